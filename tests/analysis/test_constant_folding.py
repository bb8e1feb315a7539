"""Constants the engines fold before they probe, folded by pruner to the value the engine
computes, each judged by the engine itself; and what pruner leaves unproven.

DuckDB's own Parquet bloom filter tests (test/sql/copy/parquet/bloom_filters.test) rule row
groups out for ``dt = DATE '2000-01-01' + 1001``, ``ts = TIMESTAMP '2000-01-01' + INTERVAL
1001 SECOND``, ``r BETWEEN 201 AND 201``, ``r >= 201 AND r <= 201``, ``tm_tz = TIMETZ
'12:16:41+02'`` and ``b = '\\xAA'::BLOB``: DuckDB folds the constant (or reduces the range)
first. pruner read them all as "cannot tell" and read every row group. Now it folds each one
it can fold exactly, with the rules of the query's engine (DuckDB's DATE + INTERVAL is a
TIMESTAMP, DataFusion's a DATE that drops any part of a day; DuckDB unescapes ``\\xAA`` in a
BLOB cast, DataFusion keeps the four characters; Spark computes a TIMESTAMP + INTERVAL in
its session time zone), and leaves the rest unproven: a selection too wide, never too
narrow.

* The golden table says, per dialect, what each expression folds to or that it stays
  unproven; every fold is then checked against ``SELECT <expr>`` on DuckDB and DataFusion
  (Spark: a slow test), and hypothesis draws more dates, timestamps, intervals and strings.
* ``x BETWEEN c AND c``, ``x >= c AND x <= c`` and ``greatest(x, x) = c`` are read as ``x =
  c``: over the whole literal matrix of test_literal_matrix.py, every row DuckDB matches with
  them is a row pruner's coercion of ``c`` probes.
* End to end, on Parquet files pyarrow wrote with bloom filters: each fold now prunes row
  groups (``pruner.explain``), and ``pruner.query`` answers as the engine alone on DuckDB
  and DataFusion; each refused case (and the list and struct leaves pruner does not probe)
  selects every row group and answers the same.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pruner
from pruner.analysis.conditions import constant_from_sql
from pruner.analysis.parsing import DIALECTS
from pruner.analyzer import analyze
from pruner.errors import SqlSyntaxError
from pruner.expressions import Equals, Literal, Unknown, leaves
from pruner.literals import coerce
from tests.analysis.test_literal_matrix import LITERALS, SAMPLES, _check, _duckdb
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

ENGINES = ("duckdb", "datafusion")


def folded(expression: str, dialect: str) -> Literal | None:
    """What pruner folds ``expression`` to in ``dialect`` (None: unproven, or SQL the
    dialect does not parse)."""
    try:
        node = sqlglot.parse_one(f"SELECT {expression}", read=DIALECTS[dialect])
    except sqlglot.errors.ParseError:
        return None
    return constant_from_sql(node.expressions[0], dialect)


_DATAFUSION = datafusion.SessionContext()
_DUCKDB = duckdb.connect()
_DUCKDB.execute("SET TimeZone = 'UTC'")


def engine_value(engine: str, expression: str) -> pa.Scalar | None:
    """``SELECT <expression>`` on ``engine`` alone, as an Arrow scalar of the engine's
    result type; None when the engine refuses it."""
    sql = f"SELECT {expression} AS v"
    try:
        if engine == "duckdb":
            table = _DUCKDB.sql(sql).to_arrow_table()
        else:
            table = _DATAFUSION.sql(sql).to_arrow_table()
    except Exception:  # the engine's own refusal, whatever its class
        return None
    return table.column(0)[0]


def _plain(scalar: pa.Scalar) -> Any:
    """The scalar as pruner's coercion spells a column value: a timestamp or time as its
    count of the type's unit, anything else as Python's value."""
    if pa.types.is_timestamp(scalar.type) or pa.types.is_time(scalar.type):
        return scalar.value
    return scalar.as_py()


def assert_same_value(expression: str, engine: str, literal: Literal) -> None:
    """The value pruner folded equals the engine's, at the engine's result type."""
    value = engine_value(engine, expression)
    assert value is not None, f"{engine} refuses {expression}, which pruner folds"
    coerced = coerce(literal, value.type, engine)
    assert coerced.values == [_plain(value)], (
        f"{engine}: {expression} is {value} ({value.type}), pruner folds it to {literal} "
        f"({coerced.values}, {coerced.reason})"
    )


# ------------------------------------------------------------------------------ golden

D = "CAST('{}' AS DATE)"
TS = "CAST('{}' AS TIMESTAMP)"
NS = "CAST('{}' AS TIMESTAMP_NS)"

# expression -> what it folds to on (duckdb, datafusion, spark); None: stays unproven.
GOLDEN: dict[str, tuple[str | None, str | None, str | None]] = {
    # DATE +/- integer: a DATE everywhere (DuckDB's bloom filter test's case first).
    "DATE '2000-01-01' + 1001": (D.format("2002-09-28"),) * 3,
    "1001 + DATE '2000-01-01'": (D.format("2002-09-28"),) * 3,
    "DATE '2000-01-01' - 1001": (D.format("1997-04-05"),) * 3,
    "DATE '2000-01-01' + -5": (D.format("1999-12-27"),) * 3,
    "(DATE '2000-01-01' + 1) + 2": (D.format("2000-01-04"),) * 3,
    "DATE '2000-02-28' + 1": (D.format("2000-02-29"),) * 3,
    "DATE '1900-02-28' + 1": (D.format("1900-03-01"),) * 3,
    # a BIGINT number of days: DuckDB and Spark refuse it, DataFusion's is out of range
    "DATE '2000-01-01' + 2147483648": (None, None, None),
    "DATE '2000-01-01' + 1.5": (None, None, None),
    "DATE '2000-01-01' + '5'": (None, None, None),
    "DATE '9999-12-31' + 1": (None, None, None),  # past the dates pruner folds
    # DATE +/- INTERVAL: DuckDB's is a TIMESTAMP, DataFusion's and Spark's a DATE.
    "DATE '2000-01-01' + INTERVAL '1000' DAY": (
        TS.format("2002-09-27 00:00:00"),
        D.format("2002-09-27"),
        D.format("2002-09-27"),
    ),
    "INTERVAL '1' DAY + DATE '2000-01-01'": (
        TS.format("2000-01-02 00:00:00"),
        D.format("2000-01-02"),
        D.format("2000-01-02"),
    ),
    "DATE '2000-01-01' + INTERVAL '-3' DAY": (
        TS.format("1999-12-29 00:00:00"),
        D.format("1999-12-29"),
        D.format("1999-12-29"),
    ),
    "DATE '2000-01-01' + INTERVAL '3 days'": (
        TS.format("2000-01-04 00:00:00"),
        D.format("2000-01-04"),
        D.format("2000-01-04"),
    ),
    "DATE '2000-01-31' + INTERVAL '1' MONTH": (  # the month's last day
        TS.format("2000-02-29 00:00:00"),
        D.format("2000-02-29"),
        D.format("2000-02-29"),
    ),
    "DATE '2000-03-31' - INTERVAL '1' MONTH": (
        TS.format("2000-02-29 00:00:00"),
        D.format("2000-02-29"),
        D.format("2000-02-29"),
    ),
    "DATE '2000-01-31' + INTERVAL '13' MONTH": (
        TS.format("2001-02-28 00:00:00"),
        D.format("2001-02-28"),
        D.format("2001-02-28"),
    ),
    "DATE '2000-02-29' + INTERVAL '1' YEAR": (
        TS.format("2001-02-28 00:00:00"),
        D.format("2001-02-28"),
        D.format("2001-02-28"),
    ),
    "DATE '2000-01-01' + INTERVAL '2' WEEK": (
        TS.format("2000-01-15 00:00:00"),
        D.format("2000-01-15"),
        D.format("2000-01-15"),
    ),
    "DATE '2000-01-01' + INTERVAL '2 weeks'": (
        TS.format("2000-01-15 00:00:00"),
        D.format("2000-01-15"),
        D.format("2000-01-15"),
    ),
    # Part of a day: DuckDB's TIMESTAMP keeps it, DataFusion drops it from its DATE, Spark
    # gives a TIMESTAMP in its session time zone.
    "DATE '2000-01-01' + INTERVAL '25' HOUR": (TS.format("2000-01-02 01:00:00"), None, None),
    "DATE '2000-01-01' - INTERVAL '1' SECOND": (TS.format("1999-12-31 23:59:59"), None, None),
    # TIMESTAMP +/- INTERVAL: zone-less only, and not on Spark (its TIMESTAMP is zoned).
    "TIMESTAMP '2000-01-01' + INTERVAL '1001' SECOND": (
        TS.format("2000-01-01 00:16:41"),
        TS.format("2000-01-01 00:16:41"),
        None,
    ),
    "INTERVAL '1' SECOND + TIMESTAMP '2000-01-01'": (
        TS.format("2000-01-01 00:00:01"),
        TS.format("2000-01-01 00:00:01"),
        None,
    ),
    "TIMESTAMP '2000-01-01' - INTERVAL '1001' HOUR": (
        TS.format("1999-11-20 07:00:00"),
        TS.format("1999-11-20 07:00:00"),
        None,
    ),
    "TIMESTAMP '2000-01-31 10:00:00' + INTERVAL '1' MONTH": (
        TS.format("2000-02-29 10:00:00"),
        TS.format("2000-02-29 10:00:00"),
        None,
    ),
    "TIMESTAMP '2000-01-01' + INTERVAL '1001' MILLISECOND": (
        TS.format("2000-01-01 00:00:01.001"),
        TS.format("2000-01-01 00:00:01.001"),
        None,
    ),
    "TIMESTAMP '2000-01-01' + INTERVAL '1001 microseconds'": (
        TS.format("2000-01-01 00:00:00.001001"),
        TS.format("2000-01-01 00:00:00.001001"),
        None,
    ),
    "TIMESTAMP '2000-01-01' + INTERVAL '5' MINUTE": (
        TS.format("2000-01-01 00:05:00"),
        TS.format("2000-01-01 00:05:00"),
        None,
    ),
    "TIMESTAMP '2024-02-29 23:59:59.5' + INTERVAL '1' YEAR": (
        TS.format("2025-02-28 23:59:59.5"),
        TS.format("2025-02-28 23:59:59.5"),
        None,
    ),
    "TIMESTAMP '2000-01-01' + INTERVAL '1' DAY + INTERVAL '1' SECOND": (
        TS.format("2000-01-02 00:00:01"),
        TS.format("2000-01-02 00:00:01"),
        None,
    ),
    # DuckDB's TIMESTAMP holds microseconds (it cuts the nanosecond first); DataFusion's
    # nanoseconds.
    "TIMESTAMP '2000-01-01 00:00:00.123456789' + INTERVAL '1' SECOND": (
        None,
        TS.format("2000-01-01 00:00:01.123456789"),
        None,
    ),
    # DataFusion's nanoseconds end in 2262.
    "TIMESTAMP '2262-04-11 23:47:16' + INTERVAL '1' SECOND": (
        TS.format("2262-04-11 23:47:17"),
        None,
        None,
    ),
    # DuckDB's other timestamp types (the bloom filter test's ts_sec, ts_ms, ts_ns).
    "TIMESTAMP_S '2000-01-01' + INTERVAL 1001 SECOND": (
        TS.format("2000-01-01 00:16:41"),
        None,
        None,
    ),
    "TIMESTAMP_MS '2000-01-01 00:00:00.123' + INTERVAL 1 MICROSECOND": (
        TS.format("2000-01-01 00:00:00.123001"),
        None,
        None,
    ),
    "TIMESTAMP_NS '2000-01-01' + INTERVAL 1001 SECOND": (
        NS.format("2000-01-01 00:16:41"),
        None,
        None,
    ),
    "TIMESTAMP_S '2000-01-01 00:00:00.5' + INTERVAL 1 SECOND": (None, None, None),
    # Session time zone, or forms pruner does not read: unproven everywhere.
    "(TIMESTAMP '2000-01-01' + INTERVAL '1001' SECOND)::TIMESTAMPTZ": (None, None, None),
    "TIMESTAMPTZ '2000-01-01 00:00:00+00' + INTERVAL '1' DAY": (None, None, None),
    "TIMESTAMP '2000-01-01' + INTERVAL '1 day 2 hours'": (None, None, None),
    "TIMESTAMP '2000-01-01' + INTERVAL '1.5' SECOND": (None, None, None),
    "TIMESTAMP '2000-01-01' + INTERVAL '1' QUARTER": (None, None, None),
    "INTERVAL '1' DAY - DATE '2000-01-01'": (None, None, None),
    "TIMESTAMP '2000-01-01' + 1": (None, None, None),
    "'2000-01-01' + INTERVAL '1' DAY": (None, None, None),
    "1 + 2": (None, None, None),
}


@pytest.mark.parametrize("expression", sorted(GOLDEN))
def test_golden_folds(expression: str) -> None:
    """What each expression folds to, per dialect, or that it stays unproven."""
    for dialect, expected in zip(
        ("duckdb", "datafusion", "spark"), GOLDEN[expression], strict=True
    ):
        got = folded(expression, dialect)
        assert (None if got is None else str(got)) == expected, (dialect, expression, got)


@pytest.mark.parametrize("expression", sorted(GOLDEN))
def test_what_is_not_folded_leaves_its_term_unknown(expression: str) -> None:
    """Where an expression stays unproven in a dialect, ``c = <expr>`` and ``c IN (<expr>)``
    are UNKNOWN terms there: they select every row, whatever the engine computes."""
    schema = pa.schema([("c", pa.timestamp("us")), ("d", pa.date32())])
    for dialect, expected in zip(
        ("duckdb", "datafusion", "spark"), GOLDEN[expression], strict=True
    ):
        if expected is not None:
            continue
        for condition in (f"c = {expression}", f"d IN ({expression}, DATE '2000-01-01')"):
            try:
                analysis = analyze(f"SELECT * FROM t WHERE {condition}", {"t": schema}, dialect)
            except SqlSyntaxError:
                continue  # not SQL of that dialect
            predicate = analysis.scans[0].predicate
            assert isinstance(predicate, Unknown), (dialect, condition, str(predicate))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("expression", sorted(GOLDEN))
def test_folds_equal_the_engine(expression: str, engine: str) -> None:
    """Every value pruner folds is the value the engine computes, at the engine's type."""
    literal = folded(expression, engine)
    if literal is None:
        return
    assert_same_value(expression, engine, literal)


