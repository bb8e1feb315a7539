"""Literal coercion over a wide matrix, judged by DuckDB alone.

For every column type (integers of each width and sign, floats, strings, dates, times,
timestamps of each unit, with and without a zone) and every literal spelling, Python
parameter and IN list here, DuckDB says which sample values ``c = literal`` (``c = ?``,
``c IN (...)``) matches; pruner's coercion (``coerce``, ``coerce_all``, ``literal_from_python``)
must probe every matched value's bit pattern, and may say "no match" only when DuckDB matches
none. Mutation testing of pruner/literals.py (docs/mutation.md) found the time types without
any test, and many timestamp spellings and parameter types unchecked; this is that check.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot

from pruner.analysis.conditions import literal_from_sql
from pruner.literal_text import literal_from_python
from pruner.literals import Coercion, coerce, coerce_all
from tests.analysis.test_literals import bit_patterns

T0 = dt.datetime(2024, 1, 1)
SAMPLES: dict[str, tuple[pa.DataType, list[object]]] = {
    "int8": (pa.int8(), [-128, -1, 0, 1, 5, 127]),
    "int16": (pa.int16(), [-32768, -1, 0, 5, 300, 32767]),
    "int32": (pa.int32(), [-(2**31), 0, 5, 65536, 2**31 - 1]),
    "int64": (pa.int64(), [-(2**63), -1, 0, 5, 2**32, 2**53 + 1, 2**63 - 1]),
    "uint8": (pa.uint8(), [0, 1, 5, 128, 255]),
    "uint16": (pa.uint16(), [0, 5, 300, 65535]),
    "uint32": (pa.uint32(), [0, 5, 2**31, 2**32 - 1]),
    "uint64": (pa.uint64(), [0, 5, 2**63, 2**64 - 1]),
    "float32": (pa.float32(), [-0.0, 0.0, 0.5, 0.1, 1.5, 5.0, -math.inf, math.nan]),
    # float(np.float32(0.1)): what CAST(0.1 AS FLOAT) compares equal to on a DOUBLE column
    "float64": (
        pa.float64(),
        [-0.0, 0.0, 0.1, float(np.float32(0.1)), 1.5, 5.0, 1e300, math.inf, math.nan],
    ),
    "string": (pa.string(), ["", "5", "5.0", "a", "A", " 5", "2024-01-01", "12:34:56", "true"]),
    "large_string": (pa.large_string(), ["", "5", "a", "2024-01-01"]),
    # Strings every sample of which the engine can cast to the literal's type, so that a
    # comparison with a typed literal or parameter is not refused: the engine casts the
    # column, and '05' = 5, '2024-1-1' = DATE '2024-01-01', '12:34:56.000' = TIME ...
    "string_numbers": (pa.string(), ["5", "05", " 5", "+5", "5.0", "-1", "0", "-0", "1.5"]),
    "string_dates": (
        pa.string(),
        ["2024-01-01", "2024-1-1", "2024-01-01 00:00:00", "2024-01-01T00:00:00", "2024-02-29"],
    ),
    "string_times": (pa.string(), ["12:34:56", "12:34:56.000", "12:34:56.5", "00:00:00"]),
    "string_stamps": (
        pa.string(),
        ["2024-01-01 00:00:00", "2024-01-01", "2024-01-01T00:00:00", "2024-01-01 00:00:01.5"],
    ),
    "binary": (pa.binary(), [b"", b"5", b"a", b"\x00\xff"]),
    "fixed_binary": (pa.binary(1), [b"5", b"a", b"\x00", b"\xff"]),
    "decimal9_2": (
        pa.decimal128(9, 2),
        [Decimal(v) for v in ("0.00", "5.00", "1.50", "0.10", "-1.00", "-0.01", "9999999.99")],
    ),
    "decimal18_0": (pa.decimal128(18, 0), [Decimal(v) for v in ("0", "5", "-1", "300", "65536")]),
    "decimal38_4": (
        pa.decimal128(38, 4),
        # The last has more digits than Python's default decimal context (28).
        [
            Decimal(v)
            for v in (
                *("0", "5", "1.5", "0.1", "-0.0001", "9223372036854775808"),
                "12345678901234567890123456789012.5",
            )
        ],
    ),
    "date32": (pa.date32(), [dt.date(1970, 1, 1), dt.date(2024, 1, 1), dt.date(2024, 2, 29)]),
    "time64_us": (
        pa.time64("us"),
        [
            dt.time(0, 0),
            dt.time(12, 34),  # '12:34' (no seconds) means 12:34:00
            dt.time(12, 34, 56),
            dt.time(12, 34, 56, 500000),
            dt.time(23, 59, 59),
        ],
    ),
    "time32_s": (pa.time32("s"), [dt.time(0, 0), dt.time(12, 34), dt.time(12, 34, 56)]),
    "time32_ms": (pa.time32("ms"), [dt.time(12, 34, 56), dt.time(12, 34, 56, 500000)]),
    "ts_s": (
        pa.timestamp("s"),
        [T0, T0 + dt.timedelta(seconds=1), T0.replace(hour=23, minute=59, second=59)],
    ),
    "ts_ms": (pa.timestamp("ms"), [T0, T0 + dt.timedelta(milliseconds=1500)]),
    "ts_us": (pa.timestamp("us"), [T0, T0 + dt.timedelta(seconds=1, microseconds=500000)]),
    # nanoseconds as integers: values a float64 cannot hold exactly
    "ts_ns": (pa.timestamp("ns"), [1704067200000000000, 1704067201000000000, 1704067200000000001]),
    "ts_utc": (
        pa.timestamp("us", tz="UTC"),
        [
            T0.replace(tzinfo=dt.UTC),
            T0.replace(hour=1, tzinfo=dt.UTC),
            T0.replace(hour=5, minute=30, tzinfo=dt.UTC),
            T0.replace(hour=23, minute=59, second=59, tzinfo=dt.UTC),
            # midnight of 2024-01-01 in Asia/Kolkata and America/New_York: what DATE
            # '2024-01-01' means on a zoned column in those session time zones
            dt.datetime(2023, 12, 31, 18, 30, tzinfo=dt.UTC),
            T0.replace(hour=5, tzinfo=dt.UTC),
        ],
    ),
    # nanoseconds in UTC: an offset's arithmetic is not hidden by the unit
    "ts_ns_utc": (
        pa.timestamp("ns", tz="UTC"),
        [T0.replace(tzinfo=dt.UTC), T0.replace(hour=1, tzinfo=dt.UTC)],
    ),
    "ts_berlin": (
        pa.timestamp("ms", tz="Europe/Berlin"),
        [T0.replace(tzinfo=dt.UTC), T0.replace(hour=1, tzinfo=dt.UTC)],
    ),
}

LITERALS = [
    # numbers
    "5", "-1", "0", "-0", "+5", "127", "128", "-128", "255", "256", "300", "65535", "65536",
    "2147483647", "2147483648", "4294967295", "4294967296", "9007199254740993",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "18446744073709551615", "18446744073709551616",
    "5.0", "5.00", "1.5", "0.5", "0.1", "-0.0", "0.0", "1e0", "5e0", "1.5e0", "5e-1", "1e300",
    "1e400", "0x10", "1_000", "1.50", "1.501", "0.10", "-0.01", "-0.0001", "0.005",
    "9999999.99", "10000000", "-1.00", "99999999999999999999999999999999999999",
    "1.00000000000000000000000000000000000", "0.00000000000000000000000000000000001",
    "12345678901234567890123456789012.5", "12345678901234567890123456789012.50001",
    # casts
    "CAST(5 AS TINYINT)", "CAST(5 AS UTINYINT)", "CAST(5 AS DOUBLE)", "CAST(1.5 AS FLOAT)",
    "CAST(0.1 AS FLOAT)", "CAST(0.1 AS REAL)", "CAST(0.1 AS DOUBLE)",
    "CAST(1.5 AS DECIMAL(4, 1))", "CAST(5 AS DECIMAL(10, 2))", "CAST('5' AS INTEGER)",
    "CAST('2024-01-01' AS DATE)", "CAST('12:34:56' AS TIME)", "CAST(5 AS VARCHAR)",
    "CAST('a' AS BLOB)", "'a'::BLOB", "'\\x00\\xFF'::BLOB", "'\\xFF'::BLOB", "'\\x35'::BLOB",
    "CAST(1.5 AS DECIMAL(38, 4))", "CAST(1.5 AS DECIMAL(38, 37))",
    "'inf'::DOUBLE", "'-inf'::FLOAT", "'infinity'::DOUBLE", "'NaN'::FLOAT", "'nan'::DOUBLE",
    # strings
    "'5'", "' 5'", "'5 '", "'+5'", "'5.0'", "'1.5'", "'0x10'", "'a'", "'A'", "''", "'true'",
    "'2024-01-01'", "'2024-1-1'", "'20240101'", "'2024-02-30'", "'2024-01-01 00:00:00'",
    "'2024-01-01T00:00:00'", "'2024-01-01 00:00:01'", "'2024-01-01 00:00:01.5'",
    "'2024-01-01 00:00:01.500000000'", "'2024-01-01 00:00:01+00'", "'2024-01-01 01:00:00+01'",
    "'2024-01-01 01:00:00+01:00'", "'2024-01-01 00:00:00Z'", "'2024-01-01 00:00:00 UTC'",
    "'2024-01-01 05:30:00+05:30'", "'2024-01-01 11:00:00+05:30'", "'2023-12-31 18:30:00-05:30'",
    "'2024-01-01 00:00:00-05:30'", "'2024-01-01 23:59:59'", "'2024-01-01 23:59:59+00'",
    "'2024-01-01 24:00:00'", "'2024-01-01 23:60:00'", "'2024-01-01 23:59:60'",
    "TIMESTAMPTZ '2024-01-01 11:00:00+05:30'", "'2024-01-01 10:00:00+10:00'",
    "TIMESTAMPTZ '2024-01-01 10:00:00+10'", "'2023-12-31 12:00:00-12:00'",
    "TIMESTAMPTZ '2024-01-01 05:45:00+05:45'", "'23:59:59'", "'23:59:60'", "'23:60:00'",
    "'12:34:56'", "'12:34:56.5'", "'12:34:56.500'", "'12:34'", "'24:00:00'", "'00:00:00'",
    # typed constants
    "DATE '2024-01-01'", "DATE '2024-02-29'", "DATE '1970-01-01'",
    "TIME '12:34:56'", "TIME '12:34:56.5'", "TIME '00:00:00'",
    "TIMESTAMP '2024-01-01'", "TIMESTAMP '2024-01-01 00:00:00'",
    "TIMESTAMP '2024-01-01 00:00:01'", "TIMESTAMP '2024-01-01 00:00:01.5'",
    "TIMESTAMPTZ '2024-01-01 01:00:00+00'", "TIMESTAMPTZ '2024-01-01 02:00:00+01'",
    "TIMESTAMPTZ '2024-01-01 00:00:00'", "'2024-01-01 00:00:00.000000001'",
    "TIMESTAMP_NS '2024-01-01 00:00:00.000000001'",
    "NULL", "TRUE", "FALSE",
]  # fmt: skip

PARAMETERS: list[object] = [
    5, -1, 0, 128, 2**63, -(2**63), 2**64 - 1, 2**64, 1.5, 5.0, 0.0, -0.0, math.nan, math.inf,
    -math.inf, 0.1, Decimal("5"), Decimal("5.0"), Decimal("1.5"), Decimal("1.501"),
    Decimal("-0.0001"), Decimal("9223372036854775808"), b"\xff", b"5", "5", "a", "", "2024-01-01",
    "12:34:56", b"a", b"", True, False, None, np.int8(5), np.uint64(2**63), np.float32(1.5),
    np.float64(-0.0), dt.date(2024, 1, 1), dt.date(2024, 2, 29), T0,
    T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(seconds=1, microseconds=500000),
    T0.replace(tzinfo=dt.UTC), T0.replace(hour=2, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    dt.time(12, 34, 56), dt.time(12, 34, 56, 500000), dt.time(0, 0), dt.time(23, 59, 59),
    T0.replace(hour=23, minute=59, second=59),
    T0.replace(hour=11, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
]  # fmt: skip

IN_LISTS = [
    "(5, 1.5, 300)", "(0, -1, 5.0)", "('5', 5)", "(NULL, 5)", "(NULL)", "('a', 'A', '')",
    "(255, 256, -1)", "(1e0, 5)", "('2024-01-01', DATE '2024-02-29')",
    "(TIMESTAMP '2024-01-01', '2024-01-01 00:00:01')", "(TIME '12:34:56', '00:00:00')",
    "(-0.0, 0.5)", "(9223372036854775807, 18446744073709551615)", "(" + ", ".join(
        str(i) for i in range(40)) + ", 300, 65535)",
]  # fmt: skip


_CONNECTIONS: dict[tuple[str, str], duckdb.DuckDBPyConnection] = {}
ZONES = ("UTC", "Asia/Kolkata", "America/New_York")
"""Session time zones the comparisons are judged in: a literal's meaning on a zoned column
may depend on it (a DATE, a zone-less timestamp), and pruner must not assume UTC."""


def _duckdb(column: str, where: str, params: list[Any], zone: str | None = None) -> Any:
    """The positions of the samples of ``column`` that DuckDB alone, in session time zone
    ``zone``, says match ``where``; None when DuckDB refuses the comparison. For a column of
    zoned timestamps every zone of ZONES is asked and the union returned (pruner must keep
    what any session matches)."""
    arrow_type = SAMPLES[column][0]
    if zone is None:
        if not getattr(arrow_type, "tz", None):
            return _duckdb(column, where, params, "UTC")
        found = [_duckdb(column, where, params, z) for z in ZONES]
        if all(f is None for f in found):
            return None
        return sorted(set().union(*(f for f in found if f is not None)))
    con = _CONNECTIONS.get((column, zone))
    if con is None:
        arrow_type, values = SAMPLES[column]
        con = _CONNECTIONS[(column, zone)] = duckdb.connect()
        con.execute(f"SET TimeZone = '{zone}'")
        data = pa.table({"c": pa.array(values, arrow_type), "i": list(range(len(values)))})
        con.execute("CREATE TABLE t AS SELECT * FROM data")
        del data
    try:
        return [r[0] for r in con.execute(f"SELECT i FROM t WHERE {where}", params).fetchall()]
    except (duckdb.Error, TypeError, ValueError, OverflowError):
        return None  # DuckDB refuses the comparison: nothing to prune wrongly


def _check(column: str, spelled: str, coerced: Coercion, matched: list[int]) -> None:
    arrow_type, values = SAMPLES[column]
    if coerced.no_match:
        assert matched == [], f"{column} {spelled}: pruner says no match, DuckDB matched"
        return
    if coerced.values is None:
        return  # pruner cannot tell: the term prunes nothing
    probed = set(bit_patterns(pa.array(coerced.values, arrow_type)))
    stored = pa.array(values, arrow_type)
    for position in matched:
        assert bit_patterns(stored.slice(position, 1))[0] in probed, (
            f"{column} {spelled}: DuckDB matches {values[position]!r}, pruner probes "
            f"{coerced.values}"
        )


def _literal(text: str) -> Any:
    literal = literal_from_sql(sqlglot.parse_one(f"SELECT {text}", read="duckdb").expressions[0])
    return literal


@pytest.mark.parametrize("column", sorted(SAMPLES))
def test_literals_never_exclude_a_value_duckdb_matches(column: str) -> None:
    arrow_type = SAMPLES[column][0]
    checked = 0
    for text in LITERALS:
        matched = _duckdb(column, f"c = {text}", [])
        if matched is None:
            continue
        literal = _literal(text)
        if literal is None:
            continue  # pruner does not read it as a constant: the term prunes nothing
        _check(column, f"= {text}", coerce(literal, arrow_type, "duckdb"), matched)
        _check(column, f"IN ({text})", coerce_all([literal], arrow_type, "duckdb"), matched)
        checked += 1
    assert checked >= 20, column


@pytest.mark.parametrize("column", sorted(SAMPLES))
def test_parameters_never_exclude_a_value_duckdb_matches(column: str) -> None:
    arrow_type = SAMPLES[column][0]
    for value in PARAMETERS:
        matched = _duckdb(column, "c = ?", [value])
        if matched is None:
            continue
        try:
            literal = literal_from_python(value)
        except TypeError:
            continue
        _check(column, f"= ? ({value!r})", coerce(literal, arrow_type, "duckdb"), matched)


@pytest.mark.parametrize("column", sorted(SAMPLES))
def test_in_lists_never_exclude_a_value_duckdb_matches(column: str) -> None:
    arrow_type = SAMPLES[column][0]
    for text in IN_LISTS:
        matched = _duckdb(column, f"c IN {text}", [])
        if matched is None:
            continue
        node = sqlglot.parse_one(f"SELECT 1 WHERE c IN {text}", read="duckdb").find(sqlglot.exp.In)
        assert node is not None
        literals = [literal_from_sql(e) for e in node.expressions]
        if any(lit is None for lit in literals):
            continue
        _check(column, f"IN {text}", coerce_all(literals, arrow_type, "duckdb"), matched)


def test_spark_zone_less_timestamps_are_not_probed() -> None:
    """Spark compares a zone-less timestamp literal in the session time zone, which pruner
    does not know: on Spark's dialect such a literal prunes nothing (DuckDB's is judged
    above). Mutants that dropped the dialect check survived every other test."""
    for text in ("TIMESTAMP '2024-01-01 00:00:00'", "'2024-01-01 00:00:00'"):
        literal = _literal(text)
        for arrow_type in (pa.timestamp("us"), pa.timestamp("ms")):
            assert coerce(literal, arrow_type, "spark").values is None, (text, arrow_type)
            assert coerce(literal, arrow_type, "duckdb").values is not None, (text, arrow_type)


@pytest.mark.slow
def test_integer_casts_at_their_bounds_as_spark_wraps_them(spark: Any) -> None:
    """``CAST(n AS TINYINT)`` just outside the type's range: DuckDB raises, and Spark without
    ANSI mode wraps it around (``CAST(128 AS TINYINT)`` is -128). pruner must then prune
    nothing, or probe the value Spark compares with; inside the range it probes the value.
    Judged by Spark alone; mutants that moved the bounds survived the DuckDB-judged tests."""
    previous = spark.conf.get("spark.sql.ansi.enabled", None)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        for cast, bits in (("TINYINT", 8), ("SMALLINT", 16), ("INT", 32), ("BIGINT", 64)):
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            for number in (low - 1, low, high, high + 1):
                text = f"CAST({number} AS {cast})"
                if number > 2**63 - 1 or number < -(2**63):
                    continue  # not a BIGINT literal in Spark
                (row,) = spark.sql(f"SELECT {text} AS v").collect()
                literal = _literal(text)
                coerced = coerce(literal, pa.int64(), "spark")
                if coerced.values is not None:
                    assert row.v in coerced.values, (text, row.v, coerced.values)
    finally:
        if previous is None:
            spark.conf.unset("spark.sql.ansi.enabled")
        else:
            spark.conf.set("spark.sql.ansi.enabled", previous)
