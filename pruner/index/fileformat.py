"""``bloomfilter.lance``: write and read Lance's BLOOMFILTER index file.

The file is Lance's BLOOMFILTER index file, byte-compatible in content (``docs/format.md``):
one row per zone with the columns

=====================  =======  ==================================================
``fragment_id``        uint64   fragment (Lance) or file (Parquet) holding the zone
``zone_start``         uint64   physical offset of the zone's first live row
``zone_length``        uint64   span of the zone in physical rows
``has_null``           bool     any null in the zone
``bloom_filter_data``  binary   the zone's SBBF (see :mod:`pruner.sbbf`)
=====================  =======  ==================================================

and the schema metadata ``bloomfilter_item`` / ``bloomfilter_probability`` (and
``null_bitmap``: the index of a global buffer with the exact null row offsets per fragment,
see :mod:`pruner.roaring`).

pruner adds ``pruner_zone_checksums``: the index of a global buffer holding, per zone, an
XXH3-64 of its fragment id, start, length, null flag and filter bytes. A flipped bit in a
filter passes every structural check and would drop rows; a zone whose checksum does not
match is treated as damaged and its fragment is read whole. Lance ignores metadata keys and
global buffers it does not know, so it still reads the file; indexes Lance wrote have no
checksums and are trusted as they are. An index over Parquet files also records the files
it covers (``pruner_files``) and its column (``pruner_column``).

Writes are atomic: a file is written beside its destination and renamed over it.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from pruner import roaring, sbbf, storage
from pruner.discover import FileIdentity
from pruner.errors import IndexFormatError
from pruner.index.model import FragmentFile, ZoneIndex

__all__ = [
    "INDEX_FILE_NAME",
    "INDEX_SCHEMA",
    "META_CHECKSUMS",
    "META_COLUMN",
    "META_FILES",
    "META_ITEMS",
    "META_NULL_BITMAP",
    "META_PROBABILITY",
    "IndexFileWriter",
    "arrow_type_from_text",
    "format_probability",
    "read_index_file",
    "read_index_zones",
    "stat_identity",
    "write_index_file",
    "zone_checksums",
]

INDEX_FILE_NAME = "bloomfilter.lance"

META_ITEMS = "bloomfilter_item"
META_PROBABILITY = "bloomfilter_probability"
META_NULL_BITMAP = "null_bitmap"
META_FILES = "pruner_files"
META_COLUMN = "pruner_column"
META_CHECKSUMS = "pruner_zone_checksums"
# An index built from Parquet files' own filters: their values were hashed in Parquet's plain
# encoding ("parquet"), as the Arrow type META_VALUE_TYPE names when that differs in bytes from
# the column's own (int8 / int16 / uint8 / uint16 stored as INT32).
META_VALUE_ENCODING = "pruner_value_encoding"
META_VALUE_TYPE = "pruner_value_type"

INDEX_SCHEMA = pa.schema(
    [
        pa.field("fragment_id", pa.uint64(), nullable=False),
        pa.field("zone_start", pa.uint64(), nullable=False),
        pa.field("zone_length", pa.uint64(), nullable=False),
        pa.field("has_null", pa.bool_(), nullable=False),
        pa.field("bloom_filter_data", pa.binary(), nullable=False),
    ]
)
# Filter bytes per written batch: keeps every Binary column chunk far below the 2 GiB
# offset limit (Lance issues #6522, #7753).
_WRITE_BATCH_BYTES = 256 << 20
_LANCE_MAGIC = b"LANC"


def format_probability(probability: float) -> str:
    """The probability as Lance writes it (Rust's f64 Display: never an exponent).

    >>> format_probability(1e-7), format_probability(0.00057)
    ('0.0000001', '0.00057')
    """
    return np.format_float_positional(probability, unique=True, trim="-")


def _encode_null_bitmap(null_rows: dict[int, np.ndarray]) -> bytes:
    """The ``null_bitmap`` buffer: per fragment, its null row offsets (:mod:`pruner.roaring`)."""
    # Lance (roaring-rs) writes array and bitmap containers only, never run containers.
    return roaring.encode({f: roaring.offsets_bitmap(rows) for f, rows in null_rows.items()})


def _decode_null_bitmap(data: bytes, where: str) -> dict[int, np.ndarray]:
    try:
        return roaring.decode(data)
    except (struct.error, ValueError, OverflowError) as err:
        raise IndexFormatError(f"{where}: the null_bitmap buffer is damaged ({err})") from err


_ZONE_HEADER = np.dtype([("f", "<u8"), ("s", "<u8"), ("l", "<u8"), ("n", "u1")])


def zone_checksums(
    fragment_id: np.ndarray,
    zone_start: np.ndarray,
    zone_length: np.ndarray,
    has_null: np.ndarray,
    filters: np.ndarray | Sequence[bytes],
) -> np.ndarray:
    """Per zone, XXH3-64 of its filter bytes seeded with XXH3-64 of its other four fields.

    A flipped bit anywhere in a zone's row changes its checksum (xxhash, because a bit flip
    in a bloom filter is invisible to every structural check and would drop rows).
    """
    headers = np.empty(len(fragment_id), dtype=_ZONE_HEADER)
    headers["f"], headers["s"], headers["l"] = fragment_id, zone_start, zone_length
    headers["n"] = has_null
    raw = headers.view(np.uint8).reshape(len(headers), _ZONE_HEADER.itemsize)
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter(
        (digest(filters[z], seed=digest(raw[z])) for z in range(len(headers))),
        dtype=np.uint64,
        count=len(headers),
    )


def _binary_array(filters: np.ndarray) -> pa.Array:
    """A zero-copy Binary array over the rows of a (zones, bytes) uint8 array."""
    count, width = filters.shape
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    data = np.ascontiguousarray(filters).reshape(-1)
    return pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


FINGERPRINT_TAIL = 4096
"""Bytes at the end of an index file that, with its size, name it (a companion records
them: :func:`index_fingerprint`)."""


def index_fingerprint(index_file: storage.PathLike) -> tuple[int, str]:
    """The index file's size and the XXH64 of its last :data:`FINGERPRINT_TAIL` bytes: what
    its hierarchy companion records of the file it derives from."""
    with storage.RangeFile(index_file) as handle:
        size = handle.file_stat().size
        tail = handle.read(max(0, size - FINGERPRINT_TAIL), FINGERPRINT_TAIL)
    return size, xxhash.xxh64_hexdigest(tail)


_DONE: Future[None] = Future()
_DONE.set_result(None)


class IndexFileWriter:
    """Streams zone rows into a ``bloomfilter.lance``, renamed into place by :meth:`finish`.

    A build hands each fragment's zones over as soon as they are ready, so writing overlaps
    building. Until ``finish`` the file exists only in a staging folder beside the target
    (:func:`pruner.storage.temporary_path`; pylance's writer keeps its own temporary file
    there too), so readers see the old index or the new one, never a partial file, and what a killed
    writer leaves is removed by the next one (:func:`pruner.storage.remove_leftovers`).
    """

    def __init__(self, path: storage.PathLike) -> None:
        from lance.file import LanceFileWriter

        self.target = storage.location(path)
        remote = storage.is_remote(self.target)
        self._created_parent = not remote and not storage.exists(self.target.parent)
        storage.make_dirs(self.target.parent)
        storage.remove_leftovers(self.target)
        self._staging = storage.temporary_path(self.target)
        storage.make_dirs(self._staging, exist_ok=False)  # a parent another writer took away
        self._temporary = self._staging / self.target.name
        self._writer: Any = LanceFileWriter(str(self._temporary), INDEX_SCHEMA)
        # What the target must still be when published (storage.publish): None, anything.
        self.expected: storage.Stat | None = None
        # The publish of finish(wait=False), under way (done: nothing pending)
        self.published: Future[None] = _DONE
        self._checksums: list[np.ndarray] = []

    def write_zones(
        self,
        fragment_id: np.ndarray,
        zone_start: np.ndarray,
        zone_length: np.ndarray,
        has_null: np.ndarray,
        filters: np.ndarray,
    ) -> None:
        """Append zones; ``filters`` is (zones, bytes) uint8."""
        self._checksums.append(
            zone_checksums(fragment_id, zone_start, zone_length, has_null, filters)
        )
        per_batch = max(1, _WRITE_BATCH_BYTES // max(1, filters.shape[1]))
        for start in range(0, len(filters), per_batch):
            rows = slice(start, start + per_batch)
            batch = pa.record_batch(
                [
                    pa.array(fragment_id[rows], pa.uint64()),
                    pa.array(zone_start[rows], pa.uint64()),
                    pa.array(zone_length[rows], pa.uint64()),
                    pa.array(has_null[rows], pa.bool_()),
                    _binary_array(filters[rows]),
                ],
                schema=INDEX_SCHEMA,
            )
            self._writer.write_batch(batch)

    def finish(self, index: ZoneIndex, wait: bool = True) -> int:
        """Write the metadata of ``index``, close, move into place; return the file size.

        ``wait=False``: on a store the PUT goes on in the background (:attr:`published`;
        :func:`pruner.storage.publish_soon`), overlapping what the caller does next."""
        writer = self._writer
        if writer is None:
            raise RuntimeError("IndexFileWriter.finish called after abort")
        try:
            writer.add_schema_metadata(META_ITEMS, str(index.items))
            writer.add_schema_metadata(META_PROBABILITY, format_probability(index.probability))
            if index.null_rows is not None:
                # Lance writes the buffer even when no row is null.
                buffer_index = writer.add_global_buffer(_encode_null_bitmap(index.null_rows))
                writer.add_schema_metadata(META_NULL_BITMAP, str(buffer_index))
            checksums = np.concatenate(self._checksums or [np.zeros(0, np.uint64)])
            buffer_index = writer.add_global_buffer(checksums.astype("<u8").tobytes())
            writer.add_schema_metadata(META_CHECKSUMS, str(buffer_index))
            if index.value_encoding is not None:
                writer.add_schema_metadata(META_VALUE_ENCODING, index.value_encoding)
            if index.value_type is not None:
                writer.add_schema_metadata(META_VALUE_TYPE, str(index.value_type))
            if index.files is not None:
                writer.add_schema_metadata(META_COLUMN, index.column)
                writer.add_schema_metadata(META_FILES, encode_files(index.files))
            writer.close()
            size = storage.stat(self._temporary).size
            index.written_fingerprint = index_fingerprint(self._temporary)
            if wait:
                storage.publish(self._temporary, self.target, self.expected)
            else:
                self.published = storage.publish_soon(
                    self._temporary, self.target, self.expected, then=self._remove_staging
                )
        finally:
            self.abort()
        return size

    def __enter__(self) -> IndexFileWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Leaving the block without :meth:`finish` (e.g. on an error) aborts the write."""
        self.abort()

    def abort(self) -> None:
        """Forget a write that will not finish (the target is untouched); after a
        :meth:`finish` whose PUT is under way, its staging folder goes when the PUT is done."""
        self._writer = None
        if not self.published.done():
            return
        self._remove_staging()

    def _remove_staging(self) -> None:
        storage.remove_tree(self._staging)
        if self._created_parent and not storage.exists(self.target):
            storage.remove_empty_dir(self.target.parent)


