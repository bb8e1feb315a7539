"""The DuckDB and DataFusion adapters: every sql_example gives the engine's own answer over
the raw files (pruned and unpruned, Lance and Parquet); and the edges of binding tables to
pruned sources."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import reads
from pruner.adapters import datafusion as df_adapter
from pruner.adapters import duckdb as duck_adapter
from pruner.adapters.sources import lance_source
from pruner.demo import engine_sql, read_sql_examples
from pruner.errors import EngineError
from pruner.index import build_index
from pruner.plan import plan
from pruner.reads import parquet_parts
from pruner.selection import Selection
from pruner.table import open_table
from tests.support.engine_check import Refused, engine_alone, engine_answer, outcome

EXAMPLES = read_sql_examples()
ENGINES = ("duckdb", "datafusion")
# Each table in either format: the examples' own layout, and every table swapped.
LAYOUTS = {
    "as_written": {"events": "events", "events_pq": "events_pq", "users": "users"},
    "swapped": {"events": "events_pq", "events_pq": "events", "users": "users_lance"},
}


def _run(engine: str, sql: str, tables: dict[str, Any], parameters: Any, prune: bool) -> Any:
    """pruner's answer, or Refused with the exact type of what it raised. pruner.query wraps
    no engine error: a refusal must be the engine's own exception type, unchanged."""
    return outcome(
        lambda: pruner.query(sql, tables, engine=engine, parameters=parameters, prune=prune)
    )


DUCKDB_VERSION = tuple(int(p) for p in duckdb.__version__.split(".")[:3] if p.isdigit())
REFUSED = {
    # DuckDB 2.0.1 no longer parses a table name in parentheses (`FROM (t)`): ParserException.
    "duckdb": {"invalid_date_string"}
    | ({"review_cte_read_in_parentheses"} if DUCKDB_VERSION >= (2, 0, 1) else set()),
    "datafusion": {
        "rounding_string_on_int",
        "cast_column_widening",
        "invalid_date_string",
        "review_is_distinct_from_on_outer_side",
        "review_table_alias_column_list",
        "review_duplicate_output_names",
        "review_cte_read_in_parentheses",
        "review_schema_qualified",
        "review_using_sample",
    },
}
"""Exactly the examples each engine refuses on its own (over the raw files): a new refusal,
or an example that starts running, fails the test and updates this list."""
PARAMETER_EXAMPLES = [e.name for e in EXAMPLES if e.parameters]


def test_the_refusal_lists_name_examples_and_no_parameter_example() -> None:
    names = {e.name for e in EXAMPLES}
    for engine, refused in REFUSED.items():
        assert refused <= names, (engine, refused - names)
        assert not refused & set(PARAMETER_EXAMPLES), "every parameter example runs everywhere"
    assert len(PARAMETER_EXAMPLES) >= 3, PARAMETER_EXAMPLES


# Lance selections are read ahead into Arrow when small, streamed when not: force each.
READ_AHEAD = {"read_ahead": 1 << 62, "streamed": 0}


