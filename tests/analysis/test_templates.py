"""The literal-free analysis cache (pruner.analysis.templates): a SQL text answered from a
template, in this process or from a template an earlier one kept (pruner.analysis.stored),
gets exactly the analysis it would get alone, and no template is shared across literal
types, dialects or schemas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pruner.analysis.stored import Store
from pruner.analysis.templates import Templates, template_of
from pruner.analyzer import analyze_uncached

SCHEMAS = (
    (
        "t",
        pa.schema([("i", pa.int64()), ("s", pa.string()), ("f", pa.float64()), ("d", pa.date32())]),
    ),
    ("u", pa.schema([("i", pa.int32()), ("s", pa.string())])),
)
DIALECTS = ("duckdb", "spark", "datafusion")

integers = st.integers(0, 10**12).map(str)
decimals = st.tuples(st.integers(0, 10**6), st.integers(0, 999)).map(lambda p: f"{p[0]}.{p[1]}")
strings = st.text(st.sampled_from("abcXYZ01 %_-"), max_size=6).map(lambda s: f"'{s}'")
literals = st.one_of(integers, decimals, strings)

# A condition's text with {} where literals go, and how many.
SHAPES = [
    ("t.i = {}", 1),
    ("s = {}", 1),
    ("f = {}", 1),
    ("d = {}", 1),
    ("i IN ({}, {}, {})", 3),
    ("s IN ({}, {})", 2),
    ("NOT (i = {})", 1),
    ("(i = {} OR s = {})", 2),
    ("i = {} AND i = {}", 2),
    ("s LIKE {}", 1),
    ("i = {} + 1", 1),
    ("i = CAST({} AS BIGINT)", 1),
    ("s = {} || 'x'", 1),
    ("i = {} OR s IS NULL", 1),
    ("i NOT IN ({}, {})", 2),
    ("{} = i", 1),
    ("{} = s", 1),
    ("({} = i OR {} = s)", 2),
    ("{} + 1 = i", 1),
    ("{} = t.i", 1),
    ("{} = i + 1", 1),
    ("(i = {} /* read by sqlglot's tokenizer */)", 1),
    ("(s IN ({}, {}) /* idem */)", 2),
    ("`i` = {}", 1),
]


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, int]:
    """A query over t (maybe joined to u) with {} placeholders, and their count."""
    picked = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    joiner = draw(st.sampled_from([" AND ", " OR "]))
    condition = joiner.join(f"({text})" if " OR " in text else text for text, _ in picked)
    count = sum(n for _, n in picked)
    form = draw(st.sampled_from(["plain", "join", "limit"]))
    if form == "join":
        sql = "SELECT * FROM t LEFT JOIN u ON t.i = u.i WHERE " + condition.replace("s ", "t.s ")
    elif form == "limit":
        sql = f"SELECT * FROM t WHERE {condition} LIMIT 5"
    else:
        sql = f"SELECT * FROM t WHERE {condition}"
    return sql, count


def _fill(sql: str, values: list[str]) -> str:
    return sql.format(*values)


def _answers_as_alone(sql: str, dialect: str, cache: Templates) -> None:
    """``cache`` analyses ``sql`` exactly as it is alone, or raises what that raises."""
    try:
        expected = analyze_uncached(sql, dialect, SCHEMAS)
    except Exception as err:
        with pytest.raises(type(err)):
            cache.analysis(sql, dialect, SCHEMAS)
        return
    assert cache.analysis(sql, dialect, SCHEMAS) == expected, sql


@settings(max_examples=300, deadline=None)
@given(
    query=queries(),
    dialect=st.sampled_from(DIALECTS),
    data=st.data(),
)
def test_template_answers_as_the_sql_alone(
    query: tuple[str, int], dialect: str, data: st.DataObject
) -> None:
    """Two SQL texts of one shape, each with its own literals (of any class): the second,
    answered through the cache the first filled, is analysed exactly as it is alone."""
    shape, count = query
    first = data.draw(st.lists(literals, min_size=count, max_size=count), label="first")
    second = data.draw(st.lists(literals, min_size=count, max_size=count), label="second")
    cache = Templates(analyze_uncached)
    for values in (first, second):
        _answers_as_alone(_fill(shape, values), dialect, cache)


@settings(max_examples=100, deadline=None)
@given(
    a=st.sampled_from(["7", "7.0", "'7'"]),
    b=st.sampled_from(["7", "7.0", "'7'"]),
    dialects=st.tuples(st.sampled_from(DIALECTS), st.sampled_from(DIALECTS)),
)
def test_no_template_across_literal_types_or_dialects(
    a: str, b: str, dialects: tuple[str, str]
) -> None:
    ta = template_of(f"SELECT * FROM t WHERE i = {a}", dialects[0])
    tb = template_of(f"SELECT * FROM t WHERE i = {b}", dialects[1])
    assert ta is not None and tb is not None
    same_class = (a == b) or {a, b} <= {"7"}
    assert (ta.key == tb.key) == (same_class and dialects[0] == dialects[1])
    # The schemas are part of the cache's key as well.
    cache = Templates(analyze_uncached)
    for sql, dialect in (
        (f"SELECT * FROM t WHERE i = {a}", dialects[0]),
        (f"SELECT * FROM t WHERE i = {b}", dialects[1]),
    ):
        assert cache.analysis(sql, dialect, SCHEMAS) == analyze_uncached(sql, dialect, SCHEMAS)


def test_a_schema_change_is_a_new_template() -> None:
    cache = Templates(analyze_uncached)
    narrow = (("t", pa.schema([("i", pa.int8())])),)
    wide = (("t", pa.schema([("i", pa.string())])),)
    cache.analysis("SELECT * FROM t WHERE i = 1", "duckdb", narrow)
    for schemas in (narrow, wide):
        sql = "SELECT * FROM t WHERE i = 2"
        assert cache.analysis(sql, "duckdb", schemas) == analyze_uncached(sql, "duckdb", schemas)


def test_point_lookups_share_one_template() -> None:
    calls: list[str] = []

    def counting(sql: str, dialect: str, schemas: object) -> object:
        calls.append(sql)
        return analyze_uncached(sql, dialect, schemas)  # type: ignore[arg-type]

    cache = Templates(counting)  # type: ignore[arg-type]
    for key in range(5):
        sql = f"SELECT * FROM t WHERE i = {key} AND s IN ('a{key}', 'b')"
        assert cache.analysis(sql, "duckdb", SCHEMAS) == analyze_uncached(sql, "duckdb", SCHEMAS)
    # The first text and its sentinel twin were analysed; the other four came from the
    # template.
    assert len(calls) == 2
    assert "900000001" in calls[1]


def test_a_literal_left_of_its_column_is_a_slot_where_the_comparison_is_a_condition() -> None:
    def slots(sql: str) -> list[str]:
        found = template_of(sql, "duckdb")
        return [] if found is None else [value.text for value in found.values]

    assert slots("SELECT * FROM t WHERE 7 = i AND (8 = s OR s = '9') LIMIT 2") == ["7", "8", "9"]
    for sql in (
        "SELECT * FROM t WHERE x + 7 = i",  # the literal is part of an expression
        "SELECT * FROM t WHERE 7 = i + 1",  # so is the column
        "SELECT * FROM t WHERE 7 = t.i",  # a qualified column: not read as one
        "SELECT * FROM t WHERE 7 = f(i)",
        "SELECT 7 = i FROM t",  # not a condition
    ):
        assert slots(sql) == [], sql
    cache = Templates(analyze_uncached)
    for key in range(3):
        sql = f"SELECT * FROM t WHERE {key} = i"
        assert cache.analysis(sql, "duckdb", SCHEMAS) == analyze_uncached(sql, "duckdb", SCHEMAS)
    assert len(cache._known) == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE i = 1 AND i = 2",  # contradiction: no leaf keeps a literal
        "SELECT * FROM t WHERE s LIKE 'abc'",  # not a slot
        "SELECT * FROM t WHERE i = 900000001",  # holds a sentinel
        "SELECT * FROM t WHERE zz = 5",  # unknown column: the literal is in the reason
    ],
)
def test_value_dependent_analyses_are_not_templated(sql: str) -> None:
    cache = Templates(analyze_uncached)
    cache.analysis(sql, "duckdb", SCHEMAS)
    other = sql.replace("1", "3").replace("2", "4").replace("abc", "a%").replace("5", "6")
    assert cache.analysis(other, "duckdb", SCHEMAS) == analyze_uncached(other, "duckdb", SCHEMAS)


@settings(max_examples=200, deadline=None)
@given(
    query=queries(),
    dialect=st.sampled_from(DIALECTS),
    data=st.data(),
)
def test_a_later_process_answers_from_the_kept_template_as_the_sql_alone(
    query: tuple[str, int], dialect: str, data: st.DataObject
) -> None:
    """What one process learned and kept in a folder (pruner.analysis.stored), a later one
    (a new cache over the same folder) uses for a text of the same shape with other literals:
    its analysis is exactly the text's alone."""
    shape, count = query
    first = data.draw(st.lists(literals, min_size=count, max_size=count), label="first")
    second = data.draw(st.lists(literals, min_size=count, max_size=count), label="second")
    with tempfile.TemporaryDirectory() as folder:
        for values in (first, second):
            cache = Templates(analyze_uncached)  # a new process's
            cache.store = Store(Path(folder))
            _answers_as_alone(_fill(shape, values), dialect, cache)


def test_a_new_process_templates_text_only_sqlglot_s_tokenizer_reads() -> None:
    """The first text of a process, before anything parsed (so before sqlglot or pruner's
    DuckDB dialect were imported), is templated by sqlglot's tokenizer where the plain
    reader refuses it (a comment), in every dialect."""
    code = (
        "import json, sys\n"
        "from pruner.analysis.templates import template_of\n"
        "assert 'sqlglot' not in sys.modules\n"
        "print(json.dumps([template_of(sys.argv[1], d) is not None for d in sys.argv[2:]]))\n"
    )
    sql = "SELECT * FROM t WHERE i = 5 /* a comment */"
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", code, sql, *DIALECTS],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True] * len(DIALECTS)