def write_index_file(index: ZoneIndex, path: storage.PathLike) -> int:
    """Write ``index`` as a Lance BLOOMFILTER index file, atomically; return its size."""
    with IndexFileWriter(path) as writer:
        # Zones in file order, in runs of one filter size (filters of several sizes come from
        # Parquet files' own filters, one per row group).
        sizes = np.array([len(index.filter_bytes(z)) for z in range(index.num_zones)], np.int64)
        cuts = np.flatnonzero(np.diff(sizes)) + 1
        for run in np.split(np.arange(index.num_zones), cuts):
            if not len(run):
                continue
            filters = np.frombuffer(
                b"".join(index.filter_bytes(z) for z in run.tolist()), np.uint8
            ).reshape(len(run), -1)
            writer.write_zones(
                index.fragment_id[run],
                index.zone_start[run],
                index.zone_length[run],
                index.has_null[run],
                filters,
            )
        return writer.finish(index)


def _is_lance_failure(err: BaseException) -> bool:
    """True for errors pylance raises on a bad file, including Rust panics.

    A panic inside pylance surfaces as ``pyo3_runtime.PanicException``, which derives from
    BaseException and cannot be imported by name.
    """
    if isinstance(err, KeyboardInterrupt | SystemExit | GeneratorExit):
        return False
    return isinstance(err, Exception) or type(err).__name__ == "PanicException"


