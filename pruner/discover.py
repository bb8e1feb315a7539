"""What a source is, and what identifies the content of its Parquet files.

A source is a Lance dataset (a directory with ``_versions``) or a directory of Parquet
files: every ``*.parquet`` under it, skipping folders and files whose name starts with
``_`` or ``.`` (where the index lives, ``_pruner``, and what Spark and pyarrow skip too).

A Parquet file's content is identified by its size, modification time and an XXH3-64 of
its footer (:func:`parquet_footer_hash`); an index records them for each file it covers
(:class:`pruner.index.FragmentFile`) and a table holds them for each file it has now
(:class:`ParquetFile`), so that zones of a changed file are never used.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, overload

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from pruner import formats, storage
from pruner.errors import InvalidParameterError

__all__ = [
    "FileIdentity",
    "ParquetFile",
    "arrow_schema",
    "chunk_ranges",
    "file_identity",
    "hive_partitioned",
    "is_lance_dataset",
    "located",
    "located_folder",
    "located_tables",
    "open_parquet",
    "parquet_files",
    "parquet_footer_hash",
    "parquet_names",
    "read_footers_ahead",
    "read_parquet_file",
    "read_parquet_files",
    "refuse_table_format",
    "signature",
    "table_format",
]


@overload
def located(
    source: storage.PathLike, storage_options: Mapping[str, str] | None = None
) -> storage.Location: ...


@overload
def located(source: Any, storage_options: Mapping[str, str] | None = None) -> Any: ...


def located(source: Any, storage_options: Mapping[str, str] | None = None) -> Any:
    """``source`` where the layers below read it: a path or URI (``str``, ``os.PathLike``
    or an :class:`~pruner.storage.ObjectPath`) as :func:`pruner.storage.location` places it
    (an ObjectPath with ``storage_options`` for an object store URI, a local ``Path``
    otherwise); a pyiceberg ``Table`` as the metadata file it read, and so a table of the
    user's configured Iceberg catalogs (``iceberg:CATALOG.NAMESPACE.TABLE``); anything else (a
    :class:`~pruner.table.Table`, a dataset object) unchanged.

    The entry points (:func:`pruner.query`, :func:`pruner.explain`, :func:`pruner.lookup`,
    :func:`pruner.append`, :func:`pruner.build_index`, :func:`pruner.open_table`, ...) take
    one Lance-style ``storage_options`` mapping for all their tables; this is the one place
    that pairs each path or URI with it, so the options travel with the location. Without
    ``storage_options`` a URI still reads its store: the standard ``AWS_*`` (``GOOGLE_*``,
    ``AZURE_*``) environment variables say how to reach it.

    Raises:
        InvalidParameterError: a URI of a scheme pruner does not read (``http://``...).
    """
    if isinstance(source, str) and source.startswith(formats.iceberg.CATALOG_PREFIX):
        source = formats.iceberg.catalog_table(source)  # a table of the user's catalogs
    if formats.iceberg.is_table_object(source):
        # the metadata file it read (pinned to it), reached as its own FileIO reaches it
        # where no storage_options are given
        if storage_options is None:
            storage_options = formats.iceberg.storage_options(source.io.properties) or None
        source = source.metadata_location
    if not isinstance(source, str | os.PathLike | storage.ObjectPath):
        return source
    try:
        return storage.location(source, storage_options)
    except ValueError as err:
        raise InvalidParameterError(str(err)) from err


def located_folder(source: Any, storage_options: Mapping[str, str] | None = None) -> Any:
    """:func:`located`, but an Iceberg table given by a metadata file (or a pyiceberg
    ``Table``) as its folder: where an index build reads the files to index and writes the
    index (which files get zones is all its metadata decides there, never an answer)."""
    found = located(source, storage_options)
    if isinstance(found, str | os.PathLike | storage.ObjectPath):
        return formats.folder(storage.location(found))
    return found


def located_tables(
    tables: Mapping[str, Any], storage_options: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Every source of ``tables`` :func:`located`, under the same names."""
    return {name: located(source, storage_options) for name, source in tables.items()}


def is_lance_dataset(path: storage.Location) -> bool:
    """True when ``path`` is a Lance dataset (a directory with a ``_versions`` folder)."""
    return storage.is_dir(path / "_versions")


def parquet_files(directory: storage.Location) -> list[storage.Location]:
    """Every ``*.parquet`` under ``directory``, skipping ``_`` and ``.`` folders and files
    (never looked into: an index build's staging folders come and go there)."""
    return [directory / name for name in parquet_names(directory)]


def parquet_names(directory: storage.Location) -> list[str]:
    """The paths of :func:`parquet_files` relative to ``directory`` (``/``-separated,
    sorted).

    For a Delta Lake table's folder, the live data files of its latest version; for an
    Iceberg table's folder or metadata file, those of its current (or newest) metadata's
    current snapshot (:func:`pruner.formats.snapshot`).

    Raises:
        InvalidParameterError: ``directory`` is inside a Delta Lake table, or is (inside)
            an Iceberg table (:func:`refuse_table_format`); or a Delta or Iceberg table
            pruner cannot read exactly.
    """
    if formats.kind(directory) is not None:  # the live files of its latest version
        return list(formats.snapshot(directory, newest=True).files)
    refuse_table_format(directory)
    return [name for name in storage.walk_files(directory) if name.endswith(".parquet")]


_AHEAD_SECONDS = 5.0
_ahead: dict[storage.Location, tuple[float, Future[Any]]] = {}
_ahead_lock = threading.Lock()
_ASK_AHEAD = ThreadPoolExecutor(2, thread_name_prefix="pruner-format-ask")


def ask_table_format_ahead(directory: storage.ObjectPath, found: storage.Listing) -> None:
    """Start :func:`table_format` of a folder on a store in the background, for an opening
    about to ask it: its LISTs of the folders above go out while the opening's other reads
    are under way, not in a round trip after them (the folder's own listing ``found``
    answers for the folder itself). The next :func:`table_format` of the folder within
    :data:`_AHEAD_SECONDS` takes that answer (once)."""
    directory = directory.absolute()

    def ask() -> tuple[str, storage.Location] | None:
        with storage.listed(found):
            return _table_format_now(directory)

    future = _ASK_AHEAD.submit(ask)
    with _ahead_lock:
        _ahead[directory] = (time.monotonic(), future)


def _asked_ahead(directory: storage.Location) -> Future[Any] | None:
    with _ahead_lock:
        found = _ahead.pop(directory, None)
    if found is None or time.monotonic() - found[0] > _AHEAD_SECONDS:
        return None
    return found[1]


def table_format(directory: storage.Location) -> tuple[str, storage.Location] | None:
    """``("delta", root)`` or ``("iceberg", root)`` when ``directory`` is, or lies inside,
    a Delta Lake table (a ``_delta_log`` folder) or an Iceberg table (a ``metadata`` folder
    holding ``*.metadata.json``); None for a plain directory.

    A table format's log or metadata names which of its Parquet files are live: after an
    overwrite, a delete or a compaction the removed files stay on disk until a vacuum, so
    every ``*.parquet`` under the folder is not the table.
    """
    directory = directory.absolute()
    if storage.is_remote(directory):
        ahead = _asked_ahead(directory)
        if ahead is not None:
            return ahead.result()
    return _table_format_now(directory)


def _table_format_now(directory: storage.Location) -> tuple[str, storage.Location] | None:
    folders = [directory, *directory.parents]
    logs: list[bool] | None = None
    metadata: list[list[str]] | None = None
    if storage.is_remote(directory):
        # each folder's question is a request on a store: all of them asked at once
        asked = storage.gather(
            [lambda f=f: storage.is_dir(f / "_delta_log") for f in folders]
            + [lambda f=f: formats.iceberg.metadata_names(f) for f in folders]
        )
        logs, metadata = asked[: len(folders)], asked[len(folders) :]
    for i, folder in enumerate(folders):
        if logs[i] if logs is not None else storage.is_dir(folder / "_delta_log"):
            return "delta", folder
        names = metadata[i] if metadata is not None else formats.iceberg.metadata_names(folder)
        if any(name.endswith(".metadata.json") for name in names):
            return "iceberg", folder
    return None


_FORMAT_NAMES = {
    "delta": ("a Delta Lake", "_delta_log/", "log"),
    "iceberg": ("an Iceberg", "metadata/*.metadata.json", "metadata"),
}


def refuse_table_format(directory: storage.Location) -> None:
    """Raise when ``directory`` lies inside a Delta Lake or Iceberg table: read as a plain
    directory of Parquet files it would answer from rows the table removed (the table's
    own folder is read from its log).

    Raises:
        InvalidParameterError: naming the table's root and what to do instead.
    """
    found = table_format(directory)
    if found is None or found[1] == directory.absolute():
        return  # a table's own folder is read from its log or metadata
    kind, root = found
    article, marker, log = _FORMAT_NAMES[kind]
    raise InvalidParameterError(
        f"{directory} is inside {root}, which is {article} table (it holds {marker}): its "
        f"{log} names which of its Parquet files are live, and reading every *.parquet file "
        f"under it would answer from rows the table removed. Open the table's own folder, "
        f"{root}"
    )


def hive_partitioned(folders: Iterable[Sequence[str]]) -> bool:
    """Whether files in ``folders`` (each file's folder names, outermost first) are hive
    partitioned: every file has the same, non-empty set of ``key=value`` folder keys.

    DuckDB's own rule (``read_parquet``'s auto-detection of ``hive_partitioning``): files
    at the root next to files in ``day=2/`` are not hive partitioned, nor are ``p=1/q=2/``
    next to ``p=2/``.

    >>> hive_partitioned([["p=1"], ["p=2"]]), hive_partitioned([[], ["day=2"]])
    (True, False)
    """
    first: frozenset[str] | None = None
    for names in folders:
        keys = frozenset(name.split("=", 1)[0] for name in names if "=" in name)
        if first is None:
            first = keys
        if not keys or keys != first:
            return False
    return first is not None


def parquet_footer_hash(path: storage.PathLike) -> int:
    """XXH3-64 of a Parquet file's footer (metadata and its length): an identity of the
    file's content that survives a copy keeping size and modification time. 0 when the
    file is too short to have one."""
    return read_footer(storage.location(path))[0].footer


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What identifies a Parquet file's content: size, modification time, footer hash
    (XXH3-64 of the footer; 0 when unknown, in an index written before footers were
    hashed) and, on an object store, the object's ETag (which changes whenever the object
    is written, even with the same size in the same second)."""

    size: int
    mtime_ns: int
    footer: int = 0
    etag: str = ""

    def matches(self, recorded: FileIdentity) -> bool:
        """Whether this file (now) is still the one ``recorded`` (an index's record) names.
        A record without a footer hash is matched on size and time alone; one without an
        ETag (a local file's) on the rest. With an ETag on both sides (an object on a store)
        the ETag stands for the time: it changes whenever the object is written, where a
        store's times come at one precision from a LIST and another from a GET (GCS:
        milliseconds listed, whole seconds in a reply's ``Last-Modified``)."""
        same_time = bool(recorded.etag and self.etag) or self.mtime_ns == recorded.mtime_ns
        return (
            self.size == recorded.size
            and same_time
            and recorded.footer in (0, self.footer)
            and recorded.etag in ("", self.etag)
        )

    def as_stat(self) -> storage.Stat:
        """The file's :class:`~pruner.storage.Stat` as this identity saw it (a read of the
        file on a store then needs no HEAD for its size, and is conditional on its ETag)."""
        return storage.Stat(self.size, self.mtime_ns, etag=self.etag)


def file_identity(path: storage.Location) -> FileIdentity:
    """The identity of the Parquet file at ``path`` now (its stat first, then its footer)."""
    return read_footer(path)[0]


_FOOTER_GUESS = 16 * 1024


_AHEAD_FOOTERS = 512
"""At most this many footers are read ahead by :func:`read_footers_ahead` (16 KiB each)."""


def read_footers_ahead(found: storage.Listing) -> None:
    """On a store: the footers (the last :data:`_FOOTER_GUESS` bytes) of the Parquet files
    a table's listing holds outside hidden folders, read in the background from now
    (:func:`storage.read_ahead`), so that opening the table finds them in memory while it
    asks its other questions (is it a Lance dataset, a Delta or Iceberg table?). Not the
    footers kept in memory already (:func:`storage.kept_tail`)."""
    with storage.listed(found):
        names = [
            key
            for key in found.objects
            if key.endswith(".parquet")
            and not any(p.startswith(("_", ".")) for p in key.split("/"))
            and storage.kept_tail(found.root / key) is None
        ]
    for key in names[:_AHEAD_FOOTERS]:
        known = found.objects[key]
        start = max(0, known.size - _FOOTER_GUESS)
        storage.read_ahead(found.root / key, known, [(start, known.size - start)])


def read_footer(path: storage.Location) -> tuple[FileIdentity, bytes | None, int]:
    """The file's identity, its footer (metadata, length and magic: what
    :func:`parquet_footer_hash` hashes) and its inode number, from one open and usually one
    read (on a store one suffix-range GET, whose reply also gives the size and ETag); the
    footer is None when the file has none (too short, or a length beyond the file).

    The footer parses with ``pq.read_metadata(pa.BufferReader(b"PAR1" + footer))``: a table
    opened this way reads each file's footer once, not once for its identity and again for
    its metadata.

    On a store a footer read is kept for the process (:func:`storage.keep`, under the
    object's ETag), and a footer kept (read before, or recorded beside the table's indexes:
    :mod:`pruner.index.footers`) is taken from memory where the listing shows the object
    with that ETag."""
    kept = storage.kept_tail(path)
    tail, stat = kept if kept is not None else storage.read_tail(path, _FOOTER_GUESS)
    size = stat.size
    if size < 12:
        return FileIdentity(size, stat.mtime_ns, 0, stat.etag), None, stat.inode
    (length,) = struct.unpack("<I", tail[-8:-4])
    if length + 12 > size:
        return FileIdentity(size, stat.mtime_ns, 0, stat.etag), None, stat.inode
    if length + 8 > len(tail):
        with storage.RangeFile(path, stat) as handle:
            tail = handle.read(size - 8 - length, length + 8)
    footer = tail[-(length + 8) :]
    if kept is None and isinstance(path, storage.ObjectPath):
        storage.keep(path, stat, size - len(footer), footer)
    footer_hash = int(xxhash.xxh3_64_intdigest(footer))
    return FileIdentity(size, stat.mtime_ns, footer_hash, stat.etag), footer, stat.inode


@dataclass(frozen=True)
class ParquetFile:
    """A Parquet file of a table as it is now: where it is, its rows and its identity.

    Not the index's record of a file (:class:`pruner.index.FragmentFile`): that one holds
    the fragment id the index gave the file and is stored in the index, this one holds the
    absolute path and row groups a read needs. Both hold one :class:`FileIdentity`.
    """

    path: storage.Location
    relative: str
    identity: FileIdentity
    rows: int
    # The file's parsed footer (pyarrow.parquet.FileMetaData), as read when the table was
    # opened: where its row groups' own bloom filters are (pruner.index.native).
    metadata: Any = field(compare=False, repr=False)
    inode: int = field(default=0, compare=False)  # when the table was opened

    def unchanged(self, now: storage.Stat) -> bool:
        """Does the file, whose stat is ``now``, still have the size and modification time
        (and on a store the ETag) it had when the table was opened (so its footer, read
        then, is still its own)?"""
        identity = self.identity
        if now.etag and identity.etag:  # on a store: the ETag, whatever the times' precision
            return (now.size, now.etag) == (identity.size, identity.etag)
        return (now.size, now.mtime_ns, now.etag) == (
            identity.size,
            identity.mtime_ns,
            identity.etag,
        )

    def as_opened(self) -> storage.Stat:
        """The file's :class:`~pruner.storage.Stat` as read when the table was opened (a read
        of the file on a store then needs no HEAD for its size)."""
        return dataclasses.replace(self.identity.as_stat(), inode=self.inode)

    @cached_property
    def has_bloom_filters(self) -> bool:
        """Does the footer place a bloom filter for any column chunk (``bloom_filter_offset``)?
        A reader that trusts the file's filters reads only those."""
        metadata = self.metadata
        return any(
            (metadata.row_group(g).column(c).bloom_filter_offset or 0) > 0
            for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)
        )

    @cached_property
    def row_group_rows(self) -> tuple[int, ...]:
        """Each row group's rows (listed when a read or explain first asks: a lookup reads
        a few files of the table)."""
        metadata = self.metadata
        return tuple(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups))

    @cached_property
    def byte_size(self) -> int:
        """The row groups' uncompressed bytes, from the footer (``total_byte_size``)."""
        metadata = self.metadata
        return sum(metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups))