@pytest.mark.parametrize("lance_read", READ_AHEAD)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_gives_the_engines_own_answer(
    example: Any,
    engine: str,
    lance_read: str,
    example_paths: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine alone over the raw files (tests/support/engine_check.py, no pruner code)
    is the answer: pruner unpruned and pruned, with each table in either format, must give
    it, or raise exactly the exception type the engine alone raised. Parameters are written
    in the engine's own placeholders (DuckDB ``?`` / ``$n``, DataFusion ``$n``)."""
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", READ_AHEAD[lance_read])
    sql = engine_sql(example, engine)
    parameters = list(example.parameters)
    as_written = {name: example_paths[name] for name in LAYOUTS["as_written"]}
    expected = engine_answer(engine, sql, as_written, parameters)
    refused = isinstance(expected, Refused)
    assert refused == (example.name in REFUSED[engine]), (
        f"{example.name} on {engine}: {expected if refused else 'ran'}, the list says otherwise"
    )
    assert _run(engine, sql, as_written, parameters, prune=False) == expected, (
        f"{example.name} on {engine}: unpruned differs from the engine alone"
    )
    for layout, names in LAYOUTS.items():
        tables = {name: example_paths[source] for name, source in names.items()}
        assert _run(engine, sql, tables, parameters, prune=True) == expected, (
            f"{example.name} on {engine}, {layout}: pruned differs from the engine alone"
        )


@pytest.fixture()
def lance_table(tmp_path: Path) -> Path:
    """Three fragments of 5,000 rows, ids shuffled, 1,000-row zones, rows 0-99 deleted."""
    path = tmp_path / "t.lance"
    rng = np.random.default_rng(3)
    data = pa.table(
        {
            "id": rng.permutation(15_000).astype(np.int64),
            "name": pa.array([f"n{i}" for i in range(15_000)]),
        }
    )
    lance.write_dataset(data, path, max_rows_per_file=5_000)
    lance.dataset(path).delete("id < 100")
    build_index(path, "id", items=1_000)
    return path


@pytest.fixture()
def parquet_table(tmp_path: Path) -> Path:
    """Three files of 5,000 rows in row groups of 1,000, ids shuffled, 500-row zones."""
    path = tmp_path / "pq"
    path.mkdir()
    rng = np.random.default_rng(4)
    ids = rng.permutation(15_000).astype(np.int64)
    for number in range(3):
        part = pa.table({"id": ids[number * 5_000 : (number + 1) * 5_000]})
        pq.write_table(part, path / f"part-{number}.parquet", row_group_size=1_000)
    build_index(path, "id", items=500)
    return path


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_a_point_lookup_reads_a_fraction_and_finds_the_row(
    engine: str, kind: str, lance_table: Path, parquet_table: Path
) -> None:
    path = lance_table if kind == "lance" else parquet_table
    key = (
        int(pq.read_table(path / "part-1.parquet").column("id")[1234].as_py())
        if kind == ("parquet")
        else 7_777
    )
    sql = f"SELECT id FROM t WHERE id = {key}"
    prepared = pruner.plan(sql, {"t": path}, dialect=engine)
    read, total = prepared.rows()
    assert read <= total // 5, f"a point lookup should read one zone or row group: {read}"
    result = pruner.query(sql, {"t": path}, engine=engine, prepared=prepared)
    assert result.column("id").to_pylist() == [key]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_an_empty_selection_gives_an_empty_result_with_the_schema(
    engine: str, kind: str, lance_table: Path, parquet_table: Path
) -> None:
    path = lance_table if kind == "lance" else parquet_table
    # 10**9 is in no zone's filter (checked below), so nothing at all is read. (A constant
    # FALSE filter is not used: DataFusion hands it to pyarrow datasets as a scalar, which
    # pyarrow rejects, pruned or not.)
    sql = "SELECT * FROM t WHERE id = 1000000000"
    assert pruner.plan(sql, {"t": path}, dialect=engine).rows()[0] == 0
    result = pruner.query(sql, {"t": path}, engine=engine)
    assert result.num_rows == 0
    assert result.schema.names == open_table(path).schema.names
    grouped = pruner.query(
        "SELECT count(*) AS n FROM t WHERE id = 1000000000", {"t": path}, engine=engine
    )
    assert grouped.to_pylist() == [{"n": 0}], "an aggregate over no rows still has one row"


@pytest.mark.parametrize("lance_read", READ_AHEAD)
@pytest.mark.parametrize("deletions", [True, False])
@pytest.mark.parametrize(
    "ranges",
    [[(0, 50, 100), (2, 4_000, 1_000)], [(1, 300, 1_200)], [(0, 0, 5_000), (1, 10, 1)]],
    ids=["two_fragments", "one_range", "whole_and_one_row"],
)
def test_lance_source_reads_exactly_the_selected_live_rows(
    tmp_path: Path,
    ranges: list[tuple[int, int, int]],
    deletions: bool,
    lance_read: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "t.lance"
    ids = np.random.default_rng(3).permutation(15_000).astype(np.int64)
    lance.write_dataset(pa.table({"id": ids}), path, max_rows_per_file=5_000)
    if deletions:  # offsets then stop matching positions among live rows
        lance.dataset(path).delete("id < 3000")
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", READ_AHEAD[lance_read])
    table = open_table(path)
    selection = Selection.from_ranges(ranges)
    source = lance_source(table, selection)
    assert isinstance(source, pa.Table) == (lance_read == "read_ahead")
    read = source if isinstance(source, pa.Table) else source.to_table(columns=["id"])
    full = lance.dataset(path).to_table(with_row_address=True)
    addresses = full.column("_rowaddr").to_numpy().astype(np.int64)
    wanted = selection.contains(addresses >> 32, addresses & 0xFFFFFFFF)
    expected = full.column("id").to_numpy()[wanted]
    assert sorted(read.column("id").to_pylist()) == sorted(expected.tolist()), (
        "live rows of the selection, no more and no less"
    )


def test_parquet_parts_cover_every_selected_row_with_whole_row_groups(
    parquet_table: Path,
) -> None:
    table = open_table(parquet_table)
    # file 0: rows 999-1001 straddle row groups 0 and 1; file 2: all of it.
    selection = Selection.from_ranges([(0, 999, 3), (2, 0, 5_000)])
    parts = parquet_parts(table, selection)
    assert [(p.file.relative, p.row_groups) for p in parts] == [
        ("part-0.parquet", (0, 1)),
        ("part-2.parquet", None),
    ]
    assert list(parts[0].row_spans()) == [(0, 2_000)]


@pytest.mark.parametrize(
    "other", [pa.array([3, 4], pa.int64()), pa.array(["3", "4"]), pa.array([3.0, 4.0])]
)
def test_a_parquet_set_whose_files_disagree_on_schema_is_read_whole(
    tmp_path: Path, other: pa.Array
) -> None:
    """The first file's INT32 against a later INT64 (DuckDB reads both as INTEGER, and a
    value INTEGER cannot hold fails), a string or a double: every file is read."""
    path = tmp_path / "mixed"
    path.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32())}), path / "a.parquet")
    pq.write_table(pa.table({"id": other}), path / "b.parquet")
    table = open_table(path)
    parts = parquet_parts(table, Selection.from_ranges([(1, 0, 1)]))
    assert [p.row_groups for p in parts] == [None, None]


