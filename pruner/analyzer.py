"""SQL text -> one predicate per table scan, with sqlglot.

For every place a query reads one of the known tables (each FROM / JOIN item, in every CTE,
derived table, subquery and set-operation branch), the analyzer finds the conditions that
every row it reads must satisfy to reach the result, and turns them into a
:mod:`pruner.expressions` predicate over that table's columns. Anything it cannot prove is
:class:`~pruner.expressions.Unknown` with a reason, so a query pruner does not understand
prunes less, never wrongly.

Which conditions may prune a scan of table ``s`` in a SELECT:

* WHERE, and the ON of an INNER (or SEMI) join: these filter ``s``'s rows, unless ``s`` was
  already null-extended by an outer join. Then only a condition that rejects the
  null-extended rows (it cannot be TRUE when all of ``s``'s columns are NULL) may prune:
  ``a LEFT JOIN b ... WHERE b.id = 5`` prunes ``b``; ``... WHERE b.id IS NULL`` must not.
* The ON of an outer join prunes only the side it can null-extend: ``a LEFT JOIN b ON a.k =
  b.k AND b.id = 5`` prunes ``b`` (a ``b`` row with another id never joins), never ``a``.
* Conditions of an enclosing query, pushed into a CTE or derived table whose output column
  is a plain column of ``s``, when that subquery has no LIMIT, window function or DISTINCT ON
  (filters commute with projection, DISTINCT, set operations and GROUP BY on the key).

This module is the entry point: the cache, the big stack deep SQL needs, and the fallback
to reading every table whole. The work is in :mod:`pruner.analysis` (parsing, scopes,
conditions).

>>> import pyarrow as pa
>>> schemas = {"events": pa.schema([("user_id", pa.int64()), ("country", pa.string())])}
>>> analysis = analyze("SELECT * FROM events e WHERE e.user_id IN (1, 2)", schemas)
>>> [str(scan) for scan in analysis.scans]
['events AS e: user_id IN (1, 2)']
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from pruner.analysis.model import DIALECTS, Analysis, Scan
from pruner.analysis.stored import Store
from pruner.analysis.templates import Templates
from pruner.errors import SqlSyntaxError
from pruner.expressions import Unknown
from pruner.stacks import on_big_stack

__all__ = [
    "Analysis",
    "Scan",
    "analyses_kept_in",
    "analyze",
    "analyze_uncached",
    "names_table",
    "templates",
]

_CACHED_CHARS = 65_536  # longer SQL is analysed again each time, not kept in the cache


# Deep nesting: sqlglot's parser takes ~23 Python frames per level of parentheses and ~33 per
# NOT (...). Python 3.11 keeps pure-Python frames off the C stack, but a call through C (a
# generator, a builtin calling back) still takes C stack, and the recursion limit counts
# those too. So the analysis runs on a thread of its own whose C stack holds the whole
# limit's worth of such frames (4 KiB each; only the pages touched are ever allocated), and a
# query nested deeper than the limit is read whole instead of crashing the process.
_RECURSION_LIMIT = 60_000  # ~2,600 levels of parentheses, ~1,800 of NOT (...)
_STACK_BYTES = 256 * 2**20
# SQL this short cannot nest deeply: it is analysed on the caller's thread (starting one costs
# 0.1-0.25 ms, half a short query's analysis) under the limit the caller's stack can take.
_INLINE_CHARS = 2_000
_INLINE_RECURSION_LIMIT = 12_000
_limit_lock = threading.Lock()
_limit_users = 0
_limit_before = 0


_limit_raised = 0


@contextlib.contextmanager
def _deep_recursion(limit: int = _RECURSION_LIMIT) -> Iterator[None]:
    """Raise the interpreter's recursion limit to ``limit`` while any analysis runs (the
    limit is one for all threads: the first analysis in raises it, the last one out puts it
    back; a deep analysis raises it further while it runs)."""
    global _limit_users, _limit_before, _limit_raised
    with _limit_lock:
        if _limit_users == 0:
            _limit_before = _limit_raised = sys.getrecursionlimit()
        _limit_users += 1
        if limit > _limit_raised:
            _limit_raised = limit
            sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                sys.setrecursionlimit(_limit_before)


def _on_deep_stack(function: Callable[[], Analysis], sql: str) -> Analysis:
    """``function()`` on a thread with a ``_STACK_BYTES`` C stack, under the raised limit;
    for short SQL, or where no such thread can start, on this thread under a lower one."""

    def inline() -> Analysis:
        with _deep_recursion(_INLINE_RECURSION_LIMIT):
            return function()

    def deep() -> Analysis:
        with _deep_recursion():
            return function()

    if len(sql) <= _INLINE_CHARS:
        return inline()
    return on_big_stack(deep, _STACK_BYTES, "pruner-analyze", fallback=inline)


def _whole(sql: str, dialect: str, schemas: Mapping[str, pa.Schema], reason: str) -> Analysis:
    """Every table ``sql`` names, read whole, for ``reason``."""
    scans = tuple(
        Scan(name, name, Unknown(reason, "the whole query"))
        for name in schemas
        if names_table(name, sql)
    )
    return Analysis(sql, dialect, scans)


def names_table(name: str, sql: str) -> bool:
    """Can ``sql`` name the table ``name``: does it occur, plain or with its quote
    characters doubled as inside a quoted identifier, as a token of its own (no letter,
    digit, ``_`` or ``$`` right before or after it, which would make it part of another
    identifier: ``t2`` does not name ``t``, ``main.t``, ``"T"`` and ``'t'`` do)?

    >>> names_table('a"b', 'SELECT * FROM "a""b" AS x'), names_table("users", "SELECT 1")
    (True, False)
    >>> names_table("t", "SELECT * FROM t2 JOIN tt"), names_table("t", "SELECT * FROM main.T")
    (False, True)
    """
    return _name_pattern(name).search(sql.casefold()) is not None


@functools.lru_cache(maxsize=1024)
def _name_pattern(name: str) -> re.Pattern[str]:
    """:func:`names_table`'s pattern of ``name``: each of its forms as a token of its own
    (compiled once a name: a plan asks it of every table it is given, every query)."""
    folded = name.casefold()
    forms = sorted({folded, *(folded.replace(q, q + q) for q in "\"`'")})
    return re.compile("|".join(rf"(?<![\w$]){re.escape(form)}(?![\w$])" for form in forms))


def analyze_uncached(
    sql: str, dialect: str, schema_key: tuple[tuple[str, pa.Schema], ...]
) -> Analysis:
    """:func:`analyze` without the cache: ``schema_key`` is the schemas mapping as sorted
    (name, schema) pairs."""
    if dialect not in DIALECTS:
        raise SqlSyntaxError(
            f"unknown SQL dialect {dialect!r}; use one of {', '.join(sorted(DIALECTS))}"
        )
    # sqlglot and the analysis proper are imported here, by the first SQL text analysed: a
    # process whose analyses all come from pruner's cache never imports them (~0.1 s)
    from pruner.analysis.parsing import TooComplex
    from pruner.analysis.statements import analyze_statements

    schemas = dict(schema_key)
    try:
        return _on_deep_stack(lambda: analyze_statements(sql, dialect, schemas), sql)
    except TooComplex as err:
        return _whole(sql, dialect, schemas, str(err))
    except RecursionError:
        reason = (
            "the SQL is nested too deeply for pruner to analyse: every table it names is "
            "read whole (the engine runs it as written)"
        )
        return _whole(sql, dialect, schemas, reason)


def analyze(sql: str, schemas: Mapping[str, pa.Schema], dialect: str = "duckdb") -> Analysis:
    """One predicate per scan of a known table in ``sql``.

    Args:
        sql: the statement(s), in ``dialect``.
        schemas: table name (as the SQL names it, case-insensitive) -> Arrow schema.
        dialect: ``duckdb`` (default), ``spark`` or ``datafusion``.

    Raises:
        SqlSyntaxError: the SQL does not parse; the message names the position.
    """
    key = tuple(sorted(schemas.items(), key=lambda item: item[0]))
    if len(sql) > _CACHED_CHARS:  # a cache of 256 such analyses could hold gigabytes
        return analyze_uncached(sql, dialect, key)
    return templates.analysis(sql, dialect, key)


templates = Templates(analyze_uncached)
""":func:`analyze`'s cache: the last 256 analyses by SQL text, and analyses shared by SQL
texts that differ only in the literals of their conditions (:mod:`pruner.analysis.templates`);
``templates.clear()`` empties both."""


@contextlib.contextmanager
def analyses_kept_in(directory: Path | None) -> Iterator[None]:
    """While the block runs, :data:`templates` reads the analyses its memory does not hold
    from the folder ``directory`` and keeps there what it learns, for the next process
    (:mod:`pruner.analysis.stored`); ``None``: nothing is kept. The ``pruner`` command runs
    in one, in :func:`pruner.analysis.stored.default_directory`."""
    before = templates.store
    templates.store = Store(directory) if directory is not None else None
    try:
        yield
    finally:
        templates.store = before