def read_parquet_file(path: storage.Location, relative: str) -> ParquetFile:
    """The Parquet file at ``path`` (``relative``, ``/``-separated, to its table's
    directory) as it is now: its identity and its parsed footer, from one read of the
    footer.

    The footer is parsed by ``pq.ParquetReader``, which ``pq.read_metadata`` opens inside
    a ``pq.ParquetFile``; that wrapper's set-up (file system resolution, nested column
    paths) cost as much again as the parse (200 footers: 16 ms against 8 ms, measured).

    Raises:
        pyarrow.ArrowInvalid: the file is not Parquet (pyarrow's own error).
    """
    identity, footer, inode = read_footer(path)
    if footer is None or footer[-4:] != b"PAR1":
        if not storage.is_remote(path):
            pq.read_metadata(path)  # raises pyarrow's own error for such a file
        raise pa.ArrowInvalid(f"{path}: no Parquet footer found")
    reader = pq.ParquetReader()
    reader.open(pa.BufferReader(b"PAR1" + footer))
    metadata = reader.metadata
    return ParquetFile(path, relative, identity, metadata.num_rows, metadata, inode)


def read_parquet_files(root: storage.Location, names: Sequence[str]) -> list[ParquetFile]:
    """:func:`read_parquet_file` of each of ``names`` (paths relative to ``root``): on a
    store side by side (a round trip each, with the caller's listing), locally in turn."""
    if storage.is_remote(root) and len(names) > 1:
        return storage.gather([partial(read_parquet_file, root / name, name) for name in names])
    return [read_parquet_file(root / name, name) for name in names]