def test_a_parquet_set_widened_from_int32_to_int64_reads_the_selection(tmp_path: Path) -> None:
    """The first file INT64, a later one INT32: read at BIGINT as DuckDB alone reads the
    set, so a selection of one file reads that file only."""
    path = tmp_path / "widened"
    path.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), path / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([3, 4], pa.int32())}), path / "b.parquet")
    table = open_table(path)
    assert table.widened == {"id"}
    parts = parquet_parts(table, Selection.from_ranges([(1, 0, 1)]))
    assert [(p.file.relative, p.row_groups) for p in parts] == [("b.parquet", None)]


@pytest.mark.parametrize(
    "other",
    [
        pa.array(["c", "d"], pa.large_string()),
        pa.array([3, 4], pa.timestamp("us", tz="UTC")),
    ],
)
def test_files_alike_in_parquet_but_not_in_their_arrow_schema_are_read_whole(
    tmp_path: Path, other: pa.Array
) -> None:
    """The Parquet schemas are the same (a string; a UTC-adjusted timestamp); only the
    Arrow schema pyarrow stores beside them (``ARROW:schema``) says large_string, or
    another time zone: the files still disagree on their Arrow schema."""
    path = tmp_path / "alike"
    path.mkdir()
    first = (
        pa.array(["a", "b"])
        if pa.types.is_large_string(other.type)
        else pa.array([1, 2], pa.timestamp("us", tz="Asia/Tokyo"))
    )
    pq.write_table(pa.table({"v": first}), path / "a.parquet")
    pq.write_table(pa.table({"v": other}), path / "b.parquet")
    assert pq.read_metadata(path / "a.parquet").schema.equals(
        pq.read_metadata(path / "b.parquet").schema
    )
    table = open_table(path)
    assert not table.uniform_schema
    assert table.schema.field("v").type == first.type
    parts = parquet_parts(table, Selection.from_ranges([(1, 0, 1)]))
    assert [p.row_groups for p in parts] == [None, None]


