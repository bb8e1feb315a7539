"""Predicate x table -> Selection, with a report per term for explain.

The predicate is first bound to the table (:func:`pruner.binding.bind`: each Equals / In
leaf's literals coerced at the column's type and width and hashed, once); each bound leaf is
then probed against every zone in one batch; IS NULL reads
the zones' has-null flags. AND intersects selections and OR unites them; every other leaf
selects everything, which is where "cannot prune" comes from (pyiceberg's inclusive metrics
evaluator reasons the same way). An index that is missing, damaged or stale widens the result;
nothing here can narrow it below the rows that match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import join_keys
from pruner.analyzer import Analysis, Scan
from pruner.binding import bind
from pruner.costs import equalities_pushed, join_read_reason, lance_probes_reason, probe_reason
from pruner.errors import IndexFormatError, PrunerError
from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundLiterals,
    IsNull,
    NotEquals,
    NotIn,
    NotNull,
    Or,
    Predicate,
    PredicateVisitor,
    Unknown,
    to_sql,
    visit,
)
from pruner.index.keys import KEY_TUPLE_LIMIT, Key, hash_tuples, key_tuples
from pruner.lookup import lookup
from pruner.selection import Selection
from pruner.table import Table, TableIndex

__all__ = [
    "RowKeys",
    "ScanSelection",
    "TermReport",
    "fragments_selected",
    "row_keys",
    "select_scans",
    "table_keys",
    "table_selections",
]


@dataclass(frozen=True, slots=True)
class TermReport:
    """One leaf of a scan's predicate: did it use an index, and if not, why."""

    term: str
    used_index: bool
    reason: str = ""
    column: str | None = None
    zones_selected: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "term": self.term,
            "column": self.column,
            "used_index": self.used_index,
            "reason": self.reason,
            "zones_selected": self.zones_selected,
        }


@dataclass(frozen=True, slots=True)
class RowKeys:
    """Every row a scan keeps holds one of ``values`` in ``column``: a top-level conjunct of
    its predicate is ``column = v`` / ``column IN (...)`` whose literals coerce exactly
    (:attr:`pruner.literals.Coercion.exact`: integers on an integer column, strings on a
    string column). A reader may drop the other rows of the selection before the engine
    sees them: the engine would drop them too."""

    column: str
    values: frozenset[Any]


@dataclass(frozen=True, slots=True)
class ScanSelection:
    """The rows one table scan must read, and how pruner got there."""

    scan: Scan
    selection: Selection
    terms: tuple[TermReport, ...]
    zones_total: int
    zones_selected: int
    rows_total: int
    fragments_total: int
    keys: RowKeys | None = None
    table: Table | None = field(default=None, compare=False, repr=False)
    unindexed_fragments: tuple[int, ...] = ()  # fragments the index used does not cover


