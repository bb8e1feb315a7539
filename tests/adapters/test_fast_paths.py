"""The speed paths answer as the engine alone, and take the engine's own reader when there is
nothing to prune: the key-filtered read-ahead, the cached DuckDB catalog check, DataFusion's
own listing of a whole Parquet directory and Lance's own scan of a whole dataset."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import reads
from pruner.adapters import datafusion as df_adapter
from pruner.adapters import duckdb as duck_adapter
from pruner.adapters import sources
from pruner.adapters.datafusion_settings import own_filters_only
from pruner.adapters.sources import PrunedLanceDataset, lance_source
from pruner.discover import ParquetFile
from pruner.index import build_index
from pruner.plan import plan
from pruner.reads import parquet_parts
from tests.support.engine_check import engine_answer, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

ROWS = 6_000


def _rows() -> pa.Table:
    rng = np.random.default_rng(5)
    ids = rng.permutation(ROWS).astype(np.int64)
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"n{i % 97}" for i in ids]),
            "v": pa.array(rng.random(ROWS)),
        }
    )


@pytest.fixture(scope="module")
def lance_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fast") / "t.lance"
    lance.write_dataset(_rows(), str(path), max_rows_per_file=2_000)
    build_index(path, "id", items=500)
    build_index(path, "name", items=500)
    return path


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fast") / "pq"
    path.mkdir()
    rows = _rows()
    for i in range(3):
        pq.write_table(rows.slice(i * 2_000, 2_000), path / f"part-{i}.parquet", row_group_size=500)
    build_index(path, "id", items=500)
    return path


QUERIES = [
    "SELECT * FROM t WHERE id = 17",
    "SELECT * FROM t WHERE id IN (17, 4000, 99999)",
    "SELECT * FROM t WHERE name = 'n5' AND id = 5",
    "SELECT count(*) AS n FROM t WHERE id = 17 OR id = 18",
    "SELECT * FROM t WHERE id = 17 AND v < 2",
    "SELECT a.id, b.name FROM t a JOIN t b ON a.id = b.id WHERE a.id = 9 OR b.id = 10",
    "SELECT * FROM t WHERE name = 'n5'",
    "SELECT count(*) AS n FROM t WHERE id > 10",
    # two scans of t, each with keys: the read-ahead holds the rows of either's keys
    "SELECT id FROM t WHERE id = 17 UNION ALL SELECT id FROM t WHERE id = 4000",
    "SELECT id, name FROM t WHERE id = 17 UNION ALL SELECT id, name FROM t WHERE name = 'n5'",
]


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
@pytest.mark.parametrize("sql", QUERIES)
def test_answers_as_the_engine_alone(
    engine: str, sql: str, lance_path: Path, parquet_path: Path
) -> None:
    for path in (lance_path, parquet_path):
        table = pruner.open_table(path)
        expected = engine_answer(engine, sql, {"t": path})
        assert multiset(pruner.query(sql, {"t": table}, engine=engine)) == expected, path


def test_read_ahead_holds_only_matching_rows(lance_path: Path) -> None:
    table = pruner.open_table(lance_path)
    prepared = plan("SELECT * FROM t WHERE id IN (17, 4000)", {"t": table}, dialect="duckdb")
    keys = prepared.keys("t")
    assert keys is not None and keys.column == "id" and keys.values == {17, 4000}
    rows = lance_source(table, prepared.selections["t"], keys)
    assert isinstance(rows, pa.Table)
    assert sorted(rows.column("id").to_pylist()) == [17, 4000]
    assert rows.schema == table.schema


STREAMED = [
    *QUERIES,
    "SELECT v FROM t WHERE name IN ('n5', 'n6', 'absent') AND v > 0.25",
    "SELECT count(*) AS n FROM t WHERE id IN (SELECT id FROM t WHERE name = 'n7')",
    "SELECT * FROM t WHERE id = 17 AND NULL",  # DataFusion: no filter reaches the scan
    "SELECT name, count(*) AS n FROM t WHERE name = 'n5' OR name = 'n9' GROUP BY name",
]


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
@pytest.mark.parametrize("sql", STREAMED)
def test_scans_that_add_the_keys_to_their_filter_answer_as_the_engine_alone(
    engine: str, sql: str, lance_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selections too large to read ahead are scanned with ``column IN (keys)`` added to the
    filter the engine pushes, or as the filter when it pushes none."""
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    table = pruner.open_table(lance_path)
    expected = engine_answer(engine, sql, {"t": lance_path})
    assert multiset(pruner.query(sql, {"t": table}, engine=engine)) == expected


