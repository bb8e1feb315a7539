"""Conditions made of boolean and NULL literals keep their meaning: ``WHERE TRUE`` reads
everything, ``k = 5 OR TRUE`` too. Mutation testing of conditions.py found the TRUE literal
unguarded (read as FALSE, it pruned every row; docs/mutation.md)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import pruner
from pruner.index import build_index
from tests.support.engine_check import engine_alone

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lit") / "t.lance"
    ids = np.random.default_rng(4).permutation(30_000).astype(np.int64) - 15_000
    lance.write_dataset(pa.table({"k": ids}), str(path), max_rows_per_file=10_000)
    build_index(path, "k", items=1024)
    return path


@pytest.mark.parametrize(
    "condition",
    [
        "TRUE",
        "k = 5 OR TRUE",
        "k = 5 OR (TRUE AND k = 6)",
        "k = 5 OR NOT FALSE",
        "k = 5 OR FALSE",
        "k = 5 AND TRUE",
        "k = 5 OR NULL",
        "NOT (k = 5 AND FALSE)",
    ],
)
def test_literal_conditions_answer_as_the_engine_alone(table: Path, condition: str) -> None:
    sql = f"SELECT count(*) AS n, min(k) AS low, max(k) AS high FROM t WHERE {condition}"
    expected = engine_alone("duckdb", sql, {"t": table}).to_pylist()
    for engine in ("duckdb", "datafusion"):
        assert pruner.query(sql, {"t": table}, engine=engine).to_pylist() == expected, engine


def test_a_join_of_many_items_still_prunes_the_named_ones(table: Path) -> None:
    """Past 16 FROM items a condition is converted only for the items whose columns it names
    (Resolver.conditions' other path): it must still prune them, and the answer stays the
    engine's. Mutation testing found that path without a test."""
    items = 18
    joins = " ".join(f"JOIN t AS a{i} ON a{i}.k = a0.k" for i in range(1, items))
    sql = f"SELECT count(*) AS n FROM t AS a0 {joins} WHERE a0.k = 5 AND a3.k IN (5, 7)"
    expected = engine_alone("duckdb", sql, {"t": table}).to_pylist()
    assert expected == [{"n": 1}]
    assert pruner.query(sql, {"t": table}).to_pylist() == expected
    explained = pruner.explain(sql, {"t": table}, check=False)
    assert len(explained.scans) == items
    for scan in explained.scans:
        # Every item is joined on k to a0, but only a0 and a3 are named by the WHERE.
        if scan.scan.alias in ("a0", "a3"):
            assert scan.zones_selected < scan.zones_total, scan.scan.alias


@pytest.mark.parametrize(
    ("condition", "parameters"),
    [
        ("k = -(-15)", []),
        ("k = -(15)", []),
        ("k IN (-(15), -(-(7)))", []),
        ("k = CAST(CAST(15.7 AS INTEGER) AS BIGINT)", []),
        ("k = CAST(CAST('15' AS INTEGER) AS VARCHAR)", []),
        ("k IN (-(-15), -(-(7)), 3)", []),
        ("-k = -(15)", []),
        ("k = $1 OR k = $2", [15, 7]),
        ("k IN ($2, $1)", [15, 7]),
        ("k = $2 OR $1 IS NULL", [7, 15]),
        ("k = $1 AND $2 = $2 AND $3 = $3", [15, 7, 99]),
    ],
)
def test_negated_constants_and_numbered_parameters(
    table: Path, condition: str, parameters: list[int]
) -> None:
    """Negation of a constant (``-(-15)``) and DuckDB's numbered parameters (``$2``) reach
    the probe as the engine reads them. Mutants of literal_from_sql that mis-strip a minus
    sign or shift a parameter's number survived the suite (docs/mutation.md)."""
    sql = f"SELECT k FROM t WHERE {condition} ORDER BY k"
    expected = engine_alone("duckdb", sql, {"t": table}, parameters).column("k").to_pylist()
    assert expected, "the condition matches rows"
    got = pruner.query(sql, {"t": table}, parameters=parameters).column("k").to_pylist()
    assert got == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY ROLLUP (k)) d WHERE d.k IS NULL",
        "SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY CUBE (k)) d WHERE d.k IS NULL",
        "SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY k) d WHERE d.k = 5",
        "SELECT * FROM (SELECT k AS a, k AS b FROM t) d WHERE d.b = 5",
        "SELECT * FROM (SELECT * FROM t) d WHERE d.k = 5",
        "SELECT * FROM (SELECT * EXCLUDE (k), k AS j FROM t) d WHERE d.j = 5",
        "SELECT * FROM (SELECT -k AS k, * EXCLUDE (k) FROM t) d WHERE d.k = 5",
        "SELECT * FROM (SELECT -k AS k, * REPLACE (-k AS k) FROM t) d WHERE d.k = 5",
    ],
)
def test_conditions_on_a_derived_tables_outputs(table: Path, sql: str) -> None:
    """A condition on a derived table's output is pushed to its source column only where
    that is the same condition: not through ROLLUP / CUBE, whose super-aggregate rows have
    NULL keys whatever the input. Mutants of Resolver.outputs that ignored GROUP BY survived
    (docs/mutation.md)."""
    expected = engine_alone("duckdb", sql, {"t": table}).to_pylist()
    assert expected, "the query answers rows"
    got = pruner.query(sql, {"t": table}).to_pylist()
    assert sorted(map(repr, got)) == sorted(map(repr, expected))
