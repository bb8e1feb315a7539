"""DataFusion bugs pruner works around, each checked on DataFusion alone: when one of these
tests fails, DataFusion has fixed the bug and the workaround it names can go.

The outer-join swap (worked around by ``pruner.adapters.datafusion_settings.SAFE_SETTINGS``): with
``join_reordering`` on, DataFusion 55 turns ``big RIGHT JOIN small`` into ``small LEFT JOIN
big`` and pushes the filter ``x.k IS NULL`` on the null-extended side into ``small``'s scan
(both sides have a column ``k``); the scan's row-group pruning then drops every row.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import datafusion
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pruner.adapters.datafusion import query
from pruner.adapters.datafusion_settings import SAFE_SETTINGS, new_context
from tests.support.differential import TableSpec, assert_same_answer
from tests.support.engine_check import engine_alone

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
    from pruner import reads

    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)


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


def test_datafusion_alone_cannot_push_a_contradiction_into_a_dataset(tmp_path: Path) -> None:
    """DataFusion 55 folds ``k = 0 AND k IN (2147483648)`` to a constant and may push it
    into a pyarrow/Lance dataset scan, where turning a BooleanScalar into a pyarrow filter
    raises. make fuzz found it on an EXISTS subquery over a Lance table with stable row ids
    (pruner raised where DataFusion over the rows answers); the query now runs again with no
    filter pushed into Lance. Judged by the engine alone over the raw files."""
    import pyarrow.dataset as pads

    context = datafusion.SessionContext()
    context.register_dataset("b", pads.dataset(pa.table({"k": pa.array(range(10))})))
    with pytest.raises(Exception, match="BooleanScalar"):
        context.sql("SELECT k FROM b WHERE k = 0 AND k IN (2147483648)").to_arrow_table()
    b = pa.table(
        {
            "k": pa.array([9, 6, 2, 7, 5, 0, 1, 8, 3, 4], pa.int64()),
            "ts": pa.array(
                [datetime.datetime(2024, 1, 1), *[None] * 5, datetime.datetime(1969, 12, 31)]
                + [None] * 3,
                pa.timestamp("us"),
            ),
            "u8": pa.array([0, 0, None, None, 0, None, 0, None, None, None], pa.uint8()),
        }
    )
    a = pa.table({"k": pa.array(range(40), pa.int64()), "u8": pa.array([None] * 40, pa.uint8())})
    tables = {
        "a": TableSpec(layout="lance", data=a, fragments=(40,), items={"k": 2}),
        "b": TableSpec(
            layout="lance", data=b, fragments=(10,), items={"ts": 1}, stable_row_ids=True
        ),
    }
    sql = (
        "SELECT x.k FROM a AS x WHERE EXISTS (SELECT 1 FROM b AS y WHERE y.u8 = x.u8 "
        "AND (y.k = $1 AND (y.ts IN (TIMESTAMP '1969-12-31') AND y.k IN (2147483648))))"
    )
    assert_same_answer("datafusion", tables, sql, tmp_path, parameters=[0])


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


PUSHDOWN = "datafusion.execution.parquet.pushdown_filters"

_NULL_EXTENDED = {
    "null literal": (
        pa.table({"k": pa.array(range(18), pa.int64()), "s": pa.array([None] * 18, pa.string())}),
        pa.table({"k": pa.array([0], pa.int64()), "s": pa.array([""])}),
        "SELECT x.k AS xk, y.k AS yk FROM a AS x RIGHT JOIN b AS y ON x.s = y.s",
        ["(x.k = 0 OR x.k = NULL)", "(x.k = $1 OR x.k = NULL)"],
    ),
    "not distinct": (
        pa.table(
            {"k": pa.array(range(18), pa.int64()), "i8": pa.array([None] * 17 + [1], pa.int8())}
        ),
        pa.table({"k": pa.array([0], pa.int64()), "i8": pa.array([1], pa.int8())}),
        "SELECT x.k AS xk, y.k AS yk, y.k AS yv FROM a AS x RIGHT JOIN b AS y "
        "ON x.i8 = y.i8 AND 2 = y.k",
        ["x.k IS NOT DISTINCT FROM 0", "x.k IS NOT DISTINCT FROM $1"],
    ),
}


@pytest.mark.parametrize("case", sorted(_NULL_EXTENDED))
def test_datafusion_with_parquet_pushdown_keeps_a_null_extended_row(
    tmp_path: Path, case: str
) -> None:
    """DataFusion 55 with ``datafusion.execution.parquet.pushdown_filters`` keeps the
    null-extended row of a RIGHT JOIN whose WHERE is NULL or false for it (both found by make
    fuzz); with its default settings DataFusion answers no row. pruner's contexts
    (SAFE_SETTINGS) keep the setting off."""
    a, b, select, wheres = _NULL_EXTENDED[case]
    paths = {"a": tmp_path / "a", "b": tmp_path / "b"}
    for name, data in (("a", a), ("b", b)):
        paths[name].mkdir()
        pq.write_table(data, paths[name] / "p.parquet")
    buggy = new_context({**SAFE_SETTINGS, PUSHDOWN: "true"})
    safe = new_context()
    for context in (buggy, safe):
        for name, path in paths.items():
            context.register_parquet(name, str(path / "p.parquet"))
    sql = f"{select} WHERE {wheres[0]}"
    assert buggy.sql(sql).to_arrow_table().num_rows == 1, f"the bug is gone: drop {PUSHDOWN}"
    assert SAFE_SETTINGS[PUSHDOWN] == "false"
    assert safe.sql(sql).to_arrow_table().num_rows == 0
    assert engine_alone("datafusion", sql, paths).num_rows == 0
    for where, parameters in ((wheres[0], []), (wheres[1], [0])):
        for prune in (True, False):
            got = query(
                f"{select} WHERE {where}",
                {k: str(v) for k, v in paths.items()},
                prune=prune,
                parameters=parameters,
            )
            assert got.num_rows == 0, (where, prune)


_TIMES = ", ".join(
    f"TIMESTAMP '{t}'"
    for t in (
        "1969-12-31 23:59:59",
        "2024-01-01 00:00:04",
        "2024-01-01 00:00:00.000123",
        "2024-01-01",
    )
)


def test_datafusion_alone_cannot_push_zoned_timestamps_into_a_dataset(tmp_path: Path) -> None:
    """DataFusion 55 makes ``y.tz IN (...)`` of a LEFT JOIN's ``ON ... OR y.tz = T2 OR
    ...`` of timestamps with a time zone, pushes it into the right side's dataset scan, and
    fails planning it ("PyArrow can't handle ScalarValue: TimestampMicrosecond(...,
    Some("UTC"))"); make fuzz found pruner raising so on Lance tables where DataFusion over
    the rows answers. The query now runs again with no filter pushed into Lance. Judged by
    the engine alone over the raw files."""
    import pyarrow.dataset as pads

    ors = " OR ".join(f"y.tz = {t}" for t in _TIMES.split(", "))
    sql = f"SELECT x.k AS xk, y.k AS yk FROM a AS x LEFT JOIN b AS y ON x.tz = y.tz AND {ors}"
    zoned = pa.timestamp("us", tz="UTC")
    rows = {"k": pa.array(range(12), pa.int64()), "tz": pa.array([None] * 12, zoned)}
    context = datafusion.SessionContext()
    for name in ("a", "b"):
        context.register_dataset(name, pads.dataset(pa.table(rows)))
    with pytest.raises(Exception, match="PyArrow can't handle ScalarValue"):
        context.sql(sql).to_arrow_table()
    tables = {
        name: TableSpec(layout="lance", data=pa.table(rows), fragments=(5, 7), items={"tz": 1})
        for name in ("a", "b")
    }
    assert_same_answer("datafusion", tables, sql, tmp_path)


def _write_two_groups(path: Path, values: list[int]) -> None:
    pq.write_table(pa.table({"k": pa.array(values, pa.int64())}), path, row_group_size=2)


def test_datafusion_alone_keeps_the_footer_of_a_file_rewritten_in_place(tmp_path: Path) -> None:
    """DataFusion 55 caches each Parquet footer, checked only by the file's size and
    modification time: a file rewritten in place with both the same (a rewrite within the
    file system's timestamp granularity) keeps its old statistics, and row-group pruning
    by them drops every new row. pruner's shared contexts empty their cache after a query
    that read a file modified this recently (KeptFooters); :func:`new_context`'s cache no
    footer (``NO_FOOTER_CACHE``)."""
    import os

    from pruner.adapters.datafusion_settings import NO_FOOTER_CACHE

    directory = tmp_path / "t"
    directory.mkdir()
    file = directory / "0.parquet"
    _write_two_groups(file, [1, 2, 3, 4])
    before = os.stat(file)
    sql = "SELECT k FROM t WHERE k > 10 ORDER BY k"
    context = datafusion.SessionContext()
    context.register_parquet("t", str(directory))
    assert context.sql(sql).to_pylist() == []
    for prune in (True, False):
        assert query(sql, {"t": directory}, prune=prune).to_pylist() == []
    context.deregister_table("t")

    _write_two_groups(file, [11, 12, 13, 14])
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(file).st_size == before.st_size
    context.register_parquet("t", str(directory))
    assert context.sql(sql).to_pylist() == [], "DataFusion fixed its footer cache"
    for prune in (True, False):
        got = query(sql, {"t": directory}, prune=prune).column("k").to_pylist()
        assert got == [11, 12, 13, 14]
    assert NO_FOOTER_CACHE.endswith("metadata_cache_limit = '0'")


def test_a_footer_cached_under_a_time_pruner_did_not_see_is_dropped(tmp_path: Path) -> None:
    """pruner's shared context caches the footers of files last modified long ago
    (KeptFooters). A file rewritten while a query read it leaves a footer cached under a
    size and time pruner never saw; when pruner next sees the file changed, the cache is
    emptied before DataFusion reads it. Here the footer of [5..8] is cached (read on the
    shared context outside pruner, as that race would), then [11..14] is written with the
    same size and time: without the flush, DataFusion's statistics of [5..8] drop them."""
    import os
    import time

    from pruner.adapters.datafusion import _shared_context

    directory = tmp_path / "t"
    directory.mkdir()
    file = directory / "0.parquet"
    sql = "SELECT k FROM t WHERE k > 10 ORDER BY k"

    def written(values: list[int], age: float) -> int:
        _write_two_groups(file, values)
        then = time.time_ns() - int(age * 1e9)
        os.utime(file, ns=(then, then))
        return os.stat(file).st_size

    size = written([1, 2, 3, 4], 100)
    assert query(sql, {"t": directory}).to_pylist() == []
    assert written([5, 6, 7, 8], 50) == size
    shared = _shared_context(True)  # the one a query of one table runs on
    shared.register_parquet("raced", str(directory))
    assert shared.sql("SELECT max(k) AS m FROM raced").to_pylist() == [{"m": 8}]
    shared.deregister_table("raced")
    moved = os.stat(file).st_mtime_ns
    assert written([11, 12, 13, 14], 0) == size
    os.utime(file, ns=(moved, moved))
    got = query(sql, {"t": directory}).column("k").to_pylist()
    assert got == [11, 12, 13, 14]
    assert engine_alone("datafusion", sql, {"t": directory}).column("k").to_pylist() == got


def test_datafusion_alone_reads_a_directory_from_its_cached_listing(tmp_path: Path) -> None:
    """DataFusion 55's ``read_parquet`` of a directory lists it from the context's cache:
    a file added since an earlier ``read_parquet`` of it is not read. pruner lists a
    directory with ``register_parquet``, which lists it anew, also on the caller's context."""
    directory = tmp_path / "t"
    directory.mkdir()
    _write_two_groups(directory / "0.parquet", [1, 2, 3])
    uri = directory.as_uri() + "/"
    context = datafusion.SessionContext()
    assert context.read_parquet(uri).count() == 3
    sql = "SELECT count(*) AS n FROM t"
    assert query(sql, {"t": directory}).to_pylist() == [{"n": 3}]

    _write_two_groups(directory / "1.parquet", [4, 5])
    assert context.read_parquet(uri).count() == 3, "DataFusion fixed its cached listing"
    for prune in (True, False):
        assert query(sql, {"t": directory}, prune=prune).to_pylist() == [{"n": 5}]
        assert query(sql, {"t": directory}, prune=prune, context=context).to_pylist() == [{"n": 5}]


@pytest.fixture
def null_keys(tmp_path: Path) -> dict[str, Path]:
    """``a``: one file, every ``i8`` NULL; ``b``: files in nested folders (``x/``,
    ``x/y/``), one ``i8`` not NULL. ``a RIGHT JOIN b ON i8`` matches no row."""
    a, b = tmp_path / "a", tmp_path / "b"
    (b / "x" / "y").mkdir(parents=True)
    a.mkdir()
    i8 = pa.int8()
    pq.write_table(
        pa.table({"k": pa.array(range(7), pa.int64()), "i8": pa.array([None] * 7, i8)}),
        a / "part-00.parquet",
    )
    pq.write_table(
        pa.table({"k": pa.array([0], pa.int64()), "i8": pa.array([None], i8)}),
        b / "x" / "part-00.parquet",
    )
    pq.write_table(
        pa.table({"k": pa.array(range(1, 8), pa.int64()), "i8": pa.array([None] * 6 + [0], i8)}),
        b / "x" / "y" / "part-01.parquet",
        row_group_size=1,
    )
    return {"a": a, "b": b}


_RIGHT_JOIN = "SELECT x.k AS xk, y.k AS yk FROM a AS x RIGHT JOIN b AS y ON x.i8 = y.i8 WHERE "


def _duckdb_alone(sql: str, paths: dict[str, Path]) -> list[tuple[object, ...]]:
    con = duckdb.connect()
    for name, path in paths.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/**/*.parquet')")
    return sorted(con.execute(sql).fetchall(), key=repr)


def test_datafusion_alone_pushes_a_null_extended_filter_into_the_other_side(
    null_keys: dict[str, Path],
) -> None:
    """DataFusion 55 pushes ``x.k IS NULL``, kept above a RIGHT JOIN (``x`` is its
    null-extended side), into ``b``'s scan, matching the column by its name ``k``: no row,
    where DuckDB answers all 8. Upstream's family of bugs on same-named join columns; pruner
    runs the query as DataFusion plans it and cannot avoid this one."""
    sql = _RIGHT_JOIN + "x.k IS NULL"
    assert len(_duckdb_alone(sql, null_keys)) == 8
    context = datafusion.SessionContext(
        datafusion.SessionConfig().set(
            "datafusion.execution.listing_table_ignore_subdirectory", "false"
        )
    )
    for name, path in null_keys.items():
        context.register_parquet(name, str(path))
    assert context.sql(sql).to_arrow_table().num_rows == 0, "DataFusion fixed it: say so in docs"


def test_a_table_in_nested_folders_is_one_listed_scan(null_keys: dict[str, Path]) -> None:
    """Read whole, ``b`` (files in ``x/`` and ``x/y/``) was a union of one scan per file, into
    which DataFusion 55 pushed the filter on ``x`` of this query (found by make fuzz: no row
    of 8, where DataFusion alone and DuckDB answer 8). pruner's context lists sub-folders,
    so it is one scan, as DataFusion's users register it. A caller's context lists no
    sub-folders: there the union ends in a limit, through which no filter is pushed."""
    from pruner.adapters.datafusion import parquet_frame
    from pruner.table import open_table

    sql = _RIGHT_JOIN + "((x.k IS NOT NULL AND (x.k IS NOT NULL AND x.k != NULL)) OR x.k IS NULL)"
    expected = _duckdb_alone(sql, null_keys)
    assert len(expected) == 8
    tables = {name: str(path) for name, path in null_keys.items()}
    for prune in (True, False):
        for context in (None, datafusion.SessionContext()):
            got = query(sql, tables, prune=prune, context=context)
            assert sorted(tuple(r.values()) for r in got.to_pylist()) == expected
    frame = parquet_frame(new_context(), open_table(null_keys["b"]), None)
    assert "Union" not in str(frame.logical_plan())