@pytest.mark.parametrize("name", ['my "table"', "ünï cödé", "with space", "select"])
@pytest.mark.parametrize("engine", ENGINES)
def test_table_names_are_quoted_not_pasted(engine: str, name: str, lance_table: Path) -> None:
    quoted = '"' + name.replace('"', '""') + '"'
    sql = f"SELECT count(*) AS n FROM {quoted} WHERE id = 7777"
    tables = {name: lance_table}
    assert pruner.query(sql, tables, engine=engine).column(0).to_pylist() == [1]


def test_duckdb_sql_binds_on_a_cursor_and_leaves_the_connection_alone(
    lance_table: Path, parquet_table: Path
) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 42 AS id")
    con.execute("CREATE TABLE other AS SELECT 1 AS x")
    relation = duck_adapter.sql(
        con, "SELECT t.id, x FROM t, other WHERE t.id = 7777", {"t": lance_table}
    )
    assert relation.fetchall() == [(7777, 1)], "the pruned t, and the database's own table"
    assert con.execute("SELECT id FROM t").fetchall() == [(42,)], "the caller's t is untouched"


@pytest.mark.parametrize(
    "definition",
    [
        "CREATE VIEW every_t AS SELECT id FROM t",
        "CREATE MACRO every_t() AS TABLE SELECT id FROM t",
    ],
)
def test_duckdb_views_and_macros_of_the_database_see_the_whole_table(
    definition: str, lance_table: Path
) -> None:
    """A view resolves ``t`` to the cursor's binding when the query runs; it must not see
    the rows pruned for the query's own ``WHERE t.id = 7777``."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 42 AS id")
    con.execute(definition)
    source = "every_t()" if "MACRO" in definition else "every_t"
    sql = f"SELECT count(*) FROM {source} AS v, t WHERE t.id = 7777"
    pruned = duck_adapter.sql(con, sql, {"t": lance_table}).fetchall()
    whole = duck_adapter.sql(con, sql, {"t": lance_table}, prune=False).fetchall()
    assert pruned == whole == [(14_900,)], "every live row of t, once per matching t row"


def test_duckdb_register_on_an_existing_connection(parquet_table: Path) -> None:
    con = duckdb.connect()
    table = open_table(parquet_table)
    duck_adapter.register(con, "t", table, Selection.from_ranges([(1, 0, 1_000)]))
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(1_000,)]
    duck_adapter.register(con, "t", table)  # rebinding replaces it
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(15_000,)]


def test_datafusion_sql_on_an_existing_context(lance_table: Path) -> None:
    context = datafusion.SessionContext()
    context.register_record_batches("other", [[pa.record_batch({"x": [1]})]])
    frame = df_adapter.sql(
        context,
        "SELECT t.id, x FROM t, other WHERE t.id = $1",
        {"t": lance_table},
        parameters=[7777],
    )
    assert frame.to_arrow_table().to_pylist() == [{"id": 7777, "x": 1}]


@pytest.mark.parametrize("entry", ["sql", "query"])
@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_datafusion_leaves_the_callers_context_as_it_was(
    entry: str, kind: str, lance_table: Path, parquet_table: Path
) -> None:
    """The caller's own ``t`` (the raw files, registered by DataFusion itself; Lance's
    rows in memory) answers for all of its rows after a pruned query bound ``t``; names
    pruner bound are gone again, and so are the tables of rows it read ahead (each such
    table left in the context held its rows for as long as the context lived)."""
    path = lance_table if kind == "lance" else parquet_table
    context = datafusion.SessionContext()
    if kind == "lance":
        context.register_record_batches("t", [lance.dataset(path).to_table().to_batches()])
    else:
        context.register_parquet("t", str(path))
    whole = context.sql("SELECT count(*) FROM t").to_arrow_table().column(0).to_pylist()
    key = int(context.sql("SELECT id FROM t LIMIT 1").to_arrow_table().column(0)[0].as_py())
    sql = f"SELECT count(*) FROM t, u WHERE t.id = {key} AND u.id = t.id"
    tables = {"t": path, "u": path}
    if entry == "sql":
        frame = df_adapter.sql(context, sql, tables)
        assert context.sql("SELECT count(*) FROM t").to_arrow_table().column(0).to_pylist() == (
            whole
        ), "the caller's t is back as soon as the query is planned"
        answer = frame.to_arrow_table().column(0).to_pylist()
    else:
        answer = df_adapter.query(sql, tables, context=context).column(0).to_pylist()
    assert answer == [1], "the pruned query read pruner's sources"
    assert whole[0] > 10_000
    assert context.sql("SELECT count(*) FROM t").to_arrow_table().column(0).to_pylist() == whole
    assert not context.table_exist("u"), "a name only pruner bound is not left behind"
    assert context.catalog().schema().names() == {"t"}, "nor any table pruner made"


@pytest.mark.parametrize("indexed", [True, False], ids=["read-ahead", "whole"])
def test_datafusion_builds_an_inner_join_on_its_smaller_input(
    tmp_path: Path, indexed: bool
) -> None:
    """pruner's shared context plans a statement of inner joins only with DataFusion's join
    selection on (as DataFusion alone does): the hash table is built on the dimension's 5
    rows, not on the fact's rows (read ahead, or whole), though the fact is written first.
    An outer join is planned with it off (its bug: test_datafusion_bugs.py)."""
    fact, dim = tmp_path / "f", tmp_path / "d"
    fact.mkdir()
    dim.mkdir()
    ids = pa.array(range(20_000), pa.int64())
    pq.write_table(pa.table({"id": ids, "payload": ids}), fact / "0.parquet", row_group_size=1000)
    dim_ids = pa.array(range(0, 2_000, 100), pa.int64())
    pq.write_table(
        pa.table({"id": dim_ids, "region": [f"r{i % 4}" for i in range(20)]}), dim / "0.parquet"
    )
    if indexed:
        build_index(fact, "id")
    tables = {"f": fact, "d": dim}
    sql = (
        "SELECT count(*) AS n, sum(f.payload) AS s "
        "FROM f JOIN d ON f.id = d.id WHERE d.region = 'r1'"
    )
    prepared = plan(sql, tables, dialect="datafusion")
    assert prepared.inner_joins_only
    pruned = prepared.selections["f"]
    assert (pruned is not None and pruned.num_rows < 20_000) is indexed
    frame = df_adapter._frame(df_adapter._shared_context(True), prepared, sql, ())
    scans = [
        line
        for line in frame.execution_plan().display_indent().splitlines()
        if "DataSourceExec" in line
    ]
    assert str(dim / "0.parquet").lstrip("/") in scans[0], scans
    assert pruner.query(sql, tables, engine="datafusion") == engine_alone("datafusion", sql, tables)
    outer = sql.replace(" JOIN d", " LEFT JOIN d")
    assert not plan(outer, tables, dialect="datafusion").inner_joins_only
    # DataFusion's join selection and Parquet filter pushdown (INNER_SETTINGS) are on for
    # a statement with no outer join only: a join of inner joins, or one table unanalysed
    assert prepared.no_outer_join and not plan(outer, tables, dialect="datafusion").no_outer_join
    alone = plan("SELECT count(*) AS n FROM d WHERE region = 'r1'", tables, dialect="datafusion")
    assert alone.explanation is None and alone.no_outer_join
    assert not plan(sql, tables, dialect="datafusion", prune=False).no_outer_join
    excepted = "SELECT id FROM d WHERE region = 'r1' EXCEPT VALUES (5)"
    assert not plan(excepted, tables, dialect="datafusion").no_outer_join


def test_datafusion_register_refuses_a_callers_table(lance_table: Path) -> None:
    """As DataFusion's own ``register_*`` does: the caller's table is never dropped."""
    context = datafusion.SessionContext()
    context.register_record_batches("t", [[pa.record_batch({"x": [1, 2]})]])
    with pytest.raises(EngineError, match="already has a table named 't'"):
        df_adapter.register(context, "t", lance_table)
    assert context.sql("SELECT sum(x) FROM t").to_arrow_table().column(0).to_pylist() == [3]
    df_adapter.register(context, "u", lance_table)
    rows = lance.dataset(lance_table).count_rows()
    assert context.sql("SELECT count(*) FROM u").to_arrow_table().column(0).to_pylist() == [rows]


@pytest.mark.parametrize("engine", ENGINES)
def test_parameters_reach_the_engine(engine: str, lance_table: Path) -> None:
    sql = (
        "SELECT count(*) FROM t WHERE id = ?"
        if engine == "duckdb"
        else ("SELECT count(*) FROM t WHERE id = $1")
    )
    result = pruner.query(sql, {"t": lance_table}, engine=engine, parameters=[7777])
    assert result.column(0).to_pylist() == [1]


def test_an_unknown_engine_is_a_clear_error(lance_table: Path) -> None:
    with pytest.raises(pruner.InvalidParameterError, match="unknown engine 'postgres'"):
        pruner.query("SELECT 1", {"t": lance_table}, engine="postgres")


@pytest.mark.parametrize(
    ("module", "adapter"),
    [("duckdb", "duckdb"), ("datafusion", "datafusion"), ("pyspark", "spark")],
)
def test_a_missing_engine_names_its_extra(module: str, adapter: str) -> None:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "import pruner\n"
        "try:\n"
        f"    import pruner.adapters.{adapter}\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install 'pruner-index[{adapter}]'" in out.stdout


@pytest.mark.parametrize("engine", ENGINES)
def test_stable_row_ids_restrict_whole_fragments_only(engine: str, tmp_path: Path) -> None:
    """With stable row ids Lance matches an allowlist against row ids, not addresses: after
    a compaction the two differ, so pruner restricts fragments and never passes one."""
    path = tmp_path / "stable.lance"
    ids = np.random.default_rng(5).permutation(12_000).astype(np.int64)
    lance.write_dataset(
        pa.table({"id": ids}), path, max_rows_per_file=3_000, enable_stable_row_ids=True
    )
    dataset = lance.dataset(path)
    dataset.delete("id % 7 = 0")
    dataset.optimize.compact_files(target_rows_per_fragment=6_000)
    build_index(path, "id", items=1_000)
    table = open_table(path)
    assert table.dataset.has_stable_row_ids
    wanted = [int(v) for v in ids[[1, 5_000, 11_000]] if v % 7]
    sql = f"SELECT id FROM t WHERE id IN ({', '.join(map(str, wanted))})"
    source = lance_source(table, pruner.plan(sql, {"t": table}, dialect=engine).selections["t"])
    assert source.pruner_allowlist is None
    result = pruner.query(sql, {"t": table}, engine=engine)
    assert sorted(result.column("id").to_pylist()) == sorted(wanted)


@pytest.mark.parametrize("engine", ENGINES)
def test_filters_lance_cannot_apply_are_applied_by_pyarrow(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lance refuses a pushed filter on unsigned, large string, date64, time and duration
    columns when the scan runs; the engines treat a pushed filter as applied, so pruner
    applies it with pyarrow instead (found by the differential harness: unpruned raised)."""
    path = tmp_path / "u.lance"
    table = pa.table(
        {
            "k": pa.array([0, 1, 2, 3], pa.int64()),
            "u16": pa.array([6, None, 65535, 6], pa.uint16()),
            "ls": pa.array(["a", "b", None, "a"], pa.large_string()),
        }
    )
    lance.write_dataset(table, str(path), max_rows_per_file=2)
    build_index(path, "u16", items=1)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # stream: the engine pushes filters
    cases = {
        "SELECT k FROM u WHERE u16 = 6": [0, 3],
        "SELECT k FROM u WHERE u16 > 5 AND ls = 'a'": [0, 3],
        "SELECT k FROM u WHERE ls IS NULL OR u16 IS NULL": [1, 2],
    }
    for sql, expected in cases.items():
        for prune in (True, False):
            got = pruner.query(sql, {"u": path}, engine=engine, prune=prune)
            assert sorted(got.column("k").to_pylist()) == expected, (sql, prune)


