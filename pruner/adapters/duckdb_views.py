"""The SQL of the views the DuckDB adapter binds a Parquet table to
(:func:`parquet_view_sql`): ``read_parquet`` of the files read whole, and of each file read in
part restricted to its selected row groups by ``file_row_number``, with DuckDB's string and
path quoting. Text only: this module runs no DuckDB."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa

from pruner import storage
from pruner.adapters.naming import quote_identifier
from pruner.discover import ParquetFile, hive_partitioned
from pruner.errors import EngineError
from pruner.reads import ParquetPart, deleted_rows, parquet_parts
from pruner.selection import Selection
from pruner.table import Table

__all__ = ["parquet_view_sql", "quote_path", "quote_string"]


def quote_string(text: str) -> str:
    """``text`` as a DuckDB string literal.

    >>> quote_string("it's")
    "'it''s'"
    """
    return "'" + text.replace("'", "''") + "'"


_GLOB = re.compile(r"([*?\[])")


def quote_path(path: storage.Location) -> str:
    """A local file's path as a DuckDB string literal ``read_parquet`` reads as that one file.

    DuckDB reads ``*``, ``?`` and ``[...]`` in a path as a glob (``part[1]`` would read
    ``part1``): each is put in a class of its own, which matches only itself. The path is made
    absolute, so no leading ``~`` or scheme-like first folder is read as one.

    >>> from pathlib import Path
    >>> quote_path(Path("/data/it's [1]/a*.parquet"))
    "'/data/it''s [[]1]/a[*].parquet'"

    Raises:
        EngineError: the path holds both a backslash and a glob character, which DuckDB's
            glob cannot match literally.
    """
    text = str(path.absolute())
    if _GLOB.search(text):
        if "\\" in text:
            raise EngineError(
                f"DuckDB cannot read {text!r}: its glob matching cannot take a path that holds "
                "both a backslash and one of * ? [ literally; rename the folder or file, or "
                "use another engine"
            )
        text = _GLOB.sub(r"[\1]", text)
    return quote_string(text)


def parquet_view_sql(table: Table, selection: Selection | None) -> str:
    """The SELECT a pruned Parquet table is a view of (all of it when ``selection`` is None)."""
    parts = parquet_parts(table, selection)
    files = table.files or {}
    # DuckDB's own auto-detection over the whole table's files (a subset could decide
    # otherwise), on their absolute paths as DuckDB sees them: files at the root next to
    # files in ``day=2/`` are not hive partitioned (read with hive_partitioning = true,
    # DuckDB refuses them: "Hive partition mismatch").
    # A Delta or Iceberg table's folders are no partitions of DuckDB's (a Delta table's
    # partition values are its log's, added per file below).
    hive = table.pinned is None and hive_partitioned(
        f.path.absolute().parts[:-1] for f in files.values()
    )
    options = f"hive_partitioning = {str(hive).lower()}"
    if not parts:
        first = files[min(files)]
        scan = f"read_parquet({quote_path(first.path)}, {options})"
        return f"SELECT {_projection(table, first)} FROM {scan} LIMIT 0"
    if "file_row_number" in table.schema.names:  # the pseudo-column would clash: read whole
        if table.deleted is not None:
            raise EngineError(
                f"DuckDB cannot leave out the rows {table.path}'s deletion vectors delete: "
                "its column file_row_number hides DuckDB's row numbers; use another engine"
            )
        parts = [ParquetPart(part.file, None) for part in parts]
    damaged = {files[fid].path for fid in table.damaged_filter_files()}
    # Files with deleted rows (Delta's deletion vectors) are read by row number, below.
    parts = [
        ParquetPart(part.file, tuple(range(len(part.file.row_group_rows))))
        if part.row_groups is None and deleted_rows(table, part.file) is not None
        else part
        for part in parts
    ]
    selects = []
    for unsafe in (False, True):
        whole: dict[str, list[ParquetPart]] = {}  # by the files' partition values
        for part in parts:
            if part.row_groups is None and (part.file.path in damaged) == unsafe:
                whole.setdefault(_projection(table, part.file), []).append(part)
        for projection, group in whole.items():
            listing = ", ".join(quote_path(part.file.path) for part in group)
            select = f"SELECT {projection} FROM read_parquet([{listing}], {options})"
            selects.append(_unfiltered(select, unsafe))
    for part in parts:
        if part.row_groups is None:
            continue
        select = (
            f"SELECT {_projection(table, part.file, row_numbers=True)} FROM "
            f"read_parquet({quote_path(part.file.path)}, file_row_number = true, {options}) "
            f"WHERE {_rows_kept(part, deleted_rows(table, part.file))}"
        )
        selects.append(_unfiltered(select, part.file.path in damaged))
    return " UNION ALL BY NAME ".join(selects)


def _rows_kept(part: ParquetPart, deleted: np.ndarray | None) -> str:
    """The condition on ``file_row_number`` that keeps the rows of ``part``'s row groups,
    but those its table deleted (``deleted``: a Delta deletion vector's or an Iceberg
    delete's sorted positions): the spans of rows kept, where they are fewer than the rows
    deleted in them (a deleted range: Delta's DELETE of a date range, say), else the spans
    and a list of the deleted rows (scattered ones)."""
    spans = list(part.row_spans())
    between = " OR ".join(f"file_row_number BETWEEN {a} AND {b - 1}" for a, b in spans)
    if deleted is None:
        return between
    gone = [deleted[(deleted >= start) & (deleted < end)] for start, end in spans]
    if not sum(len(rows) for rows in gone):
        return between
    kept: list[tuple[int, int]] = []
    for (start, end), rows in zip(spans, gone, strict=True):
        starts = np.concatenate(([start], rows + 1))  # a run of kept rows after each deleted
        ends = np.concatenate((rows, [end]))
        kept.extend((a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True) if b > a)
    if len(kept) <= sum(len(rows) for rows in gone):
        runs = " OR ".join(f"file_row_number BETWEEN {a} AND {b - 1}" for a, b in kept)
        return runs or "FALSE"
    listed = ", ".join(str(int(row)) for rows in gone for row in rows)
    return f"({between}) AND file_row_number NOT IN ({listed})"


def _projection(table: Table, file: ParquetFile, *, row_numbers: bool = False) -> str:
    """The select list reading ``file`` as the table's columns: ``*``, or each column by
    the file's name for it and each value the file holds in no column (a Delta table's
    partition values, from its log, typed as the table's), in the table's column order.
    Columns some files store narrower (``table.widened``) are cast as DuckDB reads them over
    every file, at the first file's type (a subset of the files may not start with that
    file). ``row_numbers``: the scan reads ``file_row_number``, which is left out."""
    layout = table.layout(file)
    if layout is None:
        widened = ", ".join(
            f"CAST({quote_identifier(c)} AS {_SQL_WIDTHS[table.schema.field(c).type]}) AS "
            f"{quote_identifier(c)}"
            for c in sorted(table.widened)
        )
        star = "* EXCLUDE (file_row_number)" if row_numbers else "*"
        return f"{star} REPLACE ({widened})" if widened else star
    columns = []
    for name, in_file, field, value in layout.columns(table.schema.names):
        if in_file is not None:
            text = quote_identifier(in_file)
            if name in table.widened:
                text = f"CAST({text} AS {_SQL_WIDTHS[table.schema.field(name).type]})"
        else:
            text = f"CAST({_literal(value)} AS {_sql_type(field.type)})"
        columns.append(f"{text} AS {quote_identifier(name)}")
    return ", ".join(columns)


def _literal(value: object) -> str:
    """A partition value as SQL text DuckDB casts to the column's type."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
        return quote_string(text)
    return quote_string(str(value))  # strings, floats (nan, inf), decimals


def _sql_type(kind: pa.DataType) -> str:
    """DuckDB's name of a partition column's Arrow type (formats.delta's constant types)."""
    if pa.types.is_timestamp(kind):
        return "TIMESTAMPTZ" if kind.tz is not None else "TIMESTAMP"
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision}, {kind.scale})"
    return _SQL_TYPES[kind]


_SQL_TYPES = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
}


_SQL_WIDTHS = {pa.int64(): "BIGINT"}


def _unfiltered(select: str, unfiltered: bool) -> str:
    """``select``, when ``unfiltered`` behind a limit no table reaches: DuckDB pushes no
    filter through a limit, so it reads no bloom filter of these files. For files with a
    filter pruner refused as damaged, which DuckDB alone reads and fails on
    (``TProtocolException: Invalid data``) or could misread; pruner's own probe already
    kept every row group such a filter covers."""
    return f"SELECT * FROM ({select} LIMIT {_NO_LIMIT})" if unfiltered else select


_NO_LIMIT = 1 << 62
