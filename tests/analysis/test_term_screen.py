"""The cheap check before any parse (pruner.costs.may_hold_term): a text it says holds no
term a bloom filter can use is read whole without being analysed, so whatever it lets
through must be a text whose analysis finds no such term (else pruning is lost, silently)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pruner.analyzer import analyze
from pruner.costs import may_hold_term, sql_words
from pruner.errors import PrunerError
from pruner.expressions import Equals, In, IsNull, leaves, rewrite_not
from tests.support.differential import COLUMN_TYPES, conditions

SCHEMA = pa.schema(list(COLUMN_TYPES.items()))
DIALECTS = ["duckdb", "datafusion", "spark"]


def _screened(sql: str) -> bool:
    return may_hold_term(sql, sql_words(sql))


def _usable_terms(sql: str, dialect: str) -> list[object]:
    found = []
    for scan in analyze(sql, {"t": SCHEMA}, dialect).scans:
        found += [
            leaf
            for leaf in leaves(rewrite_not(scan.predicate))
            if isinstance(leaf, Equals | In | IsNull)
        ]
    return found


# (condition, what the check says, whether the analysis finds a usable term): where the two
# differ, the check is only cautious (it sends to the analyzer what did not need it)
EXAMPLES = [
    ("i64 IS NOT NULL", False, False),
    ("s LIKE 'a%'", False, False),
    ("i64 > 5 AND s NOT LIKE 'x'", False, False),
    ("b IS NOT UNKNOWN", False, False),
    ("i64 IS DISTINCT FROM 5", False, False),
    ("NOT (s LIKE 'a%') AND NOT (f64 > 1)", False, False),
    ("i64 = 5", True, True),
    ("i64 >= 5 AND i64 <= 5", True, True),
    ("NOT (i64 <> 5)", True, True),
    ("NOT (i64 IS NOT NULL)", True, True),
    ("NOT (i64 NOTNULL)", True, True),
    ("i64 ISNULL", True, True),
    ("b IS UNKNOWN", True, True),
    ("i64 IS NOT NULL AND NOT (s IS NOT NULL)", True, True),
    ("NOT (i64 IS DISTINCT FROM 5)", True, True),
    ("i64 IS NOT DISTINCT FROM 5", True, True),
    ("i64 BETWEEN 5 AND 5", True, True),
    ("i64 IN (5, 6)", True, True),
    ("NOT (i64 > 5) AND s IS NOT NULL", True, False),
    ("i64 IS DISTINCT FROM 5 AND NOT (f64 > 1)", True, False),
    ("s LIKE '=%'", True, False),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("condition, screened, usable", EXAMPLES)
def test_the_check_lets_through_only_texts_without_a_usable_term(
    dialect: str, condition: str, screened: bool, usable: bool
) -> None:
    sql = f"SELECT count(*) FROM t WHERE {condition}"
    assert _screened(sql) is screened
    assert bool(_usable_terms(sql, dialect)) is usable


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_usable_term_passes_the_check(dialect: str, data: st.DataObject) -> None:
    """The differential harness's conditions (every operator pruner reads, NOT, AND, OR,
    ranges, patterns, functions): none the check lets through has a usable term."""
    condition = data.draw(conditions([("", list(COLUMN_TYPES))], dialect))
    sql = f"SELECT count(*) FROM t WHERE {condition}"
    if _screened(sql):
        return
    try:
        found = _usable_terms(sql, dialect)
    except PrunerError:
        return  # the engine refuses it too
    assert not found, (sql, found)