def _datafusion_in_memory(sql: str, name: str, data: pa.Table) -> list[int]:
    context = datafusion.SessionContext()
    context.register_record_batches(name, [data.to_batches()])
    return sorted(context.sql(sql).to_arrow_table().column("k").to_pylist())


SEMANTICS_DATA = {
    "k": pa.array(range(6), pa.int64()),
    "s": pa.array(["a", None, "c", None, "e", "f"]),
    "f": pa.array([1.0, float("nan"), None, 2.0, float("nan"), -0.0]),
    "ls": pa.array(["x", None, "y", "z", None, "x"], pa.large_string()),
}
SEMANTICS_SQL = [
    "SELECT k FROM t WHERE s NOT IN ('a', 'b', 'd', 'e')",  # NULL NOT IN (...) is NULL
    "SELECT k FROM t WHERE ls NOT IN ('x', 'b', 'd', 'e')",
    "SELECT k FROM t WHERE ls = 'x' OR f = CAST('NaN' AS DOUBLE)",  # NaN = NaN is true
    "SELECT k FROM t WHERE ls IS NULL AND f <> 1.0",
    "SELECT k FROM t WHERE k = 7 ORDER BY k LIMIT 3",  # an empty selection under a TopK
    "SELECT k, count(*) OVER () AS n FROM t WHERE k = 7",  # ... and under a window
]