def chunk_ranges(
    metadata: Any, columns: Sequence[str] | None, row_groups: Sequence[int] | None
) -> list[tuple[int, int]]:
    """The ``(offset, length)`` of the column chunks of ``columns`` (top-level names; all
    when None) in ``row_groups`` (all when None) of a file with the footer ``metadata``:
    what a read of them fetches."""
    wanted = None if columns is None else set(columns)
    groups = range(metadata.num_row_groups) if row_groups is None else row_groups
    ranges = []
    for group in groups:
        row_group = metadata.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            if wanted is not None and chunk.path_in_schema.split(".", 1)[0] not in wanted:
                continue
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
                start = min(start, chunk.dictionary_page_offset)
            ranges.append((start, chunk.total_compressed_size))
    return ranges


def open_parquet(
    path: storage.Location,
    metadata: Any = None,
    columns: Sequence[str] | None = None,
    row_groups: Sequence[int] | None = None,
    known: storage.Stat | None = None,
) -> pq.ParquetFile:
    """The Parquet file at ``path`` open for reading (on its footer ``metadata`` when
    given). On a store, the chunks of ``columns`` in ``row_groups`` are fetched at once,
    coalesced and in parallel, rather than one GET per chunk as pyarrow asks for them."""
    prefetch = None
    if storage.is_remote(path) and metadata is not None:
        prefetch = chunk_ranges(metadata, columns, row_groups)
    return pq.ParquetFile(storage.arrow_input(path, prefetch, known), metadata=metadata)


