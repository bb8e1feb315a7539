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
    ids = np.random.default_rng(4).permutation(30_000).astype(np.int64)
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