def _parse_metadata(metadata: dict[bytes, bytes], where: str) -> tuple[int, float]:
    def get(key: str) -> str:
        raw = metadata.get(key.encode())
        if raw is None:
            raise IndexFormatError(
                f"{where} has no {key!r} schema metadata: it is not a Lance BLOOMFILTER "
                "index file (or it is damaged); rebuild it with `pruner index build`"
            )
        return raw.decode("utf-8", errors="replace")

    items_text, probability_text = get(META_ITEMS), get(META_PROBABILITY)
    try:
        items = int(items_text)
        probability = float(probability_text)
    except ValueError as err:
        raise IndexFormatError(
            f"{where}: schema metadata {META_ITEMS}={items_text!r}, "
            f"{META_PROBABILITY}={probability_text!r} are not numbers; rebuild the index"
        ) from err
    if items < 1 or not 0.0 <= probability < 1.0:
        raise IndexFormatError(
            f"{where}: {META_ITEMS}={items} must be >= 1 and {META_PROBABILITY}={probability} "
            "in [0, 1); rebuild the index"
        )
    return items, probability


def _filters_from_column(column: pa.ChunkedArray, where: str) -> list[bytes] | np.ndarray:
    """The filters as one (zones, bytes) array straight from the Arrow buffers when they all
    have one size (always, for files Lance or pruner write); else one ``bytes`` per zone."""
    parts, lengths = [], []
    for chunk in column.chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        data = np.frombuffer(chunk.buffers()[2] or b"", dtype=np.uint8)
        parts.append(data[int(offsets[0]) : int(offsets[-1])])
        lengths.append(np.diff(offsets))
    sizes = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    bad = np.flatnonzero((sizes <= 0) | (sizes % sbbf.BLOCK_BYTES != 0))
    if len(bad):
        zone = int(bad[0])
        sbbf.validate_filter_length(int(sizes[zone]), f"{where}: zone {zone}'s bloom filter")
    if len(sizes) == 0 or (sizes == sizes[0]).all():
        width = int(sizes[0]) if len(sizes) else sbbf.BLOCK_BYTES
        joined = parts[0] if len(parts) == 1 else np.concatenate(parts or [np.zeros(0, np.uint8)])
        return joined.reshape(-1, width)
    return column.to_pylist()