@pytest.mark.parametrize("sql", STREAMED)
def test_a_callers_context_scanning_the_selected_files_answers_as_datafusion_alone(
    sql: str, parquet_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files scanned whole (nothing read ahead) on a caller's own context: with no outer
    join, each scan filters rows as it decodes them (:func:`pushed_scan`); joins, unions,
    subqueries and NULL literals answer as DataFusion alone."""
    monkeypatch.setattr(reads, "PARQUET_READ_AHEAD_BYTES", 0)
    got = df_adapter.query(sql, {"t": parquet_path}, context=datafusion.SessionContext())
    assert multiset(got) == engine_answer("datafusion", sql, {"t": parquet_path})


def test_a_streamed_scan_reads_only_the_rows_of_its_keys(
    lance_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    table = pruner.open_table(lance_path)
    prepared = plan("SELECT * FROM t WHERE name IN ('n5', 'n6')", {"t": table}, dialect="duckdb")
    keys = prepared.keys("t")
    assert keys is not None and keys.values == {"n5", "n6"}
    source = lance_source(table, prepared.selections["t"], keys)
    assert isinstance(source, PrunedLanceDataset) and source.pruner_keys is not None
    names = source.scanner(columns=["name"]).to_table().column("name").to_pylist()
    expected = sum(1 for n in _rows().column("name").to_pylist() if n in ("n5", "n6"))
    assert sorted(set(names)) == ["n5", "n6"] and len(names) == expected
    (fragment,) = source.get_fragments()[:1]
    part = fragment.scanner(columns=["id"], filter=pc.field("v") >= 0).to_table()
    assert part.num_rows < fragment.count_rows()
    # More keys than Lance turns into a filter cheaply: the scan is the engine's alone.
    monkeypatch.setattr(sources, "KEYS_IN_SCAN", 1)
    assert lance_source(table, prepared.selections["t"], keys).pruner_keys is None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE id = 17 OR name = 'n5'",  # OR: no conjunct fixes the rows
        "SELECT * FROM t WHERE CAST(id AS DOUBLE) = 17",  # a cast that is not one-to-one
        "SELECT * FROM t WHERE v = 0.5 AND id IN (1, 2)",  # keys from id, none from v
    ],
)
def test_keys_only_from_exact_top_level_equalities(lance_path: Path, sql: str) -> None:
    table = pruner.open_table(lance_path)
    keys = plan(sql, {"t": table}, dialect="duckdb").keys("t")
    if "IN (1, 2)" in sql:
        assert keys is not None and keys.column == "id"
    else:
        assert keys is None


@pytest.mark.parametrize("budget", [0, None])
def test_parquet_row_groups_read_ahead_within_the_budget(
    parquet_path: Path, budget: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataFusion over Parquet: the selected row groups are read ahead into Arrow while their
    footers' uncompressed size is within the budget (a memory scan), else their files are
    read whole by DataFusion's reader; both answer as DataFusion alone."""
    if budget is not None:
        monkeypatch.setattr(reads, "PARQUET_READ_AHEAD_BYTES", budget)
    table = pruner.open_table(parquet_path)
    ids = _rows().column("id").to_pylist()
    sql = f"SELECT id, name, v FROM t WHERE id IN ({ids[10]}, {ids[2_010]}, {ids[4_010]})"
    prepared = plan(sql, {"t": table}, dialect="datafusion")
    assert 0 < prepared.selections["t"].num_rows < ROWS, "some row groups, in every file"
    context = df_adapter.new_context()
    with df_adapter.registered(context, prepared):
        physical = context.sql(sql).execution_plan().display_indent()
    files = sum("part-" in line for line in physical.splitlines() if "DataSourceExec" in line)
    assert files == (3 if budget == 0 else 0), physical
    expected = engine_answer("datafusion", sql, {"t": parquet_path})
    assert multiset(pruner.query(sql, {"t": table}, engine="datafusion")) == expected


def test_whole_parquet_directory_is_datafusions_own_listing(parquet_path: Path) -> None:
    table = pruner.open_table(parquet_path)
    sql = "SELECT count(*) AS n FROM t WHERE v > 0.5"
    prepared = plan(sql, {"t": table}, dialect="datafusion")
    context = df_adapter.new_context()
    with df_adapter.registered(context, prepared):
        physical = context.sql(sql).execution_plan().display_indent()
    assert "UnionExec" not in physical
    scans = [line for line in physical.splitlines() if "DataSourceExec" in line]
    assert len(scans) == 1 and all(f"part-{i}.parquet" in scans[0] for i in range(3))
    assert "predicate=v@" in scans[0]  # the filter reaches DataFusion's Parquet reader


def _record(calls: list[list[ParquetFile]], given: Iterable[ParquetFile]) -> None:
    calls.append(list(given))


@pytest.mark.parametrize("filters", [False, True])
def test_a_callers_filters_are_turned_off_only_for_a_scan_of_files_with_filters(
    tmp_path: Path, filters: bool
) -> None:
    """parquet_frame gives ``before_scan`` the files DataFusion's reader will scan (a listed
    directory, a file read whole), none for row groups read ahead; on a caller's context
    (DataFusion reads bloom filters by default) own_filters_only turns them off, for the
    block, only when a scanned file's footer places one."""
    path = tmp_path / "t"
    path.mkdir()
    options = {"bloom_filter_options": {"id": {"ndv": 2_000, "fpp": 0.01}}} if filters else {}
    rows = _rows()
    for i in range(3):
        pq.write_table(
            rows.slice(i * 2_000, 2_000), path / f"part-{i}.parquet", row_group_size=500, **options
        )
    build_index(path, "id", items=500)
    table = pruner.open_table(path)
    files = list((table.files or {}).values())
    assert all(f.has_bloom_filters is filters for f in files)
    point = "SELECT * FROM t WHERE id = 17"
    context = df_adapter.new_context()
    for sql, read_ahead, scanned in (
        ("SELECT * FROM t WHERE v > 0.5", True, files),  # the directory, listed
        (point, True, []),  # one row group, read ahead
        (point, False, None),  # its file scanned whole
    ):
        calls: list[list[ParquetFile]] = []
        with pytest.MonkeyPatch.context() as patch:
            if not read_ahead:
                patch.setattr(reads, "PARQUET_READ_AHEAD_BYTES", 0)
            selection = plan(sql, {"t": table}, dialect="datafusion").selections["t"]
            frame = df_adapter.parquet_frame(context, table, selection, partial(_record, calls))
            parts = parquet_parts(table, selection)
        whole = sum(part.file.rows for part in parts)
        assert frame.count() == (sum(p.rows() for p in parts) if read_ahead else whole)
        if scanned is None:
            scanned = [part.file for part in parts]
        assert len(scanned) == 1 or read_ahead
        assert [sorted(f.relative for f in c) for c in calls] == (
            [sorted(f.relative for f in scanned)] if scanned else []
        )
    callers = datafusion.SessionContext()
    setting = "SHOW datafusion.execution.parquet.bloom_filter_on_read"
    with own_filters_only(callers) as before_scan:
        before_scan(files)
        shown = callers.sql(setting).to_pylist()[0]["value"]
    assert shown == ("false" if filters else "true")
    assert callers.sql(setting).to_pylist()[0]["value"] == "true"


def _pushed_rows(context: datafusion.SessionContext, frame: datafusion.DataFrame) -> int:
    """Run ``frame``; the rows its Parquet scans left out while decoding (``pushdown_rows_pruned``
    in DataFusion's metrics: 0 when the reader filtered no row)."""
    plan = frame.execution_plan()
    for partition in range(plan.partition_count):
        for _ in context.execute(plan, partition):
            pass
    text = str(plan.collect_metrics())
    pruned = re.findall(r"pushdown_rows_pruned\{[^}]*\}=([0-9.]+)( K)?", text)
    return int(sum(float(n) * (1_000 if k else 1) for n, k in pruned))


def test_a_callers_context_filters_pruned_files_as_they_are_decoded(tmp_path: Path) -> None:
    """On a caller's own context (DataFusion's defaults: no filter pushed into the Parquet
    decoder, bloom filters read), a statement with no outer join scans the files pruner
    selects filtering rows as they are decoded, as pruner's shared context does, with the
    files' bloom filters left to pruner; the context's own settings stay as they were. With
    an outer join (DataFusion 55 then keeps a null-extended row it must drop:
    tests/adapters/test_datafusion_bugs.py) the scan is DataFusion's as before."""
    path = tmp_path / "t"
    path.mkdir()
    rows = _rows()
    for i in range(3):  # one row group a file: a point lookup reads one file whole
        pq.write_table(
            rows.slice(i * 2_000, 2_000),
            path / f"part-{i}.parquet",
            bloom_filter_options={"id": {"ndv": 2_000, "fpp": 0.01}},
        )
    build_index(path, "id", items=500)
    key = rows.column("id")[1_234].as_py()
    context = datafusion.SessionContext()
    settings = {
        name: context.sql(f"SHOW datafusion.execution.parquet.{name}").to_pylist()[0]["value"]
        for name in ("pushdown_filters", "bloom_filter_on_read")
    }
    assert settings == {"pushdown_filters": "false", "bloom_filter_on_read": "true"}
    inner = f"SELECT * FROM t WHERE id = {key}"
    outer = f"SELECT t.id, u.x FROM t RIGHT JOIN u ON t.id = u.x WHERE t.id = {key}"
    context.register_record_batches("u", [[pa.record_batch({"x": [key, -1]})]])
    for sql, pushed in ((inner, True), (outer, False)):
        prepared = plan(sql, {"t": path}, dialect="datafusion")
        assert len(parquet_parts(prepared.tables["t"], prepared.selections["t"])) == 1
        frame = df_adapter.sql(context, sql, {"t": path})
        assert (_pushed_rows(context, frame) > 0) is pushed, sql
        got = df_adapter.sql(context, sql, {"t": path}).to_arrow_table()
        alone = datafusion.SessionContext()
        alone.register_parquet("t", str(path))
        alone.register_record_batches("u", [[pa.record_batch({"x": [key, -1]})]])
        assert multiset(got) == multiset(alone.sql(sql).to_arrow_table())
        assert got.num_rows == 1
    assert context.table_exist("u") and not context.table_exist("t")
    assert not any("pruner" in name for name in context.catalog().schema().names())
    for name, value in settings.items():
        shown = context.sql(f"SHOW datafusion.execution.parquet.{name}").to_pylist()[0]
        assert shown["value"] == value, name


def test_whole_lance_selection_scans_as_the_dataset(
    lance_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # a dataset, not rows read ahead
    table = pruner.open_table(lance_path)
    prepared = plan("SELECT * FROM t WHERE v > 0.5", {"t": table}, dialect="duckdb")
    source = lance_source(table, prepared.selections["t"])
    assert isinstance(source, PrunedLanceDataset) and source.pruner_whole
    # The scanner gets no fragment list: Lance plans it as for the dataset itself.
    assert source.scanner(filter=pc.field("id") == 17).to_table().num_rows == 1
    pruned = plan("SELECT * FROM t WHERE id = 17", {"t": table}, dialect="duckdb")
    partial = lance_source(table, pruned.selections["t"])
    assert not isinstance(partial, PrunedLanceDataset) or not partial.pruner_whole


def test_callers_connection_sees_a_macro_made_after_a_cached_check(lance_path: Path) -> None:
    """The catalog check is cached by DuckDB's catalog version: a macro created after a
    pruned query (on another connection to the same database) is seen by the next one."""
    con = duckdb.connect()
    table = pruner.open_table(lance_path)
    sql = "SELECT count(*) AS n, (SELECT m()) AS whole FROM t WHERE id = 17"
    first = duck_adapter.query(
        "SELECT count(*) AS n FROM t WHERE id = 17", {"t": table}, connection=con
    )
    assert first.to_pylist() == [{"n": 1}]
    con.execute("CREATE TABLE t AS SELECT 0 AS id")  # a macro's table must exist when made
    con.cursor().execute("CREATE MACRO m() AS (SELECT count(*) FROM t)")
    got = duck_adapter.query(sql, {"t": table}, connection=con).to_pylist()
    assert got == [{"n": 1, "whole": ROWS}]
    # and the shared connection answers the same
    shared = duck_adapter.query("SELECT count(*) AS n FROM t WHERE id = 17", {"t": table})
    assert shared.to_pylist() == first.to_pylist()


def _bound_rows(con: duckdb.DuckDBPyConnection, table: pruner.Table, sql: str) -> int:
    """How many rows pruner binds ``t`` to for ``sql`` on ``con``."""
    cursor = duck_adapter.registered(con, plan(sql, {"t": table}, dialect="duckdb"))
    try:
        [(rows,)] = cursor.execute("SELECT count(*) FROM t").fetchall()
    finally:
        cursor.close()
    return int(rows)


def test_a_view_of_the_callers_database_binds_whole_only_the_tables_it_names(
    lance_path: Path,
) -> None:
    """A view of the caller's database that names ``t`` (``main.T``) has ``t`` bound whole;
    one whose text holds ``t`` only inside other names (``t_archive``, ``state``) does not stop
    pruning."""
    table = pruner.open_table(lance_path)
    sql = "SELECT count(*) AS n FROM t WHERE id = 17"
    con = duckdb.connect()
    con.execute("CREATE TABLE t_archive AS SELECT 1 AS state")
    con.execute("CREATE VIEW recent AS SELECT state FROM t_archive")
    assert _bound_rows(con, table, sql) < ROWS
    assert duck_adapter.query(sql, {"t": table}, connection=con).to_pylist() == [{"n": 1}]
    con.execute("CREATE TABLE t AS SELECT 0 AS id")
    con.execute("CREATE VIEW everything AS SELECT id FROM main.T")
    assert _bound_rows(con, table, sql) == ROWS
    assert duck_adapter.query(sql, {"t": table}, connection=con).to_pylist() == [{"n": 1}]


def test_callers_connection_sees_a_collation_set_after_a_cached_check(lance_path: Path) -> None:
    con = duckdb.connect()
    table = pruner.open_table(lance_path)
    sql = "SELECT count(*) AS n FROM t WHERE name = 'N5'"
    assert duck_adapter.query(sql, {"t": table}, connection=con).to_pylist() == [{"n": 0}]
    con.execute("SET GLOBAL default_collation = 'nocase'")
    expected = con.cursor()
    expected.register("t", lance.dataset(str(lance_path)))
    [(alone,)] = expected.execute(sql).fetchall()
    assert alone > 0
    assert duck_adapter.query(sql, {"t": table}, connection=con).to_pylist() == [{"n": alone}]


def test_shared_connection_starts_with_its_catalog_known(
    lance_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pruner's own database starts with its catalog known (no view, macro or collation),
    which is what reading it says; a macro made on it later is seen by the next query."""
    monkeypatch.setattr(duck_adapter, "_shared", None)
    shared = duck_adapter.shared_connection()
    seeded = duck_adapter._catalogs[shared]
    del duck_adapter._catalogs[shared]
    read = duck_adapter._catalog(shared, shared.cursor())
    assert (seeded.version, seeded.definitions, seeded.collation) == (
        read.version,
        read.definitions,
        read.collation,
    )
    table = pruner.open_table(lance_path)
    sql = "SELECT count(*) AS n FROM t WHERE id = 17"
    assert _bound_rows(shared, table, sql) < ROWS
    shared.execute("CREATE TABLE t AS SELECT 0 AS id")
    shared.execute("CREATE MACRO m() AS (SELECT count(*) FROM t)")
    assert _bound_rows(shared, table, sql) == ROWS
    assert duck_adapter.query(sql, {"t": table}).to_pylist() == [{"n": 1}]


def test_duckdb_still_counts_catalog_changes(tmp_path: Path) -> None:
    """The catalog check's cache rests on DuckDB's per-database catalog version (private in
    DuckDB 2.0): without it every query reads the catalog (~30 ms on a caller's
    connection). This fails the day DuckDB drops or changes it."""
    first = duckdb.connect(str(tmp_path / "db.duckdb"))
    second = duckdb.connect(str(tmp_path / "db.duckdb"))
    before = duck_adapter._catalog_version(first)
    assert before is not None
    second.execute("CREATE MACRO m(x) AS x + 1")
    assert duck_adapter._catalog_version(first) == before + 1


def test_whole_parquet_directory_is_duckdbs_own_parquet_scan(parquet_path: Path) -> None:
    """Nothing to prune on DuckDB: one READ_PARQUET scan of the files, the filter pushed into
    it, as over ``read_parquet`` alone."""
    table = pruner.open_table(parquet_path)
    sql = "SELECT count(*) AS n FROM t WHERE v > 0.5"
    prepared = plan(sql, {"t": table}, dialect="duckdb")
    cursor = duck_adapter.registered(duck_adapter.shared_connection(), prepared)
    [(_, physical)] = cursor.execute("EXPLAIN " + sql).fetchall()
    cursor.close()
    assert physical.count("READ_PARQUET") == 1 and "UNION" not in physical
    assert "Filters:v>0.5" in physical.replace(" ", "")


def _duckdb_plan(table: pruner.Table, sql: str) -> str:
    prepared = plan(sql, {"t": table}, dialect="duckdb")
    cursor = duck_adapter.registered(duck_adapter.shared_connection(), prepared)
    try:
        [(_, physical)] = cursor.execute("EXPLAIN " + sql).fetchall()
    finally:
        cursor.close()
    return str(physical)


def _point_sql(positions: list[int]) -> str:
    ids = _rows().column("id").to_pylist()
    return f"SELECT id, name, v FROM t WHERE id IN ({', '.join(str(ids[p]) for p in positions)})"


def test_duckdb_reads_the_selected_row_groups_ahead(
    parquet_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some row groups of every file read: they are read ahead by pyarrow and DuckDB scans
    them as Arrow (no READ_PARQUET), exactly those row groups; past the budget, or with a
    file read whole, DuckDB's own reader reads them. Each answers as DuckDB alone."""
    table = pruner.open_table(parquet_path)
    sql = _point_sql([10, 2_010, 4_010])
    prepared = plan(sql, {"t": table}, dialect="duckdb")
    rows = duck_adapter._parquet_rows(table, prepared.selections["t"])
    assert rows is not None and rows.schema == table.schema
    assert rows.num_rows == 3 * 500  # one row group of 500 rows in each of the 3 files
    assert "READ_PARQUET" not in _duckdb_plan(table, sql)
    expected = engine_answer("duckdb", sql, {"t": parquet_path})
    assert multiset(pruner.query(sql, {"t": table})) == expected
    # No row selected: no rows, of the table's schema.
    absent = "SELECT id, name, v FROM t WHERE id = -1"
    selection = plan(absent, {"t": table}, dialect="duckdb").selections["t"]
    none = duck_adapter._parquet_rows(table, selection)
    assert none is not None and none.num_rows == 0 and none.schema == table.schema
    assert pruner.query(absent, {"t": table}).num_rows == 0
    # Every row group of the first file: that file is read whole, by DuckDB's reader.
    whole = _point_sql([10, 510, 1_010, 1_510, 2_010])
    selection = plan(whole, {"t": table}, dialect="duckdb").selections["t"]
    assert duck_adapter._parquet_rows(table, selection) is None
    assert multiset(pruner.query(whole, {"t": table})) == engine_answer(
        "duckdb", whole, {"t": parquet_path}
    )
    monkeypatch.setattr(reads, "DUCKDB_READ_AHEAD_BYTES", 0)
    assert duck_adapter._parquet_rows(table, prepared.selections["t"]) is None
    assert "READ_PARQUET" in _duckdb_plan(table, sql)
    assert multiset(pruner.query(sql, {"t": table})) == expected


def test_duckdb_reads_one_files_row_groups_itself(parquet_path: Path) -> None:
    """Bound on a new cursor (``registered``, ``sql``), row groups of one file are DuckDB's
    own read of that file, restricted to them by row number (one reader's set-up costs less
    than pyarrow decoding every column of them): no read-ahead, the plan reads Parquet, and
    the answer is DuckDB alone's, for one row group and for two of the file; with nothing
    selected, no file is read. (A query, which may bind them on a kept cursor, reads them
    ahead: test_lookups_on_a_kept_cursor_hold_their_own_rows.)"""
    table = pruner.open_table(parquet_path)
    for positions, groups in (([2_010], (0,)), ([2_010, 3_010], (0, 2))):
        sql = _point_sql(positions)
        prepared = plan(sql, {"t": table}, dialect="duckdb")
        parts = reads.parquet_parts(table, prepared.selections["t"])
        assert [(part.file.path.name, part.row_groups) for part in parts] == [
            ("part-1.parquet", groups)
        ]
        assert duck_adapter._parquet_rows(table, prepared.selections["t"]) is None
        ahead = duck_adapter._parquet_rows(table, prepared.selections["t"], one_file=True)
        assert ahead is not None and ahead.num_rows == 500 * len(groups)
        physical = _duckdb_plan(table, sql)
        assert "READ_PARQUET" in physical and "file_row_number" in physical.replace(" ", "")
        assert multiset(pruner.query(sql, {"t": table})) == engine_answer(
            "duckdb", sql, {"t": parquet_path}
        )
    absent = "SELECT id, name, v FROM t WHERE id = -1"
    selection = plan(absent, {"t": table}, dialect="duckdb").selections["t"]
    rows = duck_adapter._parquet_rows(table, selection)
    assert rows is not None and rows.num_rows == 0  # nothing selected: no file is opened


def _served_by_one_kept_cursor(
    path: Path, table: pruner.Table, how: str, extra: tuple[str, ...] = ()
) -> tuple[list[str], Any, Any]:
    """Lookups of ``table`` (at ``path``): keys of one file or fragment after another,
    forwards and back, of two at once, an absent key between them, ``extra``, then a
    parameter; each answers as DuckDB alone, and one cursor kept bound as ``how`` served
    them all. The lookups' SQL, that cursor and what it points."""
    from pruner.adapters import kept

    ids = _rows().column("id").to_pylist()
    positions = [[10], [2_010], [4_010], [4_490], [2_010], [10], [10, 4_010], [3_900], [11]]
    sqls = [_point_sql(p) for p in positions]
    sqls.insert(3, "SELECT id, name, v FROM t WHERE id = -1")  # bound empty
    sqls += extra
    idle = kept.kept_cursors(duck_adapter.shared_connection()).idle
    idle.clear()
    for sql in [*sqls, *sqls[::-1]]:
        expected = engine_answer("duckdb", sql, {"t": path})
        assert multiset(duck_adapter.query(sql, {"t": table})) == expected, sql
    found = [(cursor, p) for b, cursor, p in idle if b == (("t", table, how),)]
    assert len(found) == 1, [b for b, _, _ in idle]
    [(cursor, pointed)] = found
    # a parameter: the same kept cursor, pointed at the parameter's rows
    sql = "SELECT id, name, v FROM t WHERE id = ?"
    got = duck_adapter.query(sql, {"t": table}, parameters=[ids[1_500]])
    assert got.to_pylist() == [r for r in _rows().to_pylist() if r["id"] == ids[1_500]]
    assert [c for b, c, _ in idle if b == (("t", table, how),)] == [cursor]
    return sqls, cursor, pointed


@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_lookups_on_a_kept_cursor_hold_their_own_rows(
    kind: str, lance_path: Path, parquet_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lookups whose rows are read ahead bind them once, on a cursor kept for the next
    lookup, which points its holder at its own rows: keys of one file or fragment after
    another, forwards and back, of two at once, an absent key between them, a parameter,
    each answers as DuckDB alone; one kept cursor served every one of them, and it holds
    no rows between queries. Past what a holder holds, the rows are registered anew."""
    from pruner import discover
    from pruner.adapters import kept

    # files written in the last 2 s are not trusted as they are: the table would be opened
    # anew, with a new cursor, for each query
    monkeypatch.setattr(discover, "RACY_SECONDS", 0.0)
    path = lance_path if kind == "lance" else parquet_path
    table = pruner.open_table(path)
    sqls, _, pointed = _served_by_one_kept_cursor(path, table, "rows")
    assert isinstance(pointed["t"], kept.HeldRows) and pointed["t"].rows.num_rows == 0
    monkeypatch.setattr(kept.HeldRows, "VALUES", 0)  # too many rows to hold: not kept
    idle = kept.kept_cursors(duck_adapter.shared_connection()).idle
    idle.clear()
    for sql in sqls[:3]:
        expected = engine_answer("duckdb", sql, {"t": path})
        assert multiset(duck_adapter.query(sql, {"t": table})) == expected, sql
    assert not [b for b, _, _ in idle if b == (("t", table, "rows"),)]


def test_lookups_on_a_kept_cursor_point_a_pruned_lance_dataset_at_their_own_selection(
    lance_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lookups of a Lance table read past the read-ahead (a dataset restricted to their
    selection: fragments, row addresses, keys) bind it once, on a cursor kept for the next
    such lookup, which points the dataset at its own selection: keys of one fragment after
    another, forwards and back, two at once, a CTE, a parameter; each answers as DuckDB
    alone, and one kept cursor served them all. An absent key binds its table empty."""
    from pruner import discover

    monkeypatch.setattr(discover, "RACY_SECONDS", 0.0)  # as in the test above
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # every selection: a dataset
    table = pruner.open_table(lance_path)
    key = _rows().column("id")[50].as_py()
    cte = f"WITH m AS (SELECT * FROM t WHERE id = {key}) SELECT count(*) AS n FROM m"
    _, _, pointed = _served_by_one_kept_cursor(lance_path, table, "pruned", (cte,))
    assert isinstance(pointed["t"], PrunedLanceDataset)


@pytest.mark.parametrize("kind", ["lance", "parquet", "lance pruned"])
def test_lookups_holding_their_rows_from_many_threads_answer_as_duckdb_alone(
    kind: str, lance_path: Path, parquet_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads looking up keys of different files or fragments of one held table at once,
    through the shared connection: each takes a kept cursor for itself (or binds a new one)
    before pointing its holder at its rows, so no lookup answers from another's rows."""
    from concurrent.futures import ThreadPoolExecutor

    from pruner import discover

    monkeypatch.setattr(discover, "RACY_SECONDS", 0.0)
    if kind == "lance pruned":  # restricted datasets, pointed at each lookup's selection
        monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    path = parquet_path if kind == "parquet" else lance_path
    table = pruner.open_table(path)
    sqls = [_point_sql([p]) for p in (10, 700, 2_010, 2_600, 4_010, 4_900)] * 8
    expected = {sql: engine_answer("duckdb", sql, {"t": path}) for sql in set(sqls)}
    assert all(expected.values())

    def answer(sql: str) -> bool:
        return multiset(duck_adapter.query(sql, {"t": table})) == expected[sql]

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(answer, sqls))


def test_duckdb_reads_ahead_only_what_it_reads_alike(tmp_path: Path) -> None:
    """No read-ahead for a column whose type pyarrow and DuckDB's reader may see differently
    (a timestamp), nor for hive partitions (their columns come from the folder names)."""
    ids = np.arange(2_000, dtype=np.int64)
    stamped = tmp_path / "stamped"
    stamped.mkdir()
    when = pa.array(ids * 1_000_000, pa.timestamp("us"))
    pq.write_table(pa.table({"id": ids, "at": when}), stamped / "a.parquet", row_group_size=500)
    hive = tmp_path / "hive"
    for day in (1, 2):
        (hive / f"day={day}").mkdir(parents=True)
        part = pa.table({"id": ids + 10_000 * day})
        pq.write_table(part, hive / f"day={day}" / "a.parquet", row_group_size=500)
    for path, sql in (
        (stamped, "SELECT * FROM t WHERE id = 7"),
        (hive, "SELECT * FROM t WHERE id IN (10007, 20007)"),
    ):
        build_index(path, "id", items=500)
        table = pruner.open_table(path)
        prepared = plan(sql, {"t": table}, dialect="duckdb")
        assert 0 < prepared.selections["t"].num_rows < table.num_rows
        assert duck_adapter._parquet_rows(table, prepared.selections["t"]) is None
        expected = engine_answer("duckdb", sql, {"t": path})
        assert multiset(pruner.query(sql, {"t": table})) == expected


def test_row_groups_read_ahead_are_the_files_row_groups(parquet_path: Path) -> None:
    table = pruner.open_table(parquet_path)
    files = table.files or {}
    parts = [reads.ParquetPart(files[0], (0, 3)), reads.ParquetPart(files[2], (1,))]
    got = reads.read_row_groups(table, parts)
    first = pq.ParquetFile(files[0].path)
    expected = pa.concat_tables(
        [first.read_row_groups([0, 3]), pq.ParquetFile(files[2].path).read_row_group(1)]
    )
    assert got.equals(expected.cast(table.schema))