# ------------------------------------------------------------------ drawn by hypothesis

days = st.integers(-(2**31) - 5, 2**31 + 5) | st.integers(-800_000, 800_000)
dates = st.dates(dt.date(1800, 1, 1), dt.date(2200, 12, 31))
units = st.sampled_from(
    [
        "YEAR",
        "MONTH",
        "WEEK",
        "DAY",
        "HOUR",
        "MINUTE",
        "SECOND",
        "MILLISECOND",
        "MICROSECOND",
        "DAYS",
        "HOURS",
        "SECONDS",
        "MONTHS",
    ]
)
amounts = st.integers(-3000, 3000) | st.integers(-(10**7), 10**7)
stamps = st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2300, 12, 31))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=dates, count=days, operator=st.sampled_from(["+", "-", "commuted"]))
def test_drawn_dates_plus_days_equal_the_engines(start: dt.date, count: int, operator: str) -> None:
    """``DATE 'd' + n``, ``DATE 'd' - n`` and ``n + DATE 'd'``: wherever pruner folds, the
    engine computes the same DATE."""
    number = str(count) if count >= 0 else f"({count})"
    base = f"DATE '{start.isoformat()}'"
    expression = {
        "+": f"{base} + {number}",
        "-": f"{base} - {number}",
        "commuted": f"{number} + {base}",
    }[operator]
    for engine in ENGINES:
        literal = folded(expression, engine)
        if literal is not None:
            assert_same_value(expression, engine, literal)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stamp=stamps,
    date_only=st.booleans(),
    amount=amounts,
    unit=units,
    subtract=st.booleans(),
)
def test_drawn_interval_arithmetic_equals_the_engines(
    stamp: dt.datetime, date_only: bool, amount: int, unit: str, subtract: bool
) -> None:
    """``DATE / TIMESTAMP 'x' +/- INTERVAL 'n' unit``: wherever pruner folds, the engine
    computes the same value (DuckDB's TIMESTAMP, DataFusion's DATE or nanosecond
    TIMESTAMP), month ends and leap days included."""
    base = (
        f"DATE '{stamp.date().isoformat()}'"
        if date_only
        else f"TIMESTAMP '{stamp.isoformat(sep=' ')}'"
    )
    expression = f"{base} {'-' if subtract else '+'} INTERVAL '{amount}' {unit}"
    for engine in ENGINES:
        literal = folded(expression, engine)
        if literal is not None:
            assert_same_value(expression, engine, literal)


