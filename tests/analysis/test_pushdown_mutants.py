"""Filters pushed into derived tables (scopes._accepts_pushdown): the survivors of
`make mutate` on pruner/analysis/scopes.py that change an answer (docs/mutation.md), each
killed here.

An enclosing query's filter on a derived table's output may reach the derived table's scan
only when filtering first cannot change which rows the derived table gives: never through
LIMIT, OFFSET, FETCH, QUALIFY, DISTINCT ON, a window function or grouping sets. Each query
here is built so that pushing the filter would change the answer; pruner on DuckDB over real
Parquet files with a zone bloom index must give what DuckDB ALONE gives over the raw files.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.index import build_index

ROWS = 1000


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """a: ``id`` a shuffled permutation, ``x`` the row number (so ``ORDER BY x`` is file
    order), both indexed in zones of 64 rows; ``g`` one of three groups; four files. b, in
    the folder beside it, is a copy."""
    root = tmp_path_factory.mktemp("pushdown") / "a"
    root.mkdir()
    ids = np.random.default_rng(2).permutation(ROWS).astype(np.int64)
    data = pa.table(
        {
            "id": ids,
            "x": np.arange(ROWS, dtype=np.int64),
            "g": pa.array([f"g{i % 3}" for i in range(ROWS)]),
        }
    )
    for number in range(4):
        part = data.slice(number * 250, 250)
        pq.write_table(part, root / f"p{number}.parquet", row_group_size=64)
    build_index(root, "id", items=64)
    build_index(root, "x", items=64)
    shutil.copytree(root, root.with_name("b"))  # b: a copy of a, indexes and all
    return str(root), ids


def _rows(result: pa.Table) -> list[tuple[Any, ...]]:
    columns = [result.column(i).to_pylist() for i in range(result.num_columns)]
    return sorted(zip(*columns, strict=True), key=repr)


def _same_as_duckdb_alone(sql: str, path: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    tables = {"a": path, "b": str(Path(path).with_name("b"))}
    for name, folder in tables.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{folder}/*.parquet')")
    alone = _rows(con.sql(sql).to_arrow_table())
    assert _rows(pruner.query(sql, tables)) == alone
    return alone


# The row at x = 250 is the first of its file and of its zone: among the first three rows of
# the zone its id selects, never among the first three of the table; x = 313 is the last of
# that zone.
FIRST_OF_A_ZONE, LAST_OF_A_ZONE = 250, 313


@pytest.mark.parametrize(
    "inner",
    [
        "SELECT id FROM a ORDER BY x LIMIT 3",
        "SELECT id FROM a ORDER BY x FETCH FIRST 3 ROWS ONLY",
        "SELECT id, x FROM a QUALIFY row_number() OVER (ORDER BY x) <= 3",
        "SELECT DISTINCT ON (g) g, id FROM a ORDER BY g, x",
    ],
    ids=["limit", "fetch", "qualify", "distinct-on"],
)
def test_a_filter_never_reaches_through_a_row_limit(
    inner: str, table: tuple[str, np.ndarray]
) -> None:
    path, ids = table
    key = int(ids[FIRST_OF_A_ZONE])
    assert _same_as_duckdb_alone(f"SELECT * FROM ({inner}) s WHERE id = {key}", path) == []


def test_a_filter_never_reaches_through_an_offset(table: tuple[str, np.ndarray]) -> None:
    """OFFSET 997 keeps the table's last three rows; pushed, it would skip all of a zone's."""
    path, ids = table
    key = int(ids[ROWS - 1])
    sql = f"SELECT * FROM (SELECT id FROM a ORDER BY x OFFSET 997) s WHERE id = {key}"
    assert _same_as_duckdb_alone(sql, path) == [(key,)]


def test_a_filter_never_reaches_through_a_window(table: tuple[str, np.ndarray]) -> None:
    """row_number() over the whole table, not over the zone the filter selects."""
    path, ids = table
    key = int(ids[900])
    sql = (
        f"SELECT * FROM (SELECT id, row_number() OVER (ORDER BY x) AS n FROM a) s WHERE id = {key}"
    )
    assert _same_as_duckdb_alone(sql, path) == [(key, 901)]


@pytest.mark.parametrize("grouping", ["ROLLUP (id)", "CUBE (id)", "GROUPING SETS ((id), ())"])
def test_a_filter_never_reaches_through_grouping_sets(
    grouping: str, table: tuple[str, np.ndarray]
) -> None:
    """The grand total row has a NULL id: ``id IS NULL`` keeps it, and it counts every row."""
    path, _ = table
    sql = f"SELECT * FROM (SELECT id, count(*) AS n FROM a GROUP BY {grouping}) s WHERE id IS NULL"
    assert _same_as_duckdb_alone(sql, path) == [(None, ROWS)]


@pytest.mark.parametrize(
    ("tail", "row"),
    [("ORDER BY x LIMIT 3", FIRST_OF_A_ZONE), ("ORDER BY x DESC OFFSET 3", LAST_OF_A_ZONE)],
)
def test_a_filter_never_reaches_through_a_unions_limit_or_offset(
    tail: str, row: int, table: tuple[str, np.ndarray]
) -> None:
    """LIMIT / OFFSET of a whole UNION ALL: pushed into its branches, the filter would pick
    the rows the limit keeps, or skip the ones it keeps (mutants: the union's limit or
    offset not read)."""
    path, ids = table
    key = int(ids[row])
    union = f"SELECT id, x FROM a UNION ALL SELECT id, x FROM b {tail}"
    expected = [] if "LIMIT" in tail else [(key, row)] * 2
    sql = f"SELECT * FROM ({union}) s WHERE id = {key}"
    assert _same_as_duckdb_alone(sql, path) == expected


def test_a_unions_columns_are_named_by_its_first_branch(table: tuple[str, np.ndarray]) -> None:
    """The union's ``p`` is a.id in the first branch and b.x in the second (columns pair by
    position, named by the first branch): ``p = K`` prunes a by id and b by x (mutant: the
    names taken from the second branch, which swaps them)."""
    path, ids = table
    key = int(ids[FIRST_OF_A_ZONE])
    union = "SELECT id AS p, x AS q FROM a UNION ALL SELECT x AS q, id AS p FROM b"
    sql = f"SELECT * FROM ({union}) s WHERE p = {key}"
    expected = sorted([(key, FIRST_OF_A_ZONE), (key, int(ids[key]))])
    assert _same_as_duckdb_alone(sql, path) == expected
