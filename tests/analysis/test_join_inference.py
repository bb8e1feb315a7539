"""Values carried across equi-joins: ``o.k = v.k AND v.k IN (1, 2)`` implies ``o.k IN (1, 2)``.

Only where every row of ``o`` the query keeps met both (the WHERE clause, inner and semi join
ON clauses), never from an outer join's ON, never between columns a cast or collation sits
between. Every answer is checked against DuckDB alone.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.index import build_index
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("joins")
    rng = np.random.default_rng(2)
    rows = 8_000
    k = rng.permutation(rows)
    facts = pa.table(
        {
            "k": pa.array(k, pa.int64()),
            "s": pa.array([f"s{x}" for x in k]),
            "x": pa.array(k % 97, pa.int32()),
        }
    )
    small = pa.table(
        {
            "k": pa.array([1, 2, 3, 500, None, 7], pa.int32()),
            "s": ["s1", "s2", "s3", "s500", None, "s7"],
            "name": ["a", "b", "c", "d", "e", None],
        }
    )
    paths = {}
    for name, data, indexed in (("o", facts, ["k", "s"]), ("v", small, []), ("w", small, [])):
        folder = root / name
        folder.mkdir()
        for number, start in enumerate(range(0, data.num_rows, 2_000)):
            pq.write_table(data.slice(start, 2_000), folder / f"p{number}.parquet")
        for column in indexed:
            build_index(folder, column, items=256)
        paths[name] = folder
    return paths


def _one_file_tables(root: Path, data: dict[str, pa.Table]) -> dict[str, Path]:
    """Each table as a directory of one Parquet file (row groups of 500) under ``root``."""
    paths = {}
    for name, table in data.items():
        paths[name] = root / name
        paths[name].mkdir()
        pq.write_table(table, paths[name] / "p.parquet", row_group_size=500)
    return paths


def _scan(sql: str, tables: dict[str, Path], alias: str = "o") -> Any:
    found = [s for s in pruner.explain(sql, tables).scans if s.scan.alias == alias]
    return found[0]


INFERRED = [
    "SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.k IN (1, 2)",
    "SELECT o.x FROM o, v WHERE o.k = v.k AND v.k = 3",
    "SELECT o.x FROM o JOIN v ON o.k = v.k AND v.k IN (1, 500)",
    "SELECT o.x FROM o INNER JOIN v ON v.k = o.k WHERE v.k IN (2, 3) AND v.name <> 'z'",
    "SELECT o.x FROM o JOIN v ON o.k = v.k JOIN w ON v.k = w.k WHERE w.k = 500",
    "SELECT o.x FROM o SEMI JOIN v ON o.k = v.k AND v.k IN (1, 2)",
    "SELECT o.x FROM o JOIN v ON o.s = v.s WHERE v.s IN ('s1', 's3')",
    "SELECT o.x FROM v JOIN o ON o.k = v.k LEFT JOIN w ON w.k = o.k WHERE v.k = 1",
    "SELECT o.x FROM o RIGHT JOIN v ON o.k = v.k JOIN w ON o.k = w.k WHERE w.k IN (1, 2)",
    # a CTE's plain column compares as its table's column
    "WITH d AS (SELECT k FROM v) SELECT o.x FROM o JOIN d ON o.k = d.k WHERE d.k IN (1, 2)",
]


@pytest.mark.parametrize("sql", INFERRED)
def test_inferred_values_prune_and_answer_alike(tables: dict[str, Path], sql: str) -> None:
    scan = _scan(sql, tables)
    inferred = [t for t in scan.terms if "inferred from" in t.reason]
    assert inferred and inferred[0].used_index, scan.terms
    assert scan.zones_selected * 4 <= scan.zones_total, scan
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


NOT_INFERRED = [
    # o's rows are kept by the outer join whatever the ON says
    "SELECT o.x, v.name FROM o LEFT JOIN v ON o.k = v.k AND v.k IN (1, 2)",
    "SELECT o.x, v.name FROM v RIGHT JOIN o ON o.k = v.k AND v.k IN (1, 2)",
    "SELECT o.x, v.name FROM o FULL JOIN v ON o.k = v.k WHERE v.k IN (1, 2) OR v.k IS NULL",
    # a cast or another type family between the columns
    "SELECT o.x FROM o JOIN v ON o.k = CAST(v.s AS BIGINT) WHERE v.s IN ('1', '01')",
    "SELECT o.x FROM o JOIN v ON CAST(o.k AS VARCHAR) = v.s WHERE v.s = '1'",
    # not a conjunct of the whole condition
    "SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.k = 1 OR o.x = 5",
    "SELECT o.x FROM o JOIN v ON o.k = v.k OR v.k = 2",
    # null-safe equality holds for two NULLs
    "SELECT o.x FROM o JOIN v ON o.k IS NOT DISTINCT FROM v.k WHERE v.k = 1",
    # anti join: o's rows that match nothing
    "SELECT o.x FROM o ANTI JOIN v ON o.k = v.k AND v.k IN (1, 2)",
]


@pytest.mark.parametrize("sql", NOT_INFERRED)
def test_nothing_inferred_where_it_would_narrow(tables: dict[str, Path], sql: str) -> None:
    scan = _scan(sql, tables)
    assert not any("inferred from" in t.reason for t in scan.terms), scan.terms
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


def test_explain_names_where_the_values_came_from(tables: dict[str, Path]) -> None:
    sql = "SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.k IN (1, 2)"
    scan = _scan(sql, tables)
    (term,) = [t for t in scan.terms if "inferred from" in t.reason]
    assert term.column == "k"
    assert "o.k = v.k" in term.reason and "v.k IN (1, 2)" in term.reason


def test_parameters_carry_across(tables: dict[str, Path]) -> None:
    sql = "SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.k = ?"
    scan = pruner.explain(sql, tables, parameters=[500]).scans[0]
    assert scan.zones_selected * 4 <= scan.zones_total
    got = pruner.query(sql, tables, parameters=[500])
    assert multiset(got) == multiset(engine_alone("duckdb", sql, tables, [500]))


def test_only_columns_that_compare_as_their_values_carry_values() -> None:
    from pruner.analysis.joins import _same_equality

    assert _same_equality(pa.int8(), pa.int64())
    assert _same_equality(pa.string(), pa.large_string())
    assert _same_equality(pa.date32(), pa.date32())
    # the engine casts between these (a session time zone; rounding; a parse of text)
    assert not _same_equality(pa.timestamp("us"), pa.timestamp("us", tz="UTC"))
    assert not _same_equality(pa.int64(), pa.float64())
    assert not _same_equality(pa.int64(), pa.string())
    assert not _same_equality(pa.float32(), pa.float32())  # NaN = NaN in engines, not in IN
    assert not _same_equality(None, pa.int64())


# ---------------------------------------------------------------------------- at run time

RUNTIME = [
    "SELECT o.x FROM o JOIN v ON o.k = v.k",
    "SELECT o.x, v.name FROM o JOIN v ON o.k = v.k WHERE v.name IN ('a', 'd')",
    "SELECT o.x FROM o JOIN v ON o.s = v.s WHERE v.name <> 'a'",
    "SELECT count(*) FROM v, o WHERE v.k = o.k AND v.name = 'c'",
    "SELECT o.x FROM o SEMI JOIN v ON o.k = v.k",
    "SELECT o.x FROM o JOIN v ON o.k = v.k LEFT JOIN w ON w.k = v.k WHERE w.name IS NULL",
    "SELECT o.x, v.k FROM o JOIN v ON o.k = v.k WHERE v.name IS NULL",
    "SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name = 'zz' OR v.name IN ('b', 'c')",
]


@pytest.mark.parametrize("sql", RUNTIME)
def test_small_side_keys_prune_the_big_side(tables: dict[str, Path], sql: str) -> None:
    """The small side's keys (NULL among them: it joins nothing) are read at run time and
    looked up in the big side's index; the answer is DuckDB's alone."""
    scan = _scan(sql, tables)
    runtime = [t for t in scan.terms if t.reason.startswith("at run time")]
    assert runtime and runtime[0].used_index, scan.terms
    assert scan.zones_selected * 4 <= scan.zones_total, scan
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.x, v.name FROM o LEFT JOIN v ON o.k = v.k",
        "SELECT o.x, v.name FROM v RIGHT JOIN o ON o.k = v.k",
        "SELECT o.x, v.name FROM o FULL JOIN v ON o.k = v.k",
        "SELECT o.x FROM o ANTI JOIN v ON o.k = v.k",
        "SELECT o.x FROM o JOIN v ON o.k = v.k OR o.x = 3",
        "SELECT o.x FROM o JOIN v ON o.k + 0 = v.k",
        "SELECT o.x FROM o JOIN v ON o.k IS NOT DISTINCT FROM v.k",
        # a CTE / derived table that is not one SELECT of plain columns over one table
        "SELECT o.x FROM o LEFT JOIN (SELECT k FROM v) d ON o.k = d.k",
        "WITH d AS (SELECT k FROM v UNION ALL SELECT k FROM w) "
        "SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT v.k FROM v JOIN w ON v.s = w.s) SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT k + 0 AS k FROM v) SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT k + 1 AS j, k FROM v) SELECT o.x FROM o JOIN d ON o.k = d.j",
        "WITH d AS (SELECT row_number() OVER () AS k FROM v) SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT k FROM (SELECT k FROM v) e) SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT k FROM v) SELECT o.x FROM o WHERE o.k NOT IN (SELECT k FROM d)",
    ],
)
def test_no_runtime_keys_where_they_would_narrow(tables: dict[str, Path], sql: str) -> None:
    """A join keeping o's rows, or a small side whose keys are not a table's: no keys."""
    scan = _scan(sql, tables)
    assert not any(t.reason.startswith("at run time") for t in scan.terms), scan.terms
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


# A CTE / derived table over one table: its keys are among that table's rows meeting its
# WHERE (and what the enclosing query asks of its plain columns); (query, keys read).
RUNTIME_DERIVED = [
    (
        "WITH d AS (SELECT k, name FROM v WHERE name IN ('a', 'd')) "
        "SELECT o.x FROM o JOIN d ON o.k = d.k",
        2,
    ),
    # `<>` is not evaluated on the small side: it keeps every row (a superset of keys)
    ("SELECT o.x FROM o JOIN (SELECT k AS key FROM v WHERE name <> 'a') d ON o.k = d.key", 5),
    (
        "WITH d AS (SELECT * FROM v) SELECT o.x, d.name FROM o JOIN d ON o.s = d.s "
        "WHERE d.name = 'c'",
        1,
    ),
    (
        "WITH d AS (SELECT k FROM v GROUP BY k HAVING count(*) = 1) "
        "SELECT o.x FROM o JOIN d ON o.k = d.k",
        5,
    ),
    ("WITH d AS (SELECT k FROM v ORDER BY k LIMIT 2) SELECT o.x FROM o JOIN d ON o.k = d.k", 5),
    (
        "WITH d AS (SELECT DISTINCT s FROM v WHERE k IN (1, 2)) "
        "SELECT o.x FROM o WHERE o.s IN (SELECT s FROM d)",
        2,
    ),
    (
        "WITH d AS (SELECT k, name FROM v) "
        "SELECT o.x FROM o WHERE o.k IN (SELECT k FROM d WHERE name = 'b')",
        1,
    ),
    (
        "WITH d AS (SELECT k, upper(name) AS name FROM v) "
        "SELECT o.x, d.name FROM o JOIN d ON o.k = d.k WHERE d.name = 'A'",
        5,
    ),
    (
        "SELECT o.x FROM o LEFT JOIN (SELECT k FROM v WHERE name = 'd') d ON o.k = d.k "
        "WHERE o.k = d.k",
        1,
    ),
    # o.k IN (500, 1) implies d.k IN (500, 1) of the rows d gives (after its LIMIT)
    (
        "WITH d AS (SELECT k FROM v ORDER BY k LIMIT 2) SELECT o.x, d.k FROM o JOIN d "
        "ON o.k = d.k WHERE o.k IN (500, 1)",
        2,
    ),
]


@pytest.mark.parametrize(("sql", "keys"), RUNTIME_DERIVED)
def test_a_derived_small_side_gives_its_tables_keys(
    tables: dict[str, Path], sql: str, keys: int
) -> None:
    """Keys are read from the table the CTE / derived table reads, among its rows that meet
    the body's WHERE and the enclosing query's conditions on plain columns (a computed
    output, ``upper(name)``, restricts nothing); the answer is DuckDB's alone."""
    scan = _scan(sql, tables)
    runtime = [t for t in scan.terms if t.reason.startswith("at run time")]
    assert runtime and runtime[0].used_index, scan.terms
    assert runtime[0].reason.startswith(f"at run time: {keys} key"), runtime[0].reason
    assert " of v." in runtime[0].reason  # read from the table the CTE reads
    assert re.search(r"\bd\b", runtime[0].term)  # the join's condition, as written
    assert scan.zones_selected * 4 <= scan.zones_total, scan
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


