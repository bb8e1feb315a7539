"""The predicate tree: what a query says about one table scan, in terms an index can test.

A predicate is built by the analyzer from SQL, bound to a table (:mod:`pruner.binding`:
literals coerced to the column types and hashed, once), then evaluated against zone indexes
into a Selection. Every consumer walks it as a :class:`PredicateVisitor`. Only four shapes of
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
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundLiterals",
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
    "PredicateVisitor",
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
    "visit",
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

    def __hash__(self) -> int:
        # The text's hash, which Python keeps with the string: a 10,000-key IN list is
        # hashed a few times over (its duplicates dropped, its binding looked up), and the
        # generated hash of the four fields cost ~1 us a key each time. Literals equal in
        # every field have equal texts.
        return hash(self.text)

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
    """``column IN (values)``; build with :func:`in_` so 0 or 1 values simplify.
    ``inferred``: the conditions it was inferred from, when the query does not say it
    (``o.k = v.k AND v.k IN (1, 2)`` implies ``o.k IN (1, 2)``); explain shows them."""

    column: str
    values: tuple[Literal, ...]
    inferred: str = ""


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


@dataclass(frozen=True, slots=True, eq=False)
class BoundLiterals(Predicate):
    """An :class:`Equals` / :class:`In` leaf bound to its table's column
    (:func:`pruner.binding.bind`): its literals coerced at the column's type, once, and
    hashed as the column's index hashes values. ``hashes`` is None when the leaf cannot
    probe: ``no_match`` then says no value of the column can match, ``unindexed`` that the
    column has no index (the literals were not hashed), otherwise pruner cannot tell;
    ``reason`` says why (or, with hashes, what the coercion noted)."""

    leaf: Equals | In
    hashes: np.ndarray | None
    no_match: bool = False
    reason: str = ""
    error: Exception | None = None  # hashing failed: raised if the column has an index
    unindexed: bool = False
    exact_values: tuple[Any, ...] | None = None
    """The coerced values when they are exactly the column values that can match
    (:attr:`pruner.literals.Coercion.exact`): a row holding none of them cannot."""
    values: tuple[Any, ...] | None = None
    """The coerced values (at the column's plain type; both zeros for a float ``= 0``):
    every value of the column that can match is one of them. None when pruner cannot tell
    (``reason`` says why) or none can match (``no_match``)."""

    @property
    def column(self) -> str:
        return self.leaf.column


# ---------------------------------------------------------------------------- visitors

T = TypeVar("T")


class PredicateVisitor(Generic[T]):
    """One method per node kind; :func:`visit` calls the one for a node's kind.

    Modelled on pyiceberg's ``BooleanExpressionVisitor``, with one difference: ``visit_and``,
    ``visit_or`` and ``visit_not`` receive the node, not their children's results, and
    recurse with ``visit(child, self)`` where they choose (pushing NOT down must negate
    *before* descending; the evaluator must know which child of an OR could not prune).
    A method not overridden falls back to :meth:`visit_other`, which by default refuses
    the node; a visitor that treats most leaves alike overrides only ``visit_other``.
    """

    def visit_other(self, node: Predicate) -> T:
        raise TypeError(f"{type(self).__name__} does not visit {node!r}")

    def visit_true(self, node: AlwaysTrue) -> T:
        return self.visit_other(node)

    def visit_false(self, node: AlwaysFalse) -> T:
        return self.visit_other(node)

    def visit_unknown(self, node: Unknown) -> T:
        return self.visit_other(node)

    def visit_equals(self, node: Equals) -> T:
        return self.visit_other(node)

    def visit_in(self, node: In) -> T:
        return self.visit_other(node)

    def visit_is_null(self, node: IsNull) -> T:
        return self.visit_other(node)

    def visit_not_equals(self, node: NotEquals) -> T:
        return self.visit_other(node)

    def visit_not_in(self, node: NotIn) -> T:
        return self.visit_other(node)

    def visit_not_null(self, node: NotNull) -> T:
        return self.visit_other(node)

    def visit_bound(self, node: BoundLiterals) -> T:
        return self.visit_other(node)

    def visit_not(self, node: Not) -> T:
        return self.visit_other(node)

    def visit_and(self, node: And) -> T:
        return self.visit_other(node)

    def visit_or(self, node: Or) -> T:
        return self.visit_other(node)


_METHODS: dict[type, str] = {
    AlwaysTrue: "visit_true",
    AlwaysFalse: "visit_false",
    Unknown: "visit_unknown",
    Equals: "visit_equals",
    In: "visit_in",
    IsNull: "visit_is_null",
    NotEquals: "visit_not_equals",
    NotIn: "visit_not_in",
    NotNull: "visit_not_null",
    BoundLiterals: "visit_bound",
    Not: "visit_not",
    And: "visit_and",
    Or: "visit_or",
}


def visit(node: Predicate, visitor: PredicateVisitor[T]) -> T:
    """``visitor``'s method for the kind of ``node``, applied to it.

    A dictionary lookup rather than ``functools.singledispatch``: it costs one Python frame
    per level of the tree instead of three (trees are up to 64 AND / OR levels deep, walked
    on the caller's stack).
    """
    method = _METHODS.get(type(node))
    if method is None:
        kind = next((k for k in type(node).__mro__ if k in _METHODS), None)
        method = "visit_other" if kind is None else _METHODS[kind]
    result: T = getattr(visitor, method)(node)
    return result


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


class _Negate(PredicateVisitor[Predicate]):
    """``NOT node`` pushed to the leaves (De Morgan); a leaf with no negated form (Unknown,
    the constants) goes through :func:`not_`, so Unknown stays Unknown."""

    def visit_equals(self, node: Equals) -> Predicate:
        return NotEquals(node.column, node.value, node.null_safe)

    def visit_not_equals(self, node: NotEquals) -> Predicate:
        return Equals(node.column, node.value, node.null_safe)

    def visit_in(self, node: In) -> Predicate:
        return NotIn(node.column, node.values)

    def visit_not_in(self, node: NotIn) -> Predicate:
        return in_(node.column, node.values)

    def visit_is_null(self, node: IsNull) -> Predicate:
        return NotNull(node.column)

    def visit_not_null(self, node: NotNull) -> Predicate:
        return IsNull(node.column)

    def visit_and(self, node: And) -> Predicate:
        return or_(*(visit(child, self) for child in node.children))

    def visit_or(self, node: Or) -> Predicate:
        return and_(*(visit(child, self) for child in node.children))

    def visit_not(self, node: Not) -> Predicate:
        return visit(node.child, _REWRITE_NOT)

    def visit_other(self, node: Predicate) -> Predicate:
        return not_(node)


class _RewriteNot(PredicateVisitor[Predicate]):
    def visit_not(self, node: Not) -> Predicate:
        return visit(node.child, _NEGATE)

    def visit_and(self, node: And) -> Predicate:
        return and_(*(visit(child, self) for child in node.children))

    def visit_or(self, node: Or) -> Predicate:
        return or_(*(visit(child, self) for child in node.children))

    def visit_other(self, node: Predicate) -> Predicate:
        return node


_NEGATE = _Negate()
_REWRITE_NOT = _RewriteNot()


def rewrite_not(node: Predicate) -> Predicate:
    """Push every NOT down to the leaves (De Morgan); the result holds no :class:`Not`."""
    return visit(node, _REWRITE_NOT)


class _MapLeaves(PredicateVisitor[Predicate]):
    def __init__(self, function: Callable[[Predicate], Predicate]) -> None:
        self.function = function

    def visit_and(self, node: And) -> Predicate:
        return and_(*(visit(child, self) for child in node.children))

    def visit_or(self, node: Or) -> Predicate:
        return or_(*(visit(child, self) for child in node.children))

    def visit_not(self, node: Not) -> Predicate:
        return not_(visit(node.child, self))

    def visit_other(self, node: Predicate) -> Predicate:
        return self.function(node)


def map_leaves(node: Predicate, function: Callable[[Predicate], Predicate]) -> Predicate:
    """Rebuild ``node`` with ``function`` applied to every leaf (builders re-simplify)."""
    return visit(node, _MapLeaves(function))


class _Leaves(PredicateVisitor[list[Predicate]]):
    def visit_and(self, node: And) -> list[Predicate]:
        return [leaf for child in node.children for leaf in visit(child, self)]

    def visit_or(self, node: Or) -> list[Predicate]:
        return [leaf for child in node.children for leaf in visit(child, self)]

    def visit_not(self, node: Not) -> list[Predicate]:
        return visit(node.child, self)

    def visit_other(self, node: Predicate) -> list[Predicate]:
        return [node]


_LEAVES = _Leaves()


def leaves(node: Predicate) -> list[Predicate]:
    """Every leaf, left to right (constants included)."""
    return visit(node, _LEAVES)


def columns_of(node: Predicate) -> set[str]:
    """Columns the leaves test."""
    return {column for leaf in leaves(node) if (column := getattr(leaf, "column", None))}


def _values_sql(values: tuple[Literal, ...]) -> str:
    shown = ", ".join(str(v) for v in values[:8])
    more = f", ... {len(values) - 8} more" if len(values) > 8 else ""
    return f"({shown}{more})"


class _ToSql(PredicateVisitor[str]):
    def visit_equals(self, node: Equals) -> str:
        operator = "IS NOT DISTINCT FROM" if node.null_safe else "="
        return f"{node.column} {operator} {node.value}"

    def visit_not_equals(self, node: NotEquals) -> str:
        operator = "IS DISTINCT FROM" if node.null_safe else "!="
        return f"{node.column} {operator} {node.value}"

    def visit_in(self, node: In) -> str:
        return f"{node.column} IN {_values_sql(node.values)}"

    def visit_not_in(self, node: NotIn) -> str:
        return f"{node.column} NOT IN {_values_sql(node.values)}"

    def visit_is_null(self, node: IsNull) -> str:
        return f"{node.column} IS NULL"

    def visit_not_null(self, node: NotNull) -> str:
        return f"{node.column} IS NOT NULL"

    def visit_unknown(self, node: Unknown) -> str:
        return f"UNKNOWN({node.sql})" if node.sql else "UNKNOWN"

    def visit_true(self, node: AlwaysTrue) -> str:
        return "TRUE"

    def visit_false(self, node: AlwaysFalse) -> str:
        return "FALSE"

    def visit_bound(self, node: BoundLiterals) -> str:
        return visit(node.leaf, self)

    def visit_not(self, node: Not) -> str:
        return f"NOT ({visit(node.child, self)})"

    def visit_and(self, node: And) -> str:
        return self._junction(node, " AND ")

    def visit_or(self, node: Or) -> str:
        return self._junction(node, " OR ")

    def _junction(self, node: And | Or, joiner: str) -> str:
        return joiner.join(
            f"({visit(c, self)})" if isinstance(c, And | Or) else visit(c, self)
            for c in node.children
        )


_TO_SQL = _ToSql()


def to_sql(node: Predicate) -> str:
    """A short SQL-like rendering for explain output."""
    return visit(node, _TO_SQL)
