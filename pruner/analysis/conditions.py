"""One SELECT's conditions -> predicates: resolving column names to its FROM / JOIN items
(:class:`Resolver`) and converting each condition into what it says about one item's rows
(anything else is :class:`~pruner.expressions.Unknown`, with the reason)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from pruner.analysis.parsing import DIALECTS, PARAMETER_PREFIX
from pruner.arithmetic import Interval, interval, plus_days, plus_interval
from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    Equals,
    IsNull,
    Literal,
    Predicate,
    Unknown,
    and_,
    in_,
    leaves,
    not_,
    or_,
    rewrite_not,
)
from pruner.literal_text import INTEGER_CASTS

__all__ = [
    "Origin",
    "Resolver",
    "Source",
    "bare_star",
    "column_map",
    "constant_from_sql",
    "literal_from_sql",
    "output_names",
    "type_name",
]

_MAX_CONDITION_DEPTH = 64  # AND / OR nesting the analyzer follows; deeper is Unknown
_FEW_SOURCES = 16  # FROM items up to which a condition is converted for every one of them
_NO_ALIAS = "\x00"  # an alias no FROM item has
_PRUNER_DIALECTS = {read: name for name, read in DIALECTS.items()}  # sqlglot's -> pruner's


def literal_from_sql(node: exp.Expr) -> Literal | None:
    """The constant a sqlglot expression spells (a literal, maybe negated, cast or in
    parentheses; NULL, TRUE / FALSE, X'..', a placeholder), or None when it is not a plain
    constant."""
    if isinstance(node, exp.Paren):
        return literal_from_sql(node.this)
    if isinstance(node, exp.Literal):
        return Literal.string(node.this) if node.is_string else Literal.number(node.this)
    if isinstance(node, exp.Neg):
        inner = literal_from_sql(node.this)
        if inner is None or inner.kind != "number" or inner.cast:
            return None
        text = inner.text[1:] if inner.text.startswith("-") else "-" + inner.text
        return replace(inner, text=text)
    if isinstance(node, exp.Null):
        return Literal("null", "NULL")
    if isinstance(node, exp.Boolean):
        return Literal("boolean", "true" if node.this else "false")
    if isinstance(node, exp.HexString):
        return Literal("bytes", str(node.this))
    if isinstance(node, exp.Placeholder):
        name = str(node.this or "")
        if name.startswith(PARAMETER_PREFIX):
            return Literal("parameter", name[len(PARAMETER_PREFIX) :])
        return (
            Literal("parameter", str(int(name) - 1) if name.isdigit() else name) if name else None
        )
    if isinstance(node, exp.Parameter) and isinstance(node.this, exp.Literal):
        text = str(node.this.this)
        return Literal("parameter", str(int(text) - 1)) if text.isdigit() else None
    if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
        inner = literal_from_sql(node.this)
        if inner is None or inner.cast:
            return None
        return replace(inner, cast=type_name(node.to))
    return None


def constant_from_sql(node: exp.Expr, dialect: str = "duckdb") -> Literal | None:
    """The constant ``node`` spells (:func:`literal_from_sql`) or evaluates to in ``dialect``
    (pruner's name: duckdb, datafusion, spark), or None when pruner cannot tell.

    Beyond plain constants, date arithmetic on constants is folded as the engine folds it
    before it compares or probes (:func:`pruner.arithmetic.plus_days`,
    :func:`pruner.arithmetic.plus_interval`): ``DATE '2000-01-01' + 1001``, ``TIMESTAMP
    '2000-01-01' + INTERVAL 1001 SECOND``, nested, in either order of operands.

    >>> import sqlglot
    >>> node = sqlglot.parse_one("SELECT DATE '2000-01-01' + 1001").expressions[0]
    >>> str(constant_from_sql(node, "duckdb"))
    "CAST('2002-09-28' AS DATE)"
    """
    found = _folded(node, dialect)
    return found if isinstance(found, Literal) else None


def _folded(node: exp.Expr, dialect: str) -> Literal | str | None:
    """:func:`constant_from_sql`'s work: the constant, a reason when ``node`` is arithmetic
    on constants pruner does not fold, or None when it is not a constant at all."""
    literal = literal_from_sql(node)
    if literal is not None:
        return literal
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Add | exp.Sub):
        return None
    subtract = isinstance(node, exp.Sub)
    left, right = node.this, node.expression
    # x + INTERVAL, x - INTERVAL, INTERVAL + x (not INTERVAL - x).
    orders = ((left, right), (right, left)) if not subtract else ((left, right),)
    for base_node, step_node in orders:
        step = _interval(step_node)
        if step is None:
            continue
        if isinstance(step, str):
            return step
        base = _folded(base_node, dialect)
        if not isinstance(base, Literal):
            return base
        return plus_interval(base, step.negated() if subtract else step, dialect)
    first = _folded(left, dialect)
    if not isinstance(first, Literal):
        return first
    second = _folded(right, dialect)
    if not isinstance(second, Literal):
        return second
    if not subtract and _is_date(second) and not _is_date(first):
        first, second = second, first  # integer + DATE
    if not _is_date(first):
        return None  # arithmetic pruner does not fold, on constants of other types
    return plus_days(first, second, dialect, subtract)


def _is_date(literal: Literal) -> bool:
    return (literal.cast or "").upper() == "DATE"


def _interval(node: exp.Expr) -> Interval | str | None:
    """The interval ``node`` is, a reason when it is an INTERVAL pruner does not read, or
    None when it is not an INTERVAL."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Interval):
        return None
    unit, amount = node.args.get("unit"), literal_from_sql(node.this)
    if isinstance(unit, exp.Var) and amount is not None and amount.cast is None:
        found = interval(amount.text, unit.name)
        if found is not None:
            return found
    return f"pruner folds only INTERVAL '<whole number>' <one unit>, not {node.sql()}"


def type_name(data_type: exp.DataType) -> str:
    name = data_type.this.name if hasattr(data_type.this, "name") else str(data_type.this)
    if data_type.expressions:
        name += "(" + ", ".join(e.sql() for e in data_type.expressions) + ")"
    return name


def _preserves_values(column_type: pa.DataType, cast: str) -> bool:
    """Is ``CAST(column AS cast)`` one-to-one on the column's values (so = on it is = on them)?"""
    if pa.types.is_integer(column_type) and cast in INTEGER_CASTS:
        width, signed = INTEGER_CASTS[cast]
        source_width, source_signed = column_type.bit_width, pa.types.is_signed_integer(column_type)
        if signed:
            return width > source_width or (width == source_width and source_signed)
        return not source_signed and width >= source_width
    if cast == "DOUBLE":
        return column_type == pa.float32() or (
            pa.types.is_integer(column_type) and column_type.bit_width <= 32
        )
    same = {"VARCHAR": pa.types.is_string, "TEXT": pa.types.is_string, "DATE": pa.types.is_date32}
    check = same.get(cast)
    return bool(check and check(column_type))


@dataclass(frozen=True)
class Origin:
    """Where the plain-column outputs of a CTE / derived table come from, when its body is
    one SELECT over one known table with no join: every row it gives holds, in the output
    ``columns`` name (folded output -> the table's column), a value of a row of ``source``
    that meets ``predicate`` (its WHERE; a superset of the rows its GROUP BY, HAVING,
    DISTINCT, LIMIT and the like keep)."""

    source: Source
    columns: dict[str, str]
    predicate: Predicate


@dataclass
class Source:
    """A FROM / JOIN item of one SELECT: a known table, or a CTE / derived table."""

    alias: str  # folded as the dialect folds identifiers
    node: exp.Expr
    table: str | None = None  # key in the schemas mapping, for known tables
    schema: pa.Schema | None = None
    scope: Scope | None = None  # for CTEs and derived tables
    known_columns: bool = False  # are ``columns`` all of this item's columns?
    columns: dict[str, str] = field(default_factory=dict)  # folded name -> real name
    prunable: bool = True
    origin: Origin | None = None  # for CTEs and derived tables over one known table

    def column_type(self, column: str) -> pa.DataType | None:
        """The type of ``column`` (a real name here), when known: a known table's, or for a
        CTE / derived table a plain column of its :class:`Origin`'s table."""
        if self.schema is not None:
            return self.schema.field(column).type
        if self.origin is not None and column in self.origin.columns:
            return self.origin.source.column_type(self.origin.columns[column])
        return None


def column_map(names: list[str], fold: Callable[[str], str]) -> dict[str, str]:
    """Folded name -> name, leaving out names that fold to the same key (ambiguous)."""
    counts = Counter(fold(name) for name in names)
    return {fold(name): name for name in names if counts[fold(name)] == 1}


def bare_star(select: exp.Expr) -> bool:
    """``*`` with no REPLACE / RENAME / EXCLUDE (those change what the star outputs)."""
    return isinstance(select, exp.Star) and not any(
        select.args.get(key) for key in ("replace", "rename", "except", "exclude")
    )


def output_names(
    query: exp.Expr, fold: Callable[[str], str] = str.lower
) -> list[str | None] | None:
    """A SELECT's output names in order (None where a name repeats: which one an outer
    reference means differs between engines), or None when a star hides them."""
    if not isinstance(query, exp.Select):
        return None
    names: list[str] = []
    for select in query.expressions:
        if isinstance(select, exp.Star) or (
            isinstance(select, exp.Column) and isinstance(select.this, exp.Star)
        ):
            return None
        names.append(fold(select.alias_or_name))
    counts = Counter(names)
    return [name if counts[name] == 1 else None for name in names]


class Statement(Protocol):
    """What a :class:`Resolver` needs of the analysis of the whole statement
    (:class:`pruner.analysis.scopes.Analyzer`)."""

    fold: Callable[[str], str]
    dialect: str

    def sql(self, node: exp.Expr) -> str: ...

    def list_values(self, node: exp.Expr) -> tuple[Literal, ...] | None: ...


class Resolver:
    """Resolves the columns of one SELECT's conditions to its FROM / JOIN items."""

    def __init__(self, sources: list[Source], analyzer: Statement) -> None:
        self.sources = {s.alias: s for s in sources}
        self.fold = analyzer.fold
        self.sql = analyzer.sql
        self.list_values = analyzer.list_values
        self.dialect = analyzer.dialect
        self.engine = _PRUNER_DIALECTS.get(self.dialect, self.dialect)  # whose rules fold
        self._outputs: dict[str, tuple[str, str]] | None = None
        self._owners: dict[str, list[Source]] = {}  # folded column name -> items that have it
        for source in self.sources.values():
            for name in source.columns:
                self._owners.setdefault(name, []).append(source)
        self._unknown_columns = any(not s.known_columns for s in self.sources.values())

    def conditions(self, node: exp.Expr, aliases: list[str]) -> dict[str, Predicate]:
        """What ``node`` says about each item of ``aliases``, in that order.

        With many FROM items (a join of hundreds of tables), an item none of whose columns the
        condition names is left out: all it would get is UNKNOWN terms, and converting the
        condition once per item would be quadratic. Unless the condition can be false with no
        column at all (``ON FALSE``): then every item gets it.
        """
        if len(self.sources) <= _FEW_SOURCES:
            return {alias: self.predicate(node, alias) for alias in aliases}
        named = {found[0] for column in node.find_all(exp.Column) if (found := self.column(column))}
        alone = rewrite_not(self.predicate(node, _NO_ALIAS))
        if any(isinstance(leaf, AlwaysFalse) for leaf in leaves(alone)):
            named = set(aliases)
        return {alias: self.predicate(node, alias) for alias in aliases if alias in named}

    def outputs(self, query: exp.Select) -> dict[str, tuple[str, str]]:
        """Output name -> (alias, column) for outputs that are plain columns of one item."""
        if self._outputs is not None:
            return self._outputs
        outputs: dict[str, tuple[str, str]] = {}
        group = query.args.get("group")
        grouped = None
        if group is not None:
            grouped = {self.column(e) for e in group.expressions if isinstance(e, exp.Column)}
        names = output_names(query, self.fold)
        for position, select in enumerate(query.expressions):
            if bare_star(select) and len(self.sources) == 1 and grouped is None:
                (source,) = self.sources.values()
                for folded, real in source.columns.items():
                    outputs[folded] = (source.alias, real)
                continue
            if names is None or names[position] is None:
                continue
            target = select.this if isinstance(select, exp.Alias) else select
            if isinstance(target, exp.Column) and not isinstance(target.this, exp.Star):
                resolved = self.column(target)
                if resolved is not None and (grouped is None or resolved in grouped):
                    outputs[self.fold(select.alias_or_name)] = resolved
        self._outputs = outputs
        return outputs

    def column(self, node: exp.Column) -> tuple[str, str] | None:
        """(alias, real column name), or None when it is not a column of one item here."""
        name = self.fold(node.name)
        qualifier = self.fold(node.table) if node.table else ""
        if node.args.get("db") or node.args.get("catalog"):
            return None
        if qualifier:
            source = self.sources.get(qualifier)
            if source is None or name not in source.columns:
                return None
            return source.alias, source.columns[name]
        owners = self._owners.get(name, [])
        if len(owners) == 1 and not self._unknown_columns:
            return owners[0].alias, owners[0].columns[name]
        return None

    def predicate(self, node: exp.Expr, alias: str) -> Predicate:
        """What ``node`` (a condition of this SELECT) says about the rows of item ``alias``."""
        return self._convert(node, alias, 0, None)

    def _convert(
        self, node: exp.Expr, alias: str, depth: int, within: type[exp.Expr] | None
    ) -> Predicate:
        """``depth``: AND / OR levels above ``node`` that alternate (an AND in an AND
        flattens into it); ``within``: the kind of the nearest one."""
        if node.args.get("negate"):
            # Postgres-style parsers give `x IS NOT NULL` as Is(negate=True) (DuckDB and
            # Spark as Not(Is)); `NOT LIKE` is Like(negate=True) everywhere.
            plain = node.copy()
            plain.set("negate", None)
            negated = not_(self._convert(plain, alias, depth, None))
            if isinstance(negated, Unknown):
                return Unknown(negated.reason, self.sql(node))
            return negated
        if isinstance(node, exp.Paren):
            return self._convert(node.this, alias, depth, within)
        if isinstance(node, exp.And | exp.Or):
            kind = type(node)
            depth += kind is not within
            if depth > _MAX_CONDITION_DEPTH:
                # Every consumer of a predicate recurses on it: keep them all shallow.
                reason = f"AND / OR nested more than {_MAX_CONDITION_DEPTH} levels deep"
                return Unknown(reason, self.sql(node))
            conjuncts = list(node.flatten())
            parts = [self._convert(part, alias, depth, kind) for part in conjuncts]
            if kind is exp.Or:
                return or_(*parts)
            return and_(*parts, *self._equal_bounds(conjuncts, alias))
        if isinstance(node, exp.Not):
            return not_(self._convert(node.this, alias, depth, None))
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse("FALSE")
        if isinstance(node, exp.Null):
            return AlwaysFalse("NULL is never true")
        if isinstance(node, exp.EQ | exp.NullSafeEQ | exp.NEQ | exp.NullSafeNEQ):
            null_safe = isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ)
            equal = self._equality(node, alias, null_safe)
            return equal if isinstance(node, exp.EQ | exp.NullSafeEQ) else not_(equal)
        if isinstance(node, exp.In):
            return self._in(node, alias)
        if isinstance(node, exp.Between):
            return self._between(node, alias)
        if isinstance(node, exp.Is):
            target = self._column(node.this, alias)
            if isinstance(target, str) and isinstance(node.expression, exp.Null):
                return IsNull(target)
            if target is None:
                return Unknown(f"not a condition on {alias}", self.sql(node))
            if isinstance(target, Unknown):
                return target
            return Unknown("IS other than IS NULL cannot use a bloom filter", self.sql(node))
        return Unknown(_why_not(node), self.sql(node))

    def _column(self, node: exp.Expr, alias: str) -> str | Unknown | None:
        """The real column name when ``node`` is a column of ``alias`` (maybe cast losslessly);
        an Unknown with the reason when it involves one but cannot be used; None otherwise."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
            inner = self._column(node.this, alias)
            if not isinstance(inner, str):
                return inner
            source = self.sources[alias]
            cast = type_name(node.to)
            column_type = source.schema.field(inner).type if source.schema else None
            if column_type is not None and _preserves_values(column_type, cast):
                return inner
            return Unknown(f"cast of {inner} to {cast} changes its values", node.sql(self.dialect))
        if isinstance(node, exp.Greatest | exp.Least):
            # greatest(r, r) and least(r, r) are r in every row (NULL where r is NULL).
            found = [self._column(part, alias) for part in (node.this, *node.expressions)]
            unknown = next((f for f in found if isinstance(f, Unknown)), None)
            if unknown is not None:
                return unknown
            names = set(found)
            return found[0] if len(names) == 1 and isinstance(found[0], str) else None
        if isinstance(node, exp.Column):
            resolved = self.column(node)
            if resolved is None:
                name = self.fold(node.name)
                if node.table or any(name in s.columns for s in self.sources.values()):
                    return None
                return Unknown(f"cannot resolve column {node.sql(self.dialect)}", node.sql())
            if resolved[0] == alias:
                return resolved[1]
        return None

    def _equality(
        self,
        node: exp.Expr,
        alias: str,
        null_safe: bool,
        sides: tuple[exp.Expr, exp.Expr] | None = None,
    ) -> Predicate:
        """``left = right`` (``sides``, or the node's own operands) as a predicate on
        ``alias``; with ``sides``, only ``left`` may be the column."""
        left, right = sides or (node.this, node.expression)
        pairs = ((left, right),) if sides else ((left, right), (right, left))
        for column_node, value_node in pairs:
            column = self._column(column_node, alias)
            if column is None:
                continue
            if isinstance(column, Unknown):
                return Unknown(column.reason, self.sql(node))
            literal = _folded(value_node, self.engine)
            if not isinstance(literal, Literal):
                return Unknown(literal or _why_not_value(value_node), self.sql(node))
            if null_safe and literal.kind == "null":
                return IsNull(column)
            return Equals(column, literal, null_safe)
        for side in (left, right):
            for column_node in side.find_all(exp.Column):
                if isinstance(self._column(column_node, alias), str):
                    reason = f"an expression of {column_node.name} cannot use a bloom filter"
                    return Unknown(reason, self.sql(node))
        return Unknown(_why_not_here(left, right, alias), self.sql(node))

    def _in(self, node: exp.In, alias: str) -> Predicate:
        target = node.this
        while isinstance(target, exp.Paren):
            target = target.this
        if isinstance(target, exp.Tuple):
            return self._tuple_in(node, target, alias)
        column = self._column(node.this, alias)
        if column is None:
            return Unknown(f"not a condition on {alias}", self.sql(node))
        if isinstance(column, Unknown):
            return column
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return Unknown("IN (subquery) is not a list of constants", self.sql(node))
        values: list[Literal] = []
        for element in node.expressions:
            folded = self.list_values(element)
            if folded is not None:
                values.extend(folded)
                continue
            value = _folded(element, self.engine)
            if not isinstance(value, Literal):
                reason = value or "IN list holds something other than constants"
                return Unknown(reason, self.sql(node))
            values.append(value)
        return in_(column, values)

    def _between(self, node: exp.Between, alias: str) -> Predicate:
        """``x BETWEEN c AND c`` is ``x = c`` (DuckDB reduces it so and probes its filters):
        all three engines read BETWEEN as ``x >= c AND x <= c`` and compare with one type
        coercion for =, >= and <=, each type's order total, so the values at least and at
        most c are the values equal to c. Any other BETWEEN is a range."""
        low = _folded(node.args["low"], self.engine)
        high = _folded(node.args["high"], self.engine)
        if not isinstance(low, Literal) or low != high:
            return Unknown(_why_not(node), self.sql(node))
        return self._equality(node, alias, False, (node.this, node.args["low"]))

    def _equal_bounds(self, conjuncts: list[exp.Expr], alias: str) -> list[Predicate]:
        """``x = c`` for each ``x >= c`` and ``x <= c`` both among an AND's ``conjuncts``
        (either way round: ``c <= x``), added beside them (the AND then means the same):
        what the two say, as for ``x BETWEEN c AND c`` (:meth:`_between`)."""
        bounds: dict[tuple[str, Literal], set[bool]] = {}
        for part in conjuncts:
            while isinstance(part, exp.Paren):
                part = part.this
            if not isinstance(part, exp.GTE | exp.LTE):
                continue
            lower = isinstance(part, exp.GTE)  # column >= value: a lower bound
            for column_node, value_node, at_least in (
                (part.this, part.expression, lower),
                (part.expression, part.this, not lower),
            ):
                column = self._column(column_node, alias)
                value = _folded(value_node, self.engine)
                if isinstance(column, str) and isinstance(value, Literal):
                    bounds.setdefault((column, value), set()).add(at_least)
                    break
        return [
            Equals(column, value) for (column, value), kinds in bounds.items() if len(kinds) == 2
        ]

    def _tuple_in(self, node: exp.In, target: exp.Tuple, alias: str) -> Predicate:
        """``(a, b) IN ((1, 'x'), (2, 'y'))`` selects what ``(a = 1 AND b = 'x') OR (a = 2
        AND b = 'y')`` does, but for NULLs: DuckDB, DataFusion and Spark compare the rows as
        structs, whose NULL fields are equal (``(a, b) IN ((1, NULL))`` holds for the row
        ``(1, NULL)``), so each field is IS NOT DISTINCT FROM its value (a NULL one is ``IS
        NULL``; a placeholder bound to None becomes one). Fields of other tables are left
        out of each AND (a weaker condition on this table)."""
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return Unknown("IN (subquery) is not a list of constants", self.sql(node))
        fields = [self._column(part, alias) for part in target.expressions]
        if all(f is None for f in fields):
            return Unknown(f"not a condition on {alias}", self.sql(node))
        rows: list[Predicate] = []
        for element in node.expressions:
            parts = _tuple_parts(element, len(fields))
            if parts is None:
                return Unknown(
                    "a row-value IN list holds something other than rows of "
                    f"{len(fields)} constants",
                    self.sql(node),
                )
            terms: list[Predicate] = []
            for part_column, value_node in zip(fields, parts, strict=True):
                if part_column is None:
                    continue
                if isinstance(part_column, Unknown):
                    terms.append(Unknown(part_column.reason, self.sql(node)))
                    continue
                literal = _folded(value_node, self.engine)
                if not isinstance(literal, Literal):
                    reason = literal or _why_not_value(value_node)
                    terms.append(Unknown(reason, self.sql(node)))
                elif literal.kind == "null":
                    terms.append(IsNull(part_column))
                else:
                    terms.append(Equals(part_column, literal, null_safe=True))
            rows.append(and_(*terms))
        return or_(*rows)


def _tuple_parts(element: exp.Expr, width: int) -> list[exp.Expr] | None:
    """The values of one row of a row-value IN list, or None when it is not a row of
    ``width`` values."""
    while isinstance(element, exp.Paren):
        element = element.this
    if isinstance(element, exp.Tuple) and len(element.expressions) == width:
        return list(element.expressions)
    return None


def _why_not(node: exp.Expr) -> str:
    if isinstance(node, exp.GT | exp.GTE | exp.LT | exp.LTE | exp.Between):
        return "a range cannot use a bloom filter"
    if isinstance(node, exp.Like | exp.ILike | exp.RegexpLike):
        return "a pattern match cannot use a bloom filter"
    if isinstance(node, exp.Exists):
        return "EXISTS (subquery) is analysed on its own"
    if isinstance(node, exp.Column):
        return "a boolean column cannot use a bloom filter"
    return f"{type(node).__name__.upper()} cannot use a bloom filter"


def _why_not_value(node: exp.Expr) -> str:
    if isinstance(node, exp.Column):
        return "compares two columns"
    if isinstance(node, exp.Subquery | exp.Select):
        return "compares with a subquery"
    return "compares with an expression, not a constant"


def _why_not_here(left: exp.Expr, right: exp.Expr, alias: str) -> str:
    if isinstance(left, exp.Column) and isinstance(right, exp.Column):
        return "compares two columns (a join condition)"
    return f"not a condition on {alias}"
