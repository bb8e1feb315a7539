"""DataFusion bugs pruner works around, each checked on DataFusion alone: when one of these
tests fails, DataFusion has fixed the bug and the workaround it names can go.

The outer-join swap (worked around by ``pruner.adapters.datafusion.SAFE_SETTINGS``): with
``join_reordering`` on, DataFusion 55 turns ``big RIGHT JOIN small`` into ``small LEFT JOIN
big`` and pushes the filter ``x.k IS NULL`` on the null-extended side into ``small``'s scan
(both sides have a column ``k``); the scan's row-group pruning then drops every row.
"""

from __future__ import annotations

from pathlib import Path

import datafusion
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pruner.adapters.datafusion import SAFE_SETTINGS, new_context, query

SQL = "SELECT count(*) AS n FROM big AS x RIGHT JOIN small AS y ON x.k = y.k WHERE x.k IS NULL"


@pytest.fixture
def two_tables(tmp_path: Path) -> dict[str, Path]:
    paths = {"small": tmp_path / "small", "big": tmp_path / "big"}
    for name, values in (("small", range(12)), ("big", range(5, 5000))):
        paths[name].mkdir()
        pq.write_table(pa.table({"k": pa.array(values, pa.int64())}), paths[name] / "0.parquet")
    return paths


def _datafusion_alone(context: datafusion.SessionContext, paths: dict[str, Path]) -> int:
    for name, path in paths.items():
        context.register_parquet(name, str(path))
    return int(context.sql(SQL).to_pylist()[0]["n"])


def test_duckdb_answer(two_tables: dict[str, Path]) -> None:
    con = duckdb.connect()
    for name, path in two_tables.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    assert con.execute(SQL).fetchall() == [(5,)]


def test_datafusion_alone_still_drops_null_extended_rows(two_tables: dict[str, Path]) -> None:
    assert _datafusion_alone(datafusion.SessionContext(), two_tables) == 0, (
        "DataFusion fixed the outer-join swap bug: drop SAFE_SETTINGS' join_reordering"
    )


def test_safe_settings_answer_right(two_tables: dict[str, Path]) -> None:
    assert SAFE_SETTINGS["datafusion.optimizer.join_reordering"] == "false"
    assert _datafusion_alone(new_context(), two_tables) == 5


@pytest.mark.parametrize("prune", [True, False])
def test_pruner_answers_right(two_tables: dict[str, Path], prune: bool) -> None:
    answer = query(SQL, {name: str(path) for name, path in two_tables.items()}, prune=prune)
    assert answer.to_pylist() == [{"n": 5}]


@pytest.fixture
def lance_as_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    """pruner registers Lance selections as datasets, never as rows read ahead."""
    from pruner.adapters import sources

    monkeypatch.setattr(sources, "READ_AHEAD_VALUES", 0)


def test_datafusion_alone_cannot_push_a_null_literal_into_a_dataset(
    tmp_path: Path, lance_as_dataset: None
) -> None:
    """DataFusion 55 turns ``k IN (NULL, 0)`` pushed into a pyarrow/Lance dataset scan into
    ``BooleanScalar | Expression``, which raises (found by make fuzz); pruner registers Lance
    tables without filter pushdown when a query holds a NULL literal."""
    import lance
    import pyarrow.dataset as pads

    path = tmp_path / "a.lance"
    lance.write_dataset(pa.table({"k": pa.array(range(10), pa.int64())}), str(path))
    sql = "SELECT k FROM a WHERE k IN (NULL, 0)"
    context = datafusion.SessionContext()
    context.register_dataset("a", pads.dataset(pa.table({"k": pa.array(range(10))})))
    with pytest.raises(Exception, match="BooleanScalar"):
        context.sql(sql).to_arrow_table()
    for prune in (True, False):
        got = query(sql, {"a": path}, prune=prune)
        assert got.to_pylist() == [{"k": 0}]
    got = query("SELECT k FROM a WHERE k IN ($1, 0)", {"a": path}, parameters=[None])
    assert got.to_pylist() == [{"k": 0}]


def test_datafusion_alone_pushes_a_filter_of_literals_into_a_dataset(
    tmp_path: Path, lance_as_dataset: None
) -> None:
    """DataFusion 55 simplifies ``k = NULL OR s = NULL`` to a filter of literals only, which
    names no column, so it is pushed into a dataset scan even past pruner's identity UDF,
    and fails there (found by make fuzz); pruner puts a limit no table reaches between
    the scan and the query when the query holds a NULL literal."""
    import lance
    import pyarrow.dataset as pads

    data = pa.table({"k": pa.array(range(10), pa.int64()), "s": pa.array(["x"] * 10)})
    path = tmp_path / "a.lance"
    lance.write_dataset(data, str(path))
    sql = "SELECT k FROM a WHERE (k = NULL OR s = NULL) AND k IS NULL"
    context = datafusion.SessionContext()
    context.register_dataset("a", pads.dataset(data))
    with pytest.raises(Exception, match="BooleanScalar"):
        context.sql(sql).to_arrow_table()
    for prune in (True, False):
        assert query(sql, {"a": path}, prune=prune).num_rows == 0
        reordered = "SELECT k FROM a WHERE k IS NULL AND (k = NULL OR s = NULL)"
        assert query(reordered, {"a": path}, prune=prune).num_rows == 0
        got = query("SELECT k FROM a WHERE k = 3 OR (k = NULL OR s = NULL)", {"a": path})
        assert got.to_pylist() == [{"k": 3}]
