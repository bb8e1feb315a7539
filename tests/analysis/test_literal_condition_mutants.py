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