class _Evaluator(PredicateVisitor[Selection | None]):
    """A bound predicate -> the selected rows; None means every row (kept symbolic: it is
    the common case). Records a :class:`TermReport` per leaf as it goes."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.terms: list[TermReport] = []
        self.layout: TableIndex | None = None
        # Compound keys: which were probed or reported, and what the predicate said of the
        # columns (a leaf's column; why its literals cannot be compared exactly).
        self.keys_done: set[Key] = set()
        self.mentioned: set[str] = set()
        self.inexact: dict[str, str] = {}
        self.unmatched: set[str] = set()

    def bound(self, column: str, term: str) -> TableIndex | None:
        try:
            index = self.table.index(column)
        except IndexFormatError as err:
            self.terms.append(
                TermReport(term, False, f"bloom index on {column} is unreadable ({err})", column)
            )
            return None
        if index is None:
            reason = f"no bloom index on column {column}"
            if column in self.table.mixed_types:
                reason = f"the Parquet files disagree on the type of {column}"
            self.terms.append(TermReport(term, False, reason, column))
        elif self.layout is None:
            self.layout = index
        return index

    def visit_and(self, node: And) -> Selection | None:
        result: Selection | None = None
        for child in node.children:
            part = visit(child, self)
            if part is not None:
                result = part if result is None else result & part
        for part in self.compound(node.children):
            result = part if result is None else result & part
        return result

    def compound(self, conjuncts: tuple[Predicate, ...]) -> list[Selection]:
        """The selections of the table's compound indexes whose every column one of
        ``conjuncts`` (an AND's children) fixes: ``column = v`` / ``IN`` with literals
        pruner coerced, or ``IS NULL``. Each is probed with the tuples of the values'
        cross product (at most :data:`KEY_TUPLE_LIMIT`); every one that applies is used, and
        the AND intersects them with the single-column indexes' selections."""
        keys = self.table.compound_keys()
        if not keys:
            return []
        fixed: dict[str, tuple[tuple[Any, ...], Predicate]] = {}
        for term in conjuncts:
            if isinstance(term, BoundLiterals) and term.values is not None and not term.no_match:
                known = fixed.get(term.column)
                if known is None or len(term.values) < len(known[0]):
                    fixed[term.column] = (term.values, term)
            elif isinstance(term, IsNull):
                fixed.setdefault(term.column, ((None,), term))
        found = []
        for key in keys:
            if not all(c in fixed for c in key.columns):
                continue
            self.keys_done.add(key)
            values = [fixed[c][0] for c in key.columns]
            shown = " AND ".join(to_sql(fixed[c][1]) for c in key.columns)
            part = self.probe_key(key, values, shown)
            if part is not None:
                found.append(part)
        return found

    def probe_key(self, key: Key, values: list[tuple[Any, ...]], term: str) -> Selection | None:
        count = math.prod(len(v) for v in values)
        if count > KEY_TUPLE_LIMIT:
            reason = (
                f"compound index {key.shown} not used: the values make {count:,} tuples, "
                f"more than {KEY_TUPLE_LIMIT:,}"
            )
            self.terms.append(TermReport(term, False, reason, key.shown))
            return None
        bound = self.table.key_index(key)
        if isinstance(bound, str):
            reason = f"compound index {key.shown} not used: {bound}"
            self.terms.append(TermReport(term, False, reason, key.shown))
            return None
        try:
            hashes = hash_tuples(
                key_tuples(values, [self.table.schema.field(c).type for c in key.columns])
            )
        except (PrunerError, pa.ArrowException) as err:
            reason = f"compound index {key.shown} not used: cannot encode the values ({err})"
            self.terms.append(TermReport(term, False, reason, key.shown))
            return None
        mask, decided = bound.index.zone_mask_explained(hashes)
        selected = int((mask & bound.valid).sum())
        reason = f"compound index {key.shown}, {count:,} tuples" + (
            f"; {decided}" if decided else ""
        )
        self.terms.append(TermReport(term, True, reason, key.shown, selected))
        if self.layout is None:
            self.layout = bound
        return bound.zones(mask)

    def unused_keys(self) -> None:
        """Say why each compound index on columns the predicate names was not probed."""
        for key in self.table.compound_keys():
            if key in self.keys_done or not self.mentioned & set(key.columns):
                continue
            if self.unmatched & set(key.columns):
                continue  # a term no value can match decided
            inexact = [c for c in key.columns if c in self.inexact]
            unconstrained = [c for c in key.columns if c not in self.mentioned]
            if inexact:
                c = inexact[0]
                why = f"the literals of {c} cannot be compared exactly ({self.inexact[c]})"
            elif unconstrained:
                why = f"{', '.join(unconstrained)} unconstrained"
            else:
                why = "its columns are not all fixed within one AND (an OR across columns, or NOT)"
            self.terms.append(
                TermReport(
                    f"compound index {key.shown}",
                    False,
                    f"compound index {key.shown} not used: {why}",
                    key.shown,
                )
            )

    def visit_or(self, node: Or) -> Selection | None:
        parts = [visit(child, self) for child in node.children]
        if any(part is None for part in parts):
            if any(part is not None for part in parts):
                unpruned = [
                    to_sql(child)
                    for child, part in zip(node.children, parts, strict=True)
                    if part is None
                ]
                reason = "OR with a term that cannot prune: " + "; ".join(unpruned)
                self.terms.append(TermReport(to_sql(node), False, reason))
            return None
        united = Selection.empty()
        for part in parts:
            if part is not None:
                united = united | part
        return united

    def visit_true(self, node: AlwaysTrue) -> Selection | None:
        return None

    def visit_false(self, node: AlwaysFalse) -> Selection | None:
        self.terms.append(TermReport("FALSE", False, node.reason or "never true"))
        return Selection.empty()

    def visit_bound(self, node: BoundLiterals) -> Selection | None:
        term, column = to_sql(node), node.column
        self.mentioned.add(column)
        if node.no_match:
            self.unmatched.add(column)
        elif node.values is None:
            self.inexact.setdefault(column, node.reason)
        if node.unindexed:
            if self.bound(column, term) is not None:  # an index appeared since binding
                self.terms.append(TermReport(term, False, "index found after binding", column))
            return None
        if node.hashes is None and node.error is None:
            if node.no_match:
                self.terms.append(TermReport(term, False, node.reason, column, 0))
                return Selection.empty()
            self.terms.append(TermReport(term, False, node.reason, column))
            return None
        index = self.bound(column, term)
        if index is None:
            return None
        if node.error is not None or node.hashes is None:
            raise node.error or ValueError(f"{term} was not bound")
        mask, decided = index.index.zone_mask_explained(node.hashes, node.values)
        if node.values is not None:
            out = index.ruled_out(mask, node.values)
            if out.any():
                mask = mask & ~out
                ruled = f"row-group min/max: {int(out.sum())} more zones ruled out"
                decided = ruled if decided is None else f"{decided}; {ruled}"
        selected = int((mask & index.valid).sum())
        reason = node.reason if decided is None else f"{node.reason}; {decided}".lstrip("; ")
        self.terms.append(TermReport(term, True, reason, column, selected))
        return index.zones(mask)

    def visit_is_null(self, node: IsNull) -> Selection | None:
        self.mentioned.add(node.column)
        return self.nulls(node.column, to_sql(node))

    def visit_unknown(self, node: Unknown) -> Selection | None:
        self.terms.append(TermReport(node.sql or to_sql(node), False, node.reason))
        return None

    def visit_not_equals(self, node: NotEquals) -> Selection | None:
        return self.cannot_prune(node, node.column, "!=")

    def visit_not_in(self, node: NotIn) -> Selection | None:
        return self.cannot_prune(node, node.column, "NOT IN")

    def visit_not_null(self, node: NotNull) -> Selection | None:
        return self.cannot_prune(node, node.column, "IS NOT NULL")

    def cannot_prune(self, node: Predicate, column: str, operator: str) -> Selection | None:
        self.terms.append(TermReport(to_sql(node), False, f"{operator} cannot prune", column))
        return None

    def visit_other(self, node: Predicate) -> Selection | None:
        # Unbound Equals / In do not reach here (_run binds first); rewrite_not leaves no Not.
        self.terms.append(TermReport(to_sql(node), False, "not understood"))
        return None

    def nulls(self, column: str, term: str) -> Selection | None:
        if column not in self.table.schema.names:
            self.terms.append(TermReport(term, False, f"no column {column} in the table", column))
            return None
        index = self.bound(column, term)
        if index is None:
            return None
        mask = np.asarray(index.index.has_null, dtype=bool)
        self.terms.append(TermReport(term, True, "", column, int((mask & index.valid).sum())))
        return index.zones(mask, nulls=True)


def _run(
    predicate: Predicate, table: Table, dialect: str, alone: bool = False
) -> tuple[_Evaluator, Selection | None, Predicate]:
    """The evaluator (its term reports, its layout), the selection (None for every row) and
    the bound predicate. ``alone``: :func:`pruner.costs.equalities_pushed` of the statement
    of this one scan: its terms may be left to Lance's scanner (``lance_probes_reason``)."""
    evaluator = _Evaluator(table)
    lance = lance_probes_reason(table, predicate, dialect) if alone else None
    bound = bind(
        predicate,
        table.schema,
        dialect,
        table.hash_type,
        lambda column, keys: lance or probe_reason(table, column, keys, dialect),
    )
    selected = visit(bound, evaluator)
    evaluator.unused_keys()
    return evaluator, selected, bound


def fragments_selected(predicate: Predicate, table: Table, dialect: str) -> Selection:
    """Every row of the fragments of ``table`` that hold a row pruner's probe of
    ``predicate`` selects (no term left to Lance's scanner; the fragments its index does
    not cover included): where Lance's scanner may probe its own index
    (:attr:`pruner.plan.Plan.lance_probes`)."""
    selected, rows = _run(predicate, table, dialect)[1], table.fragment_rows
    if selected is None:
        return table.whole()
    return Selection.whole({f: rows[f] for f in selected.fragment_ids() if f in rows})


def row_keys(bound: Predicate) -> RowKeys | None:
    """The keys every row satisfying ``bound`` (a bound predicate) holds, from its top-level
    conjuncts (the one with fewest values), or None when none says."""
    conjuncts = bound.children if isinstance(bound, And) else (bound,)
    best: RowKeys | None = None
    for term in conjuncts:
        if not isinstance(term, BoundLiterals) or term.exact_values is None:
            continue
        if best is None or len(term.exact_values) < len(best.values):
            best = RowKeys(term.column, frozenset(term.exact_values))
    return best


def _within(selected: Selection | None, table: Table) -> Selection:
    """Clip to the table's rows: zones of vanished fragments or beyond a fragment drop out."""
    whole = table.whole()
    return whole if selected is None else selected & whole


def _count_zones(starts: np.ndarray, ends: np.ndarray, selection: Selection) -> int:
    """Zones that overlap the selection."""
    if not len(starts) or not selection.num_ranges:
        return 0
    slot = np.searchsorted(selection.ends, starts, side="right")
    inside = slot < selection.num_ranges
    overlaps = np.zeros(len(starts), dtype=bool)
    overlaps[inside] = selection.starts[slot[inside]] < ends[inside]
    return int(overlaps.sum())


JOIN_ROWS = 1_000_000
"""Most rows the other side of a join may have for its keys to be read at run time."""


def _joined(
    scan: Scan,
    table: Table,
    tables: Mapping[str, Table],
    dialect: str,
    evaluator: _Evaluator,
    selected: Selection | None = None,
) -> Selection | None:
    """The rows of ``table`` that may hold a key of the small other side of each join
    edge of ``scan`` (read now, under :data:`JOIN_ROWS`; the scan's column indexed), or None
    when no edge applies. ``selected``: what the scan's own terms select (None: all), which
    the cost model weighs against reading the other side (:func:`pruner.costs.join_read_reason`)."""
    result: Selection | None = None
    for edge in scan.joins:
        other = tables.get(edge.other_table)
        if other is None or other.num_rows * 4 > table.num_rows:
            continue
        try:
            index = table.index(edge.column)
        except IndexFormatError:
            continue
        if index is None:
            continue
        where = f"{edge.other_alias}.{edge.other_column}"
        if other.num_rows > JOIN_ROWS:
            reason = f"{edge.other_alias} has {other.num_rows:,} rows, more than {JOIN_ROWS:,}"
            evaluator.terms.append(TermReport(edge.condition, False, reason, edge.column))
            continue
        own = table.num_rows if selected is None else selected.num_rows
        costly = join_read_reason(own, other.num_rows, edge.other_alias)
        if costly is not None:
            evaluator.terms.append(TermReport(edge.condition, False, costly, edge.column))
            continue
        try:
            keys = join_keys.other_keys(other, edge, dialect)
        except (PrunerError, pa.ArrowException, OSError) as err:
            reason = f"the keys of {where} could not be read ({err})"
            evaluator.terms.append(TermReport(edge.condition, False, reason, edge.column))
            continue
        if keys is None:
            reason = f"{where} has more than {join_keys.JOIN_KEYS:,} keys"
            evaluator.terms.append(TermReport(edge.condition, False, reason, edge.column))
            continue
        part = lookup(table, edge.column, keys).selection()
        plural = "" if len(keys) == 1 else "s"
        reason = (
            f"at run time: {len(keys):,} key{plural} of {where} (from {other.num_rows:,} rows "
            f"of {edge.other_alias}), looked up in the index of {edge.column}"
        )
        zones = int(np.count_nonzero(index.valid & _overlaps(index, part)))
        evaluator.terms.append(TermReport(edge.condition, True, reason, edge.column, zones))
        result = part if result is None else result & part
    return result


def _overlaps(index: TableIndex, selection: Selection) -> np.ndarray:
    """Per zone of ``index``, whether ``selection`` holds a row of it."""
    if not selection.num_ranges:
        return np.zeros(len(index.zone_starts), bool)
    slot = np.searchsorted(selection.ends, index.zone_starts, side="right")
    inside = slot < selection.num_ranges
    found = np.zeros(len(index.zone_starts), bool)
    found[inside] = selection.starts[slot[inside]] < index.zone_ends[inside]
    return found


def _select_scan(
    scan: Scan,
    table: Table,
    dialect: str,
    tables: Mapping[str, Table] | None = None,
    alone: bool = False,
) -> ScanSelection:
    evaluator, selected, bound = _run(scan.predicate, table, dialect, alone and not scan.joins)
    if scan.joins and tables is not None:
        joined = _joined(scan, table, tables, dialect, evaluator, selected)
        if joined is not None:
            selected = joined if selected is None else selected & joined
    selection = _within(selected, table)
    layout = evaluator.layout or table.any_index()
    if layout is not None:
        keep = layout.valid
        others = layout.uncovered | layout.null_only
        starts = np.concatenate([layout.zone_starts[keep], others.starts])
        ends = np.concatenate([layout.zone_ends[keep], others.ends])
    else:
        starts, ends = table.default_zones()
    zones_selected = len(starts) if selected is None else _count_zones(starts, ends, selection)
    return ScanSelection(
        scan=scan,
        selection=selection,
        terms=tuple(evaluator.terms),
        zones_total=len(starts),
        zones_selected=zones_selected,
        rows_total=table.whole().num_rows,
        fragments_total=len(table.fragment_rows),
        keys=row_keys(bound),
        table=table,
        unindexed_fragments=(tuple(layout.uncovered.fragment_ids()) if layout is not None else ()),
    )


def select_scans(analysis: Analysis, tables: Mapping[str, Table]) -> list[ScanSelection]:
    """Evaluate every scan of a known table in the analysis."""
    alone = len(analysis.scans) == 1 and equalities_pushed(analysis.sql)
    return [
        _select_scan(scan, tables[scan.table], analysis.dialect, tables, alone)
        for scan in analysis.scans
        if scan.table in tables
    ]


def table_selections(scans: list[ScanSelection]) -> dict[str, Selection]:
    """Per table, the union of its scans' selections: what an engine binding it must read."""
    result: dict[str, Selection] = {}
    for scan in scans:
        name = scan.scan.table
        result[name] = result[name] | scan.selection if name in result else scan.selection
    return result


def table_keys(scans: list[ScanSelection]) -> dict[str, RowKeys]:
    """Per table, keys every row any of its scans keeps holds: when every scan of the table
    has keys on one column, the union of their values (else the table has none)."""
    found: dict[str, RowKeys | None] = {}
    for scan in scans:
        name, keys = scan.scan.table, scan.keys
        if name not in found:
            found[name] = keys
            continue
        known = found[name]
        if known is None or keys is None or keys.column != known.column:
            found[name] = None
        else:
            found[name] = RowKeys(known.column, known.values | keys.values)
    return {name: keys for name, keys in found.items() if keys is not None}
