"""The cost model: where pruning cannot pay, the engine reads the table its own way.

pruner's promise is "only faster", and pruning has costs of its own: analysing the SQL,
hashing and probing the keys, and binding the engine to a selection rather than to the
table. These checks keep those costs where they pay. Each may only **widen** a read: to
whole files, or to the whole table, read by the engine as it reads it alone, so whichever
is chosen the answer is the same (``tests/end_to_end/test_costs.py`` draws tables,
selections and queries to show it).

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
  more than about 0.7 per unit of the table (50% touched at random). For DuckDB over local
  Parquet the unit may be the file (below): keys that would touch files holding
  :data:`FILES_SKIP_FRACTION` of the rows are not probed either.
* :func:`lance_probes_reason`, before binding a scan's terms, DuckDB over a local Lance table
  held open: Lance's scanner probes a bloom index itself when DuckDB pushes ``column =
  literal`` into its scan, as it does for DuckDB alone, and costs less than pruner's own
  probe and read of the zone (docs/scale.md, 5M rows: 3.0-3.8 against 4.8-5.2 ms), on a
  table of fewer fragments than :data:`LANCE_OWN_FRAGMENTS` (with more, Lance's costs more,
  and pruner keeps the lookup). So a
  statement of one SELECT of the table whose terms are ``=`` of one literal, written so
  (:func:`equalities_pushed`: not ``IN (5)``, which DuckDB pushes as a list), is read whole,
  with Lance probing the index, once pruner has checked every zone of that index
  (:func:`pruner.table.trust.lance_may_probe`), which it does only after the held table was
  looked up :data:`LANCE_WARM_LOOKUPS_PER_MIB` times (the check and Lance's load of the
  index cost once what about that many lookups save). A damaged or changed index file is
  checked again and left to pruner's own probe.
* :func:`whole_files_reason`, after the probes, DuckDB over local Parquet only: where
  DuckDB's binding is a view with one ``read_parquet`` of its own per partly read file (more
  row groups than :data:`pruner.reads.DUCKDB_READ_AHEAD_BYTES` reads ahead, or a file read
  whole besides), DuckDB sets each of those reads up apart, with its own copy of the
  query's filter, and a file whose row groups left out are few is read faster whole, in the
  view's one ``read_parquet`` of the files read whole (:data:`VIEW_SELECT_ROWS`).
* :func:`whole_reason`, after the probes (and the files above): a selection holding at
  least :data:`WHOLE_FRACTION` of what the engine reads of the table (Parquet: the rows of
  the row groups it must read; Lance: the rows) is read whole. Measured at 1M rows on
  DuckDB, a Lance selection of 57% of the rows ran as fast pruned as whole, and a Parquet
  read of most row groups ran slower pruned (pyarrow's read ahead, a view per query) than
  DuckDB's own scan. A DuckDB selection of whole files only is kept, whatever its share: it
  is DuckDB's own read of fewer files (1,000 keys over 20M rows in 1,000 files, files of 63%
  of the rows: 0.91x DuckDB alone kept, 1.07x read whole). On an object store the selection
  is always kept: there pruner fetches what it selects in one batch, where the engine waits
  on each file's requests in turn.
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
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pruner import reads, storage
from pruner.analyzer import names_table
from pruner.errors import PrunerError
from pruner.expressions import And, Equals, In, NotIn, Predicate, leaves
from pruner.reads import deleted_rows, parquet_parts, read_ahead_bytes
from pruner.selection import Selection
from pruner.table import Table
from pruner.table.trust import lance_lookup, lance_may_probe

__all__ = [
    "FILES_SKIP_FRACTION",
    "JOIN_READ_RATIO",
    "LANCE_LEFT_FRAGMENTS",
    "LANCE_OWN_FRAGMENTS",
    "LANCE_WARM_LOOKUPS",
    "LANCE_WARM_LOOKUPS_PER_MIB",
    "LEFT_TO_LANCE",
    "PROBE_SKIP_FRACTION",
    "UNANALYSED",
    "VIEW_SELECT_ROWS",
    "VIEW_SELECT_ROWS_PER_LITERAL",
    "WHOLE_FRACTION",
    "equalities_pushed",
    "join_read_reason",
    "lance_probes_reason",
    "lance_still_probes",
    "literals",
    "may_hold_term",
    "needs_analysis",
    "probe_reason",
    "single_select",
    "sql_words",
    "whole_files_reason",
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

VIEW_SELECT_ROWS = 25_000
VIEW_SELECT_ROWS_PER_LITERAL = 110
"""DuckDB over local Parquet, bound as a view of one ``read_parquet`` per partly read file
(:func:`whole_files_reason`): such a file is read whole, with the files read whole, when it
would leave out fewer than ``VIEW_SELECT_ROWS + VIEW_SELECT_ROWS_PER_LITERAL * L`` rows
(``L``: the literals of the table's terms, :func:`literals`). A ``read_parquet`` of its own
cost DuckDB 0.55 ms a file for an ``IN`` of 7 keys and 2.8 ms for 1,000 keys, where the same
files read whole in one ``read_parquet`` cost 0.13 and 0.72 ms a file (256 files of one
8,192-row row group each), and DuckDB scans about 60 rows a microsecond on this machine's
two cores: set-up costs of 0.42 ms + 1.7 us per literal buy 25,000 + 110 rows per literal.
Measured at 20M rows in 1,000 files, an ``IN`` of 1,000 keys (831 row groups in 634 files):
2.6 s as one read per file, 0.71 s with those files read whole, 0.79 s in DuckDB alone."""

FILES_SKIP_FRACTION = 0.9
"""DuckDB over local Parquet: a term whose keys, spread at random, would touch files holding
at least this share of the rows, each of which DuckDB then reads whole
(:func:`whole_files_reason`), is not probed: the probe would save the read of at most a
tenth of the rows, and costs as much (1,000 keys over 1,000 files: 80 ms to probe, where
DuckDB reads 20M rows in 750 ms; over 200 files they touch 99% of the rows)."""

LANCE_WARM_LOOKUPS_PER_MIB = 2.0
LANCE_WARM_LOOKUPS = 8.0
"""DuckDB over a local Lance table held open: the point lookups of a column pruner probes
itself before Lance's scanner probes the index (:func:`lance_probes_reason`), per MiB of the
index's files, and at least. The switch costs once what pruner's check of the index (every
zone read and checked: ~1.5 ms a MiB) and Lance's load of it into its cache (~2.6 ms a MiB)
cost, and then saves 0.6-1.8 ms a lookup (docs/scale.md, 5M to 100M rows; 1.1-1.8 ms up to
20M): pruner switches once its own lookups have cost about what the switch costs, so a
table looked up a few times never pays for it, and one looked up often at most twice."""

LANCE_OWN_FRAGMENTS = 750
"""A Lance table of at least this many fragments keeps its lookups in pruner's own probe
and read (none is left to Lance's scanner): Lance's lookup costs more with every fragment,
pruner's does not. Warm, against DuckDB alone (/tmp/prof/own5.py), left to Lance / pruner's
own: 1.13-1.15 / 1.26-1.30 at 200 fragments, 1.12 / 1.08-1.12 at 500 (10M rows), 0.96 /
0.93 at 1,000 (20M), 0.96-0.98 / 0.79-0.83 at 1,000 (100M)."""

LANCE_LEFT_FRAGMENTS = 500
"""A lookup left to Lance's scanner (:data:`LEFT_TO_LANCE`) of a table of at least this many
fragments is given only the fragments pruner's probe of its key selects
(:attr:`pruner.plan.Plan.lance_probes`). Lance's scan costs about 1 us more per fragment it
is given (DuckDB over Lance, one key: 4.19 against 3.06 ms given all 1,000 fragments or the
one holding it, 20M rows; 0.27 ms at 200 fragments, 5M rows), and the probe and binding cost
0.3-0.5 ms: at 200 fragments a lookup took 1.35x DuckDB alone's with them, 1.17x without;
at 1,000, 1.02x against 1.13x (/tmp/prof/lk2.py)."""

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
    what the cheap checks on a query's text read instead of parsing it. The last two texts'
    words are kept for the next calls with those very strings: the plan asks for a query's
    words, for those of its text without the IN lists too long to probe
    (:func:`needs_analysis`), and for the query's again (:func:`single_select`, the
    adapter), ~2 ms each for an IN list of 10,000 keys. Callers only read the list."""
    global _last_words
    for text, words in _last_words:
        if text is sql:
            return words
    words = _WORDS.findall(sql.casefold())
    _last_words = ((sql, words), _last_words[0])
    return words


_last_words: tuple[tuple[str, list[str]], ...] = (("", []), ("", []))


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


_SET_WORDS = frozenset({"union", "intersect", "except", "exists"})
"""Words of a statement that may join its one SELECT to something else with no second
SELECT (``... EXCEPT TABLE t``, ``... UNION VALUES (1)``)."""


def single_select(sql: str) -> bool:
    """Is ``sql`` (by its words) at most one SELECT, with no join and no set operation?

    >>> single_select("SELECT * FROM t WHERE id = 5"), single_select("FROM t UNION FROM u")
    (True, False)
    """
    words = sql_words(sql)
    return words.count("select") <= 1 and "join" not in words and _SET_WORDS.isdisjoint(words)


LONG_SQL = 200
"""SQL at least this long that says IN is searched for literal lists too long to probe
(:func:`_without_unprobed_lists`); shorter SQL holds too few literals to be worth the search.
An IN of 100 keys (809 characters) not probed on a table of 1M rows, 10 fragments: 0.37 ms
to plan with the search (not analysed), 1.04 ms analysed; a query of 263 characters that is
analysed all the same costs no more with the search (0.92 against 0.95 ms)."""


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
    if len(sql) < LONG_SQL or "in" not in sql_words(sql):
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


def probe_reason(table: Table, column: str, keys: int, dialect: str | None = None) -> str | None:
    """Why a term of ``keys`` distinct keys on ``column`` is not worth probing (see the
    module's text; ``dialect``: the engine's, for its own costs), or None to probe it."""
    if keys < 2 or storage.is_remote(table.path):
        return None
    units = _units(table, column)
    if units < 1:
        return None
    touched = _touched(keys, units)
    if touched >= PROBE_SKIP_FRACTION:
        return (
            f"not probed: {keys:,} keys spread over {units:,} {_unit_name(table)} would "
            f"select about {touched:.0%} of them; the engine's own read is cheaper"
        )
    files = _files_touched(table, keys, touched, dialect)
    if files is None or files < FILES_SKIP_FRACTION:
        return None
    return (
        f"not probed: {keys:,} keys spread over {len(table.files or ()):,} files would select "
        f"files of about {files:.0%} of the rows, and DuckDB reads every file they select in "
        "part whole (cost model: a read of its own costs more); the engine's own read is "
        "cheaper"
    )


def lance_probes_reason(table: Table, predicate: Predicate, dialect: str) -> str | None:
    """Why the terms of a scan are left to Lance's scanner (see the module's text), or None
    to probe them: DuckDB, a local Lance table too large to read whole ahead
    (:data:`pruner.reads.LANCE_READ_AHEAD_VALUES`), held open and looked up often enough
    (:data:`LANCE_WARM_LOOKUPS_PER_MIB`), the scan the only one of a statement of
    one SELECT (the caller's part), and its predicate a conjunction whose every ``=`` or
    ``IN`` term is an ``=`` of one literal, each on a column Lance's scanner may probe the
    index of (integers and strings) and at least one with an index. DuckDB pushes each such
    ``column = literal`` into Lance's scan, where Lance probes the index pruner checked."""
    if not _lance_table(table, dialect):
        return None
    conjuncts = predicate.children if isinstance(predicate, And) else (predicate,)
    columns = []
    for term in conjuncts:
        if isinstance(term, Equals) and not term.null_safe:
            columns.append(term.column)
        elif any(isinstance(leaf, Equals | In) for leaf in leaves(term)):
            return None
    return LEFT_TO_LANCE if lance_still_probes(table, columns, dialect, count=True) else None


_NOT_PUSHED_AS_EQUALITY = frozenset({"in", "between"})


def equalities_pushed(sql: str) -> bool:
    """Is ``sql`` (by its words) one SELECT with no join and no set operation
    (:func:`single_select`) whose ``=`` terms DuckDB pushes into Lance's scan as the
    equalities Lance's scanner probes an index for: the statements whose terms
    :func:`lance_probes_reason` may leave to Lance. Not where it says IN or BETWEEN, which
    may write one key (``id IN (5)``, ``id BETWEEN 5 AND 5``: an ``=`` to the analysis).
    DuckDB pushes ``id IN (5)`` as ``if_else(is_valid(id), is_in(id, [5]), null)``, for
    which Lance probes no index: 11.5 ms at 1M rows against 2.7 for ``id = 5``, and pruner's
    own probe of the same key takes about what the latter takes."""
    return single_select(sql) and _NOT_PUSHED_AS_EQUALITY.isdisjoint(sql_words(sql))


LEFT_TO_LANCE = (
    "not probed: left to Lance's scanner, which probes the index pruner checked itself (DuckDB "
    "pushes each equality into Lance's scan; a table looked up often); the engine's own read "
    "is cheaper"
)
"""The reason of every term :func:`lance_probes_reason` leaves to Lance's scanner."""


def lance_still_probes(
    table: Table, columns: Iterable[str], dialect: str, count: bool = False
) -> bool:
    """May terms ``column = literal`` on ``columns`` of ``table`` be left to Lance's scanner
    (:func:`lance_probes_reason`'s choice, once it has read the predicate; or a plan made
    before, reused for a text of the same shape): the table, the columns' types and indexes,
    the lookups counted so far and the indexes' files now? With ``count``, counts this
    lookup."""
    if not _lance_table(table, dialect):
        return False
    indexed = sorted({c for c in columns if c in table.schema.names and _may_prune(table, c)})
    if not indexed:
        return False
    for column in indexed:
        kind = table.schema.field(column).type
        if not (pa.types.is_signed_integer(kind) or pa.types.is_string(kind)):
            return False
    return all(_lance_warm(table, column, count) for column in indexed)


def _lance_table(table: Table, dialect: str) -> bool:
    """DuckDB, a local Lance table too large to read whole ahead, of fewer fragments than
    :data:`LANCE_OWN_FRAGMENTS`, with no compound key."""
    if dialect != "duckdb" or table.kind != "lance" or storage.is_remote(table.path):
        return False
    if len(table.fragment_rows) >= LANCE_OWN_FRAGMENTS:
        return False  # Lance's lookup costs more than pruner's own at this many fragments
    if table.num_rows * max(1, len(table.schema)) <= reads.LANCE_READ_AHEAD_VALUES:
        return False  # read whole ahead, as pruner reads a zone: no index of Lance's probed
    return not table.compound_keys()


def _lance_warm(table: Table, column: str, count: bool = True) -> bool:
    """Has ``table`` (held open) been looked up on ``column`` often enough for Lance's
    scanner to probe that column's index itself (:data:`LANCE_WARM_LOOKUPS_PER_MIB`), and may
    it (:func:`pruner.table.trust.lance_may_probe`: the index's files are checked whole once,
    when first asked)? With ``count``, counts this lookup."""
    lookups, size = lance_lookup(table, column, count)
    needed = max(LANCE_WARM_LOOKUPS, LANCE_WARM_LOOKUPS_PER_MIB * size / (1 << 20))
    return size > 0 and lookups >= needed and lance_may_probe(table, column)


def _touched(keys: int, units: int) -> float:
    """The share of ``units`` that ``keys`` keys spread at random touch."""
    return -math.expm1(keys * math.log1p(-1.0 / units)) if units > 1 else 1.0


def _files_touched(table: Table, keys: int, touched: float, dialect: str | None) -> float | None:
    """DuckDB over local Parquet: the share of the rows in the files ``keys`` keys spread
    at random would touch, when :func:`whole_files_reason` would read each such file whole
    (its selection past the read-ahead budget, at ``touched`` of the bytes, and every file
    leaving out fewer rows than :data:`VIEW_SELECT_ROWS` allows for ``keys`` literals even
    with one row group selected; no deleted rows), else None."""
    if dialect != "duckdb" or table.kind != "parquet" or table.deleted is not None:
        return None
    files = _files_of(table)
    if files is None:
        return None
    most = VIEW_SELECT_ROWS + VIEW_SELECT_ROWS_PER_LITERAL * keys
    if files.widest >= most:
        return None
    if touched * files.byte_size <= reads.DUCKDB_READ_AHEAD_BYTES:
        return None  # read ahead, by row groups
    share = files.rows / files.rows.sum()
    return float((share * -np.expm1(keys * np.log1p(-share))).sum())


@dataclass(frozen=True)
class _Files:
    """What :func:`_files_touched` weighs of a Parquet table's files, the same for every
    query of the opened table (a table whose files change is opened anew): the most rows a
    file leaves out with one row group selected, the row groups' bytes, each file's rows."""

    widest: int
    byte_size: int
    rows: np.ndarray


_FILES: weakref.WeakKeyDictionary[Table, _Files | None] = weakref.WeakKeyDictionary()
""":class:`_Files` per opened table, None for fewer than two files or no rows (0.6-0.9 ms
a term to gather at 1,000 files, every query, before)."""


def _files_of(table: Table) -> _Files | None:
    if table not in _FILES:
        files = list((table.files or {}).values())
        rows = np.array([f.rows for f in files], dtype=np.float64)
        _FILES[table] = (
            _Files(
                max(f.rows - min(f.row_group_rows, default=0) for f in files),
                sum(f.byte_size for f in files),
                rows,
            )
            if len(files) >= 2 and rows.sum() > 0
            else None
        )
    return _FILES[table]


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


def whole_reason(table: Table, selection: Selection, dialect: str | None = None) -> str | None:
    """Why ``table`` is read whole rather than as ``selection`` (see the module's text;
    ``dialect``: the engine's), or None to read the selection."""
    if storage.is_remote(table.path):
        return None
    total = table.num_rows
    if total == 0:
        return None
    if table.kind == "parquet":
        parts = parquet_parts(table, selection)
        read = sum(part.rows() for part in parts)
        if dialect == "duckdb" and read < total and all(p.row_groups is None for p in parts):
            return None  # one read_parquet of fewer files: DuckDB's own read, of less
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


def literals(predicate: Predicate) -> int:
    """How many literals ``predicate``'s terms hold (an ``IN`` list's each, another term 1):
    what each of DuckDB's reads copies of the query's filter grows with."""
    return sum(
        len(leaf.values) if isinstance(leaf, In | NotIn) else 1 for leaf in leaves(predicate)
    )


def whole_files_reason(
    table: Table, selection: Selection, literal_count: int, dialect: str
) -> tuple[Selection, str] | None:
    """``selection`` with the files DuckDB reads faster whole than as a read of their own
    (:data:`VIEW_SELECT_ROWS`; ``literal_count``: :func:`literals` of the table's terms),
    and why, or None to read ``selection`` as it is: another engine (``dialect``), a table
    on an object store (pruner reads its files ahead, in one batch), or a selection DuckDB's
    binding reads ahead (every file in part, two or more, of few bytes) or reads with one
    ``read_parquet`` of its own at most. A file with deleted rows (Delta's deletion vectors)
    is read by row number all the same, so it is never widened."""
    if dialect != "duckdb" or table.kind != "parquet" or storage.is_remote(table.path):
        return None
    parts = parquet_parts(table, selection)
    partial = [p for p in parts if p.row_groups is not None]
    if len(partial) < 2:
        return None
    if len(partial) == len(parts) and read_ahead_bytes(partial) <= reads.DUCKDB_READ_AHEAD_BYTES:
        return None
    most = VIEW_SELECT_ROWS + VIEW_SELECT_ROWS_PER_LITERAL * literal_count
    wide = [
        p for p in partial if p.file.rows - p.rows() < most and deleted_rows(table, p.file) is None
    ]
    if not wide:
        return None
    ids = {file.path: fid for fid, file in (table.files or {}).items()}
    widened = selection | Selection.whole({ids[p.file.path]: p.file.rows for p in wide})
    return widened, (
        f"cost model: {len(wide):,} of the {len(partial):,} files selected in part are read "
        f"whole, in DuckDB's one read of the files read whole (each leaves out fewer than "
        f"{most:,} rows: DuckDB scans them faster than it sets up a read of that file alone "
        f"with {literal_count:,} literals)"
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