BLOB_PIECES = [
    "a",
    "Z",
    "0",
    "9",
    "\\",
    "\\x",
    "x",
    "X",
    "A",
    "F",
    "f",
    "g",
    "ü",
    " ",
    "'",
    "\\xAA",
]
BLOB_TEXT = st.lists(st.sampled_from(BLOB_PIECES), max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=BLOB_TEXT)
def test_blob_strings_equal_the_engines_bytes(text: str) -> None:
    """``CAST('<text>' AS BYTEA)`` on a binary column: pruner's bytes are the engine's.
    DuckDB's rules (``\\xHH`` a byte, any other backslash or non-ASCII text an error) are
    followed exactly: pruner refuses exactly the strings DuckDB refuses. DataFusion casts
    any text to its UTF-8 bytes."""
    quoted = "'" + text.replace("'", "''") + "'"
    expression = f"CAST({quoted} AS BYTEA)"
    for engine in ENGINES:
        literal = folded(expression, engine)
        assert literal is not None, expression
        value = engine_value(engine, expression)
        for kind in (pa.binary(), pa.large_binary()):
            coerced = coerce(literal, kind, engine)
            if value is None:
                assert coerced.values is None, f"{engine} refuses {expression}"
            else:
                assert coerced.values == [value.as_py()], (engine, expression, value)
        # A plain string compared with a binary column is cast the same way.
        plain = coerce(Literal.string(text), pa.binary(), engine)
        assert plain.values == (None if value is None else [value.as_py()]), (engine, text)


