"""The Parquet footers of a table on an object store, kept beside its indexes in one object
(``_pruner/@footers.arrow``), so that opening the table reads that object instead of a
footer per file.

Opening a Parquet table reads every file's footer (its row groups, schema, statistics and
bloom filter offsets). On a store that is a GET per file: 200 files cost 200 requests, side
by side but each a few milliseconds of the server's time and the client's, and an absent key
then reads every data object's tail. An index build on the store has just read them all, so
it keeps them (:func:`keep_footers`), each with the size and ETag of the object it came
from, as an Arrow IPC file (zstd).

Opening reads that one object (:func:`read_kept_footers`) and takes a footer from it only
for an object the table's LIST shows with the same size and ETag (a store gives an object a
new ETag whenever it is written) and whose bytes hash to the hash recorded with them; it
hands those to :func:`pruner.discover.read_footer` through :func:`storage.keep`. Any other
file's footer is read from the file. The object is a cache: missing, stale, damaged or
written by another build, it costs requests, never a row. Locally a footer costs a
``pread``, and there is none.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import partial

import pyarrow as pa
import xxhash

from pruner import storage
from pruner.discover import read_footer
from pruner.index.model import FragmentFile
from pruner.index.store import PARQUET_INDEX_DIR

__all__ = ["FOOTERS_NAME", "footers_path", "keep_footers", "read_kept_footers"]

FOOTERS_NAME = "@footers.arrow"
"""Its name in ``_pruner/``: no column's index folder is named so (a column's name is
percent-encoded there, ``@`` as ``%40``), nor a compound key's (which holds a comma)."""

_SCHEMA = pa.schema(
    [
        ("path", pa.string()),  # relative to the table's folder, '/'-separated
        ("size", pa.int64()),
        ("etag", pa.string()),
        ("footer_hash", pa.uint64()),  # XXH3-64 of footer, as FileIdentity.footer
        ("footer", pa.binary()),  # the footer's metadata, its length and "PAR1"
    ]
)


def footers_path(root: storage.Location) -> storage.Location:
    """Where the footers of the Parquet table at ``root`` (its folder) are kept."""
    return root / PARQUET_INDEX_DIR / FOOTERS_NAME


def keep_footers(root: storage.Location, files: Sequence[FragmentFile] | None) -> None:
    """On a store, write the footers of ``files`` (an index's, paths relative to the table's
    folder ``root``) beside the table's indexes, each with the size and ETag of its object
    as listed now; nothing locally, or for a Lance index (no files). One LIST, then one PUT;
    the footers themselves come from memory (the build just read them, and
    :func:`~pruner.discover.read_footer` keeps what it reads), else from the objects."""
    if not files or not isinstance(root, storage.ObjectPath):
        return
    found = storage.listing(root)
    paths = [f.path for f in files if f.path in found.objects]
    with storage.listed(found):
        read = storage.gather([partial(read_footer, root / path) for path in paths])
    kept = [
        (path, identity, footer)
        for path, (identity, footer, _) in zip(paths, read, strict=True)
        if footer is not None and identity.etag
    ]
    table = pa.table(
        [
            [path for path, _, _ in kept],
            [identity.size for _, identity, _ in kept],
            [identity.etag for _, identity, _ in kept],
            pa.array([identity.footer for _, identity, _ in kept], pa.uint64()),
            [footer for _, _, footer in kept],
        ],
        schema=_SCHEMA,
    )
    target = footers_path(root)
    temporary = storage.temporary_path(target)
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with (
        storage.arrow_output(temporary) as sink,
        pa.ipc.new_file(sink, _SCHEMA, options=options) as writer,
    ):
        writer.write_table(table)
    storage.publish(temporary, target)


def read_kept_footers(found: storage.Listing) -> None:
    """Where the table listed in ``found`` (from its folder) has its footers kept: read
    them (one GET), and keep for this process (:func:`storage.keep`) each footer whose object
    ``found`` lists with the size and ETag recorded for it and whose bytes are whole and hash
    as recorded. An unreadable object is no footer (the files' own are read)."""
    known = found.objects.get(f"{PARQUET_INDEX_DIR}/{FOOTERS_NAME}")
    if known is None or not known.etag:
        return
    try:
        with storage.RangeFile(found.root / PARQUET_INDEX_DIR / FOOTERS_NAME, known) as handle:
            data = handle.read(0, known.size)
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
        if not table.schema.equals(_SCHEMA):
            return
        columns = [table.column(name).to_pylist() for name in _SCHEMA.names]
    except (OSError, pa.ArrowException):
        return
    for path, size, etag, footer_hash, footer in zip(*columns, strict=True):
        listed = found.objects.get(path)
        if listed is None or not etag or (listed.size, listed.etag) != (size, etag):
            continue  # written again since (or gone): its own footer is read
        if not _whole(footer, size) or xxhash.xxh3_64_intdigest(footer) != footer_hash:
            continue
        storage.keep(found.root / path, listed, size - len(footer), footer)


def _whole(footer: bytes | None, size: int) -> bool:
    """Whether ``footer`` is a whole Parquet footer (metadata, its length, ``PAR1``) that
    fits a file of ``size`` bytes."""
    if footer is None or len(footer) < 8 or footer[-4:] != b"PAR1":
        return False
    (length,) = struct.unpack("<I", footer[-8:-4])
    return length + 8 == len(footer) and length + 12 <= size
