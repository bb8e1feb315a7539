"""The cost model: where pruning cannot pay, the engine reads the table its own way.

pruner's promise is "only faster", and pruning has costs of its own: analysing the SQL,
hashing and probing the keys, and binding the engine to a selection rather than to the
table. Three checks keep those costs where they pay. Each may only **widen** a read to the
whole table, read by the engine as it reads it alone, so whichever is chosen the answer is
the same (``tests/end_to_end/test_costs.py`` draws tables, selections and queries to show it).

* :func:`needs_analysis`, before any parse: a query of one table, with no join and no
  subquery, whose text names no column pruner could probe, or holds no operator a term a
  bloom filter can use is written with (:func:`may_hold_term`: ``id IS NOT NULL``, ``name
  LIKE 'a%'``, ``id IS DISTINCT FROM 5``), cannot be pruned, so it is not analysed (a
  check of the text's words: microseconds, where parsing costs a millisecond). An ``IN``
  list of literals too long to probe (below) counts as no term: a 10,000-key list alone
  cost ~15 ms to analyse, to probe nothing. A statement
  that may join is analysed all the same: the analysis is also what proves a statement of
  inner joins only, which DataFusion then plans with its join selection on.
* :func:`probe_reason`, before hashing a term's keys: ``K`` keys spread over ``U`` units the
  engine reads (a Parquet row group, a zone of a Lance index) touch about ``1 - (1 - 1/U)^K``
  of them when the column is not sorted, which is what a bloom index is for. Past
  :data:`PROBE_SKIP_FRACTION` the keys are not probed (10,000 keys cost ~50 ms to hash and
  probe, measured at 1M rows, to select every zone). A sorted or clustered column whose keys
  would have pruned is left to the engine's own min/max statistics (and Lance's to its own
  index); keys that cluster in an unsorted column lose their pruning only when they number
  more than about 0.7 per unit of the table (50% touched at random).
* :func:`whole_reason`, after the probes: a selection holding at least
  :data:`WHOLE_FRACTION` of what the engine reads of the table (Parquet: the rows of the row
  groups it must read; Lance: the rows) is read whole. Measured at 1M rows on DuckDB, a
  Lance selection of 57% of the rows ran as fast pruned as whole, and a Parquet read of most
  row groups ran slower pruned (pyarrow's read ahead, a view per query) than DuckDB's own
  scan. On an object store the selection is always kept: there pruner fetches what it
  selects in one batch, where the engine waits on each file's requests in turn.

* :func:`join_read_reason`, before a join's keys are read at run time: the keys of the
  other side of a join come from reading its rows, and they can only narrow what this side's
  own terms already selected. When the other side holds at least :data:`JOIN_READ_RATIO`
  times the rows this side's own terms select, the read is not made (the demo's
  ``inner_join`` read 250,000 rows of ``users``, 16 ms, to narrow a lookup of 65,536 rows
  of ``events`` that DuckDB reads in ~5 ms).

Explain reports each choice, in text and JSON.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pruner import storage
from pruner.analyzer import names_table
from pruner.errors import PrunerError
from pruner.reads import parquet_parts
from pruner.selection import Selection
from pruner.table import Table

__all__ = [
    "JOIN_READ_RATIO",
    "PROBE_SKIP_FRACTION",
    "UNANALYSED",
    "WHOLE_FRACTION",
    "join_read_reason",
    "may_hold_term",
    "needs_analysis",
    "probe_reason",
    "sql_words",
    "whole_reason",
]

WHOLE_FRACTION = 0.5
"""A selection holding at least this share of what the engine reads of a local table is
read whole, by the engine's own read."""

PROBE_SKIP_FRACTION = WHOLE_FRACTION
"""A term whose keys would, spread at random, touch at least this share of the units the
engine reads is not probed: the probe would select what :func:`whole_reason` then reads
whole. Keys spread at random touch at least this share (a filter's false positives add to
it), so the probe cost its time for nothing: 100 keys over 130 row groups at 1M rows cost
~1.5 ms to hash, probe and check against the statistics, to select 57% of them. Keys that
cluster in fewer units than that are read whole too (see the module's text)."""

JOIN_READ_RATIO = 1.0
"""A join's keys are not read at run time from another side that holds at least this many
times the rows this side's own terms select."""

