"""A table's schema and fragments with its indexes loaded on first use (:class:`Table`),
each fitted to the fragments it proves something about (:mod:`pruner.table.bound`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import discover, formats, storage
from pruner.discover import FileIdentity, ParquetFile, parquet_names
from pruner.errors import PrunerError
from pruner.formats import Snapshot
from pruner.formats.snapshot import Layout, Partitions
from pruner.hashing import plain_type
from pruner.index import (
    DEFAULT_ITEMS,
    ZoneIndex,
    list_bloom_indexes,
    load_lance_index,
    open_index,
    parquet_index_path,
)
from pruner.index.constants import constant_index
from pruner.index.keys import Key, key_index_path, lance_fragment_file, stored_keys
from pruner.index.native import (
    IntegerWidths,
    NativeFilters,
    native_index,
)
from pruner.selection import FRAGMENT_SHIFT, Selection
from pruner.table.bound import TableIndex


class Table:
    """One Lance dataset or Parquet directory, with its indexes loaded on first use."""

    def __init__(
        self,
        path: storage.Location,
        kind: str,
        schema: pa.Schema,
        fragment_rows: dict[int, int],
        files: dict[int, ParquetFile] | None = None,
        dataset: Any = None,
        mixed_types: frozenset[str] = frozenset(),
        uniform_schema: bool = True,
        widened: frozenset[str] = frozenset(),
    ) -> None:
        self.path = path
        self.kind = kind
        self.schema = schema
        self.fragment_rows = fragment_rows
        self.files = files
        self.dataset = dataset
        # Columns whose type differs between Parquet files: the index hashed one width and a
        # probe would use another, so such a column is never probed.
        self.mixed_types = mixed_types
        # False when the Parquet files' schemas differ (beyond integer widths, below): an
        # engine then reads a subset of the files with another schema than the whole set,
        # so adapters read it whole.
        self.uniform_schema = uniform_schema
        # Columns some files store as INT32 and others as INT64, all else alike: the table
        # counts as uniform, and every read of a subset of its files casts them to the
        # schema's (the first file's) type, as DuckDB alone reads all of them.
        self.widened = widened
        # The version of a Delta table whose live files ``files`` are (None: not a Delta
        # table).
        self.pinned: Snapshot | None = None
        # How each file (by its path relative to the folder) holds the table's columns,
        # which every read of it follows: a Delta table's partition columns are in no file
        # but its log, one value per file (None: every file holds every column by its name).
        self.layouts: dict[str, Layout] | None = None
        # A Delta table's deletion vectors: per file (its path relative to the folder), the
        # rows it holds that the table deleted, which every read leaves out (None: none).
        self.deleted: dict[str, np.ndarray] | None = None
        # On an object store, every object under the table as listed when it was opened:
        # where its indexes are and what they are (storage.listed), without a request each.
        self.listing: storage.Listing | None = None
        self._indexes: dict[str, TableIndex | None] = {}
        self._num_rows: int | None = None
        self._indexed_columns: list[str] | None = None
        self._keys: list[Key] | None = None
        self._key_indexes: dict[Key, TableIndex | str] = {}
        self._lock = threading.Lock()
        self._whole: Selection | None = None
        self._fragments: list[Any] | None = None
        self._fragment_places: dict[int, int] | None = None  # by id: place in _fragments
        # A local directory's (mtime, ctime, inode, device) when its names last matched
        # (_names_unchanged)
        self._names_seen: tuple[int, int, int, int] | None = None

    def layout(self, file: ParquetFile) -> Layout | None:
        """How ``file`` holds the table's columns (None: all of them, by their names)."""
        return None if self.layouts is None else self.layouts[file.relative]

    def stored_names(self, column: str) -> dict[int, str | None] | None:
        """Each file's (by id) name for ``column``, None in a file that does not hold it;
        None when every file holds every column by its name (a table without layouts)."""
        if self.layouts is None:
            return None
        files = self.files or {}
        return {fid: self.layouts[f.relative].stored_name(column) for fid, f in files.items()}

    def stored_schema(self, file: ParquetFile) -> pa.Schema:
        """The columns ``file`` holds, under its names for them, typed as the table's."""
        layout = self.layout(file)
        if layout is None:
            return self.schema
        fields = [self.schema.field(name).with_name(stored) for name, stored in layout.stored]
        return pa.schema(fields, self.schema.metadata)

    @property
    def num_rows(self) -> int:
        if self._num_rows is None:  # fragment_rows are fixed when the table is opened
            self._num_rows = sum(self.fragment_rows.values())
        return self._num_rows

    def files_unchanged(self) -> bool:
        """Are a Parquet table's files those it was opened with, each of the size,
        modification time and inode it had then: none added, removed, rewritten or replaced
        since? (What :func:`pruner.discover.signature` compares for a path.) Always for a
        Lance table: its dataset reads the version it opened, as Lance's does; and a Delta
        table's files are the live files of the version it opened, whatever the folder now
        holds (only their being unchanged is checked).

        Like a signature, it does not vouch for a file modified in the last
        :data:`pruner.discover.RACY_SECONDS`: a rewrite within the file system's timestamp
        granularity keeps the time (and, in place, the inode and maybe the size)."""
        files = self.files
        if self.kind != "parquet" or files is None:
            return True
        if storage.is_remote(self.path):
            return self._objects_unchanged(files)
        try:
            if self.pinned is None and not self._names_unchanged(files):
                return False
            racy = time.time_ns() - discover.RACY_SECONDS * 1e9
            for file in files.values():
                now = storage.stat(file.path)
                if not file.unchanged(now) or now.inode != file.inode:
                    return False
                if now.mtime_ns > racy:
                    return False
        except OSError:
            return False
        return True

    def _names_unchanged(self, files: dict[int, ParquetFile]) -> bool:
        """Whether a local Parquet directory still holds the files it was opened with (by
        name; their contents are checked by the caller); True for a table of one file.

        A flat directory (no subfolder parquet_names walks into) whose own modification and
        change times and inode are those it had when its names last matched holds the same
        names: adding, removing or renaming an entry changes its folder's times. Only times
        older than :data:`pruner.discover.RACY_SECONDS` are trusted so (as a signature
        trusts a file's); anything else is walked again (:func:`parquet_names`, which also
        checks the folders above for a table format: that is done when the table is opened,
        and again whenever the folder changes). The folder is stated before the walk, so a
        change during the walk shows next time.

        Raises:
            OSError: the directory cannot be read."""
        folder = storage.stat(self.path)
        seen = (folder.mtime_ns, folder.ctime_ns, folder.inode, folder.device)
        if seen == self._names_seen:
            return True
        if storage.is_dir(self.path):
            if parquet_names(self.path) != [file.relative for file in files.values()]:
                return False
            if storage.has_subfolders(self.path):
                return True  # a file added in a subfolder changes only that folder's times
        changed = max(folder.mtime_ns, folder.ctime_ns)
        if time.time_ns() - changed > discover.RACY_SECONDS * 1e9:
            self._names_seen = seen
        return True

    def _objects_unchanged(self, files: dict[int, ParquetFile]) -> bool:
        """:meth:`files_unchanged` on an object store: one LIST (with every object's size
        and ETag), compared with the files as opened."""
        by_name = {file.relative: file for file in files.values()}
        try:
            if len(files) == 1 and next(iter(files.values())).path == self.path:
                listed = {self.path.name: storage.stat(self.path)}  # a table of one file
            else:
                listed = storage.list_stats(self.path)
                listed = {name: st for name, st in listed.items() if name.endswith(".parquet")}
        except OSError:
            return False
        if sorted(listed) != sorted(by_name):
            return False
        return all(file.unchanged(listed[name]) for name, file in by_name.items())

    def whole(self) -> Selection:
        if self._whole is None:
            self._whole = Selection.whole(self.fragment_rows)
        return self._whole

    def lance_fragments(self) -> list[Any]:
        """The Lance dataset's fragments (of the version opened), listed once."""
        if self._fragments is None:
            self._fragments = self.dataset.get_fragments()
        return self._fragments

    def lance_fragments_of(self, fragment_ids: Iterable[int]) -> list[Any]:
        """The fragments of :meth:`lance_fragments` with those ids, in its order, found in a
        map kept by id (asking each fragment its ``fragment_id``, a call into Lance, took
        21 us at 200 fragments against 0.9 us)."""
        if self._fragment_places is None:
            fragments = self.lance_fragments()
            self._fragment_places = {f.fragment_id: n for n, f in enumerate(fragments)}
        places, fragments = self._fragment_places, self.lance_fragments()
        return [fragments[n] for n in sorted(places[f] for f in fragment_ids if f in places)]

    def index(self, column: str) -> TableIndex | None:
        """The bound index of ``column``, or None when it has none.

        Raises:
            IndexFormatError: the index exists but is damaged.
        """
        if column in self._indexes:  # loaded: read without the lock (an entry is only
            return self._indexes[column]  # ever replaced whole, never removed)
        with self._lock, storage.listed(self.listing):
            if column not in self._indexes:
                self._indexes[column] = self._load(column)
            return self._indexes[column]

    def damaged_filter_files(self) -> frozenset[int]:
        """The Parquet files (ids) in which a probe of this table refused one of the files'
        own bloom filters as damaged (:attr:`pruner.index.native.NativeFilters.damaged`):
        an engine reading them must not read their filters either, it may misread them."""
        with self._lock:
            bound = [index for index in self._indexes.values() if index is not None]
        found: set[int] = set()
        for index in bound:
            filters = index.index.hierarchy
            if isinstance(filters, NativeFilters | IntegerWidths) and filters.damaged:
                found.update(index.index.fragment_id[filters.damaged].tolist())
        return frozenset(found)

    def any_index(self) -> TableIndex | None:
        """Some readable index of this table (its zones describe the table's layout)."""
        for column in self.indexed_columns():
            try:
                index = self.index(column)
            except PrunerError:
                continue
            if index is not None:
                return index
        return None

    def indexed_columns(self) -> list[str]:
        with storage.listed(self.listing):
            return self._list_indexed_columns()

    def _list_indexed_columns(self) -> list[str]:
        if self._indexed_columns is None:
            if self.kind == "lance":
                found = sorted({info.column for info in list_bloom_indexes(self.dataset)})
            else:
                found = [n for n in self.schema.names if storage.exists(self._index_path(n))]
            self._indexed_columns = found
        return self._indexed_columns

    def _index_path(self, column: str) -> storage.Location:
        """Where a Parquet table's index of ``column`` lives (a Delta or Iceberg table's:
        under the column's identity at the version opened, formats.index_name)."""
        name = column if self.pinned is None else formats.index_name(self.pinned, column)
        return parquet_index_path(self.path, name)

    def hash_type(self, column: str) -> pa.DataType | None:
        """The type whose bytes ``column``'s index hashed, or None when evaluating a term on
        it will not probe an index (an unreadable one will: the evaluator reports it)."""
        arrow_type = plain_type(self.schema.field(column).type)
        try:
            index = self.index(column)
        except PrunerError:
            return arrow_type
        if index is None:
            return None
        return index.index.value_type or arrow_type

    def use_index(self, column: str, index: ZoneIndex) -> TableIndex:
        """Use ``index`` (fragment ids are this table's) for ``column`` instead of loading one."""
        bound = self._fit(index, self._lance_ids(index))
        with self._lock:
            self._indexes[column] = bound
        return bound

    def _lance_ids(self, index: ZoneIndex) -> np.ndarray:
        known = np.isin(index.fragment_id, np.fromiter(self.fragment_rows, np.int64))
        return np.where(known, index.fragment_id, -1).astype(np.int64)

    def _load(self, column: str) -> TableIndex | None:
        if column in self.mixed_types:
            # Only the files' own filters, each file probed in its own width, when a signed
            # integer is INT32 in some files and INT64 in others (IntegerWidths).
            found = self._native(column)
            if found is None or not isinstance(found.index.hierarchy, IntegerWidths):
                return None
            return found
        if self.kind == "lance":
            index = load_lance_index(self.dataset, column, open_part=open_index)
            return None if index is None else self._fit(index, self._lance_ids(index))
        partitions = self.pinned.partitions if self.pinned is not None else None
        if partitions is not None and column in partitions.names:
            return self._partition_index(column, partitions)
        location = self._index_path(column)
        if not storage.exists(location):
            return self._native(column)
        index = open_index(location, column)
        return self._fit(index, self._parquet_ids(index))

    def _partition_index(self, column: str, partitions: Partitions) -> TableIndex | None:
        """A Delta table's partition column: each file one zone of its value in the log
        (:func:`pruner.index.constants.constant_index`)."""
        position = partitions.names.index(column)
        files = self.files or {}
        values = {fid: partitions.values[f.relative][position] for fid, f in files.items()}
        index = constant_index(column, self.schema.field(column).type, values, self.fragment_rows)
        return (
            None
            if index is None
            else self._fit(index, index.fragment_id.astype(np.int64), column=False)
        )

    def _native(self, column: str) -> TableIndex | None:
        """The Parquet files' own bloom filters of ``column``, one zone per row group, when
        some file has them (a pruner index, whose zones never straddle a row group, is at
        least as fine and is used instead where it exists)."""
        found = native_index(self.files or {}, self.schema, column, self.stored_names(column))
        if found is None:
            return None
        (fragment_id, zone_start, zone_length, has_null, filters), value_type = found
        index = ZoneIndex(
            column=column,
            items=0,
            probability=float("nan"),
            fragment_id=fragment_id,
            zone_start=zone_start,
            zone_length=zone_length,
            has_null=has_null,
            filter_data=None,
            hierarchy=filters,
            value_type=value_type,
        )
        index.plain = lambda: replace(
            index, filter_data=filters.whole_filters(), hierarchy=None, plain=None
        )
        return self._fit(index, fragment_id.astype(np.int64))

    def _fit(self, index: ZoneIndex, table_ids: np.ndarray, column: bool = True) -> TableIndex:
        """Bind zones to fragments (``table_ids``: the table's id per zone, -1 for a stale
        zone), keeping only zones proven to describe their fragment's rows. ``column``: the
        index is of the column ``index.column`` (not of a compound key)."""
        names = self.stored_names(index.column) if column else None
        absent = {fid for fid, name in (names or {}).items() if name is None}
        if absent:  # a file holding no such column: no zone of it describes the column
            table_ids = np.where(np.isin(table_ids, list(absent)), -1, table_ids)
        files = self.files or {}
        layouts = self.layouts or {}
        nulls = {f for f in absent if layouts[files[f].relative].null_in(index.column)}
        known = table_ids >= 0
        ids = np.where(known, table_ids, 0)
        limit = np.zeros(len(ids), np.uint64)
        if known.any():
            unique, inverse = np.unique(ids[known], return_inverse=True)
            limit[known] = np.array([self.fragment_rows[int(f)] for f in unique], np.uint64)[
                inverse
            ]
        start, length = index.zone_start, index.zone_length
        with np.errstate(over="ignore"):
            inside = (start <= limit) & (length <= limit - start)
        broken = known & ~inside
        if index.damaged is not None:
            broken |= known & index.damaged
        damaged = set(np.unique(ids[broken]).tolist())
        valid = known & ~np.isin(ids, np.fromiter(damaged, np.int64, len(damaged)))
        starts = np.where(
            valid, (ids << FRAGMENT_SHIFT) + np.where(valid, start, 0).astype(np.int64), 0
        )
        ends = starts + np.where(valid, length, 0).astype(np.int64)
        damaged |= _overlapping(starts[valid], ends[valid])
        damaged |= self._unexplained_gaps(Selection.normalize(starts[valid], ends[valid]))
        if damaged:
            valid &= ~np.isin(ids, np.fromiter(damaged, np.int64, len(damaged)))
        covered = set(np.unique(ids[valid]).tolist()) | nulls
        uncovered = Selection.whole(
            {f: rows for f, rows in self.fragment_rows.items() if f not in covered}
        )
        null_only = Selection.whole({f: self.fragment_rows[f] for f in nulls})
        name = index.column
        return TableIndex(
            index,
            valid,
            starts,
            ends,
            uncovered,
            int((~known).sum()),
            frozenset(damaged),
            self.files if self.kind == "parquet" else None,
            self.schema.field(name).type if column and name in self.schema.names else None,
            names,
            null_only,
        )

    def _unexplained_gaps(self, covered: Selection) -> set[int]:
        """Fragments with zones but with a live row no zone covers.

        Zones skip rows deleted before the build (Lance's and pruner's builds start a zone
        at its first live row), so a Lance fragment's gaps are checked against its live rows;
        a Parquet file has no deleted rows, so any gap there is unexplained.
        """
        spans = covered.ends - covered.starts
        fragment = covered.starts >> FRAGMENT_SHIFT
        ids, first = np.unique(fragment, return_index=True)
        rows = np.add.reduceat(spans, first) if len(first) else np.zeros(0, np.int64)
        gaps = [
            int(f)
            for f, n in zip(ids.tolist(), rows.tolist(), strict=True)
            if n < self.fragment_rows[int(f)]
        ]
        if not gaps or self.kind != "lance":
            return set(gaps)
        unexplained = set()
        fragments = {f.fragment_id: f for f in self.lance_fragments()}
        for fid in gaps:
            live = fragments[fid].to_table(columns=[], with_row_address=True)
            addresses = live.column("_rowaddr").to_numpy().astype(np.int64)
            if not covered.contains(addresses >> FRAGMENT_SHIFT, addresses & 0xFFFFFFFF).all():
                unexplained.add(fid)
        return unexplained

    def _parquet_ids(self, index: ZoneIndex, key: Key | None = None) -> np.ndarray:
        """Index fragment id -> table fragment id, -1 where the file changed or is gone, or
        does not hold the column (a Delta or Iceberg table's column added since the file
        was written, or dropped and added again: the zones describe another column); for a
        compound ``key``, where it does not hold each of its columns by its name (the build
        read them by name)."""
        files = self.files or {}
        if self.layouts is not None:
            layouts = {fid: self.layouts[f.relative] for fid, f in files.items()}
            if key is None:
                files = {
                    fid: f
                    for fid, f in files.items()
                    if layouts[fid].stored_name(index.column) is not None
                }
            else:
                files = {
                    fid: f
                    for fid, f in files.items()
                    if all(layouts[fid].stored_name(c) == c for c in key.columns)
                }
        current = {f.relative: (fid, f.rows, f.identity) for fid, f in files.items()}
        return _file_ids(index, current)

    def compound_keys(self) -> list[Key]:
        """The compound keys indexed for this table (:mod:`pruner.index.keys`)."""
        if self._keys is None:
            with storage.listed(self.listing):
                self._keys = stored_keys(self.path) if storage.is_dir(self.path) else []
        return self._keys

    def key_index(self, key: Key) -> TableIndex | str:
        """The bound compound index of ``key``, or why it cannot be used."""
        with self._lock, storage.listed(self.listing):
            if key not in self._key_indexes:
                self._key_indexes[key] = self._load_key(key)
            return self._key_indexes[key]

    def _load_key(self, key: Key) -> TableIndex | str:
        mixed = [c for c in key.columns if c in self.mixed_types]
        if mixed:
            return f"the Parquet files disagree on the type of {mixed[0]}"
        try:
            index = open_index(key_index_path(self.path, key))
        except PrunerError as err:
            return f"it is unreadable ({err})"
        stale = key.stale(index.column, self.schema)
        if stale is not None:
            return stale
        if self.kind != "lance":
            return self._fit(index, self._parquet_ids(index, key), column=False)
        schema = self.dataset.lance_schema
        current = {}
        for fragment in self.lance_fragments():
            path, identity = lance_fragment_file(fragment, schema, key)
            current[path] = (fragment.fragment_id, fragment.metadata.physical_rows, identity)
        return self._fit(index, _file_ids(index, current), column=False)

    def default_zones(self) -> tuple[np.ndarray, np.ndarray]:
        """Zone boundaries (addresses) of ``DEFAULT_ITEMS`` rows, for tables without index."""
        starts, ends = [], []
        for fragment, rows in sorted(self.fragment_rows.items()):
            offsets = np.arange(0, rows, DEFAULT_ITEMS, dtype=np.int64)
            starts.append((fragment << FRAGMENT_SHIFT) + offsets)
            ends.append((fragment << FRAGMENT_SHIFT) + np.minimum(offsets + DEFAULT_ITEMS, rows))
        if not starts:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(starts), np.concatenate(ends)


def _file_ids(index: ZoneIndex, current: dict[str, tuple[int, int, FileIdentity]]) -> np.ndarray:
    """Per zone of ``index``, the table's fragment id of the file (``current``: path ->
    fragment id, rows, identity now) its fragment recorded, -1 where that changed or is gone."""
    mapping: dict[int, int] = {}
    for entry in index.files or []:
        found = current.get(entry.path)
        if found is None:
            continue
        fid, rows, identity = found
        if rows == entry.rows and identity.matches(entry.identity):
            mapping[entry.fragment_id] = fid
    lookup = np.vectorize(lambda f: mapping.get(int(f), -1), otypes=[np.int64])
    unique, inverse = np.unique(index.fragment_id, return_inverse=True)
    return lookup(unique)[inverse] if len(unique) else np.empty(0, np.int64)


def _overlapping(starts: np.ndarray, ends: np.ndarray) -> set[int]:
    """Fragments where two zones claim the same row: at least one of them lies about its
    rows (no writer makes such zones), so neither filter can be trusted."""
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    clash = starts[1:] < np.maximum.accumulate(ends)[:-1] if len(starts) > 1 else np.zeros(0, bool)
    return set((starts[1:][clash] >> FRAGMENT_SHIFT).tolist())