# text -> the bytes ``CAST('<text>' AS BLOB)`` is on (duckdb, datafusion, spark); None:
# unproven (DuckDB raises on \XAA, \x4 and ü; on Spark only ASCII text without a backslash
# is certain, its parser unescapes backslashes its own way).
BLOB_BYTES: dict[str, tuple[bytes | None, bytes | None, bytes | None]] = {
    "abc": (b"abc", b"abc", b"abc"),
    "": (b"", b"", b""),
    "\\xAA": (b"\xaa", b"\\xAA", None),
    "a\\x41b\\x00\\xff": (b"aAb\x00\xff", b"a\\x41b\\x00\\xff", None),
    "\\XAA": (None, b"\\XAA", None),
    "\\x4": (None, b"\\x4", None),
    "ü": (None, "ü".encode(), None),
}


@pytest.mark.parametrize("text", sorted(BLOB_BYTES))
def test_blob_bytes_per_dialect(text: str) -> None:
    """The bytes a string cast to BLOB (or compared with a binary column) probes, per
    dialect; each engine's own bytes are checked in the test above."""
    for dialect, expected in zip(("duckdb", "datafusion", "spark"), BLOB_BYTES[text], strict=True):
        for literal in (Literal("string", text, cast="VARBINARY"), Literal.string(text)):
            got = coerce(literal, pa.binary(), dialect).values
            assert got == (None if expected is None else [expected]), (dialect, literal)


# ----------------------------------------------------------------------------- TIMETZ

