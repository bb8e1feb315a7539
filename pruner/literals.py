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

import calendar
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

__all__ = [
    "INTEGER_CASTS",
    "Coercion",
    "Interval",
    "coerce",
    "coerce_all",
    "interval",
    "literal_from_python",
    "plus_days",
    "plus_interval",
]

_EXACT_DOUBLE = 2**53
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INFINITY = re.compile(r"([+-]?)inf(inity)?", re.IGNORECASE)
_NAN = re.compile(r"[+-]?nan", re.IGNORECASE)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = r"([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?"
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]" + _TIME + r")?\s*(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?"
)
_TIME_OF_DAY = re.compile(_TIME)
_UNIT_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_DAY_NANOS = 86_400 * 10**9
_EPOCH = dt.date(1970, 1, 1)
_INT64 = (-(2**63), 2**63 - 1)

# SQL integer type (sqlglot's name) -> (bits, signed).
INTEGER_CASTS = {
    "TINYINT": (8, True),
    "SMALLINT": (16, True),
    "MEDIUMINT": (24, True),
    "INT": (32, True),
    "BIGINT": (64, True),
    "HUGEINT": (128, True),
    "INT128": (128, True),
    "UTINYINT": (8, False),
    "USMALLINT": (16, False),
    "UINT": (32, False),
    "UBIGINT": (64, False),
    "UHUGEINT": (128, False),
    "UINT128": (128, False),
}
_DOUBLE_CASTS = {"DOUBLE", "FLOAT", "REAL", "DOUBLE PRECISION"}
_STRING_CASTS = {"VARCHAR", "TEXT", "STRING", "CHAR", "NVARCHAR", "NCHAR"}
_TIMESTAMP_CASTS = {"TIMESTAMP", "TIMESTAMPNTZ", "DATETIME", "TIMESTAMP_S", "TIMESTAMP_MS"}
_TIMESTAMP_CASTS |= {"TIMESTAMP_NS", "DATETIME2"}
_ZONED_TIMESTAMP_CASTS = {"TIMESTAMPTZ", "TIMESTAMPLTZ"}


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


@dataclass(frozen=True, slots=True)
class _Timestamp:
    nanos: int  # since the epoch; UTC when ``zoned``, wall-clock otherwise
    zoned: bool


# --------------------------------------------------------------------- literal -> typed value


