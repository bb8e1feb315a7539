"""The predicate tree: what a query says about one table scan, in terms an index can test.

A predicate is built by the analyzer from SQL, bound to a table (literals coerced to the
column types), then evaluated against zone indexes into a Selection. Only four shapes of
condition can prune with a bloom index: ``column = literal``, ``column IN (literals)``,
``column IS NULL``, and ``AND`` / ``OR`` of those. Everything else becomes :class:`Unknown`,
which carries the reason explain shows.

Three-valued logic, and why NOT is pushed down first: a WHERE clause keeps a row only when
the condition is TRUE. ``AlwaysFalse`` therefore means "never TRUE" (it may be NULL) and
``AlwaysTrue`` means "TRUE for every row"; ``Unknown`` means "could be anything". Negation is
pushed to the leaves (:func:`rewrite_not`, De Morgan holds in Kleene logic) *before* anything
is evaluated: ``NOT (id = 5)`` becomes :class:`NotEquals`, which may match anywhere, and
``NOT unknown`` stays unknown. Turning an Unknown into "might match" first and negating later
would make ``NOT unknown`` prune everything.

>>> p = not_(or_(Equals("id", Literal.number("5")), IsNull("name")))
>>> print(rewrite_not(p))
id != 5 AND name IS NOT NULL
>>> in_("id", [])
AlwaysFalse(reason='IN () matches nothing')
>>> print(in_("id", [Literal.number("7")]))
id = 7
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "Equals",
    "In",
    "IsNull",
    "Literal",
    "Not",
    "NotEquals",
    "NotIn",
    "NotNull",
    "Or",
    "Predicate",
    "Unknown",
    "and_",
    "columns_of",
    "in_",
    "leaves",
    "map_leaves",
    "not_",
    "or_",
    "rewrite_not",
    "to_sql",
]

# Literal kinds, as the SQL text spelled them (coercion to a column type happens at bind time):
#   number     digits as written ("5", "-1.50", "1e3"); ``double`` marks float-typed spellings
#   string     a character string, already unescaped by the dialect's parser
#   bytes      a binary literal (X'..'), as hex text
#   null, boolean ("true"/"false"), parameter (text = 0-based position of a ``?`` / ``$n``)
# ``cast`` is the SQL type name of a CAST / typed literal around it (DATE '2020-01-01').


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant from the SQL text, kept exactly as written until it is bound to a column."""

    kind: str
    text: str
    cast: str | None = None
    double: bool = False

    @staticmethod
    def number(text: str) -> Literal:
        return Literal("number", text)

    @staticmethod
    def string(text: str) -> Literal:
        return Literal("string", text)

    def __str__(self) -> str:
        if self.kind == "string":
            body = "'" + self.text.replace("'", "''") + "'"
        elif self.kind == "bytes":
            body = f"X'{self.text}'"
        elif self.kind == "null":
            body = "NULL"
        elif self.kind == "parameter":
            body = f"${int(self.text) + 1}"
        else:
            body = self.text
        return f"CAST({body} AS {self.cast})" if self.cast else body


class Predicate:
    """Base of every node. Nodes are frozen, slotted dataclasses: hashable and shareable."""

    __slots__ = ()

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True, slots=True)
class AlwaysTrue(Predicate):
    """TRUE for every row: selects everything."""


