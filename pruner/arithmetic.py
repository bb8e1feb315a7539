"""Date and time arithmetic on literals, folded as each engine folds it.

``DATE '2000-01-01' + 1001`` and ``TIMESTAMP '...' + INTERVAL '5' SECOND`` are folded by
the engines before they compare or probe; pruner folds them to the literal the engine
computes, with that engine's types and rules, where it can do so exactly (measured in
DuckDB 2.0, DataFusion 55 and Spark 4.3), and otherwise says why not:

* DATE +/- integer (days), integer + DATE: a DATE in all three. The integer is an INTEGER
  literal in DuckDB and Spark (a BIGINT one is refused by both).
* DATE +/- INTERVAL: DuckDB gives a TIMESTAMP; DataFusion a DATE, dropping any part of a
  day (only whole days, weeks, months and years are folded there); Spark a DATE for those
  too (the others give a TIMESTAMP in the session time zone: refused).
* TIMESTAMP +/- INTERVAL, zone-less: DuckDB (TIMESTAMP_NS stays TIMESTAMP_NS, the other
  units give TIMESTAMP) and DataFusion (nanoseconds). A zoned timestamp adds days and
  months in the session time zone, and Spark's TIMESTAMP is in it: refused.

Months clamp to the month's last day (2000-01-31 + 1 month is 2000-02-29) in all three;
an interval is months, days and microseconds, added in that order.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from pruner.expressions import Literal
from pruner.literal_text import (
    _DAY_NANOS,
    _EPOCH,
    _INT64,
    _INTEGER,
    _typed,
)

__all__ = ["Interval", "interval", "plus_days", "plus_interval"]


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