UNANALYSED = (
    "the SQL names no column with an index in its one table, or no term an index can use "
    "(=, IN, BETWEEN, IS NULL, IS NOT DISTINCT FROM; an IN list of more keys than are worth "
    "probing is none), and no join: a query does not analyse it, the engine reads the "
    "table whole, its own way"
)

_WORDS = re.compile(r"[\w$]+")
_PLAIN = re.compile(r"[\w$]+\Z")


def sql_words(sql: str) -> list[str]:
    """The words of ``sql`` (runs of letters, digits, ``_`` and ``$``), case-folded, in order:
    what the cheap checks on a query's text read instead of parsing it. The last text's
    words are kept for the next call with that very string (the plan and the adapter ask
    again: ~2 ms each for an IN list of 10,000 keys); callers only read the list."""
    global _last_words
    last = _last_words
    if last is not None and last[0] is sql:
        return last[1]
    words: list[str] = _WORDS.findall(sql.casefold())
    _last_words = (sql, words)
    return words


_last_words: tuple[str, list[str]] | None = None


def needs_analysis(sql: str, tables: Mapping[str, Table]) -> bool:
    """Must ``sql`` be analysed: may it join (it names more than one of ``tables``, or says
    JOIN or SELECT more than once), or does it name, as a word of its own, a column that
    pruner could probe (a column with an index, or with the Parquet files' own bloom
    filters, or in a compound key), in a text that may hold a term an index can use
    (:func:`may_hold_term`)? False only when no analysis could prune any of them.

    A name that occurs in a string, a comment or another table's column still counts: the
    check may only send a query to the analyzer that did not need it, never the reverse.
    """
    if len(tables) > 1:
        return True
    sql = _without_unprobed_lists(sql, tables)
    found = sql_words(sql)
    if "join" in found or found.count("select") > 1:
        return True
    if not may_hold_term(sql, found):
        return False
    words = set(found)
    for table in tables.values():
        for column in table.schema.names:
            folded = column.casefold()
            named = folded in words if _PLAIN.match(folded) else names_table(column, sql)
            if named and _may_prune(table, column):
                return True
    return False


LONG_SQL = 2_000
"""SQL at least this long is searched for literal lists too long to probe
(:func:`_without_unprobed_lists`); shorter SQL is not worth the search."""


def _without_unprobed_lists(sql: str, tables: Mapping[str, Table]) -> str:
    """``sql`` with each ``IN (...)`` list of plain literals that :func:`probe_reason` would
    not probe on any column of ``tables`` pruner could probe (its distinct literals would
    touch :data:`PROBE_SKIP_FRACTION` of every such column's units) written ``IS NOT
    NULL``, which no index can use: the text a query needs analysing for without it.

    Such a list selects every row once analysed, so a query whose other words hold no term
    an index can use is read whole without the analysis, which costs most for these lists
    (a 10,000-key list: ~15 ms to fold, parse and bind, to probe nothing). A list in a
    string or comment, or one that is no column's, changes only whether the rest is
    analysed; the analysis may only be skipped where it could select nothing narrower.
    """
    if len(sql) < LONG_SQL:
        return sql
    from pruner.folding import whole_in_lists  # its patterns take ~3 ms to compile

    lists = list(whole_in_lists(sql, 2))
    if not lists:
        return sql
    columns = [
        (table, column)
        for table in tables.values()
        for column in table.schema.names
        if _may_prune(table, column)
    ]
    pieces, position = [], 0
    for start, end, values in lists:
        keys = len(set(values))
        if columns and all(probe_reason(t, c, keys) is not None for t, c in columns):
            pieces += [sql[position:start], " IS NOT NULL "]
            position = end
    return "".join([*pieces, sql[position:]]) if pieces else sql


_TERM_WORDS = frozenset({"in", "between", "isnull"})
_PATTERN_NOT = [["like"], ["ilike"], ["glob"], ["similar"], ["rlike"], ["regexp"]]
"""The words after a NOT that negates only a pattern match (``x NOT LIKE y``)."""