def test_a_sampled_derived_side_gives_no_keys(tables: dict[str, Path]) -> None:
    """A sample draws from the table's rows before anything else: no keys from it."""
    for sql in (
        "WITH d AS (SELECT k FROM v USING SAMPLE 50%) SELECT o.x FROM o JOIN d ON o.k = d.k",
        "WITH d AS (SELECT k FROM v TABLESAMPLE (50 PERCENT)) "
        "SELECT o.x FROM o JOIN d ON o.k = d.k",
    ):
        scan = _scan(sql, tables)
        assert not any(t.reason.startswith("at run time") for t in scan.terms), sql


def test_an_equality_between_two_other_tables_is_not_an_edge_of_this_one(tmp_path: Path) -> None:
    """``v.s = w.s`` joins v and w; o has a column ``s`` too, indexed, but its values are
    not v's: the keys of w.s may not prune o.s (mutant: the pair's own tables not checked).
    Here w.s = 'zz' matches v's row of k = 1, whose o row has s = 's1'."""
    o = pa.table(
        {
            "k": pa.array(np.arange(4_000), pa.int64()),
            "s": pa.array([f"s{i}" for i in range(4_000)]),
            "x": pa.array(np.arange(4_000), pa.int64()),
        }
    )
    v = pa.table({"k": pa.array([1, 2], pa.int64()), "s": ["zz", "yy"]})
    w = pa.table({"s": ["zz"]})
    paths = _one_file_tables(tmp_path, {"o": o, "v": v, "w": w})
    build_index(paths["o"], "k", items=256)
    build_index(paths["o"], "s", items=256)
    sql = "SELECT o.x FROM o JOIN v ON o.k = v.k JOIN w ON v.s = w.s"
    assert multiset(pruner.query(sql, paths)) == multiset(engine_alone("duckdb", sql, paths))
    assert pruner.query(sql, paths).column("x").to_pylist() == [1]
    scan = _scan(sql, paths)
    assert [t.term for t in scan.terms if t.reason.startswith("at run time")] == ["o.k = v.k"]


