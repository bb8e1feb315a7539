"""``plan``: what an adapter needs before it runs a query, the same for every engine.

The tables are opened, the SQL is analyzed in the engine's dialect and every scan's
selection is computed; the per-table union is what the engine must read. With
``prune=False`` nothing is analyzed and every table is read whole (``None``), through the
same adapter code, so pruned and unpruned runs differ only in what they skip.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from pruner import costs
from pruner.analysis.templates import template_of
from pruner.analyzer import analyze, names_table
from pruner.costs import LEFT_TO_LANCE, lance_still_probes, needs_analysis, single_select
from pruner.errors import SqlSyntaxError
from pruner.evaluate import RowKeys, fragments_selected
from pruner.explain import Explanation, explain_opened
from pruner.expressions import And, Equals
from pruner.parameters import Parameters
from pruner.selection import Selection
from pruner.table import Table, TableSource, open_tables

__all__ = ["Parameters", "Plan", "TableSource", "named_in", "plan"]


@dataclass(frozen=True)
class Plan:
    """Per table name: the opened table and the rows to read (None: the whole table, read
    without any index; a whole Selection: the whole table, as the engine reads it alone;
    pruner's scans of Lance never probe Lance's own indexes, which Lance does not check:
    pruner.adapters.sources.NO_SCALAR_INDEX, but for the tables of ``lance_probes``)."""

    tables: dict[str, Table]
    selections: dict[str, Selection | None]
    explanation: Explanation | None = field(default=None)
    row_keys: dict[str, RowKeys] = field(default_factory=dict)  # known without an analysis
    one_table_select: bool = False  # not analysed: one SELECT of one table, no set operation
    # Tables whose terms are left to Lance's scanner (pruner.costs.LEFT_TO_LANCE), which
    # probes the index pruner checked within the selection (whole fragments)
    lance_probes: frozenset[str] = frozenset()

    def keys(self, name: str) -> RowKeys | None:
        """The keys every row the query keeps of table ``name`` holds, when pruner knows
        them and the table is pruned (a reader may drop the other rows of its selection)."""
        if self.selections.get(name) is None:
            return None
        if self.explanation is None:
            return self.row_keys.get(name)
        if name in dict(self.explanation.read_whole):
            return None
        return self.explanation.keys().get(name)

    def reads_whole(self, name: str) -> bool:
        """Does table ``name`` read all its rows, with no keys to filter them by?"""
        selection = self.selections.get(name)
        whole = selection is None or selection.num_rows == self.tables[name].num_rows
        return whole and self.keys(name) is None

    @property
    def inner_joins_only(self) -> bool:
        """Is the statement known to join by inner or cross joins only, none made from a
        subquery (:class:`pruner.analysis.model.Analysis`)? False when not analysed."""
        return self.explanation is not None and self.explanation.inner_joins_only

    @property
    def no_outer_join(self) -> bool:
        """Is the statement known to hold no outer, semi or anti join: inner or cross joins
        only (:attr:`inner_joins_only`), or one SELECT of one table, no join at all?"""
        return self.one_table_select or self.inner_joins_only

    def zones(self) -> tuple[int, int]:
        """Zones selected and zones in total, over every scan (0, 0 when not pruned)."""
        if self.explanation is None:
            return 0, 0
        scans = self.explanation.scans
        return sum(s.zones_selected for s in scans), sum(s.zones_total for s in scans)

    def rows(self) -> tuple[int, int]:
        """Rows the engine reads and rows in the tables the query names."""
        total = sum(t.num_rows for t in self.tables.values())
        read = sum(
            self.tables[name].num_rows if selection is None else selection.num_rows
            for name, selection in self.selections.items()
        )
        return read, total


def plan(
    sql: str,
    tables: Mapping[str, TableSource],
    *,
    dialect: str,
    parameters: Parameters = (),
    prune: bool = True,
) -> Plan:
    """Open ``tables`` and compute what each must read for ``sql``.

    Only the tables whose name occurs in the SQL text are opened and bound (an engine
    cannot read a table the query does not name); the others are left out, pruned or not.
    """
    opened = open_tables({n: t for n, t in tables.items() if named_in(n, sql)})
    if not prune:
        return Plan(opened, dict.fromkeys(opened))
    if not needs_analysis(sql, opened):
        # Nothing the text names could prune (pruner.costs): not analysed; each table is
        # read whole as the engine reads it alone.
        every: dict[str, Selection | None] = {n: t.whole() for n, t in opened.items()}
        return Plan(opened, every, one_table_select=single_select(sql))
    if _LEFT and not parameters:
        known = _left_to_lance(sql, dialect, opened)
        if known is not None:
            return known
    # SQL pruner's parser refuses is the engine's to judge: explain reads every table whole
    # then, and the engine raises its own error (as it would without pruner) or answers.
    explanation = explain_opened(sql, opened, dialect=dialect, parameters=parameters, analysed=True)
    found = explanation.chosen()
    whole = dict(explanation.read_whole)  # the cost model's choice (pruner.costs)
    selections: dict[str, Selection | None] = {
        name: table.whole() if name in whole else found.get(name) for name, table in opened.items()
    }
    if not parameters:
        _remember_left(sql, dialect, opened, explanation)
    return Plan(opened, selections, explanation)


_Left = tuple[tuple[tuple[str, weakref.ref[Table]], ...], frozenset[tuple[str, str]]]
_LEFT: dict[tuple[object, ...], _Left] = {}
"""Per template of SQL texts (:func:`pruner.analysis.templates.template_of`, whose key
holds the dialect): the tables (held open, by name) whose every term a plan of one of those
texts left to Lance's scanner (:data:`pruner.costs.LEFT_TO_LANCE`), and those terms'
columns by table. That choice reads each table whole and depends on no literal of the text
(only on its shape, the table held and its index), so the next text of the template over
the same tables gets the same plan without an analysis: 0.1 ms where analysing and choosing
cost 0.45 ms of a 3 ms lookup (5M rows, DuckDB). The choice is checked again
(:func:`pruner.costs.lance_still_probes`: the table and its index's files as they are now)
before the plan is reused. On a table of many fragments the next text's plan also gives
Lance the fragments pruner's probe of its key selects (:func:`_lookup_fragments`)."""

_LEFT_SIZE = 256
_LEFT_LOCK = threading.Lock()


def _remember_left(
    sql: str, dialect: str, opened: Mapping[str, Table], explanation: Explanation
) -> None:
    """Remember the plan of ``sql`` in :data:`_LEFT` when it left every term to Lance."""
    terms = [(s.scan.table, term) for s in explanation.scans for term in s.terms]
    if not terms or any(term.reason != LEFT_TO_LANCE for _, term in terms):
        return
    if {s.scan.table for s in explanation.scans} != set(opened):
        return
    template = template_of(sql, dialect)
    if template is None:
        return
    refs = tuple((name, weakref.ref(table)) for name, table in opened.items())
    columns = frozenset((name, term.column) for name, term in terms if term.column is not None)
    with _LEFT_LOCK:
        if len(_LEFT) >= _LEFT_SIZE:
            del _LEFT[next(iter(_LEFT))]
        _LEFT[template.key] = (refs, columns)


def _left_to_lance(sql: str, dialect: str, opened: dict[str, Table]) -> Plan | None:
    """The plan :data:`_LEFT` remembers for ``sql``'s template over ``opened``, if any and
    each column's index may still be probed by Lance's scanner."""
    template = template_of(sql, dialect)
    if template is None:
        return None
    key = template.key
    known = _LEFT.get(key)
    if known is None:
        return None
    refs, columns = known
    if len(refs) != len(opened) or any(opened.get(name) is not ref() for name, ref in refs):
        return None
    if not all(
        lance_still_probes(t, [c for n, c in columns if n == name], dialect)
        for name, t in opened.items()
    ):
        with _LEFT_LOCK:
            _LEFT.pop(key, None)
        return None
    if len(opened) == 1:
        [(name, table)] = opened.items()
        if len(table.fragment_rows) >= costs.LANCE_LEFT_FRAGMENTS:
            found = _lookup_fragments(sql, dialect, name, table, {c for _, c in columns})
            if found is not None:
                probes = frozenset(opened)
                return Plan(opened, {name: found}, one_table_select=True, lance_probes=probes)
    whole: dict[str, Selection | None] = {name: t.whole() for name, t in opened.items()}
    return Plan(opened, whole, one_table_select=True)


def _lookup_fragments(
    sql: str, dialect: str, name: str, table: Table, columns: set[str]
) -> Selection | None:
    """The fragments a lookup left to Lance may find its rows in
    (:data:`pruner.costs.LANCE_LEFT_FRAGMENTS`): those pruner's probe selects for an equality
    of ``columns`` among the top-level terms of ``sql``'s one scan (its analysis, as the
    template of the text gives it: 0.03 ms), or None (every fragment)."""
    try:
        analysis = analyze(sql, {name: table.schema}, dialect)
    except SqlSyntaxError:
        return None
    if len(analysis.scans) != 1 or analysis.scans[0].table != name or analysis.scans[0].joins:
        return None
    predicate = analysis.scans[0].predicate
    for term in predicate.children if isinstance(predicate, And) else (predicate,):
        if isinstance(term, Equals) and not term.null_safe and term.column in columns:
            return fragments_selected(term, table, dialect)
    return None


def named_in(name: str, sql: str) -> bool:
    """Can ``sql`` name the table ``name``: does it occur, plain or with its quote
    characters doubled as inside a quoted identifier?

    >>> named_in('a"b', 'SELECT * FROM "a""b" AS x'), named_in("users", "SELECT 1")
    (True, False)
    """
    return names_table(name, sql)
