"""IN lists the folding step splits: a long run of constants becomes one placeholder, and
what follows it (a cast constant, another run) must still reach the probe. Mutation testing
of conditions.py found that unguarded (``continue`` -> ``break`` after a folded run dropped
every later element: a narrower selection; docs/mutation.md)."""

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
    path = tmp_path_factory.mktemp("in") / "t.lance"
    ids = np.random.default_rng(9).permutation(40_000).astype(np.int64)
    lance.write_dataset(pa.table({"k": ids}), str(path), max_rows_per_file=10_000)
    build_index(path, "k", items=1024)
    return path


ABSENT = ", ".join(str(-i) for i in range(1, 41))  # 40 constants: folded into one run


@pytest.mark.parametrize(
    "listed",
    [
        f"{ABSENT}, CAST(7777 AS BIGINT)",
        f"{ABSENT}, 7777 + 0, 5",
        f"CAST(7777 AS BIGINT), {ABSENT}",
        f"{ABSENT}, CAST(7777 AS BIGINT), {ABSENT}",
    ],
)
def test_every_element_after_a_folded_run_is_probed(table: Path, listed: str) -> None:
    sql = f"SELECT k FROM t WHERE k IN ({listed}) ORDER BY k"
    expected = engine_alone("duckdb", sql, {"t": table}).column("k").to_pylist()
    assert 7777 in expected
    for engine in ("duckdb", "datafusion"):
        got = pruner.query(sql, {"t": table}, engine=engine).column("k").to_pylist()
        assert got == expected, engine
