"""Literal coercion, checked against DuckDB's own comparisons.

For each column type and each literal spelling, DuckDB says which of a set of sample values
``column = literal`` matches; pruner's coercion must include every one of them (or say it
cannot tell), and "no match" must mean DuckDB matches none.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot

from pruner.analysis.conditions import literal_from_sql
from pruner.literal_text import literal_from_python
from pruner.literals import coerce

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


def bit_patterns(array: pa.Array) -> list[object]:
    """Each value's identity as the index sees it: the raw bits of a float (-0.0 and 0.0
    differ, every NaN payload differs), the value itself otherwise."""
    if pa.types.is_floating(array.type):
        width = {pa.float32(): np.uint32, pa.float64(): np.uint64}[array.type]
        floats = array.to_numpy(zero_copy_only=False).astype(array.type.to_pandas_dtype())
        return floats.view(width).tolist()
    if pa.types.is_decimal(array.type):  # the unscaled integer's bytes, as stored
        width = array.type.byte_width
        raw = array.buffers()[1].to_pybytes()[array.offset * width :]
        return [raw[i * width : (i + 1) * width] for i in range(len(array))]
    return array.to_pylist()


def test_bit_patterns_tell_the_two_zeros_apart() -> None:
    for arrow_type in (pa.float32(), pa.float64()):
        zeros = pa.array([0.0, -0.0], arrow_type)
        assert zeros.slice(0, 1).equals(zeros.slice(1, 1)), "Arrow's equals cannot tell"
        positive, negative = bit_patterns(zeros)
        assert positive == 0 and negative == 1 << (arrow_type.bit_width - 1)


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
            # Bit patterns, not Arrow's equals (which holds -0.0 equal to 0.0): the index
            # hashes bits, so a probe of one zero must not pass for both.
            probed = set(bit_patterns(pa.array(coerced.values, arrow_type)))
            for position in matched:
                assert bit_patterns(stored.slice(position, 1))[0] in probed, (
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
    for arrow_type in (pa.float32(), pa.float64()):
        for zero in (0.0, -0.0, 0):
            probed = coerce(literal_from_python(zero), arrow_type).values
            assert probed is not None, (zero, arrow_type)
            assert sorted(bit_patterns(pa.array(probed, arrow_type))) == sorted(
                bit_patterns(pa.array([0.0, -0.0], arrow_type))
            ), f"{zero!r} on {arrow_type} probes both zero bit patterns"
    assert coerce(literal_from_python(math.nan), pa.float64()).values is None
    assert coerce(literal_from_python(dt.date(2024, 1, 2)), pa.date32()).values == [
        dt.date(2024, 1, 2)
    ]
    stamp = dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert coerce(literal_from_python(stamp), pa.timestamp("ms", tz="UTC")).values == [
        1704067201000
    ]
    assert coerce(literal_from_python(b"\x00\xff"), pa.binary()).values == [b"\x00\xff"]


ZERO_ROWS, ZERO_FRAGMENT_ROWS = 4_000, 500


def _zero_table() -> pa.Table:
    """Distinct non-zero floats, with +0.0 only in fragment 2 and -0.0 only in fragment 5
    (both widths): an index probe of one zero pattern prunes away the other's rows."""
    rng = np.random.default_rng(12)
    values = rng.uniform(1.0, 1000.0, ZERO_ROWS)
    values[2 * ZERO_FRAGMENT_ROWS + 17] = 0.0
    values[5 * ZERO_FRAGMENT_ROWS + 301] = -0.0
    return pa.table(
        {
            "k": np.arange(ZERO_ROWS, dtype=np.int64),
            "f32": pa.array(values.astype(np.float32), pa.float32()),
            "f64": pa.array(values, pa.float64()),
        }
    )


@pytest.fixture(scope="module", params=["lance", "parquet"])
def zero_table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    import lance
    import pyarrow.parquet as pq

    from pruner.index import build_index

    data = _zero_table()
    root = tmp_path_factory.mktemp("zeros")
    if request.param == "lance":
        path = root / "z.lance"
        lance.write_dataset(data, str(path), max_rows_per_file=ZERO_FRAGMENT_ROWS)
    else:
        path = root / "z"
        path.mkdir()
        for number in range(ZERO_ROWS // ZERO_FRAGMENT_ROWS):
            part = data.slice(number * ZERO_FRAGMENT_ROWS, ZERO_FRAGMENT_ROWS)
            pq.write_table(part, path / f"part-{number}.parquet", row_group_size=250)
    for column in ("f32", "f64"):
        build_index(path, column, items=250)
    return path


ZERO_QUERIES = [
    ("SELECT k, f32 FROM z WHERE f32 = 0", []),
    ("SELECT k, f32 FROM z WHERE f32 = 0.0", []),
    ("SELECT k, f32 FROM z WHERE f32 = -0.0", []),
    ("SELECT k, f32 FROM z WHERE f32 = CAST(-0.0 AS FLOAT)", []),  # not folded: reads all
    ("SELECT k, f32 FROM z WHERE f32 IN (0, 5.5)", []),
    ("SELECT k, f32 FROM z WHERE f32 = ?", [-0.0]),
    ("SELECT k, f64 FROM z WHERE f64 = 0", []),
    ("SELECT k, f64 FROM z WHERE f64 = -0.0", []),
    ("SELECT k, f64 FROM z WHERE f64 = ?", [0.0]),
    ("SELECT k, f64 FROM z WHERE f64 = ?", [-0.0]),
]


@pytest.mark.parametrize(("sql", "parameters"), ZERO_QUERIES)
def test_float_zero_finds_both_zero_bit_patterns_end_to_end(
    sql: str, parameters: list[float], zero_table: Any
) -> None:
    """``f = 0`` on an indexed float32 or float64 column, on DuckDB through pruner: the rows
    holding +0.0 and -0.0 (in different fragments) both come back, bit for bit what DuckDB
    alone over the raw files returns, while the index still prunes the other fragments."""
    import pruner
    from tests.support.engine_check import engine_alone

    tables = {"z": zero_table}
    expected = engine_alone("duckdb", sql, tables, parameters)
    data = _zero_table()
    keys = sorted(expected.column("k").to_pylist())
    assert keys == [2 * ZERO_FRAGMENT_ROWS + 17, 5 * ZERO_FRAGMENT_ROWS + 301], "the data's zeros"
    column = expected.column(1).combine_chunks()
    stored = data.column("f32" if column.type == pa.float32() else "f64").combine_chunks()
    want = sorted(bit_patterns(stored.take(pa.array(keys))))
    assert sorted(bit_patterns(column)) == want, "DuckDB alone returns both zero patterns"
    read, total = pruner.plan(sql, tables, dialect="duckdb", parameters=parameters).rows()
    if "CAST" not in sql:
        assert read <= total // 4, f"the index prunes: {read} of {total} rows read"
    for prune in (True, False):
        got = pruner.query(sql, tables, engine="duckdb", parameters=parameters, prune=prune)
        got_bits = bit_patterns(got.column(1).combine_chunks())
        pairs = sorted(zip(got.column("k").to_pylist(), got_bits, strict=True))
        expected_pairs = sorted(
            zip(expected.column("k").to_pylist(), bit_patterns(column), strict=True)
        )
        assert pairs == expected_pairs, (sql, parameters, prune)
