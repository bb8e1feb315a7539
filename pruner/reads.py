"""What an engine reads of a table for a Selection, where it differs from the rows selected.

A Parquet reader's unit is the row group: :func:`parquet_parts` maps a Selection to the
files read whole and the files of which only some row groups are read. A row group is read
when any selected row falls in it, so a zone (which never straddles a row group, see
:mod:`pruner.zones`) always maps to whole row groups and no needed row is dropped. Adapters
read these parts; explain reports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pruner import storage
from pruner.discover import ParquetFile, chunk_ranges
from pruner.selection import Selection
from pruner.table import Table

__all__ = [
    "DUCKDB_READ_AHEAD_BYTES",
    "LANCE_READ_AHEAD_VALUES",
    "PARQUET_READ_AHEAD_BYTES",
    "ParquetPart",
    "as_table",
    "deleted_rows",
    "file_columns",
    "parquet_parts",
    "read_ahead_bytes",
    "read_ahead_on_store",
    "read_row_groups",
    "without_deleted",
]

LANCE_READ_AHEAD_VALUES = 1 << 18
"""A Lance selection of at most this many values (rows x columns) is read before the query
runs and handed to the engine as an Arrow table (a zone of 8,192 rows of up to 32 columns).
A point lookup then costs one Lance read (~0.6 ms for a zone) instead of an engine's streamed
scan set-up (~3 ms in DuckDB); the engine gives up projection pushdown only on rows that few.
"""

PARQUET_READ_AHEAD_BYTES = 256 << 20
"""An adapter reads the selected row groups of a Parquet table's files ahead into Arrow
only while their uncompressed size (their footers' ``total_byte_size``) is at most this;
past it, the engine reads those files itself. DataFusion's Python API reads no subset of a
file's row groups, so there reading files whole reads everything: a run-time join's 100
keys over 2M rows (83 of 260 row groups) took 127 ms read whole, 79 ms read ahead, 108 ms
in DataFusion alone."""

DUCKDB_READ_AHEAD_BYTES = 64 << 20
"""DuckDB: a Parquet selection of only some row groups of each of two or more files, of at
most this many uncompressed bytes (footers' ``total_byte_size``), is read ahead by pyarrow
and bound as Arrow (:func:`pruner.adapters.duckdb._parquet_rows`): a view of one
``read_parquet`` per file costs DuckDB a set-up per file (a run-time join's 98 row groups in
77 files of a 20M-row table: 139 ms to bind and run the view, 48 ms to read them ahead).
Past it, DuckDB's own reader, which reads only the columns the query uses, on every core.

A selection in one file bound by ``registered`` or ``sql`` (a relation, read later, on no
kept cursor) is DuckDB's own read of that file's row groups, where DuckDB decodes the other
columns only for the rows the query's filter keeps (measured when chosen: a point lookup of
one row group of 8,192 rows 0.4-0.7 ms less than reading it ahead, at 200,000 to 5M rows).
A query reads it ahead when the rows are few enough to be held on a kept cursor
(:class:`pruner.adapters.kept.HeldRows`): the next lookup then binds nothing anew. On
DuckDB 2.0.1 that was faster even for a table opened per query, bound anew each time (0.96x
the view, 3 columns, 200,000 and 1M rows), and 0.88x the view for a held table of 32 columns
in one file."""


@dataclass(frozen=True, slots=True)
class ParquetPart:
    """One Parquet file to read: whole (``row_groups is None``) or only some row groups."""

    file: ParquetFile
    row_groups: tuple[int, ...] | None

    def rows(self) -> int:
        """How many rows the part reads."""
        if self.row_groups is None:
            return self.file.rows
        return sum(self.file.row_group_rows[group] for group in self.row_groups)

    def row_spans(self) -> Iterator[tuple[int, int]]:
        """The selected row groups as merged half-open ``(first_row, end_row)`` spans."""
        if self.row_groups is None:
            yield 0, self.file.rows
            return
        bounds = np.concatenate(([0], np.cumsum(self.file.row_group_rows))).tolist()
        span_start = span_end = -1
        for group in self.row_groups:
            if bounds[group] != span_end:
                if span_end > span_start:
                    yield span_start, span_end
                span_start = bounds[group]
            span_end = bounds[group + 1]
        if span_end > span_start:
            yield span_start, span_end


def parquet_parts(table: Table, selection: Selection | None) -> list[ParquetPart]:
    """The files (in path order) and row groups an engine must read for ``selection``.

    A table whose files disagree on their schema is read whole: an engine reading a subset
    of its files could otherwise settle on another schema than for the whole set.
    """
    files = table.files or {}
    if selection is None or not table.uniform_schema:
        return [ParquetPart(files[fid], None) for fid in sorted(files)]
    parts = []
    for fid, ranges in sorted(selection.by_fragment().items()):
        file = files[fid]
        groups = _overlapping_groups(file.row_group_rows, ranges)
        whole = len(groups) == len(file.row_group_rows)
        if groups or file.rows == 0:
            parts.append(ParquetPart(file, None if whole else tuple(groups)))
    return parts


def read_ahead_on_store(table: Table, parts: list[ParquetPart]) -> list[ParquetPart]:
    """``parts``, where ``table`` is on an object store and they are not all of its files
    read whole, with each file read whole given as all its row groups: read ahead by
    pruner (one round trip: the file's chunks fetched at once, its footer known) rather
    than by the engine, whose own read of a file on a store waits for each of its requests
    in turn (DuckDB through pruner's fsspec file system: 4 round trips for a file of one row
    group, measured). Unchanged elsewhere."""
    if not storage.is_remote(table.path):
        return parts
    if len(parts) == len(table.files or {}) and all(p.row_groups is None for p in parts):
        return parts
    return [
        ParquetPart(p.file, tuple(range(len(p.file.row_group_rows)))) if p.row_groups is None else p
        for p in parts
    ]


def _overlapping_groups(group_rows: tuple[int, ...], ranges: list[tuple[int, int]]) -> list[int]:
    """Indices of the row groups any half-open range of ``ranges`` overlaps.

    >>> _overlapping_groups((10, 10, 10), [(5, 6), (20, 21)])
    [0, 2]
    >>> _overlapping_groups((10, 10, 10), [(9, 11)])
    [0, 1]
    """
    if not group_rows:
        return []
    group_end = np.cumsum(np.asarray(group_rows, dtype=np.int64))
    group_start = group_end - np.asarray(group_rows, dtype=np.int64)
    starts = np.array([s for s, _ in ranges], dtype=np.int64)
    ends = np.array([e for _, e in ranges], dtype=np.int64)
    first = np.searchsorted(group_end, starts, side="right")
    last = np.searchsorted(group_start, ends, side="left")  # one past the last group
    marks = np.zeros(len(group_rows) + 1, dtype=np.int64)
    np.add.at(marks, first, 1)
    np.add.at(marks, last, -1)
    return np.flatnonzero(np.cumsum(marks)[:-1] > 0).tolist()


def read_ahead_bytes(parts: list[ParquetPart]) -> int:
    """The uncompressed bytes of the row groups of ``parts``, from the files' footers (read
    when the table was opened)."""
    return sum(
        part.file.metadata.row_group(group).total_byte_size
        for part in parts
        for group in part.row_groups or ()
    )


def read_row_groups(table: Table, parts: list[ParquetPart]) -> pa.Table:
    """The row groups of ``parts`` (each a part of some row groups of one file of
    ``table``), read by pyarrow (two files at a time from four files on: handing a read to
    a thread costs a point lookup's one or two files more than it saves), as the table's
    schema.

    A file whose size and modification time are still those it had when the table was
    opened is read on the footer parsed then (77 files: 41 ms against 55 ms parsing each
    footer again); another is read on its footer as it is now."""

    pooled = len(parts) >= 4

    def read(part: ParquetPart) -> pa.Table:
        file = part.file
        if storage.is_remote(file.path):
            # the selected chunks fetched at once, each GET conditional on the ETag the
            # table was opened with (a replaced object fails the read, never mixes in)
            ranges = chunk_ranges(file.metadata, None, part.row_groups)
            handle = storage.arrow_input(file.path, ranges, known=file.as_opened())
        else:
            handle = storage.arrow_input(file.path)
        try:
            unchanged = part.file.unchanged(storage.input_stat(handle))
            reader = pq.ParquetReader()
            reader.open(
                handle, metadata=part.file.metadata if unchanged else None, pre_buffer=False
            )
            # pyarrow's own threads only when the files are read one at a time: both at
            # once were slower (77 files: 28 ms against 24 ms).
            return reader.read_row_groups(part.row_groups or (), use_threads=not pooled)
        finally:
            handle.close()

    ahead = list(_READERS.map(read, parts)) if pooled else [read(p) for p in parts]
    ahead = [
        as_table(table, part.file, _stored(table, part, without_deleted(table, part, rows)))
        for part, rows in zip(parts, ahead, strict=True)
    ]
    return pa.concat_tables(ahead) if ahead else table.schema.empty_table()


def _stored(table: Table, part: ParquetPart, rows: pa.Table) -> pa.Table:
    """``rows`` of ``part``'s file as the table's types, under the file's names: only the
    columns it holds for the table (an Iceberg file may hold a column dropped since)."""
    schema = table.stored_schema(part.file)
    if table.layouts is not None:
        rows = rows.select(schema.names)
    return rows.cast(schema)


def deleted_rows(table: Table, file: ParquetFile) -> np.ndarray | None:
    """The positions of the rows ``file`` holds that its table deleted (a Delta deletion
    vector's, sorted), or None when there are none."""
    return None if table.deleted is None else table.deleted.get(file.relative)


def without_deleted(table: Table, part: ParquetPart, rows: pa.Table) -> pa.Table:
    """``rows`` read of ``part`` (its row groups, in order; all of the file when None)
    without those its table deleted."""
    deleted = deleted_rows(table, part.file)
    if deleted is None:
        return rows
    positions = np.concatenate(
        [np.arange(start, end, dtype=np.int64) for start, end in part.row_spans()]
        or [np.zeros(0, np.int64)]
    )
    return rows.filter(pa.array(~np.isin(positions, deleted)))


def file_columns(table: Table, file: ParquetFile, columns: list[str]) -> list[str]:
    """The names ``file`` of ``table`` holds ``columns`` under (leaving out those it holds
    in no column: a Delta table's partition columns, a column added since it was written)."""
    layout = table.layout(file)
    if layout is None:
        return columns
    found = (layout.stored_name(column) for column in columns)
    return [name for name in found if name is not None]


def as_table(table: Table, file: ParquetFile, rows: pa.Table) -> pa.Table:
    """``rows`` read from ``file`` of ``table`` (all its columns or some, under the file's
    names for them) as the table's columns: named as the table names them, with the values
    the file holds in no column (a Delta table's partition values, from its log), in the
    table's column order; ``rows`` itself when the file holds every column by its name."""
    layout = table.layout(file)
    if layout is None:
        return rows
    held = set(rows.column_names)
    columns, fields = [], []
    for name, in_file, field, value in layout.columns(table.schema.names):
        if in_file is None:
            columns.append(pa.repeat(pa.scalar(value, field.type), rows.num_rows))
            fields.append(field)
        elif in_file in held:
            columns.append(rows.column(in_file))
            fields.append(rows.schema.field(in_file).with_name(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, rows.schema.metadata))


_READERS = ThreadPoolExecutor(2, thread_name_prefix="pruner-parquet-read")
"""Reads files side by side for :func:`read_row_groups` (pyarrow releases the GIL)."""