def arrow_schema(metadata: Any) -> pa.Schema:
    """The Arrow schema of a Parquet file's footer (``pyarrow.parquet.FileMetaData``) as
    pyarrow reads the file: with ``arrow.uuid`` for a top-level UUID column (the UUID logical
    type), which ``ParquetSchema.to_arrow_schema`` gives as ``fixed_size_binary(16)`` when
    the writer stored no Arrow schema (DuckDB, Spark), while ``pq.read_table`` reads
    ``arrow.uuid``, and DuckDB reads UUID."""
    schema = metadata.schema.to_arrow_schema()
    parquet = metadata.schema
    for i in range(len(parquet)):
        leaf = parquet.column(i)
        if leaf.name != leaf.path or leaf.physical_type != "FIXED_LEN_BYTE_ARRAY":
            continue
        position = schema.get_field_index(leaf.name)
        if position < 0 or schema.field(position).type != pa.binary(16):
            continue
        if "UUID" in str(leaf.logical_type):
            schema = schema.set(position, schema.field(position).with_type(pa.uuid()))
    return schema


RACY_SECONDS = 2.0
"""A file modified this recently may be modified again within the file system's timestamp
granularity without its size or time changing: :func:`signature` does not vouch for it."""


def signature(path: storage.Location) -> tuple[object, ...] | None:
    """What changes whenever the table at ``path`` (absolute) changes, read without opening
    it: for a Lance dataset the names of its version manifests (a new version, even of an
    index, adds one; versions are never rewritten), for a Delta or Iceberg table the names in
    its log or metadata folder (likewise; and an Iceberg folder's version hint); for a
    Parquet directory or file, each Parquet file's (name, size, modification time, inode);
    for all, each index file's in
    ``_pruner`` (a Parquet directory's indexes, either table's compound keys).
    None when it cannot vouch: a file changed in the last :data:`RACY_SECONDS`, or the path
    is neither.

    On an object store: every object under the path, each with its size and ETag, from one
    LIST (a page per 1,000 objects), not a request per file; an ETag changes on every write,
    so no time is racy there."""
    if storage.is_remote(path):
        try:
            listed = storage.list_stats(path, hidden=())
        except OSError:
            return None
        if not listed:  # one object, or nothing: opened each time
            return None
        return ("store", tuple(sorted((n, s.size, s.etag) for n, s in listed.items())))
    lance = is_lance_dataset(path)
    log = None if lance else formats.kind(path)
    paths: list[storage.Location] = []
    if lance:
        versions = frozenset(storage.list_dir(path / "_versions"))
    elif log:  # a commit adds a log entry; data files are never rewritten in place
        versions = formats.log_entries(path)
        hint = path / formats.iceberg.METADATA / formats.iceberg.HINT
        if log == "iceberg" and storage.is_file(hint):  # rewritten in place by a commit
            paths = [hint]
    elif storage.is_file(path):
        paths = [path]
    elif storage.is_dir(path):
        paths = parquet_files(path)
    else:
        return None
    index_dir = formats.folder(path) / "_pruner"
    if storage.is_dir(index_dir):
        # every column's and key's folder (a column may start with _), not staging folders
        paths += [index_dir / name for name in storage.walk_files(index_dir, hidden=(".",))]
    now = time.time_ns()
    items = []
    for file in paths:
        try:
            stat = storage.stat(file)
        except FileNotFoundError:  # removed since listed (a build's temporary file): changing
            return None
        if now - stat.mtime_ns < RACY_SECONDS * 1e9:
            return None
        items.append((str(file), stat.size, stat.mtime_ns, stat.inode))
    if lance or log:
        return (log or "lance", versions, tuple(items))
    return ("parquet", tuple(items))
