"""What a SQL literal's text is, after its own CAST and before it meets a column.

Numbers, strings, dates, timestamps and times as the engines read them (each literal as a
``(kind, value)`` pair), the bytes a string becomes, and query
parameters as the literals SQL would have spelled (:func:`literal_from_python`). Comparing
one with a column's values is :mod:`pruner.literals`; folding arithmetic on them is
:mod:`pruner.arithmetic`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from pruner.expressions import Literal

__all__ = ["INTEGER_CASTS", "literal_from_python"]

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
