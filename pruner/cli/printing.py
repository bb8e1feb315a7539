"""What the ``pruner`` command prints: the index list, query results as a table, CSV or
JSON, the summary of what a query read, and errors as one line.

A query's table is DuckDB's own box (types under the names, as ``duckdb`` and
``relation.show()`` print them; every row, and on a terminal the columns that fit its width)
when DuckDB ran it; rich's table for the other engines. rich is imported only where it
draws: ~20 ms of a new process's query."""

from __future__ import annotations

import errno
import io
import json
import sys
from typing import Any

import pyarrow as pa
import pyarrow.csv as csv

from pruner.errors import PrunerError


def _print_index_list(rows: list[dict[str, object]], path: str) -> None:
    """The rows of :func:`pruner.index_status` as ``pruner index list`` shows them: a table,
    then what to run for each index that is not current."""
    from rich.console import Console
    from rich.table import Table

    if not rows:
        print(f"no bloom indexes in {path}")
        return
    shown = Table(
        "column", "state", "zones", "fragments indexed", "rows indexed", "filter", "hierarchy"
    )
    advice = []
    for row in rows:
        if "error" in row:
            shown.add_row(str(row["column"]), str(row["state"]), str(row["error"]))
            continue
        state = str(row["state"]) + (f" ({row['why']})" if row["why"] else "")
        shown.add_row(
            str(row["column"]),
            state,
            f"{row['zones']:,}",
            f"{row['fragments_indexed']:,} / {row['fragments_total']:,}",
            f"{row['rows_indexed']:,} / {row['rows_total']:,}"
            + (f" ({row['rows_deleted']:,} deleted)" if row["rows_deleted"] else ""),
            f"{row['filter_bytes']:,} B, {row['items']:,} items, p={row['probability']}",
            str(row["hierarchy"]),
        )
        if row["advice"]:
            advice.append(f"{row['column']}: {row['advice']}")
            update = row["update"]
            if isinstance(update, dict) and "words" in update:
                advice.append(f"{row['column']}: an update would {update['words']}")
    console = Console() if Console().is_terminal else Console(width=160)  # piped: no wrapping
    console.print(shown)
    for line in advice:
        console.print(line, soft_wrap=True)


def _row_groups_read(prepared: Any) -> str:
    """What the engine reads of the Parquet tables, as the plan binds them (the cost model's
    choices included), where a row group holds more than the zones selected in it:
    ``; Parquet row groups read 3 / 60 (750,000 rows)``."""
    from pruner.explain import parquet_reads

    if prepared.explanation is None:
        return ""
    found = [
        parquet_reads(prepared.tables[name], selection)
        for name, selection in prepared.selections.items()
        if selection is not None and prepared.tables[name].kind == "parquet"
    ]
    if not found:
        return ""
    groups = sum(r["row_groups_read"] for r in found)
    of = sum(r["row_groups_total"] for r in found)
    rows = sum(r["rows_read"] for r in found)
    return f"; Parquet row groups read {groups:,} / {of:,} ({rows:,} rows)"


def _print_result(result: pa.Table, form: str, engine: str = "duckdb") -> None:
    if form == "table" and engine == "duckdb":
        from pruner.engines import adapter

        relation = adapter("duckdb").shared_connection().from_arrow(result)
        # every row, as pruner printed them before; on a terminal DuckDB fits the columns
        # to its width (the ones left out are named in its footer), piped none is left out
        width = None if sys.stdout.isatty() else 1 << 20
        relation.show(max_rows=max(result.num_rows, 1), max_width=width)
        return
    result = _without_views(result)
    if form == "csv":
        buffer = io.BytesIO()
        csv.write_csv(result, buffer)
        sys.stdout.write(buffer.getvalue().decode())
    elif form == "json":
        print(json.dumps(result.to_pylist(), default=str, indent=1))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(*result.schema.names)
        for row in result.to_pylist():
            table.add_row(*("NULL" if v is None else str(v) for v in row.values()))
        Console().print(table)


def _without_views(result: pa.Table) -> pa.Table:
    """``string_view`` columns (DataFusion returns them for strings read from Parquet) as
    ``string``, pyarrow's CSV writer refusing view types; binary columns as DuckDB's text of
    them (:func:`blob_text`), pyarrow's writing them as UTF-8 and failing on other bytes."""
    for position, f in enumerate(result.schema):
        if pa.types.is_string_view(f.type):
            result = result.set_column(
                position, f.with_type(pa.string()), result[position].cast(pa.string())
            )
        elif _is_binary(f.type):
            texts = pa.array(
                [None if v is None else blob_text(v) for v in result[position].to_pylist()],
                pa.string(),
            )
            result = result.set_column(position, f.with_type(pa.string()), texts)
    return result


def _is_binary(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_binary_view(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
    )


_BLOB_TEXT = {
    byte: chr(byte) if 0x20 <= byte < 0x7F and chr(byte) not in "\"'\\" else f"\\x{byte:02X}"
    for byte in range(256)
}


def blob_text(value: bytes) -> str:
    """``value`` written as DuckDB writes a BLOB in CSV (``COPY ... (FORMAT csv)``, and its
    cast to VARCHAR): printable ASCII as itself but for ``"``, ``'`` and ``\\``, every other
    byte as ``\\xHH``.

    >>> print(blob_text(b"a,\\x00\\xaa'"))
    a,\\x00\\xAA\\x27
    """
    return value.decode("latin-1").translate(_BLOB_TEXT)


_STORAGE_ERRORS = {
    errno.EACCES: "pruner reads the table and writes in its index folders: check their permissions",
    errno.EPERM: "pruner reads the table and writes in its index folders: check their permissions",
    errno.EROFS: "the file system is read-only: build or update the index where it can write",
    errno.ENOSPC: "free some space and run again",
    errno.EDQUOT: "the disk quota is used up: free some space and run again",
    errno.EFBIG: "a file would pass the size limit (ulimit -f): raise it and run again",
}
"""Errors of the storage under a table, and what to do about each."""


def _one_line(err: Exception) -> str:
    """An error as one line: pruner's own as they are (they say what to do); a missing
    engine extra with the install command; anything else with its type, and how to see
    the traceback."""
    if isinstance(err, PrunerError):
        return str(err)
    if isinstance(err, ImportError):
        return f"{err} (a missing extra: pip install the extra the message names)"
    if isinstance(err, OSError) and err.errno in _STORAGE_ERRORS:
        where = f" ({err.filename})" if err.filename else ""
        return (
            f"{err.strerror}{where}: {_STORAGE_ERRORS[err.errno]}; an index is replaced "
            "only after its new files are written, so the old one is still in use"
        )
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first} (run with --debug for the traceback)"