_READ_ATTEMPTS = 5


def stat_identity(path: storage.Location) -> tuple[int, ...] | None:
    """What names one state of a file: its inode, device, size and times (None: missing)."""
    try:
        stat = storage.stat(path)
    except OSError:
        return None
    return (stat.inode, stat.device, stat.size, stat.mtime_ns, stat.ctime_ns)


def arrow_type_from_text(text: str) -> pa.DataType:
    """The Arrow type ``str(arrow_type)`` printed (``type_for_alias`` does not read a
    ``fixed_size_binary[N]``: a decimal's Parquet encoding in N bytes)."""
    match = re.fullmatch(r"fixed_size_binary\[([0-9]{1,2})\]", text)
    return pa.binary(int(match.group(1))) if match else pa.type_for_alias(text)


def read_index_file(path: storage.PathLike, column: str = "") -> ZoneIndex:
    """Read a Lance BLOOMFILTER index file, whoever wrote it, validating it fully.

    Lance's reader opens the file by name more than once, so a rebuild renaming a new file
    over it mid-read could hand it pieces of both: a read is kept only when the name
    pointed at the same file before and after it, and is retried otherwise.

    Raises:
        IndexFormatError: the file is missing pieces, damaged, or not such an index.
    """
    target = storage.location(path)
    for _ in range(_READ_ATTEMPTS):
        before = stat_identity(target)
        try:
            index, error = _read_index_file_once(target, column), None
        except IndexFormatError as err:
            index, error = None, err
        if stat_identity(target) == before:
            if error is not None:
                raise error
            assert index is not None
            return index
    raise IndexFormatError(
        f"bloom index file {path} was replaced during each of {_READ_ATTEMPTS} reads "
        "(is a build rewriting it in a loop?); try again when the builds are done"
    )


