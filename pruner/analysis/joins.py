"""Carrying values across equalities and join edges.

:func:`_implied` finds what a SELECT's equalities of two tables' columns imply of each FROM
item (``o.k = v.k AND v.k IN (1, 2)`` -> ``o.k IN (1, 2)``) and the equalities themselves;
:func:`_edges` and :func:`_edge` turn those into the :class:`~pruner.analysis.model.JoinEdge`
of a scan, whose other side's keys may restrict it at run time.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from sqlglot import exp

from pruner.analysis.conditions import Resolver, Source
from pruner.analysis.model import JoinEdge
from pruner.analysis.pushdown import _renamed
from pruner.expressions import Equals, In, Literal, Predicate, and_, rewrite_not


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _same_equality(a: pa.DataType | None, b: pa.DataType | None) -> bool:
    """Do two columns of these types compare as their values, with no cast or collation
    between them that could make ``a = b`` hold for values the literals of one do not
    equal in the other (integers of any width, strings of any layout, or one type)?"""
    if a is None or b is None:
        return False
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return True
    strings = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
    if any(t(a) for t in strings) and any(t(b) for t in strings):
        return True
    return a == b and not pa.types.is_floating(a)


def _implied(
    resolver: Resolver, sources: list[Source], conditions: list[exp.Expr]
) -> tuple[dict[str, Predicate], list[tuple[tuple[str, str], tuple[str, str], str]]]:
    """Per FROM item, what the query implies of its rows beyond what it says: for every
    equality ``x.a = y.b`` of two tables' columns and ``y.b = v`` / ``y.b IN (...)``, each
    a top-level conjunct of ``conditions`` (the WHERE clause and the ON clauses of inner and
    semi joins: every row of x the query keeps met them), ``x.a IN (...)`` — also along
    chains of equalities. Only between columns that compare as their values
    (:func:`_same_equality`); never from an outer join's ON. Also every such equality, as
    ``(x, a), (y, b), sql``: a join that may restrict x by y's keys at run time."""
    by_alias = {s.alias: s for s in sources}
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(item: tuple[str, str]) -> tuple[str, str]:
        while parent.get(item, item) != item:
            item = parent[item]
        return item

    def type_of(item: tuple[str, str]) -> pa.DataType | None:
        return by_alias[item[0]].column_type(item[1])

    equalities: list[tuple[tuple[str, str], str]] = []
    pairs: list[tuple[tuple[str, str], tuple[str, str], str]] = []
    values: dict[tuple[str, str], tuple[tuple[Literal, ...], str]] = {}
    for condition in conditions:
        for part in _conjuncts(condition):
            if isinstance(part, exp.EQ):
                left, right = part.this, part.expression
                while isinstance(left, exp.Paren):
                    left = left.this
                while isinstance(right, exp.Paren):
                    right = right.this
                if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                    a, b = resolver.column(left), resolver.column(right)
                    if a and b and a[0] != b[0] and _same_equality(type_of(a), type_of(b)):
                        parent[find(a)] = find(b)
                        equalities.append((a, resolver.sql(part)))
                        pairs.append((a, b, resolver.sql(part)))
                        continue
            for alias in {
                found[0] for c in part.find_all(exp.Column) if (found := resolver.column(c))
            }:
                said = rewrite_not(resolver.predicate(part, alias))
                if isinstance(said, Equals) and not said.null_safe:
                    literals: tuple[Literal, ...] = (said.value,)
                elif isinstance(said, In):
                    literals = said.values
                else:
                    continue
                known = values.get((alias, said.column))
                if known is None or len(literals) < len(known[0]):
                    values[(alias, said.column)] = (literals, resolver.sql(part))
    if not equalities or not values:
        return {}, pairs
    implied: dict[str, list[Predicate]] = {}
    members: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for item in {*parent, *parent.values()}:
        members.setdefault(find(item), []).append(item)
    for group in members.values():
        stated = [m for m in group if m in values]
        if not stated:
            continue
        origin = min(stated, key=lambda m: len(values[m][0]))
        literals, where = values[origin]
        for alias, column in group:
            if (alias, column) == origin or (alias, column) in values:
                continue
            used = [text for item, text in equalities if find(item) == find(origin)]
            source = f"{' AND '.join(used)} AND {where}"
            implied.setdefault(alias, []).append(In(column, literals, inferred=source))
    return {alias: and_(*parts) for alias, parts in implied.items()}, pairs


def _edges(
    source: Source,
    sources: Mapping[str, Source],
    predicates: Mapping[str, Predicate],
    pairs: list[tuple[tuple[str, str], tuple[str, str], str]],
) -> tuple[JoinEdge, ...]:
    """The equalities of ``pairs`` joining ``source`` to another known table's scan."""
    edges = []
    for a, b, sql in pairs:
        for mine, other in ((a, b), (b, a)):
            target = sources[other[0]]
            if mine[0] == source.alias:
                edge = _edge(mine[1], target, other[1], predicates[other[0]], sql)
                if edge is not None:
                    edges.append(edge)
    return tuple(edges)


def _edge(
    column: str, target: Source, output: str, predicate: Predicate, sql: str
) -> JoinEdge | None:
    """The edge from ``column`` to ``target``'s ``output`` column, whose rows meet
    ``predicate``: to a known table it may prune; to a CTE / derived table's plain column
    as an edge to its origin table's column (the rows it joins are rows of that table
    meeting the body's WHERE and ``predicate``, renamed onto the table's columns); else
    None (no keys to read)."""
    if target.table is not None:
        if not target.prunable:
            return None
        return JoinEdge(column, target.table, target.alias, output, predicate, sql)
    origin = target.origin
    if origin is None or output not in origin.columns:
        return None
    assert origin.source.table is not None
    renamed = _renamed(predicate, origin.columns, "not a plain column of the table it reads")
    return JoinEdge(
        column,
        origin.source.table,
        origin.source.alias,
        origin.columns[output],
        and_(origin.predicate, renamed),
        sql,
    )
