"""Hostile and extreme input (issue 6): each gets a result or a clear error, within bounded
memory, and never a wrong answer (pruned == unpruned; anything unproven widens).

- SQL: IN lists of 100,000 values and 200,000 ORed equalities (folded out of the text before
  sqlglot parses it, :mod:`pruner.folding`), SQL longer than pruner parses, nesting deeper
  than its parser (tables read whole: the engine runs or refuses the SQL itself), AND / OR
  alternating deeper than pruner follows, subqueries nested 2,000 deep, 1,000-table joins.
- Names: table names and file paths with quotes, spaces, unicode, glob characters, ':'.
- Index files from an untrusted source: nothing in them is unpickled or evaluated.

No test asserts on wall-clock time; memory is asserted with tracemalloc on pruner's own work.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import re
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pruner
from pruner import folding
from pruner.analysis import parsing
from pruner.analysis.parsing import MAX_PARSED_CHARS
from pruner.analyzer import analyze, analyze_uncached
from pruner.demo import rows_multiset
from pruner.engines import adapter
from pruner.errors import EngineError, IndexFormatError
from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Equals,
    In,
    IsNull,
    Literal,
    Not,
    NotEquals,
    NotIn,
    NotNull,
    Or,
    Predicate,
    Unknown,
)
from pruner.index import (
    INDEX_SCHEMA,
    META_CHECKSUMS,
    META_FILES,
    META_ITEMS,
    META_NULL_BITMAP,
    build_index,
    parquet_index_path,
    read_index_file,
)

ROWS = 100_000
ITEMS = 2_048  # 49 zones: a selective query prunes most of them
SCHEMA = {"t": pa.schema([("id", pa.int64()), ("s", pa.string())])}


def _peak_mib(function: Callable[[], Any]) -> tuple[Any, float]:
    """``function()`` and the peak of the Python memory it allocated, in MiB."""
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _table() -> pa.Table:
    ids = pa.array(range(ROWS), pa.int64())
    return pa.table({"id": ids, "s": pa.array([f"v{i}" for i in range(ROWS)])})


@pytest.fixture(scope="module")
def lance_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "t.lance"
    lance.write_dataset(_table(), path, max_rows_per_file=25_000)
    build_index(path, "id", items=ITEMS)
    build_index(path, "s", items=ITEMS)
    return path


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile_pq")
    for part in range(4):
        rows = _table().slice(part * 25_000, 25_000)
        pq.write_table(rows, path / f"part-{part}.parquet", row_group_size=ITEMS)
    build_index(path, "id", items=ITEMS)
    return path


def _same_answer(sql: str, tables: dict[str, Any], engine: str, **options: Any) -> pa.Table:
    """The pruned result, after checking it equals the unpruned one."""
    run = adapter(engine).query  # the adapter's own: it takes a connection or session
    pruned, whole = run(sql, tables, **options), run(sql, tables, prune=False, **options)
    assert rows_multiset(pruned) == rows_multiset(whole), sql[:200]
    return pruned


# ------------------------------------------------------------------------------ long lists


def test_an_in_list_of_100000_values_is_folded_out_of_the_parse() -> None:
    values = range(0, 200_000, 2)
    sql = f"SELECT count(*) FROM t WHERE id IN ({', '.join(map(str, values))})"
    folded = folding.fold(sql)
    assert len(folded.sql) < 80, "sqlglot parses one placeholder, not 100,000 literals"
    analysis, peak = _peak_mib(lambda: analyze(sql, SCHEMA))
    (scan,) = analysis.scans
    assert scan.predicate == In("id", tuple(Literal.number(str(v)) for v in values))
    # Parsing the literals themselves took 107 MiB; the folded list is ~12 MiB of Literals.
    assert peak < 48, f"{peak:.0f} MiB for a 0.64 MB IN list"


def test_200000_ored_equalities_are_one_in_list() -> None:
    sql = "SELECT count(*) FROM t WHERE id = 5 OR " + " OR ".join(
        f"id = {i}" for i in range(200_000)
    )
    analysis, peak = _peak_mib(lambda: analyze(sql, SCHEMA))
    (scan,) = analysis.scans
    assert isinstance(scan.predicate, In) and len(scan.predicate.values) == 200_000
    assert set(scan.predicate.values) == {Literal.number(str(i)) for i in range(200_000)}
    # Before folding, 20,000 such equalities took 60 MiB and 200,000 did not finish.
    assert peak < 96, f"{peak:.0f} MiB for 2.9 MB of ORed equalities"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_long_lists_prune_and_answer_as_unpruned(
    engine: str, lance_path: Path, parquet_path: Path
) -> None:
    in_list = ", ".join(str(v) for v in range(40_000, 60_000))
    ored = " OR ".join(f"id = {v}" for v in range(70_000, 70_100))
    strings = ", ".join(f"'v{v}'" for v in range(10_000, 10_500))
    queries = {
        f"SELECT count(*) AS n FROM t WHERE id IN ({in_list})": 20_000,
        f"SELECT count(*) AS n FROM t WHERE {ored}": 100,
        f"SELECT count(*) AS n FROM t WHERE s IN ({strings})": 500,
    }
    for path in (lance_path, parquet_path):
        for sql, count in queries.items():
            if path == parquet_path and " s IN " in sql:
                continue  # the Parquet table indexes only id
            result = _same_answer(sql, {"t": path}, engine)
            assert result.to_pylist() == [{"n": count}]
            explanation = pruner.explain(sql, {"t": path}, dialect=engine)
            (scan,) = explanation.scans
            assert scan.terms[0].used_index, str(explanation)
            if count <= 100:  # 20,000 probes hit a false positive in most zones
                assert scan.zones_selected < scan.zones_total / 2, str(explanation)


@pytest.mark.slow
def test_datafusion_plans_10000_ored_terms_without_crashing(tmp_path: Path) -> None:
    # DataFusion recurses once per OR while it plans, on the calling thread: 10,000 terms
    # overflowed the main thread's stack and killed the process. The adapter runs it on a
    # thread with a large stack. (Over two columns DataFusion still crashes, on its own
    # execution threads, pruned or not: not pruner's to fix.)
    path = tmp_path / "small.lance"
    lance.write_dataset(pa.table({"id": pa.array(range(64), pa.int64())}), path)
    build_index(path, "id", items=16)
    sql = "SELECT count(*) AS n FROM t WHERE " + " OR ".join(f"id = {i}" for i in range(10_000))
    assert _same_answer(sql, {"t": path}, "datafusion").to_pylist() == [{"n": 64}]


# The folding must never change what the analyzer concludes: drawn SQL, analysed with every
# run of 2+ literals folded and with nothing folded, must give the same predicates.

_STRING_CHARS = st.sampled_from([*"ab ,)(=-'\\;é*", " OR ", " IN (", "--", "/*", "\n"])
_VALUES = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.sampled_from(["0.5", "-2.25", "007", "1e3", "NULL", "CAST(3 AS INT)", "- 4", "3::INT"]),
    st.lists(_STRING_CHARS, max_size=4).map(lambda s: "'" + "".join(s).replace("'", "''") + "'"),
)
_COLUMNS = st.sampled_from(["id", "s", "t.id", "k", "u.id", "u.s"])


_SEPARATORS = st.sampled_from([", ", ",", " ,\n", "\t,\r\n  "])
"""Between an IN list's values: blanks of every kind on either side of the comma."""