def _read_index_file_once(target: storage.Location, column: str) -> ZoneIndex:
    where = f"bloom index file {target}"
    if not storage.is_file(target):
        kind = "a directory" if storage.is_dir(target) else "missing"
        raise IndexFormatError(f"{where} is {kind}; rebuild the index with `pruner index build`")
    try:
        with storage.local_copy(target) as local:
            return _read_local_index_file(local, where, column)
    except OSError as err:
        if isinstance(err, FileNotFoundError) or not storage.is_remote(target):
            raise
        raise IndexFormatError(f"{where} cannot be read ({err})") from err


def _read_local_index_file(target: Path, where: str, column: str) -> ZoneIndex:
    from lance.file import LanceFileReader

    with storage.RangeFile(target) as handle:
        size = handle.file_stat().size
        tail = handle.read(max(0, size - len(_LANCE_MAGIC)), len(_LANCE_MAGIC))
    if size < 64 or tail != _LANCE_MAGIC:
        raise IndexFormatError(
            f"{where} is not a complete Lance file ({size} bytes, no trailing magic): it was "
            "truncated or overwritten; rebuild the index with `pruner index build`"
        )
    try:
        reader = LanceFileReader(str(target))
        table = reader.read_all().to_table()
        metadata = dict(table.schema.metadata or {})
        null_buffer_text = metadata.get(META_NULL_BITMAP.encode())
        null_buffer = (
            bytes(reader.read_global_buffer(int(null_buffer_text)))
            if null_buffer_text is not None
            else None
        )
        checksum_text = metadata.get(META_CHECKSUMS.encode())
        checksum_buffer = (
            bytes(reader.read_global_buffer(int(checksum_text)))
            if checksum_text is not None
            else None
        )
    except BaseException as err:
        if not _is_lance_failure(err):
            raise
        raise IndexFormatError(
            f"{where} cannot be read by Lance ({type(err).__name__}: {err}); rebuild the index"
        ) from err
    got = table.schema.remove_metadata()
    expected_columns = [(f.name, f.type) for f in INDEX_SCHEMA]
    if [(f.name, f.type) for f in got] != expected_columns:
        raise IndexFormatError(
            f"{where} has columns {got.to_string(show_schema_metadata=False)!r} but a bloom "
            f"filter index has {', '.join(f'{n}: {t}' for n, t in expected_columns)}"
        )
    if table.num_rows and any(table.column(i).null_count for i in range(table.num_columns)):
        raise IndexFormatError(f"{where} has nulls in a non-nullable column; rebuild the index")
    items, probability = _parse_metadata(metadata, where)
    filters = _filters_from_column(table.column("bloom_filter_data"), where)
    zone_length = table.column("zone_length").to_numpy()
    if (zone_length == 0).any():
        raise IndexFormatError(f"{where} has a zone of length 0; rebuild the index")
    fragment_id = table.column("fragment_id").to_numpy()
    zone_start = table.column("zone_start").to_numpy()
    has_null = table.column("has_null").to_numpy(zero_copy_only=False)
    damaged = None
    if checksum_buffer is not None:
        if len(checksum_buffer) != 8 * table.num_rows:
            raise IndexFormatError(
                f"{where}: {META_CHECKSUMS} holds {len(checksum_buffer)} bytes for "
                f"{table.num_rows} zones (zones are missing or added); rebuild the index"
            )
        stored = np.frombuffer(checksum_buffer, dtype="<u8")
        damaged = stored != zone_checksums(fragment_id, zone_start, zone_length, has_null, filters)
    value_type = None
    value_text = metadata.get(META_VALUE_TYPE.encode())
    if value_text is not None:
        try:
            value_type = arrow_type_from_text(value_text.decode())
        except (ValueError, UnicodeDecodeError) as err:
            raise IndexFormatError(
                f"{where}: {META_VALUE_TYPE} {value_text!r} is not an Arrow type; rebuild the index"
            ) from err
    files = None
    files_text = metadata.get(META_FILES.encode())
    if files_text is not None:
        files = decode_files(files_text, where)
        column = column or metadata.get(META_COLUMN.encode(), b"").decode()
    return ZoneIndex(
        column=column,
        items=items,
        probability=probability,
        fragment_id=fragment_id,
        zone_start=zone_start,
        zone_length=zone_length,
        has_null=has_null,
        filter_data=filters,
        null_rows=_decode_null_bitmap(null_buffer, where) if null_buffer is not None else None,
        files=files,
        damaged=damaged,
        value_type=value_type,
        value_encoding=_text(metadata.get(META_VALUE_ENCODING.encode())),
    )


