"""SQL literal -> the column values an equality can match, coerced as the engines do it.

An index probe hashes values at the *column's* width and type, so ``int8_col = 5`` must probe
the 1-byte value 5 and ``ts_col = '2024-01-01'`` the 8-byte count of the column's unit. The
rule everywhere: a literal either coerces *exactly* to a set of column values (usually one;
``0.0`` gives both zeros), or provably matches no value of the column (``int_col = 1.5``),
or pruner says it cannot tell and the term selects everything. Where the engines disagree
or depend on session settings, pruner cannot tell. Measured in DuckDB 2.0 (the cases that
forced a rule):

* ``float32_col = 0.1`` compares in FLOAT (0.1f and its float32 neighbours of 0.1 match),
  Spark compares in DOUBLE (nothing matches): a float32 probe is only exact when the literal
  is exactly a float32.
* ``int64_col = 9007199254740992e0`` compares in DOUBLE and matches 9007199254740993: a
  float-typed literal at or beyond 2**53 cannot be coerced to one integer.
* ``int_col = '1.5'`` matches (the string is cast and rounded): only integer-looking strings
  coerce to integer columns.
* ``timestamp_s_col = '... 00:00:01.5'`` matches 00:00:01 (the literal is truncated to the
  column's unit): sub-unit fractions cannot be coerced.
* A zone-less literal on a zoned timestamp column (or the reverse) depends on the session
  time zone: not coerced.
* ``blob_col = '\\xAA'`` (or ``CAST('\\xAA' AS BLOB)``) is the byte 0xAA in DuckDB and the
  four bytes of the text in DataFusion: a string becomes bytes by the query's engine's rules.
* ``time_col = TIMETZ '12:00:00+02'`` (DuckDB) matches the clock reading 12:00:00 or nothing,
  however DuckDB reads the Parquet TIME.

NaN has many bit patterns and engines compare NaNs as equal; probing one pattern could miss
rows, so NaN never prunes.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa

from pruner.expressions import Literal
from pruner.hashing import is_uuid
from pruner.literal_text import (
    _DATE,
    _DAY_NANOS,
    _EPOCH,
    _EXACT_DOUBLE,
    _INFINITY,
    _INT64,
    _INTEGER,
    _NAN,
    _NUMBER,
    _UNIT_NANOS,
    _parse_time,
    _parse_timestamp,
    _string_bytes,
    _Timestamp,
    _typed,
)

__all__ = [
    "Coercion",
    "coerce",
    "coerce_all",
]


@dataclass(frozen=True, slots=True)
class Coercion:
    """What ``column = literal`` can match.

    ``values`` (Python values of the column's Arrow type) when the literal coerces exactly;
    ``None`` with ``no_match`` when no value can match; ``None`` otherwise (pruner cannot
    tell), with ``reason`` saying why.
    """

    values: list[Any] | None
    no_match: bool = False
    reason: str = ""
    exact: bool = False
    """``values`` are all the column values that can equal the literals, in every engine, as
    Python's ``==`` compares them (integers written as integers on an integer column, strings
    on a string column): a row whose value is none of them cannot match."""


def _unknown(reason: str) -> Coercion:
    return Coercion(None, False, reason)


def _none(reason: str) -> Coercion:
    return Coercion(None, True, reason)


def _integer_column(kind: str, raw: Any, arrow_type: pa.DataType, shown: str) -> Coercion:
    info = np.iinfo(arrow_type.to_pandas_dtype())
    if kind == "string":
        if not _INTEGER.fullmatch(raw.strip()):
            return _unknown(f"{shown} cast to {arrow_type} may round")
        kind, raw = "int", int(raw.strip())
    if kind == "double":
        if not math.isfinite(raw) or abs(raw) >= _EXACT_DOUBLE:
            return _unknown(f"{shown} is a DOUBLE: several {arrow_type} values compare equal")
        if not raw.is_integer():
            return _none(f"{shown} can never equal an integer")
        kind, raw = "int", int(raw)
    if kind == "decimal":
        if raw != raw.to_integral_value():
            return _none(f"{shown} can never equal an integer")
        kind, raw = "int", int(raw)
    if kind != "int":
        return _unknown(f"cannot compare {shown} with {arrow_type}")
    if info.min <= raw <= info.max:
        return Coercion([raw])
    if abs(raw) < _EXACT_DOUBLE:
        return _none(f"{shown} is out of range of {arrow_type}")
    return _unknown(f"{shown} is out of range of {arrow_type}; engines compare it differently")


def _float_column(kind: str, raw: Any, arrow_type: pa.DataType, shown: str) -> Coercion:
    if kind == "string":
        text = raw.strip()
        if _NAN.fullmatch(text):
            kind = "nan"
        elif _NUMBER.fullmatch(text) or _INFINITY.fullmatch(text):
            kind, raw = "double", float(text)
        else:
            return _unknown(f"{shown} is not a number")
    if kind == "nan":
        return _unknown("NaN has many bit patterns and engines compare NaNs as equal")
    if kind not in ("int", "decimal", "double"):
        return _unknown(f"cannot compare {shown} with {arrow_type}")
    number = float(raw)
    if arrow_type == pa.float32() and float(np.float32(number)) != number:
        return _unknown(f"{shown} is not exactly a float32; engines round it differently")
    # 0.0 = -0.0 in SQL, but the two have different bits: probe both.
    values = [0.0, -0.0] if number == 0 else [number]
    return Coercion(values)


_DECIMAL_DIGITS = 38


def _decimal_column(kind: str, raw: Any, arrow_type: pa.DataType, shown: str) -> Coercion:
    """An integer or exact decimal literal against a DECIMAL(p, s) column: the engines compare
    both exactly in a decimal type holding both. Past 38 digits for that type (DECIMAL(38,
    30) against an INTEGER) DuckDB 2.0 raises and Spark 4 and DataFusion 55 were seen to
    compare exactly, but Spark documents rounding the scale away there
    (``spark.sql.decimalOperations.allowPrecisionLoss``): pruner prunes nothing."""
    if kind == "int":
        # As an INTEGER / BIGINT / HUGEINT literal is widened: DECIMAL(10 / 20 / 39, 0).
        raw = Decimal(raw)
        digits = 10 if abs(raw) < 2**31 else 20 if abs(raw) < 2**63 else 39
        places = 0
    elif kind == "decimal":
        _, numerals, exponent = raw.as_tuple()
        if not isinstance(exponent, int):
            return _unknown(f"{shown} is not a finite number")
        places = max(0, -exponent)
        digits = max(len(numerals) + max(0, exponent), places)
    else:
        return _unknown(f"comparing {arrow_type} with {shown} may round")
    precision, scale = arrow_type.precision, arrow_type.scale
    if max(precision - scale, digits - places) + max(scale, places) > _DECIMAL_DIGITS:
        return _unknown(f"{arrow_type} and {shown} have no exact common type in every engine")
    # Exact at 76 digits (DECIMAL256), not Python's default 28 (quantize raised past it).
    with localcontext(prec=_DECIMAL_DIGITS * 2):
        step = Decimal(1).scaleb(-scale)
        value = raw.quantize(step)
        if value != raw:
            return _none(f"{shown} has more decimal places than {arrow_type}")
        if abs(value) >= Decimal(10) ** (precision - scale):
            return _none(f"{shown} is out of range of {arrow_type}")
        return Coercion([value])


def _timestamp_column(
    kind: str, raw: Any, arrow_type: pa.DataType, shown: str, dialect: str
) -> Coercion:
    zoned_column = arrow_type.tz is not None
    if dialect == "spark" and not zoned_column:
        return _unknown("Spark compares zone-less timestamps in the session time zone")
    if kind == "string":
        stamp = _parse_timestamp(raw)
        if stamp is None:
            return _unknown(f"{shown} is not a timestamp pruner can read")
        if stamp.zoned != zoned_column:
            return _unknown(f"{shown} on {arrow_type} depends on the session time zone")
    elif kind == "timestamp":
        stamp = raw
        if stamp.zoned != zoned_column:
            return _unknown(f"{shown} on {arrow_type} depends on the session time zone")
    elif kind == "date" and not zoned_column:
        stamp = _Timestamp((raw - _EPOCH).days * _DAY_NANOS, False)
    else:
        return _unknown(f"cannot compare {shown} with {arrow_type}")
    unit = _UNIT_NANOS[arrow_type.unit]
    if stamp.nanos % unit:
        return _unknown(f"{shown} is finer than the column's unit ({arrow_type.unit})")
    value = stamp.nanos // unit
    if not _INT64[0] <= value <= _INT64[1]:
        return _unknown(f"{shown} is out of range of {arrow_type}")
    return Coercion([value])


def _date_column(kind: str, raw: Any, arrow_type: pa.DataType, shown: str) -> Coercion:
    if arrow_type == pa.date64():
        return _unknown("date64 values may carry a time of day; engines convert them differently")
    if kind == "string":
        match = _DATE.fullmatch(raw.strip())
        if not match:
            return _unknown(f"{shown} is not a YYYY-MM-DD date")
        try:
            kind, raw = "date", dt.date(*(int(part) for part in match.groups()))
        except ValueError:
            return _unknown(f"{shown} is not a valid date")
    if kind == "timestamp" and not raw.zoned:
        if raw.nanos % _DAY_NANOS:
            return _unknown(f"{shown} is not at midnight")
        kind, raw = "date", _EPOCH + dt.timedelta(days=raw.nanos // _DAY_NANOS)
    if kind != "date":
        return _unknown(f"cannot compare {shown} with {arrow_type}")
    return Coercion([raw])


def _time_column(kind: str, raw: Any, arrow_type: pa.DataType, shown: str) -> Coercion:
    if kind == "string":
        parsed = _parse_time(raw)
        if parsed is None:
            return _unknown(f"{shown} is not a time of day")
        kind, raw = "time", parsed
    if kind != "time":
        return _unknown(f"cannot compare {shown} with {arrow_type}")
    nanos, _ = raw
    unit = _UNIT_NANOS[arrow_type.unit]
    if nanos % unit:
        return _unknown(f"{shown} is finer than the column's unit ({arrow_type.unit})")
    return Coercion([nanos // unit])


_UUID = re.compile(
    r"\{?([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{12})\}?"
    r"|\{?([0-9a-fA-F]{32})\}?"
)


def _uuid_column(kind: str, raw: Any, shown: str, dialect: str) -> Coercion:
    """A Parquet UUID column (FIXED_LEN_BYTE_ARRAY(16), UUID logical type; pyarrow's
    ``arrow.uuid``): DuckDB reads it as UUID and casts a string literal to one, the 16
    big-endian bytes the file stores. Only the forms DuckDB reads (hyphenated or 32 hex
    digits, in braces or not) are converted; other engines read the column otherwise."""
    if dialect != "duckdb":
        return _unknown(f"pruner compares UUID columns only in DuckDB's dialect ({dialect})")
    if kind != "string":
        return _unknown(f"cannot compare {shown} with a UUID column")
    match = _UUID.fullmatch(raw)
    if match is None:
        return _unknown(f"{shown} is not a UUID pruner can read")
    return Coercion([bytes.fromhex("".join(part for part in match.groups() if part))])


def coerce(literal: Literal, arrow_type: pa.DataType, dialect: str = "duckdb") -> Coercion:
    """The values of ``arrow_type`` that ``column = literal`` can match, as the engines do.

    >>> coerce(Literal.number("5"), pa.int8()).values
    [5]
    >>> coerce(Literal.number("1.5"), pa.int64()).no_match
    True
    >>> coerce(Literal.number("0"), pa.float64()).values
    [0.0, -0.0]
    >>> coerce(Literal.string("2024-02-30"), pa.date32()).reason
    "'2024-02-30' is not a valid date"
    """
    shown = str(literal)
    kind, raw = _typed(literal, dialect)
    if kind == "null":
        return _none("= NULL is never true (IS NULL tests for nulls)")
    if kind == "unknown":
        return _unknown(raw)
    if pa.types.is_integer(arrow_type):
        return _integer_column(kind, raw, arrow_type, shown)
    if pa.types.is_floating(arrow_type):
        return _float_column(kind, raw, arrow_type, shown)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        if kind != "string":
            return _unknown(f"comparing a string column with {shown} casts the column")
        return Coercion([raw])
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        if kind in ("string", "string_as_bytes"):
            encoded = _string_bytes(raw, dialect)
            if encoded is None:
                return _unknown(f"engines convert {shown} to bytes differently")
            kind, raw = "bytes", encoded
        if kind != "bytes":
            return _unknown(f"cannot compare {shown} with {arrow_type}")
        return Coercion([raw])
    if is_uuid(arrow_type):
        return _uuid_column(kind, raw, shown, dialect)
    if pa.types.is_fixed_size_binary(arrow_type):
        # Only X'..' is certain: a string may be read as a UUID (DuckDB reads a Parquet
        # UUID column as UUID) or cast to bytes differently.
        if kind != "bytes" or len(raw) != arrow_type.byte_width:
            return _unknown(f"pruner compares {arrow_type} only with X'..' of its width")
        return Coercion([raw])
    if pa.types.is_decimal(arrow_type):
        return _decimal_column(kind, raw, arrow_type, shown)
    if pa.types.is_timestamp(arrow_type):
        return _timestamp_column(kind, raw, arrow_type, shown, dialect)
    if pa.types.is_date(arrow_type):
        return _date_column(kind, raw, arrow_type, shown)
    if pa.types.is_time(arrow_type):
        return _time_column(kind, raw, arrow_type, shown)
    return _unknown(f"pruner does not index {arrow_type} columns")


_SHOWN_REASONS = 3


def coerce_all(
    literals: Sequence[Literal], arrow_type: pa.DataType, dialect: str = "duckdb"
) -> Coercion:
    """What ``column IN (literals)`` can match: every literal's values, or None with the
    reason of the first literal pruner cannot tell about; ``no_match`` when none can match,
    and ``reason`` then names (some of) the literals that cannot.

    The plain cases of long lists (integers as written on an integer column, strings on a
    string column) take one cheap step per value; the rest go through :func:`coerce`.

    >>> coerce_all([Literal.number("5"), Literal.number("1.5")], pa.int8()).values
    [5]
    >>> coerce_all([Literal.number("300")], pa.int8()).no_match
    True
    """
    values: list[Any] = []
    integers: list[int] = []
    integer_literals: list[Literal] = []
    others: list[Literal] = []
    integer_column = pa.types.is_integer(arrow_type)
    string_column = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    for literal in literals:
        if literal.cast is None and not literal.double:
            if integer_column and literal.kind == "number":
                # At most 18 characters: well inside int64, and no engine reads it as DOUBLE.
                text = literal.text
                digits = text[1:] if text[:1] in ("-", "+") else text
                if len(text) <= 18 and digits.isdigit() and digits.isascii():
                    integers.append(int(text))
                    integer_literals.append(literal)
                    continue
            elif string_column and literal.kind == "string":
                values.append(literal.text)
                continue
        others.append(literal)
    if integers:
        info = np.iinfo(arrow_type.to_pandas_dtype())
        if info.min <= min(integers) and max(integers) <= info.max:
            values.extend(integers)
        else:
            others.extend(integer_literals)
    reasons: list[str] = []
    for literal in others:
        coerced = coerce(literal, arrow_type, dialect)
        if coerced.values is not None:
            values.extend(coerced.values)
        elif coerced.no_match:
            reasons.append(coerced.reason)
        else:
            return coerced
    reason = "; ".join(reasons[:_SHOWN_REASONS])
    if len(reasons) > _SHOWN_REASONS:
        reason += f"; and {len(reasons) - _SHOWN_REASONS:,} more values that cannot match"
    return Coercion(values, not values, reason, exact=not others and bool(values))


# ------------------------------------------------------------ constant date arithmetic
#