@st.composite
def _condition(draw: st.DrawFn, depth: int = 0) -> str:
    column = draw(_COLUMNS)
    values = draw(st.lists(_VALUES, min_size=1, max_size=5))
    shape = draw(st.integers(0, 12 if depth < 2 else 4))
    separator = draw(_SEPARATORS)
    if shape == 0:
        return f"{column} IN ({separator.join(values)})"
    if shape == 1:
        return f"{column} NOT IN ({separator.join(values)})"
    if shape == 2:
        return " OR ".join(f"{column} = {value}" for value in values)
    if shape == 3:
        return f"{column} = {values[0]}"
    if shape == 4:
        return f"{column} IS NULL"
    inner = draw(_condition(depth + 1))
    other = draw(_condition(depth + 1))
    return {
        5: f"NOT {inner}",
        6: f"({inner})",
        7: f"{inner} AND {other}",
        8: f"{inner} OR {other}",
        9: f"CASE WHEN {inner} THEN 1 ELSE 0 END = 1",
        10: f"{inner} /* {other} */",
        11: f"s = '{other.replace(chr(39), chr(39) * 2)}' OR {inner}",
        12: f"{inner} -- {other.replace(chr(10), ' ')}\n",
    }[shape]


def _canonical(predicate: Predicate) -> Any:
    """A predicate up to what folding may change: In of values == OR of equalities, the
    order and nesting of AND / OR, the text of an Unknown."""
    if isinstance(predicate, In):
        return _canonical(Or(tuple(Equals(predicate.column, v) for v in predicate.values)))
    if isinstance(predicate, NotIn):
        return _canonical(And(tuple(NotEquals(predicate.column, v) for v in predicate.values)))
    if isinstance(predicate, And | Or):
        kind = type(predicate).__name__
        parts: set[Any] = set()
        for child in predicate.children:
            canonical = _canonical(child)
            if isinstance(canonical, tuple) and canonical[0] == kind:
                parts |= canonical[1]
            else:
                parts.add(canonical)
        return next(iter(parts)) if len(parts) == 1 else (kind, frozenset(parts))
    if isinstance(predicate, Unknown):
        return ("Unknown",)
    if isinstance(predicate, Not):
        return ("Not", _canonical(predicate.child))
    assert isinstance(
        predicate, Equals | NotEquals | IsNull | NotNull | AlwaysTrue | AlwaysFalse
    ), predicate
    return predicate if not isinstance(predicate, AlwaysFalse) else ("False",)