def test_values_stay_within_their_class_of_equal_columns(tmp_path: Path) -> None:
    """Two classes of equal columns, {o.k, v.k} and {o.j, w.j}: ``v.k IN (1, 2)`` says what
    o.k holds, nothing of o.j (mutants: every column put in one class). o's rows of k = 1
    and 2 have j = 1001 and 1002."""
    o = pa.table(
        {
            "k": pa.array(np.arange(4_000), pa.int64()),
            "j": pa.array(np.arange(4_000) + 1_000, pa.int64()),
            "x": pa.array(np.arange(4_000), pa.int64()),
        }
    )
    v = pa.table({"k": pa.array([1, 2, 3], pa.int64())})
    w = pa.table({"j": pa.array([1_001, 1_002, 5], pa.int64())})
    paths = _one_file_tables(tmp_path, {"o": o, "v": v, "w": w})
    build_index(paths["o"], "k", items=256)
    build_index(paths["o"], "j", items=256)
    sql = "SELECT o.x FROM o JOIN v ON o.k = v.k JOIN w ON o.j = w.j WHERE v.k IN (1, 2)"
    assert sorted(pruner.query(sql, paths).column("x").to_pylist()) == [1, 2]
    assert multiset(pruner.query(sql, paths)) == multiset(engine_alone("duckdb", sql, paths))
    scan = _scan(sql, paths)
    inferred = [t.term for t in scan.terms if "inferred from" in t.reason]
    assert inferred and all(term.startswith("o.k") or "k IN" in term for term in inferred), inferred