TIMETZ_SPELLINGS = [
    "12:16:41+02",
    "12:16:41+02:00",
    "12:16:41-05:30",
    "12:16:41+05:30:10",
    "12:16:41.123456+02",
    "12:16:41.5-01",
    "12:16:41",
    "00:00:00+00",
    "23:59:59+15:59",
    "10:16:41+00",
    # forms pruner does not read (DuckDB reads some, errs on others): unproven
    "12:16:41+0200",
    "12:16:41 +02",
    "12:16:41Z",
    "12:16+02",
    "12:16:41+16",
    "24:00:00+00",
    "12:16:41.1234567+02",
]
TIME_SAMPLES = [
    dt.time(10, 16, 41),
    dt.time(12, 16, 41),
    dt.time(12, 16, 41, 123456),
    dt.time(12, 16, 41, 500000),
    dt.time(6, 46, 41),
    dt.time(0, 0),
    dt.time(23, 59, 59),
]
READERS = {  # how DuckDB reads a Parquet TIME: as TIME, or as TIMETZ at +00 (adjusted to UTC)
    "TIME": "t",
    "TIMETZ": "CAST(CAST(t AS VARCHAR) || '+00' AS TIMETZ)",
}


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_timetz_literals_probe_what_duckdb_matches(zone: str) -> None:
    """``tm = TIMETZ '...'`` on a TIME column and on a TIMETZ one at offset +00 (how DuckDB
    reads a Parquet TIME adjusted to UTC; pyarrow gives both as time64), in several session
    time zones: every sample DuckDB matches is the value pruner probes (the literal's clock
    reading); pruner folds the forms DuckDB reads, and only those."""
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{zone}'")
    times = pa.table({"t": pa.array(TIME_SAMPLES, pa.time64("us")), "i": range(len(TIME_SAMPLES))})
    con.register("times", times)
    folded_any = 0
    for spelling in TIMETZ_SPELLINGS:
        literal = folded(f"TIMETZ '{spelling}'", "duckdb")
        assert literal is not None
        coerced = coerce(literal, pa.time64("us"), "duckdb")
        try:
            clock = con.sql(f"SELECT CAST(TIMETZ '{spelling}' AS TIME)").fetchall()[0][0]
        except duckdb.Error:
            assert coerced.values is None, f"DuckDB refuses {spelling}, pruner probes it"
            continue
        if coerced.values is None:
            continue  # unproven: prunes nothing
        folded_any += 1
        assert coerced.values == [pa.scalar(clock, pa.time64("us")).value], spelling
        for reader, column in READERS.items():
            matched = con.sql(
                f"SELECT i FROM times WHERE {column} = TIMETZ '{spelling}'"
            ).fetchall()
            for (position,) in matched:
                value = pa.scalar(TIME_SAMPLES[position], pa.time64("us")).value
                assert value in coerced.values, (reader, spelling, TIME_SAMPLES[position])
    assert folded_any >= 8
    for dialect in ("datafusion", "spark"):  # no TIME WITH TIME ZONE there
        literal = folded("TIMETZ '12:16:41+02'", dialect)
        assert literal is None or coerce(literal, pa.time64("us"), dialect).values is None


# ---------------------------------------------------------- BETWEEN c AND c, greatest(x, x)


@pytest.mark.parametrize(
    ("spelling", "rows", "zones"),
    [
        ("10:16:40+00", 4, 1),  # stored: the value is at +00
        ("10:16:40", 4, 1),  # the session's offset, UTC here
        ("12:16:40+02", 0, 0),  # the same instant at another offset: DuckDB matches none
        ("12:16:41+02", 0, 0),  # DuckDB's bloom filter test's absent value
        ("10:00:00-05", 0, 1),  # a clock reading the file holds: its row group is read
    ],
)
def test_timetz_on_a_column_duckdb_wrote(
    tmp_path: Path, spelling: str, rows: int, zones: int
) -> None:
    """DuckDB's own case: a TIME WITH TIME ZONE column DuckDB wrote (stored adjusted to UTC,
    with bloom filters; pyarrow reads it as time64). pruner probes the literal's clock
    reading (1 of the 4 row groups where it is stored, none where it is absent), and the
    answer is DuckDB's alone."""
    root = tmp_path / "t"
    root.mkdir()
    duckdb.connect().execute(
        "COPY (SELECT (TIMETZ '12:00:00+02' + (2 * (i // 4)) * INTERVAL 1 SECOND)::TIMETZ "
        f"AS tm_tz, i FROM range(8192) t(i)) TO '{root / 'part-0.parquet'}' (FORMAT PARQUET, "
        "ROW_GROUP_SIZE 2048, DICTIONARY_SIZE_LIMIT 4096, BLOOM_FILTER_FALSE_POSITIVE_RATIO 0.0001)"
    )
    sql = f"SELECT i FROM t WHERE tm_tz = TIMETZ '{spelling}'"
    expected = engine_alone("duckdb", sql, {"t": root})
    assert expected.num_rows == rows
    assert multiset(pruner.query(sql, {"t": root}, engine="duckdb")) == multiset(expected)
    (scan,) = pruner.explain(sql, {"t": root}).scans
    assert scan.zones_total == 4
    assert scan.zones_selected == zones, scan.terms


