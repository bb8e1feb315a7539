"""Binding: a scan's predicate x its table's schema -> a predicate whose literals are ready.

Evaluating a leaf ``column = literal`` or ``column IN (literals)`` needs the literals at the
column's Arrow type and width (:mod:`pruner.literals`, which says how the engines compare)
and their hashes, computed the way the column's bloom index hashed its values
(:mod:`pruner.hashing`). :func:`bind` does both once per scan, per column and list of
literals, and leaves a :class:`~pruner.expressions.BoundLiterals` in place of each such leaf;
evaluation (:mod:`pruner.evaluate`) then only probes the indexes with the hashes, however
many times it runs.

In pruner's core modules "bind" means only this step. Substituting query parameters is
:meth:`pruner.analyzer.Analysis.with_parameters`.

>>> import pyarrow as pa
>>> from pruner.expressions import Equals, Literal
>>> bound = bind(Equals("id", Literal.number("7")), pa.schema([("id", pa.int8())]))
>>> bound.hashes is not None, str(bound)
(True, 'id = 7')
>>> bind(Equals("id", Literal.number("300")), pa.schema([("id", pa.int8())])).no_match
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from pruner.errors import PrunerError
from pruner.expressions import (
    And,
    BoundLiterals,
    Equals,
    In,
    Literal,
    Or,
    Predicate,
    PredicateVisitor,
    visit,
)
from pruner.hashing import hash_array, plain_type
from pruner.index.native import hashable
from pruner.literals import coerce_all

__all__ = ["bind"]


_BY_IDENTITY = 64
"""An In list of at least this many literals is cached by its tuple's identity."""


class _Binder(PredicateVisitor[Predicate]):
    """Rebuilds AND / OR as they are (no re-simplifying: what evaluation reports per term
    must not change) with every Equals / In leaf bound; other nodes are kept."""

    def __init__(
        self,
        schema: pa.Schema,
        dialect: str,
        hash_type: Callable[[str], pa.DataType | None] | None,
        unprobed: Callable[[str, int], str | None] | None = None,
    ) -> None:
        self.schema = schema
        self.dialect = dialect
        self.hash_type = hash_type
        self.unprobed = unprobed
        self.bound: dict[tuple[str, object, str], BoundLiterals] = {}

    def visit_and(self, node: And) -> Predicate:
        return And(tuple(visit(child, self) for child in node.children))

    def visit_or(self, node: Or) -> Predicate:
        return Or(tuple(visit(child, self) for child in node.children))

    def visit_equals(self, node: Equals) -> Predicate:
        return self.literals(node, (node.value,))

    def visit_in(self, node: In) -> Predicate:
        return self.literals(node, node.values)

    def visit_other(self, node: Predicate) -> Predicate:
        return node

    def literals(self, leaf: Equals | In, values: tuple[Literal, ...]) -> BoundLiterals:
        # A long list is known by its identity: hashing a tuple of 10,000 literals costs
        # 10,000 calls, and an In's tuple lives as long as the predicate being bound.
        long = isinstance(leaf, In) and values is leaf.values and len(values) >= _BY_IDENTITY
        known_by = id(values) if long else values
        key = (leaf.column, known_by, leaf.inferred if isinstance(leaf, In) else "")
        known = self.bound.get(key)
        if known is not None:
            return replace(known, leaf=leaf)
        bound = self._bind_leaf(leaf, values)
        self.bound[key] = bound
        return bound

    def _bind_leaf(self, leaf: Equals | In, values: tuple[Literal, ...]) -> BoundLiterals:
        column = leaf.column
        if column not in self.schema.names:
            return BoundLiterals(leaf, None, reason=f"no column {column} in the table")
        skipped = None if self.unprobed is None else self.unprobed(column, len(values))
        if skipped is not None:  # selects every row: its literals are not even coerced
            return BoundLiterals(leaf, None, reason=skipped)
        # A dictionary or view column compares as its plain values.
        arrow_type = plain_type(self.schema.field(column).type)
        coerced = coerce_all(values, arrow_type, self.dialect)
        if isinstance(leaf, In) and leaf.inferred:
            noted = f"inferred from {leaf.inferred}"
            coerced = replace(coerced, reason="; ".join(filter(None, [noted, coerced.reason])))
        if coerced.values is None:  # pruner cannot tell (whatever no_match says)
            return BoundLiterals(leaf, None, reason=coerced.reason)
        if coerced.no_match:
            return BoundLiterals(leaf, None, no_match=True, reason=coerced.reason)
        exact = tuple(coerced.values) if coerced.exact else None
        coerced_values = tuple(coerced.values)
        hash_type = arrow_type if self.hash_type is None else self.hash_type(column)
        if hash_type is None:
            return BoundLiterals(
                leaf,
                None,
                reason=coerced.reason,
                unindexed=True,
                exact_values=exact,
                values=coerced_values,
            )
        try:
            array = pa.array(coerced.values, arrow_type)
            if hash_type != arrow_type:
                try:
                    array = hashable(array, hash_type)
                except pa.ArrowException as err:
                    # Not representable in the index's encoding: prune nothing.
                    reason = f"cannot hash the values as {hash_type} ({err})"
                    return BoundLiterals(
                        leaf, None, reason=reason, exact_values=exact, values=coerced_values
                    )
            hashes, _ = hash_array(array)
        except (PrunerError, pa.ArrowException) as err:
            # Raised only if the column turns out to have an index to probe, as before
            # binding was a step of its own.
            return BoundLiterals(
                leaf, None, reason=coerced.reason, error=err, values=coerced_values
            )
        return BoundLiterals(
            leaf, hashes, reason=coerced.reason, exact_values=exact, values=coerced_values
        )


def bind(
    predicate: Predicate,
    schema: pa.Schema,
    dialect: str = "duckdb",
    hash_type: Callable[[str], pa.DataType | None] | None = None,
    unprobed: Callable[[str, int], str | None] | None = None,
) -> Predicate:
    """``predicate`` with every Equals / In leaf bound to its column of ``schema``: its
    literals coerced (as ``dialect`` compares) and hashed, once. Bound leaves are kept.

    ``hash_type(column)``: the Arrow type whose bytes the column's index hashed (the
    column's own type for pruner's and Lance's indexes; Parquet's plain encoding for a
    file's own filters, :mod:`pruner.index.native`), the literals are cast to it before
    they are hashed; None when the column has no index to probe, so its literals are
    coerced (a literal no value can equal still selects nothing) but not hashed (a
    100,000-value IN on an unindexed column costs no hashing). ``hash_type`` None: every
    column's literals are hashed at the column's type.

    ``unprobed(column, count)``: why a leaf of ``count`` literals on ``column`` is not worth
    probing (:func:`pruner.costs.probe_reason`), or None; such a leaf is left unbound (it
    selects every row)."""
    return visit(predicate, _Binder(schema, dialect, hash_type, unprobed))
