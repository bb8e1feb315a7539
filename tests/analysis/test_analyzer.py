"""The analyzer: join safety, NOT push-down, parameters, resolution, and no errors on SQL
pruner does not understand (it prunes less)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pruner.analyzer import analyze
from pruner.errors import SqlSyntaxError
from pruner.expressions import (
    Equals,
    In,
    IsNull,
    Literal,
    NotEquals,
    NotNull,
    Unknown,
    and_,
    columns_of,
    leaves,
    or_,
)

SCHEMAS = {
    "a": pa.schema([("k", pa.int64()), ("id", pa.int64()), ("x", pa.string())]),
    "b": pa.schema([("k", pa.int64()), ("id", pa.int64()), ("y", pa.string())]),
    "Mixed": pa.schema([("UserId", pa.int64())]),
}


def scans(sql: str, dialect: str = "duckdb") -> dict[str, str]:
    return {s.alias: str(s.predicate) for s in analyze(sql, SCHEMAS, dialect).scans}


def usable(sql: str, alias: str) -> set[str]:
    """The columns whose index a scan may use (leaves that are not Unknown)."""
    (scan,) = [s for s in analyze(sql, SCHEMAS).scans if s.alias == alias]
    return {str(leaf) for leaf in leaves(scan.predicate) if isinstance(leaf, Equals | In | IsNull)}


def test_left_join_where_is_null_must_not_prune_the_right_side() -> None:
    sql = "SELECT * FROM a LEFT JOIN b ON a.k = b.k WHERE b.id IS NULL"
    assert usable(sql, "b") == set(), "IS NULL is true on null-extended rows of b"


def test_left_join_on_condition_prunes_the_right_side_only() -> None:
    assert usable("SELECT * FROM a LEFT JOIN b ON a.k = b.k AND b.id = 5", "b") == {"id = 5"}
    assert usable("SELECT * FROM a LEFT JOIN b ON a.k = b.k AND a.id = 5", "a") == set()


def test_where_that_rejects_null_extended_rows_may_prune_the_outer_side() -> None:
    assert usable("SELECT * FROM a LEFT JOIN b ON a.k = b.k WHERE b.id = 5", "b") == {"id = 5"}
    sql = "SELECT * FROM a LEFT JOIN b ON a.k = b.k WHERE b.id = 5 OR b.y IS NULL"
    assert usable(sql, "b") == set()


def test_right_and_full_joins() -> None:
    right = "SELECT * FROM a RIGHT JOIN b ON a.k = b.k AND a.id = 1 AND b.id = 2"
    assert usable(right, "a") == {"id = 1"} and usable(right, "b") == set()
    full = "SELECT * FROM a FULL JOIN b ON a.k = b.k AND a.id = 1 AND b.id = 2"
    assert usable(full, "a") == set() and usable(full, "b") == set()
    assert usable("SELECT * FROM a FULL JOIN b ON a.k = b.k WHERE a.id = 1", "a") == {"id = 1"}


def test_inner_join_on_a_side_null_extended_earlier_needs_null_rejection() -> None:
    sql = (
        "SELECT * FROM a LEFT JOIN b ON a.k = b.k "
        "JOIN b AS c ON c.k = a.k AND (b.id = 5 OR b.id IS NULL)"
    )
    assert usable(sql, "b") == set(), "the inner join keeps a's rows whose b was null-extended"


def test_not_is_pushed_down_before_unknown_becomes_might_match() -> None:
    (scan,) = analyze("SELECT * FROM a WHERE NOT (id = 5 OR x IS NULL)", SCHEMAS).scans
    assert scan.predicate == and_(NotEquals("id", Literal.number("5")), NotNull("x"))
    (scan,) = analyze("SELECT * FROM a WHERE NOT (id > 5)", SCHEMAS).scans
    assert isinstance(scan.predicate, Unknown), "NOT unknown stays unknown"


def test_null_safe_equality_and_distinct() -> None:
    assert scans("SELECT * FROM a WHERE id <=> NULL", "spark") == {"a": "id IS NULL"}
    assert scans("SELECT * FROM a WHERE id IS NOT DISTINCT FROM 5") == {
        "a": "id IS NOT DISTINCT FROM 5"
    }
    assert scans("SELECT * FROM a WHERE id IS DISTINCT FROM 5") == {"a": "id IS DISTINCT FROM 5"}
    bound = analyze("SELECT * FROM a WHERE id IS NOT DISTINCT FROM ?", SCHEMAS).with_parameters(
        [None]
    )
    assert str(bound.scans[0].predicate) == "id IS NULL", "<=> NULL is IS NULL"


def test_parameters_bind_in_textual_order_across_ctes() -> None:
    sql = "WITH c AS (SELECT * FROM b WHERE id = ?) SELECT * FROM a, c WHERE a.id = ? AND x = ?"
    analysis = analyze(sql, SCHEMAS).with_parameters([1, 2, "z"])
    found = {s.alias: str(s.predicate) for s in analysis.scans}
    assert found["b"].startswith("id = 1")
    assert "id = 2" in found["a"] and "x = 'z'" in found["a"]
    named = analyze("SELECT * FROM a WHERE id = :wanted", SCHEMAS).with_parameters({"wanted": 7})
    assert str(named.scans[0].predicate) == "id = 7"
    dollar = analyze("SELECT * FROM a WHERE x = $2 AND id = $1", SCHEMAS, "datafusion")
    assert str(dollar.with_parameters([3, "q"]).scans[0].predicate) == "x = 'q' AND id = 3"


def test_columns_resolve_case_insensitively_and_ambiguity_is_unknown() -> None:
    assert scans("SELECT * FROM mixed WHERE userid = 4") == {"mixed": "UserId = 4"}
    assert usable("SELECT * FROM a, b WHERE id = 4", "a") == set(), "id is in a and b"
    assert usable("SELECT * FROM a, b WHERE x = 'q'", "a") == {"x = 'q'"}


def test_hundreds_of_in_values_and_deep_nesting() -> None:
    values = ", ".join(str(v) for v in range(500))
    (scan,) = analyze(f"SELECT * FROM a WHERE id IN ({values})", SCHEMAS).scans
    assert len(scan.predicate.values) == 500  # type: ignore[attr-defined]
    nested = "id = 1"
    for depth in range(24):
        nested = f"({nested} OR id = {depth + 2})" if depth % 2 else f"NOT (NOT ({nested}))"
    (scan,) = analyze(f"SELECT * FROM a WHERE {nested}", SCHEMAS).scans
    assert columns_of(scan.predicate) == {"id"}
    assert not any(isinstance(leaf, Unknown) for leaf in leaves(scan.predicate))


def test_pushdown_stops_at_limit_window_and_recursion() -> None:
    assert scans("SELECT * FROM (SELECT id FROM a) s WHERE s.id = 3") == {"a": "id = 3"}
    assert scans("SELECT * FROM (SELECT id FROM a LIMIT 5) s WHERE s.id = 3") == {"a": "TRUE"}
    window = "SELECT * FROM (SELECT id, rank() OVER (ORDER BY k) r FROM a) s WHERE s.id = 3"
    assert scans(window) == {"a": "TRUE"}
    recursive = (
        "WITH RECURSIVE r AS (SELECT id, k FROM a UNION ALL "
        "SELECT b.id, b.k FROM b JOIN r ON b.k = r.id) SELECT * FROM r WHERE id = 3"
    )
    assert usable(recursive, "a") == set() and usable(recursive, "b") == set()


def test_sql_pruner_does_not_understand_is_never_an_error() -> None:
    queries = [
        "SELECT * FROM a ASOF JOIN b ON a.k >= b.k WHERE b.id = 1",
        "SELECT * FROM a POSITIONAL JOIN b WHERE b.id = 1",
        "SELECT * FROM a QUALIFY row_number() OVER (PARTITION BY k) = 1",
        "INSERT INTO z SELECT * FROM a WHERE id = 1",
        "CREATE TABLE z AS SELECT * FROM a WHERE id = 1",
        "SELECT * FROM (VALUES (1), (2)) v(id) WHERE id = 1",
        "SELECT * FROM a, UNNEST([1, 2]) AS u(v) WHERE v = 1",
        "SELECT * FROM read_parquet('x.parquet') WHERE id = 1",
        "SELECT 1; SELECT * FROM a WHERE id = 2",
        "FROM a WHERE id = 3",
        "SELECT * FROM a WHERE id = (SELECT max(id) FROM b)",
        "PIVOT a ON x USING sum(id)",
        "SELECT * FROM other.a WHERE id = 1",
    ]
    for sql in queries:
        analysis = analyze(sql, SCHEMAS)
        assert analysis.sql == sql
    positional = analyze("SELECT * FROM a POSITIONAL JOIN b WHERE b.id = 1", SCHEMAS)
    assert all(not columns_of(s.predicate) - {""} or _all_unknown(s) for s in positional.scans)


def _all_unknown(scan: object) -> bool:
    return all(isinstance(leaf, Unknown) for leaf in leaves(scan.predicate))  # type: ignore[attr-defined]


def test_every_reference_to_a_known_table_gets_a_scan() -> None:
    analysis = analyze("PIVOT a ON x USING sum(id)", SCHEMAS)
    assert [s.table for s in analysis.scans] == ["a"]
    (scan,) = analyze("SELECT * FROM main.a WHERE id = 1", SCHEMAS).scans
    assert isinstance(scan.predicate, Unknown), "a schema-qualified name may be the same table"
    (scan,) = analyze("SELECT * FROM query_table('a') WHERE id = 1", SCHEMAS).scans
    assert scan.table == "a" and isinstance(scan.predicate, Unknown)


def test_a_table_pruner_does_not_know_is_left_to_the_engine() -> None:
    """A name outside the tables given (one of the caller's own) gets no scan, and the known
    table beside it still prunes (Analyzer.known_table: None for it, never an error)."""
    (scan,) = analyze("SELECT * FROM a JOIN other o ON a.k = o.k WHERE a.id = 1", SCHEMAS).scans
    assert scan.table == "a" and str(scan.predicate).endswith(" AND id = 1"), scan.predicate


def test_datafusion_right_anti_join_and_quoted_identifiers() -> None:
    sql = "SELECT * FROM a RIGHT ANTI JOIN b ON a.k = b.k AND b.id = 5 AND a.id = 6"
    analysis = analyze(sql, SCHEMAS, "datafusion")
    pruning = {
        s.alias: {str(leaf) for leaf in leaves(s.predicate) if isinstance(leaf, Equals)}
        for s in analysis.scans
    }
    assert pruning == {"a": {"id = 6"}, "b": set()}, "RIGHT ANTI keeps b's unmatched rows"
    quoted = 'SELECT * FROM a "A" CROSS JOIN a WHERE a.id = 3'
    by_alias = {s.alias: s.predicate for s in analyze(quoted, SCHEMAS, "datafusion").scans}
    assert isinstance(by_alias["A"], Unknown), '"A" and a are different tables here'
    assert str(by_alias["a"]) == "id = 3"
    mixed = analyze('SELECT * FROM "Mixed" WHERE "UserId" = 4', SCHEMAS, "datafusion").scans
    assert str(mixed[0].predicate) == "UserId = 4"


def test_sql_nested_beyond_the_parser_reads_its_tables_whole() -> None:
    deep = "(" * 30_000 + "id = 1" + ")" * 30_000  # mypyc's sqlglot follows ~20,000
    (scan,) = analyze(f"SELECT * FROM a WHERE {deep}", SCHEMAS).scans
    assert isinstance(scan.predicate, Unknown), "the engine decides; pruner reads a whole"
    assert "nested too deeply" in scan.predicate.reason


def test_unparsable_sql_names_the_position() -> None:
    with pytest.raises(SqlSyntaxError, match=r"line 1, column \d+"):
        analyze("SELECT * FROM a WHERE (id = ", SCHEMAS)
    with pytest.raises(SqlSyntaxError, match="unknown SQL dialect"):
        analyze("SELECT 1", SCHEMAS, "oracle")


def test_builders_simplify() -> None:
    assert or_(Equals("id", Literal.number("1")), and_()) == and_()
    assert isinstance(and_(IsNull("x"), or_()), type(or_()))


def test_a_union_branch_of_unknown_columns_stops_pushdown() -> None:
    """(b UNION c) may widen v to DOUBLE; then ids near 2**53 compare equal to others."""
    schemas = {**SCHEMAS, "c": pa.schema([("v", pa.float64())])}
    sql = (
        "SELECT * FROM (SELECT id AS v FROM a UNION ALL "
        "(SELECT id AS v FROM b UNION ALL SELECT v FROM c)) u WHERE u.v = 3"
    )
    for scan in analyze(sql, schemas).scans:
        assert not any(isinstance(leaf, Equals) for leaf in leaves(scan.predicate)), scan


def test_two_from_items_with_one_name_prune_nothing() -> None:
    sql = "SELECT * FROM (SELECT id FROM a) x, (SELECT id FROM b) x WHERE x.id = 3"
    for scan in analyze(sql, SCHEMAS).scans:
        assert not any(isinstance(leaf, Equals) for leaf in leaves(scan.predicate)), scan


@pytest.mark.parametrize("dialect", ["duckdb", "spark", "datafusion"])
def test_is_not_null_is_never_is_null_in_any_dialect(dialect: str) -> None:
    """sqlglot's postgres parser (DataFusion's dialect) gives `id IS NOT NULL` as
    Is(negate=True); read as IS NULL it dropped every non-null row (found by the
    differential harness)."""
    for sql in ("SELECT * FROM a WHERE id IS NOT NULL", "SELECT * FROM a WHERE NOT id IS NULL"):
        (scan,) = analyze(sql, SCHEMAS, dialect).scans
        assert scan.predicate == NotNull("id"), (sql, scan.predicate)
    (scan,) = analyze("SELECT * FROM a WHERE x NOT LIKE 'a'", SCHEMAS, dialect).scans
    assert isinstance(scan.predicate, Unknown) and "NOT LIKE" in scan.predicate.sql.upper()


@pytest.mark.parametrize("dialect", ["duckdb", "spark", "datafusion"])
def test_sql_ending_in_an_empty_string_after_a_placeholder_is_read(dialect: str) -> None:
    """sqlglot's postgres tokenizer failed on a ``$n`` followed by SQL ending in ``''``, so
    a query DataFusion answers raised SqlSyntaxError only when pruned (found by make fuzz)."""
    placeholder = "$1" if dialect == "datafusion" else "?"
    sql = f"SELECT * FROM a WHERE id = {placeholder} AND x = ''"
    (scan,) = analyze(sql, SCHEMAS, dialect).scans
    assert str(scan.predicate) == "id = $1 AND x = ''", scan.predicate


@pytest.mark.parametrize(
    ("sql", "inner"),
    [
        ("SELECT * FROM a JOIN b ON a.k = b.k WHERE b.id = 3", True),
        ("SELECT * FROM a, b WHERE a.k = b.k", True),
        ("SELECT * FROM a CROSS JOIN b", True),
        ("SELECT * FROM a JOIN b USING (k)", True),
        ("WITH c AS (SELECT * FROM b) SELECT * FROM a JOIN c ON a.k = c.k", True),
        ("SELECT * FROM (SELECT * FROM a) AS s JOIN b ON s.k = b.k", True),
        ("SELECT k FROM a UNION ALL SELECT k FROM b", True),
        ("SELECT * FROM a WHERE id = 1", True),
        ("SELECT * FROM a LEFT JOIN b ON a.k = b.k", False),
        ("SELECT * FROM a RIGHT JOIN b ON a.k = b.k", False),
        ("SELECT * FROM a FULL JOIN b ON a.k = b.k", False),
        ("SELECT * FROM a JOIN b ON a.k = b.k LEFT JOIN b AS c ON c.k = a.k", False),
        ("SELECT * FROM a RIGHT ANTI JOIN b ON a.k = b.k", False),
        ("SELECT * FROM a LEFT SEMI JOIN b ON a.k = b.k", False),
        ("SELECT * FROM a WHERE k IN (SELECT k FROM b)", False),
        ("SELECT * FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k)", False),
        ("SELECT (SELECT max(k) FROM b) AS m FROM a", False),
        ("SELECT * FROM (SELECT * FROM a WHERE k IN (SELECT k FROM b)) AS s", False),
        ("SELECT k FROM a EXCEPT SELECT k FROM b", False),
        ("SELECT k FROM a INTERSECT SELECT k FROM b", False),
        ("SELECT * FROM a WHERE id = 1; SELECT * FROM a LEFT JOIN b ON a.k = b.k", False),
    ],
)
def test_inner_joins_only(sql: str, inner: bool) -> None:
    """Whether a statement joins by inner joins only, none of them made by the engine from
    a subquery, INTERSECT or EXCEPT: DataFusion's join selection is safe only then."""
    assert analyze(sql, SCHEMAS, "datafusion").inner_joins_only is inner
