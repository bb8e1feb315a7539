"""Literal coercion, checked against DuckDB's own comparisons.

For each column type and each literal spelling, DuckDB says which of a set of sample values
``column = literal`` matches; pruner's coercion must include every one of them (or say it
cannot tell), and "no match" must mean DuckDB matches none.
"""

from __future__ import annotations

import datetime as dt
import math

import duckdb
import pyarrow as pa
import pytest
import sqlglot

from pruner.analyzer import literal_from_sql
from pruner.literals import coerce, literal_from_python

SAMPLES: dict[str, tuple[pa.DataType, list[object]]] = {
    "int8": (pa.int8(), [-128, -1, 0, 1, 2, 5, 127]),
    "int32": (pa.int32(), [-(2**31), 0, 1, 5, 2**31 - 1]),
    "int64": (pa.int64(), [0, 1, 5, 2**53, 2**53 + 1, 2**63 - 1, -(2**63)]),
    "uint16": (pa.uint16(), [0, 1, 5, 65535]),
    "float32": (pa.float32(), [0.0, -0.0, 0.5, 0.1, 1.0, 3.4e38, math.inf, math.nan]),
    "float64": (pa.float64(), [0.0, -0.0, 0.1, 0.5, 1.0, 2.0**53, math.inf, -math.inf, math.nan]),
    "string": (pa.string(), ["", "a", "5", "it's", "ü", "a\\b"]),
    "date32": (pa.date32(), [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(2024, 3, 1)]),
    "ts_us": (
        pa.timestamp("us"),
        [
            dt.datetime(2024, 1, 1),
            dt.datetime(2024, 1, 1, 0, 0, 1),
            dt.datetime(2024, 1, 1, 0, 0, 1, 500000),
        ],
    ),
    "ts_s": (pa.timestamp("s"), [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 1)]),
    "ts_utc": (
        pa.timestamp("ms", tz="UTC"),
        [dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, 1, tzinfo=dt.UTC)],
    ),
}

LITERALS = [
    "5",
    "-1",
    "0",
    "1.0",
    "1.5",
    "5.0",
    "300",
    "3e9",
    "9007199254740993e0",
    "9007199254740993",
    "'5'",
    "'1.5'",
    "' 5'",
    "0.0",
    "-0.0",
    "0.1",
    "0.5",
    "CAST(0.1 AS FLOAT)",
    "'NaN'::DOUBLE",
    "'inf'::DOUBLE",
    "'a'",
    "''",
    "'ü'",
    "'it''s'",
    "'a\\b'",
    "NULL",
    "DATE '2024-02-29'",
    "'2024-03-01'",
    "'2024-02-30'",
    "TIMESTAMP '2024-03-01 00:00:00'",
    "TIMESTAMP '2024-01-01 00:00:01'",
    "'2024-01-01 00:00:01.5'",
    "'2024-01-01 00:00:01'",
    "TIMESTAMPTZ '2024-01-01 01:00:00+00'",
    "'2024-01-01 00:00:00'",
    "CAST('5' AS BIGINT)",
]


def duckdb_matches(arrow_type: pa.DataType, values: list[object], literal: str) -> list[int] | None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", pa.table({"c": pa.array(values, arrow_type), "i": list(range(len(values)))}))
    try:
        return [r[0] for r in con.execute(f"SELECT i FROM t WHERE c = {literal}").fetchall()]
    except duckdb.Error:
        return None  # DuckDB refuses the comparison: nothing to prune wrongly


@pytest.mark.parametrize("column", sorted(SAMPLES))
def test_coercion_never_excludes_a_value_duckdb_matches(column: str) -> None:
    arrow_type, values = SAMPLES[column]
    stored = pa.array(values, arrow_type)
    for text in LITERALS:
        matched = duckdb_matches(arrow_type, values, text)
        if matched is None:
            continue
        literal = literal_from_sql(
            sqlglot.parse_one(f"SELECT {text}", read="duckdb").expressions[0]
        )
        assert literal is not None, text
        coerced = coerce(literal, arrow_type, "duckdb")
        if coerced.no_match:
            assert matched == [], f"{column} = {text}: pruner says no match, DuckDB matched"
        elif coerced.values is not None:
            probed = pa.array(coerced.values, arrow_type)
            for position in matched:
                bits = stored.slice(position, 1)
                assert any(bits.equals(probed.slice(k, 1)) for k in range(len(probed))), (
                    f"{column} = {text}: DuckDB matches {values[position]!r}, "
                    f"pruner probes {coerced.values}"
                )


def test_lossy_and_ambiguous_casts_have_reasons() -> None:
    cases = {
        ("1.5", pa.int64()): "can never equal",
        ("9007199254740993e0", pa.int64()): "DOUBLE",
        ("'1.5'", pa.int32()): "may round",
        ("0.1", pa.float32()): "float32",
        ("'NaN'::DOUBLE", pa.float64()): "NaN",
        ("'2024-02-30'", pa.date32()): "not a valid date",
        ("'2024-01-01 00:00:00'", pa.timestamp("ms", tz="UTC")): "time zone",
        ("'2024-01-01 00:00:01.5'", pa.timestamp("s")): "finer than",
    }
    for (text, arrow_type), fragment in cases.items():
        literal = literal_from_sql(
            sqlglot.parse_one(f"SELECT {text}", read="duckdb").expressions[0]
        )
        assert literal is not None
        assert fragment in coerce(literal, arrow_type).reason, (text, arrow_type)


def test_python_parameters_become_literals() -> None:
    assert coerce(literal_from_python(5), pa.int16()).values == [5]
    assert coerce(literal_from_python(None), pa.int16()).no_match
    assert coerce(literal_from_python(-0.0), pa.float64()).values == [0.0, -0.0]
    assert coerce(literal_from_python(math.nan), pa.float64()).values is None
    assert coerce(literal_from_python(dt.date(2024, 1, 2)), pa.date32()).values == [
        dt.date(2024, 1, 2)
    ]
    stamp = dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert coerce(literal_from_python(stamp), pa.timestamp("ms", tz="UTC")).values == [
        1704067201000
    ]
    assert coerce(literal_from_python(b"\x00\xff"), pa.binary()).values == [b"\x00\xff"]