def _analysis(sql: str, dialect: str, minimum: int) -> Any:
    saved = folding.MINIMUM
    folding.MINIMUM = minimum
    try:
        schemas = {**SCHEMA, "u": SCHEMA["t"]}
        key = tuple(sorted(schemas.items(), key=lambda item: item[0]))
        try:
            scans = analyze_uncached(sql, dialect, key).scans
        except pruner.SqlSyntaxError:
            return "syntax error"
        return Counter((s.table, s.alias, _canonical(s.predicate)) for s in scans)
    finally:
        folding.MINIMUM = saved


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    where=_condition(),
    dialect=st.sampled_from(["duckdb", "spark", "datafusion"]),
    join=st.booleans(),
)
def test_folding_never_changes_the_analysis(where: str, dialect: str, join: bool) -> None:
    source = "t JOIN u ON t.id = u.id" if join else "t"
    sql = f"SELECT * FROM {source} WHERE {where}"
    unfolded = _analysis(sql, dialect, 10**9)
    if unfolded == "syntax error":
        return  # the engine refuses it too; what pruner says does not matter
    folded = _analysis(sql, dialect, 2)
    if join and folded != unfolded:
        # Folding ``t.id = 0 OR t.id = 0`` to ``t.id = 0`` lets the join carry the equality
        # to u (sound: the inner join keeps only rows with u.id = t.id), and ``u.id = 0 OR
        # u.id = 0`` to t; unfolded, the other table gets nothing. A table may differ only
        # where it got nothing unfolded.
        for name in ("t", "u"):
            if _only(folded, name) != _only(unfolded, name):
                assert _only(unfolded, name) == {(name, name, ("Unknown",))}, sql
        return
    assert folded == unfolded, sql


