"""Run a query on DuckDB over in-memory copies of the example tables, whole or pruned.

Each table is read once into Arrow together with every row's (fragment, offset) address,
so a Selection can be applied exactly and the query compared, pruned vs unpruned.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sqlglot

from pruner.analyzer import DIALECTS
from pruner.selection import Selection
from pruner.table import open_table


def read_with_addresses(path: Path) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The whole table, with each row's fragment id and physical offset."""
    table = open_table(path)
    parts, fragments, offsets = [], [], []
    if table.kind == "lance":
        for fragment in table.dataset.get_fragments():
            data = fragment.to_table(with_row_address=True)
            address = data.column("_rowaddr").to_numpy().astype(np.int64)
            parts.append(data.drop_columns(["_rowaddr"]))
            fragments.append(address >> 32)
            offsets.append(address & 0xFFFFFFFF)
    else:
        for fid, file in sorted((table.files or {}).items()):
            data = pq.read_table(file.path)
            parts.append(data)
            fragments.append(np.full(data.num_rows, fid, np.int64))
            offsets.append(np.arange(data.num_rows, dtype=np.int64))
    if not parts:  # every row deleted
        empty = np.empty(0, np.int64)
        return table.schema.empty_table(), empty, empty
    return pa.concat_tables(parts), np.concatenate(fragments), np.concatenate(offsets)


def run_duckdb(
    sql: str, dialect: str, tables: dict[str, pa.Table], parameters: list[Any]
) -> Counter[tuple[Any, ...]]:
    """The query's rows as a multiset, on DuckDB over the given Arrow tables."""
    if dialect != "duckdb":
        sql = sqlglot.transpile(sql, read=DIALECTS[dialect], write="duckdb")[0]
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    rows = con.execute(sql, parameters).fetchall() if parameters else con.execute(sql).fetchall()
    return Counter(rows)


def restrict(
    table: pa.Table, fragments: np.ndarray, offsets: np.ndarray, selection: Selection
) -> pa.Table:
    return table.filter(pa.array(selection.contains(fragments, offsets)))