def _parse_timestamp(text: str) -> _Timestamp | None:
    match = _TIMESTAMP.fullmatch(text.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        days = (dt.date(int(year), int(month), int(day)) - _EPOCH).days
    except ValueError:
        return None
    if int(hour or 0) > 23 or int(minute or 0) > 59 or int(second or 0) > 59:
        return None
    clock = (int(hour or 0) * 60 + int(minute or 0)) * 60 + int(second or 0)
    digits = fraction or ""
    nanos = (days * 86_400 + clock) * 10**9 + int((digits + "0" * 9)[:9])
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hours, minutes = int(zone[1:3]), int(zone[-2:]) if len(zone) > 3 else 0
        nanos -= sign * (hours * 3600 + minutes * 60) * 10**9
    return _Timestamp(nanos, zone is not None)


def _parse_time(text: str) -> tuple[int, int] | None:
    """Nanoseconds since midnight and the significant fraction digits."""
    match = _TIME_OF_DAY.fullmatch(text.strip())
    if not match:
        return None
    hour, minute, second, fraction = match.groups()
    if int(hour) > 23 or int(minute) > 59 or int(second or 0) > 59:
        return None
    digits = fraction or ""
    nanos = ((int(hour) * 60 + int(minute)) * 60 + int(second or 0)) * 10**9
    return nanos + int((digits + "0" * 9)[:9]), len(digits.rstrip("0"))


_TIME_WITH_ZONE = re.compile(
    r"(?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?)"
    r"(?:[+-](?P<hours>[0-9]{2})(?::(?P<minutes>[0-9]{2})"
    r"(?::(?P<seconds>[0-9]{2}))?)?)?"
)
_LARGEST_OFFSET = 16 * 3600 - 1  # DuckDB's TIMETZ offsets: at most 15:59:59 either way


def _time_with_zone(text: str, literal: Literal, dialect: str) -> tuple[str, Any]:
    """``TIMETZ 'hh:mm:ss[.f][+hh[:mm[:ss]]]'`` as the time of day a Parquet TIME column
    can equal: the literal's own clock reading, offset dropped (DuckDB 2.0, the one engine
    of the three with TIME WITH TIME ZONE). DuckDB reads a Parquet TIME as TIME or, when the
    file marks it adjusted to UTC, as TIMETZ at offset +00 (pyarrow reads both as
    ``time64``): a TIME column meets the literal cast to TIME, which drops the offset; a
    TIMETZ one compares time *and* offset, so a literal at another offset than +00 matches
    none of its values. Either way only rows holding the clock reading can match."""
    if dialect != "duckdb":
        return "unknown", f"{literal}: pruner reads TIME WITH TIME ZONE only in DuckDB"
    match = _TIME_WITH_ZONE.fullmatch(text.strip())
    parsed = _parse_time(match.group("clock")) if match else None
    if match is None or parsed is None:
        return "unknown", f"{literal} is not a TIME WITH TIME ZONE pruner can read"
    hours, minutes, seconds = (int(match.group(g) or 0) for g in ("hours", "minutes", "seconds"))
    if minutes > 59 or seconds > 59 or hours * 3600 + minutes * 60 + seconds > _LARGEST_OFFSET:
        return "unknown", f"{literal} has an offset DuckDB does not take"
    return "time", parsed


def _number(text: str, double: bool) -> tuple[str, Any]:
    """("int", int) | ("decimal", Decimal) | ("double", float) for a numeric spelling."""
    if _INTEGER.fullmatch(text) and not double:
        return "int", int(text)
    if double:
        return "double", float(text)
    return "decimal", Decimal(text)


def _typed(literal: Literal, dialect: str) -> tuple[str, Any]:
    """The literal as (kind, value) after its own CAST, before meeting the column."""
    kind, text = literal.kind, literal.text
    value: tuple[str, Any]
    if kind == "null":
        return "null", None
    if kind == "boolean":
        value = ("bool", text.lower() == "true")
    elif kind == "bytes":
        try:
            value = ("bytes", bytes.fromhex(text))
        except ValueError:
            return "unknown", f"{text!r} is not hexadecimal"
    elif kind == "string":
        value = ("string", text)
    elif kind == "number":
        if not _NUMBER.fullmatch(text):
            return "unknown", f"{text!r} is not a number pruner can read"
        float_typed = literal.double or "e" in text.lower()
        # Beyond DECIMAL(38) and HUGEINT, engines read a number as a DOUBLE.
        float_typed = float_typed or sum(c.isdigit() for c in text) > 38
        # DataFusion parses 1.5 as a DOUBLE, DuckDB and Spark as an exact DECIMAL.
        float_typed = float_typed or (dialect == "datafusion" and "." in text)
        value = _number(text, float_typed)
    elif kind == "unsupported":
        return "unknown", text
    else:
        return "unknown", f"unbound parameter {literal}"
    if literal.cast is None:
        return value
    return _apply_cast(value, literal.cast.upper(), literal, dialect)


def _apply_cast(
    value: tuple[str, Any], cast: str, literal: Literal, dialect: str
) -> tuple[str, Any]:
    kind, raw = value
    base = cast.split("(")[0].strip()
    if base in _STRING_CASTS and kind == "string":
        return value
    if base in INTEGER_CASTS:
        if kind == "string" and _INTEGER.fullmatch(raw.strip()):
            kind, raw = "int", int(raw.strip())
        if kind == "int":
            bits, signed = INTEGER_CASTS[base]
            low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
            if low <= raw <= high:
                return "int", raw
            return "unknown", f"{literal} overflows {base} (engines error or wrap around)"
    elif base in _DOUBLE_CASTS:
        if base in ("FLOAT", "REAL"):
            return "unknown", f"{literal} is FLOAT in some engines and REAL in others"
        if kind in ("int", "decimal", "double"):
            return "double", float(raw)
        if kind == "string":
            text = raw.strip()
            if _NUMBER.fullmatch(text) or _INFINITY.fullmatch(text):
                return "double", float(text)
            if _NAN.fullmatch(text):
                return "nan", None
    elif base == "DATE" and kind == "string":
        match = _DATE.fullmatch(raw.strip())
        if match:
            try:
                return "date", dt.date(*(int(part) for part in match.groups()))
            except ValueError:
                return "unknown", f"{raw!r} is not a valid date"
    elif base in _TIMESTAMP_CASTS | _ZONED_TIMESTAMP_CASTS and kind == "string":
        stamp = _parse_timestamp(raw)
        if stamp is not None:
            zoned = base in _ZONED_TIMESTAMP_CASTS
            if stamp.zoned != zoned:
                return "unknown", f"{literal} depends on the session time zone"
            return "timestamp", stamp
    elif base == "TIME" and kind == "string":
        parsed = _parse_time(raw)
        if parsed is not None:
            return "time", parsed
    elif base == "TIMETZ" and kind == "string":
        return _time_with_zone(raw, literal, dialect)
    elif base in ("BLOB", "BINARY", "VARBINARY", "BYTEA") and kind in ("bytes", "string"):
        return ("bytes", raw) if kind == "bytes" else ("string_as_bytes", raw)
    return "unknown", f"pruner does not evaluate {literal}"


# -------------------------------------------------------------------- typed value -> column


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


_BLOB_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def _string_bytes(text: str, dialect: str) -> bytes | None:
    """The bytes a string becomes as a binary value (``CAST('..' AS BLOB)``, or a string
    compared with a binary column: every engine casts the string, not the column), or None
    when pruner cannot tell.

    * DuckDB: each ASCII character is its byte and ``\\xHH`` (a lower-case x, two hex
      digits) the byte HH; any other backslash or a non-ASCII character is an error.
    * DataFusion: the string's UTF-8 bytes (its SQL strings keep backslashes as written).
    * Spark: the UTF-8 bytes too, but its parser unescapes backslashes in its own way:
      only a string with neither a backslash nor a non-ASCII character is certain.
    """
    if dialect == "duckdb":
        found = bytearray()
        position = 0
        while position < len(text):
            character = text[position]
            if character == "\\":
                escape = _BLOB_ESCAPE.match(text, position)
                if escape is None:
                    return None
                found.append(int(escape.group(1), 16))
                position = escape.end()
            elif character.isascii():
                found.append(ord(character))
                position += 1
            else:
                return None
        return bytes(found)
    if dialect == "datafusion":
        try:
            return text.encode()
        except UnicodeEncodeError:  # a lone surrogate: not a string an engine holds
            return None
    if text.isascii() and "\\" not in text:
        return text.encode()
    return None


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
    if isinstance(arrow_type, pa.BaseExtensionType) and arrow_type.extension_name == "arrow.uuid":
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
# ``DATE '2000-01-01' + 1001`` and ``TIMESTAMP '...' + INTERVAL '5' SECOND`` are folded by
# the engines before they compare or probe; pruner folds them to the literal the engine
# computes, with that engine's types and rules, where it can do so exactly (measured in
# DuckDB 2.0, DataFusion 55 and Spark 4.3), and otherwise says why not:
#
# * DATE +/- integer (days), integer + DATE: a DATE in all three. The integer is an INTEGER
#   literal in DuckDB and Spark (a BIGINT one is refused by both).
# * DATE +/- INTERVAL: DuckDB gives a TIMESTAMP; DataFusion a DATE, dropping any part of a
#   day (only whole days, weeks, months and years are folded there); Spark a DATE for those
#   too (the others give a TIMESTAMP in the session time zone: refused).
# * TIMESTAMP +/- INTERVAL, zone-less: DuckDB (TIMESTAMP_NS stays TIMESTAMP_NS, the other
#   units give TIMESTAMP) and DataFusion (nanoseconds). A zoned timestamp adds days and
#   months in the session time zone, and Spark's TIMESTAMP is in it: refused.
#
# Months clamp to the month's last day (2000-01-31 + 1 month is 2000-02-29) in all three;
# an interval is months, days and microseconds, added in that order.

_INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {
    "YEAR": (12, 0, 0),
    "MONTH": (1, 0, 0),
    "WEEK": (0, 7, 0),
    "DAY": (0, 1, 0),
    "HOUR": (0, 0, 3_600_000_000),
    "MINUTE": (0, 0, 60_000_000),
    "SECOND": (0, 0, 1_000_000),
    "MILLISECOND": (0, 0, 1_000),
    "MICROSECOND": (0, 0, 1),
}
_INTERVAL_AMOUNT = re.compile(r"-?[0-9]+")
_INT32 = 2**31 - 1
# Interval parts DuckDB and DataFusion hold: months and days as int32, the rest as int64
# microseconds (DuckDB) or nanoseconds (DataFusion, the narrower).
_LARGEST_INTERVAL_MICROS = _INT64[1] // 1_000
_YEARS = (1, 9999)  # Python's dates; DuckDB's reach further, pruner folds inside these
# Timestamp literal cast -> DuckDB's precision in nanoseconds (TIMESTAMP_S / _MS / plain
# hold seconds / milliseconds / microseconds: a finer literal is cut to them first).
_DUCKDB_TIMESTAMPS = {
    "TIMESTAMP": 1_000,
    "TIMESTAMPNTZ": 1_000,
    "DATETIME": 1_000,
    "TIMESTAMP_S": 10**9,
    "TIMESTAMP_MS": 10**6,
    "TIMESTAMP_NS": 1,
}


@dataclass(frozen=True, slots=True)
class Interval:
    """An ``INTERVAL`` constant as the engines keep it: months, days and microseconds."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def negated(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)


def interval(amount: str, unit: str) -> Interval | None:
    """``INTERVAL '<amount>' <unit>`` for a whole number of one unit pruner knows (YEAR,
    MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND, MICROSECOND, singular or plural),
    within what DuckDB and DataFusion hold; None otherwise.

    >>> interval("1001", "SECOND")
    Interval(months=0, days=0, micros=1001000000)
    >>> interval("1.5", "DAY") is None, interval("1", "QUARTER") is None
    (True, True)
    """
    name = unit.upper()
    parts = _INTERVAL_UNITS.get(name) or _INTERVAL_UNITS.get(name.removesuffix("S"))
    if parts is None or not _INTERVAL_AMOUNT.fullmatch(amount):
        return None
    count = int(amount)
    months, days, micros = (count * part for part in parts)
    if max(abs(months), abs(days)) > _INT32 or abs(micros) > _LARGEST_INTERVAL_MICROS:
        return None
    return Interval(months, days, micros)


def _date_literal(day: dt.date) -> Literal:
    return Literal("string", day.isoformat(), cast="DATE")


def _timestamp_literal(nanos: int, cast: str) -> Literal | str:
    days, within = divmod(nanos, _DAY_NANOS)
    try:
        day = _EPOCH + dt.timedelta(days=days)
    except OverflowError:
        return "the result is out of the range of dates pruner folds"
    seconds, fraction = divmod(within, 10**9)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    digits = f".{fraction:09d}".rstrip("0") if fraction else ""
    return Literal("string", f"{day.isoformat()} {clock}{digits}", cast=cast)


def _plus_months(day: dt.date, months: int) -> dt.date | None:
    """``day`` plus ``months``, clamped to the last day of the month reached."""
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    if not _YEARS[0] <= year <= _YEARS[1]:
        return None
    return dt.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _plus_date(day: dt.date, step: Interval) -> dt.date | None:
    shifted = _plus_months(day, step.months)
    if shifted is None:
        return None
    try:
        return shifted + dt.timedelta(days=step.days)
    except OverflowError:
        return None


def plus_days(base: Literal, days: Literal, dialect: str, subtract: bool = False) -> Literal | str:
    """``base + days`` (``base - days`` when ``subtract``) for a DATE ``base`` and an
    integer literal ``days``, as ``dialect`` computes it: the DATE literal, or why pruner
    does not fold it.

    >>> str(plus_days(Literal("string", "2000-01-01", "DATE"), Literal.number("1001"), "duckdb"))
    "CAST('2002-09-28' AS DATE)"
    """
    kind, day = _typed(base, dialect)
    if kind == "unknown":
        return str(day)
    if kind != "date":
        return f"{base} is not a DATE"
    text = days.text
    if days.kind != "number" or days.cast or days.double or not _INTEGER.fullmatch(text):
        return f"{days} is not an integer literal"
    count = int(text)
    if dialect != "datafusion" and abs(count) > _INT32:
        return f"{days} is a BIGINT: a DATE takes an INTEGER number of days"
    if dialect == "datafusion" and abs(count) > _INT64[1] // _DAY_NANOS:
        return f"DataFusion adds {days} days as nanoseconds, past their range"
    try:
        return _date_literal(day + dt.timedelta(days=-count if subtract else count))
    except OverflowError:
        return "the result is out of the range of dates pruner folds"


def plus_interval(base: Literal, step: Interval, dialect: str) -> Literal | str:
    """``base + step`` for a DATE or zone-less TIMESTAMP ``base``, as ``dialect`` computes
    it (see the comment above): the literal of the engine's result type, or why pruner
    does not fold it.

    >>> base = Literal("string", "2000-01-01", "TIMESTAMP")
    >>> str(plus_interval(base, Interval(micros=1001 * 10**6), "duckdb"))
    "CAST('2000-01-01 00:16:41' AS TIMESTAMP)"
    >>> plus_interval(Literal("string", "2000-01-01", "DATE"), Interval(micros=1), "datafusion")
    'DataFusion drops the part of a day a DATE + INTERVAL adds'
    """
    kind, raw = _typed(base, dialect)
    cast = (base.cast or "").upper()
    if kind == "date":
        if dialect == "duckdb":  # DATE + INTERVAL is a TIMESTAMP
            start, result_cast = (raw - _EPOCH).days * _DAY_NANOS, "TIMESTAMP"
        elif step.micros:
            if dialect == "spark":
                return "Spark's DATE + INTERVAL of a part of a day is in the session time zone"
            return "DataFusion drops the part of a day a DATE + INTERVAL adds"
        else:
            shifted = _plus_date(raw, step)
            if shifted is None:
                return "the result is out of the range of dates pruner folds"
            return _date_literal(shifted)
    elif kind == "timestamp":
        if raw.zoned:
            return f"{base} + INTERVAL is computed in the session time zone"
        if dialect == "spark":
            return "Spark's TIMESTAMP + INTERVAL is computed in the session time zone"
        if dialect == "duckdb":
            precision = _DUCKDB_TIMESTAMPS.get(cast)
            if precision is None:
                return f"pruner does not fold {cast} arithmetic"
            if raw.nanos % precision:
                return f"{base} is finer than its type: DuckDB cuts it first"
            result_cast = "TIMESTAMP_NS" if cast == "TIMESTAMP_NS" else "TIMESTAMP"
        elif cast != "TIMESTAMP":
            return f"pruner does not fold {cast} arithmetic"
        elif not _INT64[0] <= raw.nanos <= _INT64[1]:
            return f"{base} is out of the range of DataFusion's nanosecond timestamps"
        else:
            result_cast = "TIMESTAMP"
        start = raw.nanos
    elif kind == "unknown":
        return str(raw)
    else:
        return f"{base} is not a DATE or TIMESTAMP"
    days, within = divmod(start, _DAY_NANOS)
    shifted = _plus_date(_EPOCH + dt.timedelta(days=days), step)
    if shifted is None:
        return "the result is out of the range of dates pruner folds"
    nanos = (shifted - _EPOCH).days * _DAY_NANOS + within + step.micros * 1_000
    nanosecond_type = result_cast == "TIMESTAMP_NS" or dialect == "datafusion"
    if nanosecond_type and not _INT64[0] <= nanos <= _INT64[1]:
        return "the result is out of the range of a nanosecond timestamp"
    return _timestamp_literal(nanos, result_cast)


def literal_from_python(value: object) -> Literal:
    """A query parameter (``?`` / ``$1``) as the literal SQL would have spelled it."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return Literal("null", "NULL")
    if isinstance(value, bool):
        return Literal("boolean", "true" if value else "false")
    if isinstance(value, int):
        return Literal.number(str(value))
    if isinstance(value, float):
        if math.isnan(value):
            return Literal("string", "nan", cast="DOUBLE")
        if math.isinf(value):
            return Literal("string", "-inf" if value < 0 else "inf", cast="DOUBLE")
        return Literal("number", repr(value), double=True)
    if isinstance(value, Decimal):
        return Literal.number(str(value))
    if isinstance(value, str):
        return Literal.string(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return Literal("bytes", bytes(value).hex())
    if isinstance(value, dt.datetime):
        zoned = value.tzinfo is not None
        text = value.isoformat(sep=" ")
        return Literal("string", text, cast="TIMESTAMPTZ" if zoned else "TIMESTAMP")
    if isinstance(value, dt.date):
        return Literal("string", value.isoformat(), cast="DATE")
    if isinstance(value, dt.time):
        return Literal("string", value.isoformat(), cast="TIME")
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a query parameter")