def _only(analysis: Any, table: str) -> set[Any]:
    return {scan for scan in analysis if scan[0] == table}


@pytest.mark.parametrize(
    ("condition", "folds"),
    [
        ("id IN (1, 2, 3)", True),
        ("id = 1 OR id = 2 OR id = -3", True),
        ("s = 'x IN (1, 2, 3)' AND id = 4", False),  # inside a string: put back
        ("id = 4 /* id IN (1, 2, 3) */", False),  # inside a comment: put back
        ("NOT id = 1 OR id = 2 OR id = 3 OR id = 4", True),  # NOT takes the first only
        ("id = 1 OR id = 2 OR id = 3 OR id = 4 AND s = 'a'", True),  # AND takes the last
        ("id = 1 OR id = 2 OR id = 3 OR id = 4 = TRUE", True),
        ("CASE WHEN id = 1 OR id = 2 OR id = 3 THEN TRUE END", False),
        ("coalesce(id = 1 OR id = 2 OR id = 3, FALSE)", False),
        ("id IN (1, 2, 3, 4 + 5)", True),  # 4 belongs to 4 + 5
        ("id IN ('a''b', 'c', 'd')", False),  # an escaped quote is not folded
        ("s IN ('a', 'b', 'c', 'it''s')", True),  # the plain ones before it are
        ("s = ':__pruner_list0' OR id IN (1, 2, 3)", True),  # the prefix changes
    ],
)
def test_folding_is_checked_where_it_lands(condition: str, folds: bool) -> None:
    sql = f"SELECT * FROM t WHERE {condition}"
    for dialect in ("duckdb", "spark", "datafusion"):
        assert _analysis(sql, dialect, 3) == _analysis(sql, dialect, 10**9), (dialect, sql)
    folded = folding.fold(sql, 3)
    kept = [name for name in folded.lists if name in parsing.check(folded, _parse(folded.sql))]
    assert bool(kept) == folds, (folded.sql, kept)


@pytest.mark.parametrize("quoted", [False, True])
def test_an_in_lists_values_are_its_literals_whatever_the_blanks(quoted: bool) -> None:
    values = ["1", "-22", "3.5", "-4.25", "0"] if not quoted else ["'a'", "-1", "'b c'", "2"]
    text = "IN (" + " ,\n".join(values[:2]) + "\t,\r\n " + ",".join(values[2:]) + " )"
    sql = f"SELECT * FROM t WHERE id {text} AND id IN (7, 8)"
    found = list(folding.whole_in_lists(sql, 2))
    assert [(sql[start:end], got) for start, end, got in found] == [
        (text, values),
        ("IN (7, 8)", ["7", "8"]),
    ]
    folded = folding.fold(sql, 2)
    assert [[(v.kind, v.text) for v in f.values] for f in folded.lists.values()] == [
        [("string", v[1:-1]) if v[0] == "'" else ("number", v) for v in values],
        [("number", "7"), ("number", "8")],
    ]