@pytest.mark.parametrize("streamed", [True, False])
def test_datafusion_answers_with_its_own_semantics_on_lance(
    streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataFusion pushes filters into a pyarrow dataset as exact; pyarrow applied them with
    its semantics (NOT IN kept NULL rows, NaN = NaN false), so a Lance table with a column
    Lance cannot filter on answered differently pruned and unpruned (differential harness).
    Every answer must be DataFusion's on the same rows in memory."""
    data = pa.table(SEMANTICS_DATA)
    path = tmp_path / "t.lance"
    lance.write_dataset(data, str(path), max_rows_per_file=2)
    build_index(path, "k", items=1)
    if streamed:
        monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    for sql in SEMANTICS_SQL:
        expected = _datafusion_in_memory(sql, "t", data)
        for prune in (True, False):
            got = pruner.query(sql, {"t": path}, engine="datafusion", prune=prune)
            assert sorted(got.column("k").to_pylist()) == expected, (sql, prune)


def test_datafusion_reads_parquet_with_its_own_reader(tmp_path: Path) -> None:
    """Parquet goes through DataFusion's own reader (whole files) or DataFusion's in-memory
    scan (row groups read ahead), never a pyarrow dataset: the answer is the one
    ``register_parquet`` gives, pruned or not, for selections of whole files, of row groups
    and of nothing."""
    data = pa.table(SEMANTICS_DATA)
    directory = tmp_path / "t"
    directory.mkdir()
    pq.write_table(data.slice(0, 4), directory / "a.parquet", row_group_size=2)
    pq.write_table(data.slice(4), directory / "b.parquet")
    build_index(directory, "k", items=1)
    native = datafusion.SessionContext()
    native.register_parquet("t", str(directory))
    sqls = [s for s in SEMANTICS_SQL if "NaN" not in s]
    sqls += ["SELECT k FROM t WHERE k IN (1, 4) AND s IS NULL", "SELECT k FROM t WHERE k = 2"]
    for sql in sqls:
        expected = sorted(native.sql(sql).to_arrow_table().column("k").to_pylist())
        for prune in (True, False):
            got = pruner.query(sql, {"t": directory}, engine="datafusion", prune=prune)
            assert sorted(got.column("k").to_pylist()) == expected, (sql, prune)
    prepared = pruner.plan("SELECT k FROM t WHERE k = 2", {"t": directory}, dialect="datafusion")
    parts = parquet_parts(prepared.tables["t"], prepared.selections["t"])
    assert [(p.file.path.name, p.row_groups) for p in parts] == [("a.parquet", (1,))]


def test_datafusion_lance_table_with_no_fragment_left(tmp_path: Path) -> None:
    """Every row deleted: the dataset has no fragment, a scan of no partitions that
    DataFusion's sanity check refused under a TopK or a window (differential harness)."""
    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"k": pa.array([0], pa.int64())}), str(path))
    build_index(path, "k", items=1)
    lance.dataset(str(path)).delete("k IN (0)")
    for sql in SEMANTICS_SQL[-2:]:
        for prune in (True, False):
            assert pruner.query(sql, {"t": path}, engine="datafusion", prune=prune).num_rows == 0


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_a_filter_pyarrow_cannot_put_into_substrait_is_applied_by_pyarrow(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB pushes ``tzms = ?`` with a cast pyarrow cannot serialize into Substrait for
    Lance ("only capable of representing unsafe casts"): unpruned raised, pruned answered
    (make fuzz)."""
    path = tmp_path / "t.lance"
    stamp = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    table = pa.table(
        {
            "k": pa.array(range(4), pa.int64()),
            "i8": pa.array([None, 0, -128, -128], pa.int8()),
            "tzms": pa.array([None, None, stamp, stamp], pa.timestamp("ms", tz="UTC")),
        }
    )
    lance.write_dataset(table, str(path), max_rows_per_file=2)
    build_index(path, "k", items=1)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # stream: the engine pushes filters
    mark = "?" if engine == "duckdb" else "$1"
    for value, expected in [(stamp.replace(tzinfo=None), [2, 3]), (dt.datetime(1969, 12, 31), [])]:
        for prune in (True, False):
            got = pruner.query(
                f"SELECT k FROM t WHERE tzms = {mark} AND i8 IN (-128, 0)",
                {"t": path},
                engine=engine,
                prune=prune,
                parameters=[value],
            )
            assert sorted(got.column("k").to_pylist()) == expected, (value, prune)


@pytest.mark.parametrize("literal", ["9007199254740993.0", "9007199254740992.5"])
def test_datafusion_types_a_decimal_literal_as_a_float(tmp_path: Path, literal: str) -> None:
    """DataFusion reads ``9007199254740992.5`` as a float64, which equals both 2**53 and
    2**53 + 1 once the column is cast to it: the engine alone answers both rows, and pruner
    must probe both (DuckDB's exact decimal would probe neither). Kills a mutation run's
    survivor that bound every literal with DuckDB's rules."""
    from pruner.index import build_index

    path = tmp_path / "t.lance"
    values = np.arange(20_000, dtype=np.int64) + 2**53 - 10_000
    lance.write_dataset(pa.table({"k": values}), str(path), max_rows_per_file=5_000)
    build_index(path, "k", items=1_000)
    sql = f"SELECT k FROM t WHERE k = {literal} ORDER BY k"
    alone = engine_alone("datafusion", sql, {"t": path}).column("k").to_pylist()
    assert alone == [2**53, 2**53 + 1]
    assert pruner.query(sql, {"t": path}, engine="datafusion").column("k").to_pylist() == alone