_ZONE_COLUMNS = ["fragment_id", "zone_start", "zone_length", "has_null"]


def read_index_zones(path: storage.PathLike, column: str = "") -> ZoneIndex:
    """The zones of a Lance BLOOMFILTER index file without their filters (a few KiB read, not
    the file), for planning an update. Nothing else is checked: the filters, null rows and
    checksums load and are checked on first use (``plain``: :func:`read_index_file`).

    Raises:
        IndexFormatError: the file cannot be read, or holds no zones of this shape.
    """
    from lance.file import LanceFileReader

    target = storage.location(path)
    where = f"bloom index file {target}"
    try:
        with storage.local_copy(target) as local:
            table = LanceFileReader(str(local), columns=_ZONE_COLUMNS).read_all().to_table()
    except BaseException as err:
        if not _is_lance_failure(err) and not isinstance(err, OSError):
            raise
        raise IndexFormatError(f"{where} cannot be read ({err}); rebuild the index") from err
    items, probability = _parse_metadata(dict(table.schema.metadata or {}), where)
    expected = [(f.name, f.type) for f in INDEX_SCHEMA if f.name in _ZONE_COLUMNS]
    if [(f.name, f.type) for f in table.schema] != expected:
        raise IndexFormatError(f"{where} has other zone columns than a bloom filter index")
    return ZoneIndex(
        column=column,
        items=items,
        probability=probability,
        fragment_id=table.column("fragment_id").to_numpy(),
        zone_start=table.column("zone_start").to_numpy(),
        zone_length=table.column("zone_length").to_numpy(),
        has_null=table.column("has_null").to_numpy(zero_copy_only=False),
        filter_data=None,
        plain=lambda: read_index_file(target, column),
    )


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def encode_files(files: list[FragmentFile]) -> str:
    """The Parquet files an index covers, as the index file's ``pruner_files`` metadata."""
    rows = []
    for f in files:
        identity = f.identity
        row = [f.fragment_id, f.path, identity.size, identity.mtime_ns, f.rows, identity.footer]
        rows.append([*row, identity.etag] if identity.etag else row)
    return json.dumps(rows)


def decode_files(text: str | bytes, where: str) -> list[FragmentFile]:
    """:func:`encode_files`' text read back.

    Raises:
        IndexFormatError: the text is damaged.
    """
    try:
        return [
            FragmentFile(
                int(a),
                str(b),
                FileIdentity(
                    int(c), int(d), int(rest[0]) if rest else 0, str(rest[1]) if rest[1:] else ""
                ),
                int(e),
            )
            for a, b, c, d, e, *rest in json.loads(text)
        ]
    except (ValueError, TypeError, RecursionError) as err:
        raise IndexFormatError(f"{where}: {META_FILES} metadata is damaged ({err})") from err