def test_a_sampled_table_gets_no_keys_at_run_time(tables: dict[str, Path]) -> None:
    """TABLESAMPLE draws from the table's rows before the join: restricting them to the
    small side's keys first would draw from fewer rows, another sample (mutant: edges kept
    for a table pruner may not prune)."""
    sql = "SELECT o.k FROM o TABLESAMPLE reservoir(2000 ROWS) REPEATABLE (7) JOIN v ON o.k = v.k"
    scan = _scan(sql, tables)
    assert not any(t.reason.startswith("at run time") for t in scan.terms), scan.terms
    assert scan.zones_selected == scan.zones_total
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("u.g = 0.1", [1]),  # not exactly a float32: pruner cannot tell, the row is kept
        ("u.g IN (0.5, 2)", [2]),
        ("u.k IN (1, 2)", [1, 2]),  # an int32 column, int64 keys
        ("u.t = TIMESTAMP '2024-01-02 03:04:05.006'", [2]),  # a millisecond column
        ("u.t IN ('2024-01-01', '2030-01-01')", [1]),
    ],
)
def test_the_small_side_is_judged_at_its_own_types(
    condition: str, expected: list[int], tmp_path: Path
) -> None:
    """The small side's rows are kept by its conditions as the engine keeps them: a term
    pruner cannot tell about keeps every row (mutant: counted as false), values compare at
    the column's own type (int32, float32, timestamp[ms])."""
    o = pa.table({"k": pa.array(np.arange(4_000), pa.int64()), "x": np.arange(4_000)})
    u = pa.table(
        {
            "k": pa.array([1, 2, 3], pa.int32()),
            "g": pa.array([0.1, 0.5, 7.0], pa.float32()),
            "t": pa.array(
                [
                    datetime.datetime(2024, 1, 1),
                    datetime.datetime(2024, 1, 2, 3, 4, 5, 6_000),
                    datetime.datetime(2025, 1, 1),
                ],
                pa.timestamp("ms"),
            ),
        }
    )
    paths = _one_file_tables(tmp_path, {"o": o, "u": u})
    build_index(paths["o"], "k", items=256)
    sql = f"SELECT o.x FROM o JOIN u ON o.k = u.k WHERE {condition}"
    alone = engine_alone("duckdb", sql, paths)
    assert sorted(alone.column("x").to_pylist()) == expected
    assert multiset(pruner.query(sql, paths)) == multiset(alone)
    scan = _scan(sql, paths)
    assert any(t.reason.startswith("at run time") for t in scan.terms), scan.terms