FORMS = {
    "between": "c BETWEEN {0} AND {0}",
    "bounds": "c >= {0} AND c <= {0}",
    "bounds reversed": "{0} >= c AND {0} <= c",
    "greatest": "greatest(c, c) = {0}",
    "least": "least(c, c, c) = {0}",
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("column", sorted(SAMPLES))
def test_identities_never_exclude_a_row_duckdb_matches(column: str, form: str) -> None:
    """``c BETWEEN v AND v``, ``c >= v AND c <= v`` (either way round) and ``greatest(c, c)
    = v`` are read as ``c = v``, over every column type and literal spelling of the literal
    matrix: each sample DuckDB matches with the form itself is a value pruner probes (or
    pruner cannot tell), and "no match" only where DuckDB matches none."""
    arrow_type = SAMPLES[column][0]
    schema = pa.schema([("c", arrow_type)])
    read = 0
    for text in LITERALS:
        condition = FORMS[form].format(text)
        matched = _duckdb(column, condition, [])
        if matched is None:
            continue
        analysis = analyze(f"SELECT * FROM t WHERE {condition}", {"t": schema})
        equalities = [
            leaf for leaf in leaves(analysis.scans[0].predicate) if isinstance(leaf, Equals)
        ]
        if not equalities:
            continue  # read as unknown: selects everything
        (leaf,) = equalities
        assert leaf.column == "c" and not leaf.null_safe
        _check(column, condition, coerce(leaf.value, arrow_type, "duckdb"), matched)
        read += 1
    assert read >= 20, column


@pytest.mark.parametrize(
    ("condition", "reading"),
    [
        ("r BETWEEN 201 AND 201", "r = 201"),
        ("r NOT BETWEEN 201 AND 201", "r != 201"),
        ("r BETWEEN 201 AND 202", "UNKNOWN(r BETWEEN 201 AND 202)"),
        ("r BETWEEN 201 AND 201.0", "UNKNOWN(r BETWEEN 201 AND 201.0)"),
        ("r BETWEEN $1 AND $1", "r = $1"),
        ("r BETWEEN ? AND ?", "UNKNOWN(r BETWEEN $__pruner_parameter_0 AND $__pruner_parameter_1)"),
        ("r >= 201 AND r <= 201", "UNKNOWN(r >= 201) AND UNKNOWN(r <= 201) AND r = 201"),
        ("r > 201 AND r <= 201", "UNKNOWN(r > 201) AND UNKNOWN(r <= 201)"),
        ("r >= 201 OR r <= 201", "UNKNOWN(r >= 201) OR UNKNOWN(r <= 201)"),
        ("greatest(r, r) = 201", "r = 201"),
        ("least(r, r) IS NULL", "r IS NULL"),
        ("greatest(r, CAST(r AS BIGINT)) IN (1, 2)", "r IN (1, 2)"),
        ("greatest(r, 201) = 201", "UNKNOWN(GREATEST(r, 201) = 201)"),
        ("greatest(r, i) = 201", "UNKNOWN(GREATEST(r, i) = 201)"),
        ("greatest(r, CAST(r AS TINYINT)) = 201", "UNKNOWN(GREATEST(r, CAST(r AS TINYINT)) = 201)"),
    ],
)
def test_identity_readings(condition: str, reading: str) -> None:
    """How the identities read, and what stays a range or an expression: a NOT BETWEEN c AND
    c is ``!=`` (which selects everything), two different parameters are not one value, and a
    lossy cast or another column inside greatest is not the column."""
    schema = pa.schema([("r", pa.int64()), ("i", pa.int64())])
    analysis = analyze(f"SELECT * FROM t WHERE {condition}", {"t": schema})
    assert str(analysis.scans[0].predicate) == reading


# -------------------------------------------------------------------------- end to end

ROWS, GROUP = 8192, 1024
INDEXED = ("r", "dt", "ts", "ts_ms", "ts_ns", "tm", "b", "s")
EPOCH = dt.datetime(2000, 1, 1)


def _table() -> pa.Table:
    """8 row groups of 1,024 rows; ``v`` runs over the even numbers 0..4094, four rows
    each, in order (row group g holds 512 g .. 512 g + 510), and every column is a function
    of it: ``dt`` 2000-01-01 + v days, the timestamps 2000-01-01 + v seconds, ``tm`` v
    seconds past midnight. ``b`` holds the bytes 0xAA where v = 100 (row group 0) and the
    four bytes ``\\xAA`` where v = 3000 (row group 5): what DuckDB's and DataFusion's
    ``CAST('\\xAA' AS BYTEA)`` mean."""
    values = [2 * (i // 4) for i in range(ROWS)]
    blobs = [
        b"\xaa" if v == 100 else b"\\xAA" if v == 3000 else f"blob_{v}".encode() for v in values
    ]
    stamps = [EPOCH + dt.timedelta(seconds=v) for v in values]
    return pa.table(
        {
            "r": pa.array(values, pa.int64()),
            "dt": pa.array([(EPOCH + dt.timedelta(days=v)).date() for v in values], pa.date32()),
            "ts": pa.array(stamps, pa.timestamp("us")),
            "ts_ms": pa.array(stamps, pa.timestamp("ms")),
            "ts_ns": pa.array(stamps, pa.timestamp("ns")),
            "tm": pa.array(
                [(EPOCH + dt.timedelta(seconds=v)).time() for v in values], pa.time64("us")
            ),
            "b": pa.array(blobs, pa.binary()),
            "s": pa.array([f"s_{v}" for v in values]),
            "lst": pa.array([[v, v + 2] for v in values], pa.list_(pa.int64())),
            "st": pa.array([{"a": v} for v in values], pa.struct([("a", pa.int64())])),
        }
    )


@pytest.fixture(scope="module")
def bloom_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folding") / "t"
    root.mkdir()
    options = {column: {"ndv": 600, "fpp": 0.01} for column in INDEXED}
    pq.write_table(
        _table(), root / "part-0.parquet", row_group_size=GROUP, bloom_filter_options=options
    )
    return root


# (condition, engines): each folds, probes the files' own filters and prunes there.
PRUNED = [
    ("dt = DATE '2000-01-01' + 1000", ENGINES),
    ("dt = DATE '2000-01-01' + 1001", ENGINES),  # absent: odd
    ("dt = 1000 + DATE '2000-01-01'", ENGINES),
    ("dt IN (DATE '2000-01-01' - 2, DATE '2005-01-01' - 1000)", ENGINES),
    ("dt = DATE '2000-01-01' + INTERVAL '1000' DAY", ENGINES),  # DuckDB: a TIMESTAMP
    ("dt BETWEEN DATE '2000-01-01' + 1000 AND DATE '2000-01-01' + 1000", ENGINES),
    ("ts = TIMESTAMP '2000-01-01' + INTERVAL '1000' SECOND", ENGINES),
    ("ts = INTERVAL '1001' SECOND + TIMESTAMP '2000-01-01'", ENGINES),
    ("ts_ms = TIMESTAMP '2000-01-01' + INTERVAL '3000' SECOND", ENGINES),
    ("ts_ns = TIMESTAMP '2000-01-01' + INTERVAL '1000' SECOND", ENGINES),
    ("ts = TIMESTAMP '2000-01-02' - INTERVAL '1' DAY + INTERVAL '4000' SECOND", ENGINES),
    ("r BETWEEN 200 AND 200", ENGINES),
    ("r >= 200 AND r <= 200", ENGINES),
    ("200 <= r AND r <= 200", ENGINES),
    ("greatest(r, r) = 200", ENGINES),
    ("least(r, r) IN (200, 4000)", ENGINES),
    ("b = CAST('\\xAA' AS BYTEA)", ENGINES),  # 0xAA on DuckDB, the 4 characters on DataFusion
    ("b = '\\xAA'", ENGINES),  # a string meets a binary column cast as by CAST
    ("b IN ('blob_2', 'blob_4000')", ENGINES),
    ("b = '\\xAA'::BLOB", ("duckdb",)),
    ("b = CAST('blob_2' AS BLOB)", ("duckdb",)),
    ("tm = TIMETZ '00:16:40+02'", ("duckdb",)),
    ("ts_ns = TIMESTAMP_NS '2000-01-01' + INTERVAL 1000 SECOND", ("duckdb",)),
    ("ts_ms = TIMESTAMP_MS '2000-01-01' + INTERVAL 1002 SECOND", ("duckdb",)),
    # DuckDB's DATE + INTERVAL is the TIMESTAMP 00:16:40 (DataFusion's: below)
    ("ts = DATE '2000-01-01' + INTERVAL '1000' SECOND", ("duckdb",)),
]

# (condition, engines): unproven, so every row group is read.
UNPROVEN = [
    # DataFusion drops the hour (its DATE 2000-01-01 matches); DuckDB's TIMESTAMP 01:00
    # is not a date at all.
    ("dt = DATE '2000-01-01' + INTERVAL '1' HOUR", ENGINES),
    # DataFusion's DATE + INTERVAL drops the 1,000 seconds: midnight, which v = 0 holds.
    ("ts = DATE '2000-01-01' + INTERVAL '1000' SECOND", ("datafusion",)),
    # DuckDB cuts the literal to microseconds before it adds.
    ("ts = TIMESTAMP '2000-01-01 00:16:38.9999999' + INTERVAL '1' SECOND", ("duckdb",)),
    ("ts = CAST(TIMESTAMP '2000-01-01' + INTERVAL '1000' SECOND AS TIMESTAMPTZ)", ("duckdb",)),
    ("ts = TIMESTAMP '2000-01-01' + INTERVAL '1 day 2 hours'", ENGINES),
    ("ts = TIMESTAMP '2000-01-01' + INTERVAL '1.5' SECOND", ENGINES),
    ("r BETWEEN 200 AND 202", ENGINES),
    ("r > 198 AND r < 202", ENGINES),
    ("greatest(r, 200) = 200", ENGINES),
    ("b = 'ü'::BLOB", ("duckdb",)),  # DuckDB raises: nothing to prune wrongly, nor to prove
    # List and struct leaves: DuckDB probes a list's leaf filter; pruner probes no nested
    # column, and reads none of these as a condition on a column it indexes.
    ("lst[1] = 200", ENGINES),
    ("list_extract(lst, 1) = 200", ("duckdb",)),
    ("st['a'] = 200", ENGINES),
    ("st.a = 200", ("duckdb",)),
    ("lst = [200, 202]", ("duckdb",)),
    ("st = {'a': 200}", ("duckdb",)),
]


def _explained(sql: str, path: Path, engine: str) -> Any:
    (scan,) = pruner.explain(sql, {"t": path}, dialect=engine).scans
    return scan


@pytest.mark.parametrize(("condition", "engines"), PRUNED)
def test_folded_conditions_prune_and_answer_as_the_engine(
    bloom_dir: Path, condition: str, engines: tuple[str, ...]
) -> None:
    """Each fold now prunes with the files' own bloom filters, and pruner's answer is the
    engine's alone over the same files, on each engine whose SQL it is."""
    sql = f"SELECT r, dt, ts, b FROM t WHERE {condition}"
    for engine in engines:
        scan = _explained(sql, bloom_dir, engine)
        assert scan.zones_total == ROWS // GROUP
        assert scan.zones_selected < scan.zones_total, (engine, condition, scan.terms)
        assert scan.selection.num_rows < ROWS
        assert any("parquet bloom filter" in term.reason for term in scan.terms), scan.terms
        expected = multiset(engine_alone(engine, sql, {"t": bloom_dir}))
        assert multiset(pruner.query(sql, {"t": bloom_dir}, engine=engine)) == expected, engine


def test_a_present_value_is_found_in_its_row_group(bloom_dir: Path) -> None:
    """The folded value is the stored one: ``DATE '2000-01-01' + 1000`` selects row group 1
    (v = 1000) and the engines find its four rows through pruner; ``CAST('\\xAA' AS BYTEA)``
    finds row group 0 on DuckDB and row group 5 on DataFusion."""
    sql = "SELECT r FROM t WHERE dt = DATE '2000-01-01' + 1000"
    for engine in ENGINES:
        got = pruner.query(sql, {"t": bloom_dir}, engine=engine).column("r").to_pylist()
        assert got == [1000] * 4, engine
    blob = "SELECT r FROM t WHERE b = CAST('\\xAA' AS BYTEA)"
    assert (
        pruner.query(blob, {"t": bloom_dir}, engine="duckdb").column("r").to_pylist() == [100] * 4
    )
    assert (
        pruner.query(blob, {"t": bloom_dir}, engine="datafusion").column("r").to_pylist()
        == [3000] * 4
    )


@pytest.mark.parametrize(("condition", "engines"), UNPROVEN)
def test_unproven_conditions_read_everything_and_answer_as_the_engine(
    bloom_dir: Path, condition: str, engines: tuple[str, ...]
) -> None:
    """What pruner cannot fold exactly, and the nested leaves it does not probe, select
    every row group, and the answer is the engine's alone (or both raise)."""
    sql = f"SELECT r, dt, ts, b FROM t WHERE {condition}"
    for engine in engines:
        try:
            expected = multiset(engine_alone(engine, sql, {"t": bloom_dir}))
        except Exception:  # the engine refuses the SQL: so must pruner
            with pytest.raises(Exception):  # noqa: B017
                pruner.query(sql, {"t": bloom_dir}, engine=engine)
            continue
        scan = _explained(sql, bloom_dir, engine)
        assert scan.zones_selected == scan.zones_total, (engine, condition, scan.terms)
        assert scan.selection.num_rows == scan.rows_total == ROWS, (engine, condition)
        assert multiset(pruner.query(sql, {"t": bloom_dir}, engine=engine)) == expected, engine


# ------------------------------------------------------------------------------- Spark


@pytest.mark.slow
def test_spark_folds_equal_spark(spark: Any) -> None:
    """On Spark's dialect, every golden expression pruner folds is the value Spark computes
    (``SELECT <expr>``, with and without ANSI mode)."""
    previous = spark.conf.get("spark.sql.ansi.enabled", None)
    checked = 0
    try:
        for ansi in ("true", "false"):
            spark.conf.set("spark.sql.ansi.enabled", ansi)
            for expression in sorted(GOLDEN):
                literal = folded(expression, "spark")
                if literal is None:
                    continue
                frame = spark.sql(f"SELECT {expression} AS v").toArrow()
                value = frame.column(0)[0]
                coerced = coerce(literal, value.type, "spark")
                assert coerced.values == [_plain(value)], (ansi, expression, value)
                checked += 1
    finally:
        if previous is None:
            spark.conf.unset("spark.sql.ansi.enabled")
        else:
            spark.conf.set("spark.sql.ansi.enabled", previous)
    assert checked >= 20
