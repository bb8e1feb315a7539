"""DuckDB bugs pruner works around, each checked on DuckDB alone: when one of these tests
fails, DuckDB has fixed the bug and the workaround it names can go.

The anti-join rewrite over an Arrow table (worked around in pruner.adapters.duckdb: read-ahead
rows are registered as a pyarrow dataset): ``a LEFT JOIN b ON a.x = b.x AND b.k IS NULL
WHERE b.x IS NULL`` becomes an anti join that drops ``b.k IS NULL`` when ``b`` is a registered
Arrow table, and loses the ``a`` rows whose ``x`` some ``b`` row holds (found by make fuzz).
DuckDB 2.0.1 fixed it; the workaround stays while pruner supports DuckDB 2.0.0
(``duckdb>=2.0`` in pyproject.toml), and can go with that version.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import lance
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import pruner

A = pa.table(
    {"k": pa.array(range(5), pa.int64()), "x": pa.array([None, 0, None, None, -128], pa.int8())}
)
B = pa.table(
    {"k": pa.array([0, 1, 2, 3], pa.int64()), "x": pa.array([0, 0, None, None], pa.int8())}
)
SQL = "SELECT count(*) FROM a LEFT JOIN b ON a.x = b.x AND b.k IS NULL WHERE b.x IS NULL"


def _count(b: object) -> int:
    con = duckdb.connect()
    con.register("a", A)
    con.register("b", b)
    [(n,)] = con.execute(SQL).fetchall()
    return int(n)


FIXED_IN = (2, 0, 1)


def _version() -> tuple[int, ...]:
    return tuple(int(part) for part in duckdb.__version__.split(".")[:3] if part.isdigit())


def test_duckdb_alone_over_an_arrow_table_drops_the_condition_before_2_0_1() -> None:
    if _version() < FIXED_IN:
        assert _count(B) == 4, "DuckDB fixed the anti-join rewrite: register Arrow tables again"
    else:
        assert _count(B) == 5, "DuckDB >= 2.0.1 broke the anti-join rewrite again"


def test_over_a_dataset_or_a_table_it_answers_right() -> None:
    assert _count(pads.dataset(B)) == 5
    con = duckdb.connect()
    con.execute("CREATE TABLE a AS SELECT * FROM A")
    con.execute("CREATE TABLE b AS SELECT * FROM B")
    assert con.execute(SQL).fetchall() == [(5,)]


@pytest.mark.parametrize("prune", [True, False])
def test_pruner_answers_right(tmp_path: Path, prune: bool) -> None:
    lance.write_dataset(A, str(tmp_path / "a.lance"))
    lance.write_dataset(B, str(tmp_path / "b.lance"))
    tables = {"a": tmp_path / "a.lance", "b": tmp_path / "b.lance"}
    got = pruner.query(SQL.replace("count(*)", "count(*) AS n"), tables, prune=prune)
    assert got.to_pylist() == [{"n": 5}]