def test_the_small_side_is_judged_in_the_querys_dialect(tmp_path: Path) -> None:
    """DataFusion reads ``9007199254740992.5`` as a float64, equal to both 2**53 and
    2**53 + 1 once the column is cast to it, so the small side keeps two rows; DuckDB's
    rules (an exact decimal: no row) would give no key and prune the big side to nothing.
    (pruner keeps all three: it cannot evaluate that term exactly.) Kills a mutation run's
    survivor that read the small side's keys with DuckDB's rules."""
    o = pa.table({"k": pa.array(np.arange(4_000), pa.int64()), "x": np.arange(4_000)})
    u = pa.table(
        {
            "k": pa.array([1, 2, 3], pa.int32()),
            "big": pa.array([2**53, 2**53 + 1, 0], pa.int64()),
        }
    )
    paths = _one_file_tables(tmp_path, {"o": o, "u": u})
    build_index(paths["o"], "k", items=256)
    sql = "SELECT o.x FROM o JOIN u ON o.k = u.k WHERE u.big = 9007199254740992.5"
    alone = engine_alone("datafusion", sql, paths)
    assert sorted(alone.column("x").to_pylist()) == [1, 2]
    assert multiset(pruner.query(sql, paths, engine="datafusion")) == multiset(alone)
    scan = [
        s for s in pruner.explain(sql, paths, dialect="datafusion").scans if s.scan.alias == "o"
    ]
    assert any(t.reason.startswith("at run time") for t in scan[0].terms), scan[0].terms


def test_a_lance_small_side_gives_its_live_keys(tables: dict[str, Path], tmp_path: Path) -> None:
    """A Lance dataset as the small side: its keys are read from its live rows (a deleted
    row's key joins nothing), among the rows its conditions keep."""
    path = tmp_path / "v.lance"
    small = pa.table(
        {"k": pa.array([1, 2, 3, 500, 7], pa.int64()), "name": ["a", "b", "a", "d", "a"]}
    )
    lance.write_dataset(small, str(path))
    lance.dataset(str(path)).delete("k = 3")
    paths = {"o": tables["o"], "v": path}
    sql = "SELECT o.x, v.k FROM o JOIN v ON o.k = v.k WHERE v.name = 'a'"
    scan = _scan(sql, paths)
    runtime = [t for t in scan.terms if t.reason.startswith("at run time")]
    assert runtime and runtime[0].reason.startswith("at run time: 2 keys of v.k"), runtime
    assert multiset(pruner.query(sql, paths)) == multiset(engine_alone("duckdb", sql, paths))


