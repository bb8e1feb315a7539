"""What null extension can bring back: an outer join's null-extended rows may meet a
condition (:func:`_can_be_true_on_nulls`), and then the condition may not prune that scan
(:func:`refused`).
"""

from __future__ import annotations

from pruner.expressions import (
    AlwaysTrue,
    And,
    Equals,
    IsNull,
    NotEquals,
    Or,
    Predicate,
    PredicateVisitor,
    Unknown,
    map_leaves,
    visit,
)

__all__ = ["refused"]


def refused(predicate: Predicate, reason: str) -> Predicate:
    """``predicate`` may not prune this scan: each term stays visible in explain, with why."""

    def leaf(part: Predicate) -> Predicate:
        if isinstance(part, Unknown | AlwaysTrue):
            return part
        return Unknown(reason, str(part))

    return map_leaves(predicate, leaf)


class _TrueOnNulls(PredicateVisitor[bool]):
    """Could the predicate be TRUE for a row whose columns (of this table) are all NULL?"""

    def visit_and(self, node: And) -> bool:
        return all(visit(child, self) for child in node.children)

    def visit_or(self, node: Or) -> bool:
        return any(visit(child, self) for child in node.children)

    def visit_not_equals(self, node: NotEquals) -> bool:  # IS DISTINCT FROM v is TRUE on NULL
        return node.null_safe

    def visit_equals(self, node: Equals) -> bool:
        # <=> ? may be bound to NULL, and then it is IS NULL
        return node.null_safe and node.value.kind == "parameter"

    def visit_other(self, node: Predicate) -> bool:
        # col = v, col IN (..), col NOT IN (..) are NULL on a NULL column, and IS NOT NULL is
        # FALSE; IS NULL is TRUE; anything unknown may be TRUE.
        return isinstance(node, IsNull | Unknown | AlwaysTrue)


_TRUE_ON_NULLS = _TrueOnNulls()


def _can_be_true_on_nulls(predicate: Predicate) -> bool:
    """Could the predicate be TRUE for a row whose columns (of this table) are all NULL?"""
    return visit(predicate, _TRUE_ON_NULLS)
