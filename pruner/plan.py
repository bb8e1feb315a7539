"""``plan``: what an adapter needs before it runs a query, the same for every engine.

The tables are opened, the SQL is analyzed in the engine's dialect and every scan's
selection is computed; the per-table union is what the engine must read. With
``prune=False`` nothing is analyzed and every table is read whole (``None``), through the
same adapter code, so pruned and unpruned runs differ only in what they skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pruner.analyzer import names_table
from pruner.costs import needs_analysis, sql_words
from pruner.evaluate import RowKeys
from pruner.explain import Explanation, explain_opened
from pruner.parameters import Parameters
from pruner.selection import Selection
from pruner.table import Table, TableSource, open_tables

__all__ = ["Parameters", "Plan", "TableSource", "named_in", "plan"]


@dataclass(frozen=True)
class Plan:
    """Per table name: the opened table and the rows to read (None: the whole table, read
    without any index; a whole Selection: the whole table, as the engine reads it alone;
    pruner's scans of Lance never probe Lance's own indexes, which Lance does not check:
    pruner.adapters.sources.NO_SCALAR_INDEX)."""

    tables: dict[str, Table]
    selections: dict[str, Selection | None]
    explanation: Explanation | None = field(default=None)
    row_keys: dict[str, RowKeys] = field(default_factory=dict)  # known without an analysis
    one_table_select: bool = False  # not analysed: one SELECT of one table, no set operation

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
        return Plan(opened, every, one_table_select=_SET_WORDS.isdisjoint(sql_words(sql)))
    # SQL pruner's parser refuses is the engine's to judge: explain reads every table whole
    # then, and the engine raises its own error (as it would without pruner) or answers.
    explanation = explain_opened(sql, opened, dialect=dialect, parameters=parameters, analysed=True)
    found = explanation.chosen()
    whole = dict(explanation.read_whole)  # the cost model's choice (pruner.costs)
    selections: dict[str, Selection | None] = {
        name: table.whole() if name in whole else found.get(name) for name, table in opened.items()
    }
    return Plan(opened, selections, explanation)


_SET_WORDS = frozenset({"union", "intersect", "except", "exists"})
"""Words of a statement that may join its one SELECT to something else with no second
SELECT (``... EXCEPT TABLE t``, ``... UNION VALUES (1)``): not :attr:`Plan.one_table_select`."""


def named_in(name: str, sql: str) -> bool:
    """Can ``sql`` name the table ``name``: does it occur, plain or with its quote
    characters doubled as inside a quoted identifier?

    >>> named_in('a"b', 'SELECT * FROM "a""b" AS x'), named_in("users", "SELECT 1")
    (True, False)
    """
    return names_table(name, sql)