def test_a_big_other_side_is_not_read(
    tables: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pruner.evaluate as evaluate
    import pruner.join_keys as join_keys

    monkeypatch.setattr(evaluate, "JOIN_ROWS", 4)
    sql = "SELECT o.x FROM o JOIN v ON o.k = v.k"
    scan = _scan(sql, tables)
    (term,) = [t for t in scan.terms if t.term == "o.k = v.k" and t.column == "k"]
    assert not term.used_index and "more than 4" in term.reason
    monkeypatch.setattr(evaluate, "JOIN_ROWS", 1_000_000)
    monkeypatch.setattr(join_keys, "JOIN_KEYS", 2)
    scan = _scan(sql, tables)
    (term,) = [t for t in scan.terms if t.term == "o.k = v.k" and t.column == "k"]
    assert not term.used_index and "more than 2 keys" in term.reason
    assert scan.zones_selected == scan.zones_total


@pytest.mark.parametrize("engine", ["datafusion", "spark"])
def test_runtime_keys_on_every_engine(tables: dict[str, Path], engine: str, spark: Any) -> None:
    sql = "SELECT o.x, v.name FROM o JOIN v ON o.k = v.k WHERE v.name IN ('a', 'd')"
    session = spark if engine == "spark" else None
    expected = engine_alone(engine, sql, tables, spark=session)
    assert multiset(pruner.query(sql, tables, engine=engine)) == multiset(expected)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.x FROM o WHERE o.k IN (SELECT k FROM v WHERE name IN ('a', 'd'))",
        "SELECT o.x FROM o WHERE o.k IN (SELECT v.k FROM v) AND o.x > 3",
        "SELECT o.x FROM o WHERE k IN (SELECT k FROM v ORDER BY k LIMIT 2)",
        "SELECT o.x FROM o WHERE o.s IN (SELECT DISTINCT s FROM v WHERE v.k <> 3)",
        "SELECT count(*) FROM o AS big WHERE big.k IN (SELECT k FROM w GROUP BY k)",
    ],
)
def test_in_subquery_keys_prune_the_outer_scan(tables: dict[str, Path], sql: str) -> None:
    scan = _scan(sql, tables, alias="big" if "AS big" in sql else "o")
    runtime = [t for t in scan.terms if t.reason.startswith("at run time")]
    assert runtime and runtime[0].used_index, scan.terms
    assert scan.zones_selected * 4 <= scan.zones_total, scan
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.x FROM o WHERE o.k NOT IN (SELECT k FROM v WHERE k IS NOT NULL)",
        "SELECT o.x FROM o WHERE o.k IN (SELECT k FROM v) OR o.x = 1",
        "SELECT o.x FROM o WHERE o.k IN (SELECT k + 1 FROM v)",
        "SELECT o.x FROM o WHERE o.k IN (SELECT v.k FROM v JOIN w ON v.k = w.k)",
        "SELECT o.x FROM o WHERE o.k IN (SELECT max(k) FROM v)",
        "SELECT o.x FROM o WHERE o.x IN (SELECT k FROM v)",  # int32 and int64: carried
    ],
)
def test_in_subqueries_that_give_no_keys(tables: dict[str, Path], sql: str) -> None:
    scan = _scan(sql, tables)
    runtime = [t for t in scan.terms if t.reason.startswith("at run time")]
    # o.x has no index: nothing to look the keys up in
    assert not runtime, scan.terms
    expected = engine_alone("duckdb", sql, tables)
    assert multiset(pruner.query(sql, tables)) == multiset(expected)


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        ("SELECT o.x FROM o JOIN v ON o.k = v.k", 5),  # the NULL key joins nothing
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name IS NULL", 1),
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name IN ('a', 'd')", 2),
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name = 'a' OR v.name IS NULL", 2),
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name <> 'a'", 5),  # cannot tell: all
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name = 'a' AND v.s = 's1'", 1),
        ("SELECT o.x FROM o JOIN v ON o.k = v.k WHERE v.name = 'a' AND v.s = 's2'", 0),
    ],
)
def test_the_small_side_gives_the_keys_of_the_rows_it_keeps(
    tables: dict[str, Path], sql: str, keys: int
) -> None:
    """Exactly the distinct non-null keys of the rows the small side's own conditions may
    keep (a condition pruner cannot evaluate keeps every row)."""
    scan = _scan(sql, tables)
    (term,) = [t for t in scan.terms if t.reason.startswith("at run time")]
    assert term.reason.startswith(f"at run time: {keys} key"), term.reason
    assert multiset(pruner.query(sql, tables)) == multiset(engine_alone("duckdb", sql, tables))