@dataclass(frozen=True, slots=True)
class AlwaysFalse(Predicate):
    """Never TRUE (FALSE or NULL) for any row: selects nothing."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Unknown(Predicate):
    """A condition pruner cannot use; ``reason`` says why (explain shows it)."""

    reason: str
    sql: str = ""


@dataclass(frozen=True, slots=True)
class Equals(Predicate):
    """``column = value``; with ``null_safe``, IS NOT DISTINCT FROM (``<=>``): a NULL value
    (say, a parameter bound to None) then means IS NULL instead of "never true"."""

    column: str
    value: Literal
    null_safe: bool = False


@dataclass(frozen=True, slots=True)
class In(Predicate):
    """``column IN (values)``; build with :func:`in_` so 0 or 1 values simplify."""

    column: str
    values: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class IsNull(Predicate):
    column: str


@dataclass(frozen=True, slots=True)
class NotEquals(Predicate):
    """``column != value``: true almost everywhere, so it cannot prune. With ``null_safe``
    (IS DISTINCT FROM) it is also TRUE where the column is NULL."""

    column: str
    value: Literal
    null_safe: bool = False


@dataclass(frozen=True, slots=True)
class NotIn(Predicate):
    column: str
    values: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class NotNull(Predicate):
    column: str


@dataclass(frozen=True, slots=True)
class Not(Predicate):
    """A negation not yet pushed down; :func:`rewrite_not` removes every one."""

    child: Predicate


@dataclass(frozen=True, slots=True)
class And(Predicate):
    children: tuple[Predicate, ...]


@dataclass(frozen=True, slots=True)
class Or(Predicate):
    children: tuple[Predicate, ...]


def _junction(
    parts: tuple[Predicate, ...],
    kind: type[And] | type[Or],
    neutral: type[Predicate],
    absorbing: type[Predicate],
) -> Predicate:
    children: list[Predicate] = []
    for part in parts:
        if isinstance(part, absorbing):
            return part
        if isinstance(part, kind):
            children.extend(part.children)
        elif not isinstance(part, neutral):
            children.append(part)
    if not children:
        return neutral()
    return children[0] if len(children) == 1 else kind(tuple(children))


def and_(*parts: Predicate) -> Predicate:
    """Conjunction that flattens, drops AlwaysTrue, and collapses on AlwaysFalse."""
    return _junction(parts, And, AlwaysTrue, AlwaysFalse)


def or_(*parts: Predicate) -> Predicate:
    """Disjunction that flattens, drops AlwaysFalse, and collapses on AlwaysTrue."""
    return _junction(parts, Or, AlwaysFalse, AlwaysTrue)


def not_(part: Predicate) -> Predicate:
    """Negation with the constant cases folded; the rest waits for :func:`rewrite_not`."""
    if isinstance(part, Not):
        return part.child
    if isinstance(part, AlwaysTrue):
        return AlwaysFalse()
    if isinstance(part, AlwaysFalse):
        # "never TRUE" negated is not "always TRUE" (NULL stays NULL), but selecting
        # everything is a safe superset.
        return AlwaysTrue()
    if isinstance(part, Unknown):
        return part
    return Not(part)


def in_(column: str, values: Iterable[Literal]) -> Predicate:
    """``column IN (values)`` with duplicates removed; one value is Equals, none AlwaysFalse."""
    unique = tuple(dict.fromkeys(values))
    if not unique:
        return AlwaysFalse("IN () matches nothing")
    if len(unique) == 1:
        return Equals(column, unique[0])
    return In(column, unique)


def _negate(node: Predicate) -> Predicate:
    if isinstance(node, Equals):
        return NotEquals(node.column, node.value, node.null_safe)
    if isinstance(node, NotEquals):
        return Equals(node.column, node.value, node.null_safe)
    if isinstance(node, In):
        return NotIn(node.column, node.values)
    if isinstance(node, NotIn):
        return in_(node.column, node.values)
    if isinstance(node, IsNull):
        return NotNull(node.column)
    if isinstance(node, NotNull):
        return IsNull(node.column)
    if isinstance(node, And):
        return or_(*(_negate(child) for child in node.children))
    if isinstance(node, Or):
        return and_(*(_negate(child) for child in node.children))
    if isinstance(node, Not):
        return rewrite_not(node.child)
    return not_(node)


def rewrite_not(node: Predicate) -> Predicate:
    """Push every NOT down to the leaves (De Morgan); the result holds no :class:`Not`."""
    if isinstance(node, Not):
        return _negate(node.child)
    if isinstance(node, And):
        return and_(*(rewrite_not(child) for child in node.children))
    if isinstance(node, Or):
        return or_(*(rewrite_not(child) for child in node.children))
    return node


def map_leaves(node: Predicate, function: Callable[[Predicate], Predicate]) -> Predicate:
    """Rebuild ``node`` with ``function`` applied to every leaf (builders re-simplify)."""
    if isinstance(node, And):
        return and_(*(map_leaves(child, function) for child in node.children))
    if isinstance(node, Or):
        return or_(*(map_leaves(child, function) for child in node.children))
    if isinstance(node, Not):
        return not_(map_leaves(node.child, function))
    return function(node)


def leaves(node: Predicate) -> list[Predicate]:
    """Every leaf, left to right (constants included)."""
    if isinstance(node, And | Or):
        return [leaf for child in node.children for leaf in leaves(child)]
    if isinstance(node, Not):
        return leaves(node.child)
    return [node]


def columns_of(node: Predicate) -> set[str]:
    """Columns the leaves test."""
    return {column for leaf in leaves(node) if (column := getattr(leaf, "column", None))}


def _values_sql(values: tuple[Literal, ...]) -> str:
    shown = ", ".join(str(v) for v in values[:8])
    more = f", ... {len(values) - 8} more" if len(values) > 8 else ""
    return f"({shown}{more})"


def to_sql(node: Predicate) -> str:
    """A short SQL-like rendering for explain output."""
    text: Any
    if isinstance(node, Equals):
        operator = "IS NOT DISTINCT FROM" if node.null_safe else "="
        text = f"{node.column} {operator} {node.value}"
    elif isinstance(node, NotEquals):
        operator = "IS DISTINCT FROM" if node.null_safe else "!="
        text = f"{node.column} {operator} {node.value}"
    elif isinstance(node, In):
        text = f"{node.column} IN {_values_sql(node.values)}"
    elif isinstance(node, NotIn):
        text = f"{node.column} NOT IN {_values_sql(node.values)}"
    elif isinstance(node, IsNull):
        text = f"{node.column} IS NULL"
    elif isinstance(node, NotNull):
        text = f"{node.column} IS NOT NULL"
    elif isinstance(node, Unknown):
        text = f"UNKNOWN({node.sql})" if node.sql else "UNKNOWN"
    elif isinstance(node, AlwaysTrue):
        text = "TRUE"
    elif isinstance(node, AlwaysFalse):
        text = "FALSE"
    elif isinstance(node, Not):
        text = f"NOT ({to_sql(node.child)})"
    elif isinstance(node, And | Or):
        joiner = " AND " if isinstance(node, And) else " OR "
        text = joiner.join(
            f"({to_sql(c)})" if isinstance(c, And | Or) else to_sql(c) for c in node.children
        )
    else:  # pragma: no cover - every node type is listed above
        raise TypeError(f"not a predicate: {node!r}")
    return str(text)