def may_hold_term(sql: str, words: list[str]) -> bool:
    """May ``sql`` (of ``words``, :func:`sql_words`) hold a term a bloom filter can use?

    Every such term is written with ``=`` (``=``, ``==``, ``<=>``, ``!=``, ``>=`` with
    ``<=``), ``<>`` (under a NOT), ``IN``, ``BETWEEN``, ``IS NOT DISTINCT FROM``, ``IS
    NULL``, ``ISNULL``, ``IS UNKNOWN``, or is a NOT of ``IS NOT NULL``, ``NOTNULL`` or ``IS
    DISTINCT FROM``. So False when the text has none of the first, and either none of the
    last or no NOT but theirs and those of ``NOT LIKE`` and its kin. A character or word in
    a string or a comment counts: the check may only send a query to the analyzer that did
    not need it, never the reverse."""
    if "=" in sql or "<>" in sql or not _TERM_WORDS.isdisjoint(words):
        return True
    nots = negations = 0
    for at, word in enumerate(words):
        before = words[max(0, at - 2) : at]
        if word == "not":
            nots += words[at + 1 : at + 2] not in _PATTERN_NOT
        elif word == "notnull":
            negations += 1
        elif word in ("null", "unknown"):
            if before != ["is", "not"]:
                return True  # IS NULL, or NULL anywhere else
            nots, negations = nots - 1, negations + 1
        elif word == "distinct" and before[-1:] == ["is"]:
            negations += 1  # IS DISTINCT FROM
        elif word == "distinct" and before == ["is", "not"]:
            return True  # IS NOT DISTINCT FROM
    return nots > 0 and negations > 0


def _may_prune(table: Table, column: str) -> bool:
    """Could a term on ``column`` prune ``table``? (An unreadable index counts: the
    analysis reports it.)"""
    try:
        if table.hash_type(column) is not None:
            return True
        return any(column in key.columns for key in table.compound_keys())
    except PrunerError:
        return True


def probe_reason(table: Table, column: str, keys: int) -> str | None:
    """Why a term of ``keys`` distinct keys on ``column`` is not worth probing (see the
    module's text), or None to probe it."""
    if keys < 2 or storage.is_remote(table.path):
        return None
    units = _units(table, column)
    if units < 1:
        return None
    touched = -math.expm1(keys * math.log1p(-1.0 / units)) if units > 1 else 1.0
    if touched < PROBE_SKIP_FRACTION:
        return None
    return (
        f"not probed: {keys:,} keys spread over {units:,} {_unit_name(table)} would select "
        f"about {touched:.0%} of them; the engine's own read is cheaper"
    )


def _units(table: Table, column: str) -> int:
    """How many units a read of ``table`` is made of: row groups (Parquet), or the zones of
    ``column``'s index (Lance, which reads rows)."""
    if table.kind == "parquet":
        return sum(len(f.row_group_rows) for f in (table.files or {}).values())
    try:
        index = table.index(column)
    except PrunerError:
        return 0
    return 0 if index is None else int(index.valid.sum())


def _unit_name(table: Table) -> str:
    return "row groups" if table.kind == "parquet" else "zones"


def whole_reason(table: Table, selection: Selection) -> str | None:
    """Why ``table`` is read whole rather than as ``selection`` (see the module's text), or
    None to read the selection."""
    if storage.is_remote(table.path):
        return None
    total = table.num_rows
    if total == 0:
        return None
    if table.kind == "parquet":
        read = sum(part.rows() for part in parquet_parts(table, selection))
        what = "the rows of the row groups it selects"
    else:
        read = selection.num_rows
        what = "the rows it selects"
    share = read / total
    if share < WHOLE_FRACTION:
        return None
    return (
        f"cost model: read whole by the engine's own read; the selection's reads, {what}, "
        f"are {share:.0%} of the table (pruning pays under {WHOLE_FRACTION:.0%})"
    )


def join_read_reason(selected_rows: int, other_rows: int, other: str) -> str | None:
    """Why the keys of ``other`` (a join's other side, of ``other_rows`` rows) are not read
    to narrow a scan whose own terms select ``selected_rows`` (see the module's text), or
    None to read them."""
    if other_rows < JOIN_READ_RATIO * selected_rows:
        return None
    return (
        f"cost model: not read at run time; {other} has {other_rows:,} rows to read for its "
        f"keys, and this side's own terms select {selected_rows:,}"
    )
