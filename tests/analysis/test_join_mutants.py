"""Join sides and null extension in Analyzer.select: the survivors of `make mutate` on it
that change an answer (docs/mutation.md), each killed here.

Every test runs a query through pruner on DuckDB over real Parquet files with a zone bloom
index and compares the answer with DuckDB ALONE over the raw files (read_parquet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.index import build_index


def _parquet_dir(path: Path, table: pa.Table, files: int = 4) -> Path:
    path.mkdir()
    step = -(-table.num_rows // files)
    for number in range(files):
        part = table.slice(number * step, step)
        pq.write_table(part, path / f"part-{number}.parquet", row_group_size=64)
    return path


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """a: ids 0..999 (indexed); b: ids 500..1499 with v = id * 7 + 3, never NULL (both
    indexed): 500 a rows match no b row, 500 b rows no a row."""
    root = tmp_path_factory.mktemp("joins")
    a = pa.table({"id": pa.array(range(1000), pa.int64())})
    ids = np.arange(500, 1500, dtype=np.int64)
    b = pa.table({"id": ids, "v": pa.array(ids * 7 + 3, pa.int64())})
    paths = {"a": _parquet_dir(root / "a", a), "b": _parquet_dir(root / "b", b)}
    build_index(paths["a"], "id", items=64)
    build_index(paths["b"], "id", items=64)
    build_index(paths["b"], "v", items=64)
    return {name: str(path) for name, path in paths.items()}


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted(zip(*columns, strict=True), key=repr)


def _same_as_duckdb_alone(sql: str, tables: dict[str, str]) -> int:
    con = duckdb.connect()
    for name, path in tables.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    alone = con.execute(sql).to_arrow_table()
    assert _rows(pruner.query(sql, tables)) == _rows(alone)
    return alone.num_rows


def test_anti_join_on_condition_never_prunes_the_kept_side(tables: dict[str, str]) -> None:
    """An ANTI join keeps the left rows that match nothing: ``a.id = 5`` in its ON clause
    may not prune a (mutants: the join's kind not read, ANTI not recognised)."""
    sql = "SELECT a.id FROM a ANTI JOIN b ON a.id = b.id AND a.id = 5"
    assert _same_as_duckdb_alone(sql, tables) == 1000


def test_full_join_null_extends_both_sides(tables: dict[str, str]) -> None:
    """``b.v IS NULL`` holds on every row the FULL JOIN null-extends: it may not prune b
    (mutants: FULL no longer null-extends)."""
    sql = "SELECT a.id, b.id FROM a FULL JOIN b ON a.id = b.id WHERE b.v IS NULL"
    assert _same_as_duckdb_alone(sql, tables) == 500


def test_a_later_right_join_null_extends_every_earlier_side(tables: dict[str, str]) -> None:
    """``a JOIN b ... RIGHT JOIN c``: the RIGHT JOIN null-extends a and b; ``b.v IS NULL``
    may not prune b (mutant: the joined alias not remembered as seen)."""
    sql = (
        "SELECT c.id, b.v FROM a JOIN b ON a.id = b.id RIGHT JOIN a AS c ON b.id = c.id "
        "WHERE b.v IS NULL"
    )
    assert _same_as_duckdb_alone(sql, tables) == 500


def test_using_sample_keeps_the_where_out_of_a_derived_table(tables: dict[str, str]) -> None:
    """USING SAMPLE draws from the FROM item's rows before WHERE: pushing ``x.id IN (...)``
    into the derived table would draw from fewer rows (mutant: pushed despite the refusal)."""
    sql = (
        "SELECT x.id FROM (SELECT * FROM a) AS x WHERE x.id IN (5, 6, 7, 8) "
        "USING SAMPLE 100 ROWS (reservoir, 7)"
    )
    # 100 of a's 1,000 rows, then the WHERE: pruned to the 64 rows of one zone first, the
    # sample would hold all four ids.
    assert _same_as_duckdb_alone(sql, tables) < 4