def _parse(sql: str) -> list[Any]:
    import sqlglot

    try:
        return [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except sqlglot.ParseError:
        return []


# ------------------------------------------------------------------- size and nesting


def test_sql_beyond_the_parse_limit_reads_whole_in_bounded_memory(lance_path: Path) -> None:
    # 200,000 equalities on two columns: no run to fold, 2.8 MB left to parse.
    sql = "SELECT count(*) FROM t WHERE " + " OR ".join(
        f"{'id' if i % 2 else 's'} = {i}" for i in range(200_000)
    )
    analysis, peak = _peak_mib(lambda: analyze(sql, SCHEMA))
    (scan,) = analysis.scans
    assert isinstance(scan.predicate, Unknown)
    assert f"pruner analyses at most {MAX_PARSED_CHARS:,}" in scan.predicate.reason
    assert peak < 32, f"{peak:.0f} MiB to decide not to parse 2.8 MB"
    # The engine runs a long query as written, over the whole table.
    long = f"SELECT count(*) AS n FROM t WHERE s = '{'x' * MAX_PARSED_CHARS}' OR id = 5"
    assert _same_answer(long, {"t": lance_path}, "duckdb").to_pylist() == [{"n": 1}]
    text = str(pruner.explain(long, {"t": lance_path}))
    assert "read whole" in text and "characters long" in text


NESTED = {
    "parentheses": "(" * 30_000 + "id = 1" + ")" * 30_000,
    "NOT": "NOT (" * 15_000 + "id = 1" + ")" * 15_000,
}
"""Deeper than pruner's parser follows (sqlglot compiled by mypyc follows ~20,000 levels of
parentheses and ~10,000 of NOT, pure-Python sqlglot ~2,600 and ~1,800)."""
ANSWERED = {
    "parentheses": "(" * 5000 + "id = 1" + ")" * 5000,
    "NOT": "NOT (" * 5000 + "id = 1" + ")" * 5000,
}
"""Nested as deep as DuckDB answers when allowed (it crashes at 40,000 levels of NOT)."""


@pytest.mark.parametrize("shape", NESTED)
def test_nesting_beyond_the_parser_reads_whole_and_the_engine_decides(
    shape: str, lance_path: Path
) -> None:
    sql = f"SELECT count(*) AS n FROM t WHERE {NESTED[shape]}"
    # DuckDB refuses such depths (max_expression_depth is 1,000): explain, which has the
    # engine plan the SQL, raises DuckDB's own error as the query does.
    with pytest.raises(duckdb.ParserException, match="expression depth"):
        pruner.explain(sql, {"t": lance_path})
    explanation = pruner.explain(sql, {"t": lance_path}, check=False)
    (scan,) = explanation.scans
    assert scan.zones_selected == scan.zones_total
    assert "nested too deeply for pruner's parser" in str(explanation)
    # DuckDB refuses such depths itself (max_expression_depth is 1,000): its own error.
    with pytest.raises(duckdb.ParserException, match="expression depth"):
        pruner.query(sql, {"t": lance_path})
    # Allowed deeper, it answers 5,000 levels, and pruner agrees with it. (GLOBAL: pruner
    # runs the query on a cursor of the connection, which has its own session.)
    sql = f"SELECT count(*) AS n FROM t WHERE {ANSWERED[shape]}"
    connection = duckdb.connect()
    connection.execute("SET GLOBAL max_expression_depth TO 100000")
    expected = [{"n": 1}]  # an even number of NOTs
    assert _same_answer(sql, {"t": lance_path}, "duckdb", connection=connection).to_pylist() == (
        expected
    )


def test_datafusion_refuses_deep_nesting_itself(lance_path: Path) -> None:
    # DataFusion's parser stops at 50 levels (and takes exponential time on deep NOT, which
    # is why only parentheses are tried here).
    sql = f"SELECT count(*) AS n FROM t WHERE {NESTED['parentheses']}"
    with pytest.raises(Exception, match="RecursionLimitExceeded"):
        pruner.query(sql, {"t": lance_path}, engine="datafusion")


def test_nesting_the_parser_follows_still_prunes() -> None:
    sql = "SELECT * FROM t WHERE " + "(" * 1500 + "id = 1" + ")" * 1500
    (scan,) = analyze(sql, SCHEMA).scans
    assert scan.predicate == Equals("id", Literal.number("1"))


def test_and_or_alternating_deeper_than_pruner_follows(parquet_path: Path) -> None:
    levels = 300
    where = "".join(f"(id = {i} {'OR' if i % 2 else 'AND'} " for i in range(levels))
    sql = f"SELECT count(*) AS n FROM t WHERE {where}id = 1{')' * levels}"
    (scan,) = analyze(sql, SCHEMA).scans
    unknown = [leaf for leaf in _leaves(scan.predicate) if isinstance(leaf, Unknown)]
    assert [leaf.reason for leaf in unknown] == ["AND / OR nested more than 64 levels deep"]
    # Explain and evaluation recurse on the predicate under the default recursion limit.
    assert sys.getrecursionlimit() <= 1000 + 100
    explanation = pruner.explain(sql, {"t": parquet_path})
    assert explanation.scans[0].zones_selected == 1, "id = 0 AND ...: only zone 0"
    assert _same_answer(sql, {"t": parquet_path}, "duckdb").to_pylist() == [{"n": 0}]


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_deep_filters_pushed_into_lance_stay_fast(engine: str, lance_path: Path) -> None:
    # DuckDB pushes an OR chain into the Lance scanner one level per term, and Lance's
    # Substrait serialization of a filter doubles in time with each level (40 terms: hours,
    # unpruned as well): pyarrow applies such a filter instead. Either way it is exact.
    ored = " OR ".join(f"s = 'v{i}'" for i in range(0, 80, 2))
    levels = 200 if engine == "duckdb" else 16  # DataFusion's parser stops at ~20
    nested = "".join(f"(id = {i} {'OR' if i % 2 else 'AND'} " for i in range(levels))
    queries = {
        f"SELECT count(*) AS n FROM t WHERE {ored}": 40,
        f"SELECT count(*) AS n FROM t WHERE {nested}id = 1{')' * levels}": 0,
    }
    for sql, count in queries.items():
        assert _same_answer(sql, {"t": lance_path}, engine).to_pylist() == [{"n": count}]


def _leaves(predicate: Predicate) -> Iterator[Predicate]:
    if isinstance(predicate, And | Or):
        for child in predicate.children:
            yield from _leaves(child)
    else:
        yield predicate


def test_subqueries_nested_2000_deep_and_a_1000_table_join() -> None:
    depth = 2000
    nested = "".join("SELECT id FROM t WHERE id IN (" for _ in range(depth))
    sql = f"SELECT count(*) FROM t WHERE id IN ({nested}1, 2{')' * (depth + 1)}"
    scans = analyze(sql, SCHEMA).scans
    assert len(scans) == depth + 1
    assert str(scans[0].predicate) == "id IN (1, 2)", "the innermost scan prunes"
    # Explain names a large condition instead of writing it out: writing each of 2,000
    # nested subqueries out in full was quadratic (300 levels took 17 s).
    assert str(scans[-1].predicate) == "UNKNOWN(id IN ...)"
    tables = 1000
    joins = " ".join(f"JOIN t AS a{i} ON a{i}.id = a{i - 1}.id" for i in range(1, tables))
    scans = analyze(f"SELECT count(*) FROM t AS a0 {joins} WHERE a0.id = 5", SCHEMA).scans
    assert len(scans) == tables
    assert "id = 5" in str(scans[0].predicate)
    assert "a0" not in str(scans[500].predicate), "WHERE names no column of a500"


# ------------------------------------------------------------------------------- names

TABLE_NAMES = ["it's", 'say "hi"', "with space", "naïve", "a.b", "x`y", "select", "t--x"]
FOLDERS = ["it's", 'say "hi"', "with space", "naïve ünï", "pct%20", "hash#x", "colon:x"]
# A folder whose name is a glob, beside a folder the glob matches: only the first is read.
GLOBS = {"g[1]": "g1", "s*": "sX", "q?": "qq", "b{c,d}": "bc"}


def _quote(name: str, engine: str) -> str:
    if engine == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture(scope="module")
def named_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Lance datasets and Parquet folders under hostile names; the glob folders have
    decoys holding other ids."""
    root = tmp_path_factory.mktemp("names")
    found = {}
    data = pa.table({"id": pa.array(range(20_000), pa.int64())})
    decoy = pa.table({"id": pa.array(range(50_000, 50_100), pa.int64())})
    for kind in ("lance", "parquet"):
        for folder in [*FOLDERS, *GLOBS, *GLOBS.values()]:
            path = root / kind / folder
            rows = decoy if folder in GLOBS.values() else data
            if kind == "lance":
                lance.write_dataset(rows, path)
            else:
                path.mkdir(parents=True)
                pq.write_table(rows, path / "part.parquet", row_group_size=2_048)
            if folder not in GLOBS.values():
                build_index(path, "id", items=2_048)
                found[f"{kind}/{folder}"] = path
    return found


def _check_names(engine: str, named_tables: dict[str, Path], **options: Any) -> None:
    first = named_tables["lance/it's"]
    for name in TABLE_NAMES:
        for path in (first, named_tables["parquet/it's"]):
            sql = f"SELECT count(*) AS n FROM {_quote(name, engine)} WHERE id IN (7, 19999)"
            result = _same_answer(sql, {name: path}, engine, **options)
            assert result.to_pylist() == [{"n": 2}], (engine, name, path)
    for key, path in named_tables.items():
        sql = "SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM t WHERE id < 50000"
        result = _same_answer(sql, {"t": path}, engine, **options)
        assert result.to_pylist() == [{"n": 20_000, "lo": 0, "hi": 19_999}], (engine, key)
        sql = "SELECT count(*) AS n FROM t WHERE id = 19999"
        assert _same_answer(sql, {"t": path}, engine, **options).to_pylist() == [{"n": 1}]


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_names_and_paths_with_quotes_spaces_unicode_and_globs(
    engine: str, named_tables: dict[str, Path]
) -> None:
    _check_names(engine, named_tables)


@pytest.mark.slow
def test_names_and_paths_on_spark(named_tables: dict[str, Path], spark: Any) -> None:
    _check_names("spark", named_tables, spark=spark)


def test_duckdb_refuses_a_path_it_cannot_name_clearly(tmp_path: Path) -> None:
    folder = tmp_path / "back\\slash[1]"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), folder / "part.parquet")
    with pytest.raises(EngineError, match="backslash"):
        pruner.query("SELECT * FROM t", {"t": folder})
    assert pruner.query("SELECT * FROM t", {"t": folder}, engine="datafusion").num_rows == 2


def test_names_that_fold_together_are_never_pruned(lance_path: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.lance"
    lance.write_dataset(pa.table({"id": pa.array([5, 5, 6], pa.int64())}), other)
    build_index(other, "id")
    tables = {"t": lance_path, "T": other}  # DuckDB binds both; the last one wins
    sql = "SELECT count(*) AS n FROM t WHERE id = 5"
    assert analyze(sql, {"t": SCHEMA["t"], "T": SCHEMA["t"]}).scans == ()
    assert _same_answer(sql, tables, "duckdb").to_pylist() == [{"n": 2}]


def test_a_duckdb_default_collation_turns_pruning_off(lance_path: Path) -> None:
    connection = duckdb.connect()
    connection.execute("SET GLOBAL default_collation = 'nocase'")
    sql = "SELECT count(*) AS n FROM t WHERE s = 'V7'"
    # 'V7' = 'v7' under NOCASE: a probe of the bytes of 'V7' would have pruned v7's zone.
    result = _same_answer(sql, {"t": lance_path}, "duckdb", connection=connection)
    assert result.to_pylist() == [{"n": 1}]


def test_datafusion_names_are_exact(lance_path: Path) -> None:
    tables = {"Events": lance_path}
    sql = 'SELECT count(*) AS n FROM "Events" WHERE id = 5'
    assert _same_answer(sql, tables, "datafusion").to_pylist() == [{"n": 1}]
    (scan,) = pruner.explain(sql, tables, dialect="datafusion").scans
    assert scan.zones_selected == 1
    with pytest.raises(Exception, match="not found"):  # unquoted, DataFusion means "events"
        pruner.query("SELECT count(*) FROM Events", tables, engine="datafusion")


# ------------------------------------------------------------------ untrusted index files


class _Payload:
    """Unpickled, it would create the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (pathlib.Path.touch, (self.marker,))


def _rewrite_index(path: Path, metadata: dict[str, str], field_metadata: Any = None) -> None:
    """Write the index file at ``path`` again with ``metadata`` replacing its own keys."""
    from lance.file import LanceFileReader, LanceFileWriter

    reader = LanceFileReader(str(path))
    table = reader.read_all().to_table()
    own = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    buffers = {key: bytes(reader.read_global_buffer(int(own[key]))) for key in (META_CHECKSUMS,)}
    if META_NULL_BITMAP in own:
        buffers[META_NULL_BITMAP] = bytes(reader.read_global_buffer(int(own[META_NULL_BITMAP])))
    schema = INDEX_SCHEMA
    if field_metadata is not None:
        schema = pa.schema([f.with_metadata(field_metadata) for f in INDEX_SCHEMA])
    staging = path.with_name("staging.lance")
    writer = LanceFileWriter(str(staging), schema)
    for batch in table.to_batches():
        writer.write_batch(pa.record_batch(batch.columns, schema=schema))
    for key, data in buffers.items():
        own[key] = str(writer.add_global_buffer(data))
    for key, value in {**own, **metadata}.items():
        writer.add_schema_metadata(key, value)
    writer.close()
    os.replace(staging, path)


@pytest.fixture
def indexed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    pq.write_table(
        pa.table({"id": pa.array(range(20_000), pa.int64())}),
        folder / "part.parquet",
        row_group_size=2_048,
    )
    build_index(folder, "id", items=2_048)
    return folder


@pytest.mark.parametrize("key", [META_FILES, META_ITEMS])
def test_a_pickle_in_index_metadata_is_rejected_not_loaded(
    key: str, indexed_folder: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Payload(marker), protocol=0).decode("ascii")
    index_file = parquet_index_path(indexed_folder, "id")
    _rewrite_index(index_file, {key: payload})
    with pytest.raises(IndexFormatError):
        read_index_file(index_file, "id")
    sql = "SELECT count(*) AS n FROM t WHERE id = 7"
    assert _same_answer(sql, {"t": indexed_folder}, "duckdb").to_pylist() == [{"n": 1}]
    assert "unreadable" in str(pruner.explain(sql, {"t": indexed_folder}))
    assert not marker.exists(), "nothing in an index file is ever unpickled"


def test_a_pickled_arrow_extension_type_is_not_loaded(indexed_folder: Path, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Payload(marker), protocol=0)
    field_metadata = {
        b"ARROW:extension:name": b"arrow.py_extension_type",
        b"ARROW:extension:metadata": payload,
    }
    index_file = parquet_index_path(indexed_folder, "id")
    _rewrite_index(index_file, {}, field_metadata)
    read_index_file(index_file, "id")  # read as plain columns, the metadata left alone
    sql = "SELECT count(*) AS n FROM t WHERE id = 7"
    assert _same_answer(sql, {"t": indexed_folder}, "duckdb").to_pylist() == [{"n": 1}]
    assert not marker.exists()


def test_deeply_nested_json_in_index_metadata_is_a_damaged_index(indexed_folder: Path) -> None:
    index_file = parquet_index_path(indexed_folder, "id")
    _rewrite_index(index_file, {META_FILES: "[" * 200_000 + "]" * 200_000})
    with pytest.raises(IndexFormatError):
        read_index_file(index_file, "id")


def test_pruner_never_unpickles_or_evaluates() -> None:
    banned = re.compile(
        r"\bimport (pickle|cPickle|dill|cloudpickle|marshal|shelve)\b"
        r"|\bfrom (pickle|dill|cloudpickle|marshal|shelve) import"
        r"|(?<![\w.])(eval|exec)\(|allow_pickle\s*=\s*True|yaml\.load\(|np\.load\("
    )
    package = Path(pruner.__file__).parent
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if banned.search(line)
    ]
    assert found == []
