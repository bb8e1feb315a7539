"""SQL text -> one predicate per table scan, with sqlglot.

For every place a query reads one of the known tables (each FROM / JOIN item, in every CTE,
derived table, subquery and set-operation branch), the analyzer finds the conditions that
every row it reads must satisfy to reach the result, and turns them into a
:mod:`pruner.expressions` predicate over that table's columns. Anything it cannot prove is
:class:`~pruner.expressions.Unknown` with a reason, so a query pruner does not understand
prunes less, never wrongly.

Which conditions may prune a scan of table ``s`` in a SELECT:

* WHERE, and the ON of an INNER (or SEMI) join: these filter ``s``'s rows, unless ``s`` was
  already null-extended by an outer join. Then only a condition that rejects the
  null-extended rows (it cannot be TRUE when all of ``s``'s columns are NULL) may prune:
  ``a LEFT JOIN b ... WHERE b.id = 5`` prunes ``b``; ``... WHERE b.id IS NULL`` must not.
* The ON of an outer join prunes only the side it can null-extend: ``a LEFT JOIN b ON a.k =
  b.k AND b.id = 5`` prunes ``b`` (a ``b`` row with another id never joins), never ``a``.
* Conditions of an enclosing query, pushed into a CTE or derived table whose output column
  is a plain column of ``s``, when that subquery has no LIMIT, window function or DISTINCT ON
  (filters commute with projection, DISTINCT, set operations and GROUP BY on the key).

>>> import pyarrow as pa
>>> schemas = {"events": pa.schema([("user_id", pa.int64()), ("country", pa.string())])}
>>> analysis = analyze("SELECT * FROM events e WHERE e.user_id IN (1, 2)", schemas)
>>> [str(scan) for scan in analysis.scans]
['events AS e: user_id IN (1, 2)']
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, build_scope

from pruner.errors import SqlSyntaxError
from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Equals,
    In,
    IsNull,
    Literal,
    NotEquals,
    NotIn,
    NotNull,
    Or,
    Predicate,
    PredicateVisitor,
    Unknown,
    and_,
    in_,
    leaves,
    map_leaves,
    not_,
    or_,
    rewrite_not,
    visit,
)
from pruner.folding import Folded, check, fold, unfold
from pruner.literals import INTEGER_CASTS, literal_from_python
from pruner.stacks import on_big_stack

__all__ = [
    "DIALECTS",
    "MAX_PARSED_CHARS",
    "Analysis",
    "Scan",
    "analyze",
    "analyze_cached",
    "analyze_uncached",
    "literal_from_sql",
    "names_table",
]

# pruner dialect -> sqlglot dialect. DataFusion parses with sqlparser-rs' generic dialect,
# which reads SQL as PostgreSQL does (double-quoted identifiers, ::casts, $1 parameters).
DIALECTS = {"duckdb": "duckdb", "spark": "spark", "datafusion": "postgres"}
_PARAMETER_PREFIX = "__pruner_parameter_"
MAX_PARSED_CHARS = 262_144
"""Longest SQL text (after :mod:`pruner.folding` took its literal lists out) pruner parses:
sqlglot takes ~10 us and ~250 bytes per character. Longer SQL is not analysed: every table
it names is read whole, and explain says why."""
_CACHED_CHARS = 65_536  # longer SQL is analysed again each time, not kept in the cache
_MAX_CONDITION_DEPTH = 64  # AND / OR nesting the analyzer follows; deeper is Unknown
_JOIN_SIDES = {"", "LEFT", "RIGHT", "FULL"}
_JOIN_KINDS = {"", "INNER", "OUTER", "CROSS", "SEMI", "ANTI"}


@dataclass(frozen=True, slots=True)
class Scan:
    """One read of a known table: the conditions every row it reads must meet."""

    table: str  # the name as given in the schemas mapping
    alias: str
    predicate: Predicate

    def __str__(self) -> str:
        name = self.table if self.alias == self.table else f"{self.table} AS {self.alias}"
        return f"{name}: {self.predicate}"


@dataclass(frozen=True, slots=True)
class Analysis:
    """What a statement says about each table it scans."""

    sql: str
    dialect: str
    scans: tuple[Scan, ...]
    parameters: tuple[str, ...] = ()  # parameter keys in the order they must be given

    def with_parameters(self, parameters: Sequence[object] | Mapping[str, object] = ()) -> Analysis:
        """Substitute query parameters (``?``, ``$1``, ``:name``) by values."""
        if not self.parameters:  # no placeholder to substitute
            return self
        if isinstance(parameters, Mapping):
            values = {str(key): value for key, value in parameters.items()}
        else:
            # ?, $n and :n all number from 0 when parsed (see literal_from_sql)
            values = {str(position): value for position, value in enumerate(parameters)}
        literals = {key: literal_from_python(value) for key, value in values.items()}

        def substitute(literal: Literal) -> Literal:
            if literal.kind != "parameter":
                return literal
            bound = literals.get(literal.text)
            if bound is None or not literal.cast:
                return bound or literal
            if bound.cast:  # CAST(? AS VARCHAR) of a date: its text form is the engine's
                return Literal("unsupported", f"pruner does not evaluate CAST({bound} AS ...)")
            return replace(bound, cast=literal.cast)

        def leaf(node: Predicate) -> Predicate:
            if isinstance(node, Equals | NotEquals):
                value = substitute(node.value)
                if node.null_safe and value.kind == "null":
                    if isinstance(node, Equals):
                        return IsNull(node.column)
                    return NotNull(node.column)
                return replace(node, value=value)
            if isinstance(node, In | NotIn):
                return replace(node, values=tuple(substitute(v) for v in node.values))
            return node

        scans = tuple(replace(s, predicate=map_leaves(s.predicate, leaf)) for s in self.scans)
        return replace(self, scans=scans)

    def bind(self, parameters: Sequence[object] | Mapping[str, object] = ()) -> Analysis:
        """Deprecated name of :meth:`with_parameters` (in pruner, "bind" is
        :func:`pruner.binding.bind`: literals coerced and hashed for a table)."""
        return self.with_parameters(parameters)


# ------------------------------------------------------------------------------ parsing


def _number_placeholders(sql: str, dialect: str) -> str:
    """Give every ``?`` its position, so parameters bind in textual order."""
    if "?" not in sql:
        return sql
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql + "\n")
    pieces, position, count = [], 0, 0
    for token in tokens:
        if token.text in ("?", "?::") and token.token_type in (
            sqlglot.TokenType.PLACEHOLDER,
            sqlglot.TokenType.QDCOLON,
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f":{_PARAMETER_PREFIX}{count}" + token.text[1:])
            position, count = token.end + 1, count + 1
    pieces.append(sql[position:])
    return "".join(pieces)


class _TooComplex(Exception):
    """The SQL is beyond what pruner analyses: every table it names is read whole."""


def _parse(sql: str, dialect: str) -> list[exp.Expr]:
    read = DIALECTS[dialect]
    try:
        # The newline changes no token; without it sqlglot 30's postgres tokenizer fails on
        # text with a ``$n`` placeholder that ends in ``''`` (SQL DataFusion accepts).
        statements = sqlglot.parse(_number_placeholders(sql, read) + "\n", read=read)
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        where = f"line {first.get('line', '?')}, column {first.get('col', '?')}"
        near = (first.get("highlight") or "").strip()
        detail = first.get("description") or str(err)
        raise SqlSyntaxError(
            f"could not parse the SQL ({dialect}) at {where}: {detail}"
            + (f" near {near!r}" if near else "")
        ) from err
    except TokenError as err:
        raise SqlSyntaxError(f"could not read the SQL ({dialect}): {err}") from err
    except RecursionError as err:
        raise _TooComplex(
            "the SQL is nested too deeply for pruner's parser: every table it names is read "
            "whole (the engine runs it as written)"
        ) from err
    return [statement for statement in statements if statement is not None]


def _parse_folded(sql: str, dialect: str) -> tuple[Folded, list[exp.Expr]]:
    """Parse ``sql`` with its long literal lists folded (:mod:`pruner.folding`): every fold
    that parsed where its values were is kept, any other is put back and the text parsed
    again (at most twice more, the last time with nothing folded)."""
    folded = fold(sql)
    first = True
    while True:
        if len(folded.sql) > MAX_PARSED_CHARS:
            raise _TooComplex(
                f"the SQL is {len(folded.sql):,} characters long"
                + (" after folding its literal lists" if folded.lists else "")
                + f"; pruner analyses at most {MAX_PARSED_CHARS:,}: every table it names is "
                "read whole"
            )
        try:
            statements = _parse(folded.sql, dialect)
        except SqlSyntaxError:
            if not folded.lists:
                raise
            folded = unfold(folded, ())
            continue
        good = check(folded, statements)
        if len(good) == len(folded.lists):
            return folded, statements
        folded = unfold(folded, good if first else ())
        first = False


# ------------------------------------------------------------------- condition -> predicate


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
        if name.startswith(_PARAMETER_PREFIX):
            return Literal("parameter", name[len(_PARAMETER_PREFIX) :])
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
        return replace(inner, cast=_type_name(node.to))
    return None


def _type_name(data_type: exp.DataType) -> str:
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


@dataclass
class _Source:
    """A FROM / JOIN item of one SELECT: a known table, or a CTE / derived table."""

    alias: str  # folded as the dialect folds identifiers
    node: exp.Expr
    table: str | None = None  # key in the schemas mapping, for known tables
    schema: pa.Schema | None = None
    scope: Scope | None = None  # for CTEs and derived tables
    known_columns: bool = False  # are ``columns`` all of this item's columns?
    columns: dict[str, str] = field(default_factory=dict)  # folded name -> real name
    prunable: bool = True


def _column_map(names: list[str], fold: Callable[[str], str]) -> dict[str, str]:
    """Folded name -> name, leaving out names that fold to the same key (ambiguous)."""
    counts = Counter(fold(name) for name in names)
    return {fold(name): name for name in names if counts[fold(name)] == 1}


def _renames_columns(item: exp.Expr, scope: Scope | None) -> bool:
    """Does the FROM item (or the CTE it names) rename or reshape its columns?"""
    alias = item.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return True
    if item.args.get("pivots"):
        return True
    parent = scope.expression.parent if scope is not None else None
    if isinstance(parent, exp.CTE):
        cte_alias = parent.args.get("alias")
        return isinstance(cte_alias, exp.TableAlias) and bool(cte_alias.columns)
    return False


class _Analyzer:
    def __init__(
        self, schemas: Mapping[str, pa.Schema], dialect: str, folded: Folded | None = None
    ) -> None:
        # DuckDB and Spark compare identifiers case-insensitively; DataFusion lower-cases
        # unquoted ones (normalize_identifiers does that first) and compares exactly.
        self.fold: Callable[[str], str] = (
            (lambda name: name) if dialect == "datafusion" else str.lower
        )
        # Names that fold to one key ("T" and "t" on DuckDB) are left out: which one a
        # reference means is the engine's choice, so neither is ever pruned.
        folds = Counter(self.fold(name) for name in schemas)
        self.schemas = {
            self.fold(name): (name, schema)
            for name, schema in schemas.items()
            if folds[self.fold(name)] == 1
        }
        self.dialect = DIALECTS.get(dialect, dialect)  # sqlglot's name, for SQL text
        self.scans: list[Scan] = []
        self.visited: set[int] = set()  # ids of exp.Table nodes analysed
        self.cte_references: set[int] = set()  # ids of exp.Table nodes read as a CTE
        self.active: list[int] = []  # scopes being visited (recursive CTEs)
        self.seen_scopes: set[int] = set()
        self.pushdown = True
        self.budget = 10_000
        self.folded = folded

    def list_values(self, node: exp.Expr) -> tuple[Literal, ...] | None:
        """The values of a literal list :mod:`pruner.folding` took out, where ``node`` is its
        placeholder."""
        if self.folded is None or not isinstance(node, exp.Placeholder):
            return None
        entry = self.folded.lists.get(str(node.this or ""))
        return None if entry is None else entry.values

    # ---------------------------------------------------------------- statements

    def statement(self, statement: exp.Expr) -> None:
        if any(w.args.get("recursive") for w in statement.find_all(exp.With)):
            # Pushing a filter into a recursive CTE would cut the recursion short.
            self.pushdown = False
        queries = [statement] if isinstance(statement, exp.Query) else []
        if not queries:
            queries = [q for q in statement.find_all(exp.Query) if _outermost(q)]
        for query in queries:
            root = build_scope(query)
            if root is not None:
                self.visit(root, None)
                self.other_cte_references(root, statement)
        self.unanalysed(statement)

    def other_cte_references(self, root: Scope, statement: exp.Expr) -> None:
        """A CTE also read other than as a FROM item (``FROM (t)``, a nested join) is
        analysed once more with no filter pushed into it."""
        ctes: dict[str, list[Scope]] = {}
        for scope in root.traverse():
            parent = scope.expression.parent
            if scope.is_cte and isinstance(parent, exp.CTE):
                ctes.setdefault(self.fold(parent.alias), []).append(scope)
        if not ctes:
            return
        revisited: set[str] = set()
        for table in list(statement.find_all(exp.Table)):
            name = self.fold(table.name)
            if name in ctes and name not in revisited and id(table) not in self.cte_references:
                revisited.add(name)
                for scope in ctes[name]:
                    self.visit(scope, None)

    def unanalysed(self, statement: exp.Expr) -> None:
        """Known tables read where the analyzer did not look are read whole."""
        reason = "read where pruner cannot analyse the query"
        for table in statement.find_all(exp.Table):
            if id(table) in self.visited or id(table) in self.cte_references:
                continue
            names: list[str] = []
            if isinstance(table.this, exp.Identifier):
                entry = self.schemas.get(self.fold(table.name))
                names = [entry[0]] if entry else []
            else:  # a table function: query_table('events'), query('SELECT ... FROM events')
                texts = [lit.this for lit in table.find_all(exp.Literal) if lit.is_string]
                names = [
                    real
                    for key, (real, _) in self.schemas.items()
                    if any(re.search(rf"\b{re.escape(key)}\b", t, re.IGNORECASE) for t in texts)
                ]
            for name in names:
                self.scans.append(Scan(name, table.alias_or_name, Unknown(reason, self.sql(table))))

    def sql(self, node: exp.Expr) -> str:
        """``node`` as SQL text for explain, cut to 200 characters. A large node is only named:
        generating its whole text for every scan that meets it would be quadratic (a
        subquery nested 2,000 deep)."""
        if _larger_than(node, _SHOWN_NODES):
            head = node.this if isinstance(node.this, exp.Expr) else None
            shown = "" if head is None or _larger_than(head, 20) else head.sql(self.dialect) + " "
            return f"{shown}{type(node).__name__.upper()} ..."
        text = node.sql(self.dialect)
        if self.folded is not None and self.folded.lists and self.folded.prefix in text:
            text = re.sub(f":({re.escape(self.folded.prefix)}[0-9]+)", self._shown_list, text)
        return text if len(text) <= 200 else text[:197] + "..."

    def _shown_list(self, match: re.Match[str]) -> str:
        assert self.folded is not None
        values = self.folded.lists[match.group(1)].values
        return ", ".join(str(v) for v in values[:3]) + f", ... {len(values) - 3:,} more"

    def known_table(self, table: exp.Table) -> str | None:
        if not isinstance(table.this, exp.Identifier) or table.args.get("db"):
            return None
        entry = self.schemas.get(self.fold(table.name))
        return entry[0] if entry else None

    # ---------------------------------------------------------------- scopes

    def visit(self, scope: Scope, pushed: Predicate | None) -> None:
        if id(scope) in self.active:
            return  # a recursive CTE reading itself: the visit under way covers its tables
        self.budget -= 1
        if self.budget < 0:
            pushed = None  # too many CTE references to push into: analyse each on its own
            if self.budget < -100_000:
                return  # what is left unvisited is read whole (unanalysed)
        self.active.append(id(scope))
        self.seen_scopes.add(id(scope))
        try:
            self._visit(scope, pushed if self.pushdown else None)
        finally:
            self.active.pop()

    def _visit(self, scope: Scope, pushed: Predicate | None) -> None:
        query = scope.expression
        for sub in scope.subquery_scopes + scope.udtf_scopes:
            self.visit(sub, None)
        if isinstance(query, exp.SetOperation):
            self.set_operation(scope, pushed)
            return
        if not isinstance(query, exp.Select):
            self.unreferenced(scope.derived_table_scopes + scope.cte_scopes)
            return
        if pushed is not None and not _accepts_pushdown(query):
            pushed = None
        self.select(scope, query, pushed)

    def set_operation(self, scope: Scope, pushed: Predicate | None) -> None:
        query = scope.expression
        if query.args.get("limit") or query.args.get("offset") or query.args.get("by_name"):
            pushed = None
        branches = scope.set_operation_scopes
        columns = [self.branch_columns(branch) for branch in branches]
        known = [c for c in columns if c is not None]
        if len(known) < len(columns) or len({len(c) for c in known}) > 1:
            pushed = None  # a branch whose columns are unknown may widen the union's types
        for branch, branch_columns in zip(branches, columns, strict=True):
            branch_pushed = None
            if pushed is not None and branch_columns is not None:
                # Only where every branch outputs a plain column of one and the same type:
                # a union that widens a type (BIGINT + DOUBLE) compares in the wider one.
                renames = {}
                for position, (name, _) in enumerate(known[0]):
                    types = {c[position][1] for c in known}
                    target = branch_columns[position][0]
                    if name and target and len(types) == 1 and None not in types:
                        renames[name] = target
                branch_pushed = _renamed(pushed, renames, "not a plain column of the subquery")
            self.visit(branch, branch_pushed)
        self.unreferenced(scope.cte_scopes)

    def branch_columns(self, scope: Scope) -> list[tuple[str | None, pa.DataType | None]] | None:
        """(output name, type) per output of a set-operation branch; the name is None where
        it is not unique, the type None where it is not a plain column of a known table."""
        query = scope.expression
        names = _output_names(query, self.fold)
        if names is None or not isinstance(query, exp.Select):
            return None
        resolver = _Resolver(self.sources(scope, query), self)
        result: list[tuple[str | None, pa.DataType | None]] = []
        for name, select in zip(names, query.expressions, strict=True):
            target = select.this if isinstance(select, exp.Alias) else select
            column_type = None
            if isinstance(target, exp.Column):
                resolved = resolver.column(target)
                source = resolver.sources.get(resolved[0]) if resolved else None
                if resolved and source is not None and source.schema is not None:
                    column_type = source.schema.field(resolved[1]).type
            result.append((name, column_type))
        return result

    def unreferenced(self, scopes: list[Scope]) -> None:
        """CTEs and derived tables not read as a FROM item are analysed on their own."""
        for child in scopes:
            if id(child) not in self.seen_scopes:
                self.visit(child, None)

    def sources(self, scope: Scope, query: exp.Select) -> list[_Source]:
        items: list[exp.Expr] = []
        from_ = query.args.get("from_") or query.args.get("from")
        if from_ is not None:
            items.append(from_.this)
            items.extend(from_.expressions or [])
        items.extend(join.this for join in query.args.get("joins") or [])
        result = []
        for item in items:
            alias = self.fold(item.alias_or_name) if isinstance(item, exp.Expr) else ""
            source = _Source(alias=alias, node=item)
            target = scope.sources.get(item.alias_or_name)
            renamed = _renames_columns(item, target if isinstance(target, Scope) else None)
            if isinstance(item, exp.Table) and isinstance(target, exp.Table):
                known = self.known_table(item)
                if known and not renamed:
                    schema = self.schemas[self.fold(known)][1]
                    source.table, source.schema = known, schema
                    source.columns = _column_map(schema.names, self.fold)
                    source.known_columns = True
                    if item.args.get("sample") or item.args.get("version"):
                        source.prunable = False
            elif isinstance(target, Scope) and not renamed:
                source.scope = target
                if target.is_cte:
                    self.cte_references.add(id(item))
                names = self.derived_names(target)
                if names is not None:
                    source.columns = {name: name for name in names if name}
                    source.known_columns = len(source.columns) == len(names)
            result.append(source)
        return result

    def select(self, scope: Scope, query: exp.Select, pushed: Predicate | None) -> None:
        sources = self.sources(scope, query)
        resolver = _Resolver(sources, self)
        constraints: dict[str, list[Predicate]] = {s.alias: [] for s in sources}
        null_extended: set[str] = set()
        refusal = ""
        if query.args.get("sample"):
            refusal = "USING SAMPLE picks rows before the WHERE clause"
        if len({s.alias for s in sources}) < len(sources):
            refusal = "two FROM items share a name"
        seen: list[str] = [sources[0].alias] if sources else []
        from_ = query.args.get("from_") or query.args.get("from")
        extra_from = len(from_.expressions) if from_ is not None and from_.expressions else 0
        seen.extend(s.alias for s in sources[1 : 1 + extra_from])

        for join, source in zip(
            query.args.get("joins") or [], sources[1 + extra_from :], strict=False
        ):
            side = (join.args.get("side") or "").upper()
            kind = (join.args.get("kind") or "").upper()
            method = (join.args.get("method") or "").upper()
            if side not in _JOIN_SIDES or kind not in _JOIN_KINDS or method not in ("", "NATURAL"):
                refusal = refusal or "a join pruner does not understand (ASOF, POSITIONAL, ...)"
            if kind == "SEMI":
                prunes = [*seen, source.alias]
            elif kind == "ANTI":  # keeps the rows of one side that match nothing on the other
                prunes = list(seen) if side == "RIGHT" else [source.alias]
            elif side == "LEFT":
                prunes = [source.alias]
            elif side == "RIGHT":
                prunes = list(seen)
            elif side == "FULL":
                prunes = []
            else:
                prunes = [*seen, source.alias]
            on = join.args.get("on")
            if on is not None:
                joined = {*seen, source.alias}
                targets = [s.alias for s in sources if s.alias in joined]
                pruned = set(prunes)
                for alias, converted in resolver.conditions(on, targets).items():
                    part = rewrite_not(converted)
                    if alias not in pruned:
                        part = _refused(part, f"the {side or kind} JOIN keeps {alias}'s rows")
                    elif alias in null_extended and _can_be_true_on_nulls(part):
                        part = _refused(part, f"outer join may null-extend {alias}")
                    constraints[alias].append(part)
            if kind not in ("SEMI", "ANTI"):
                if side == "LEFT":
                    null_extended.add(source.alias)
                elif side == "RIGHT":
                    null_extended.update(seen)
                elif side == "FULL":
                    null_extended.update([*seen, source.alias])
            seen.append(source.alias)

        where = query.args.get("where")
        where_parts = (
            {} if where is None else resolver.conditions(where.this, [s.alias for s in sources])
        )
        for source in sources:
            parts = []
            if source.alias in where_parts:
                parts.append(where_parts[source.alias])
            if pushed is not None:
                mine = {
                    output: column
                    for output, (alias, column) in resolver.outputs(query).items()
                    if alias == source.alias
                }
                parts.append(_renamed(pushed, mine, "not a plain column of this table"))
            if not parts:
                continue
            part = rewrite_not(and_(*parts))
            if source.alias in null_extended and _can_be_true_on_nulls(part):
                part = _refused(part, f"outer join may null-extend {source.alias}")
            constraints[source.alias].append(part)

        for source in sources:
            predicate = and_(*constraints[source.alias])
            if refusal:
                predicate = _refused(predicate, refusal)
            if not source.prunable:
                predicate = _refused(predicate, "TABLESAMPLE or time travel on the table")
            if source.table is not None:
                self.visited.add(id(source.node))
                self.scans.append(Scan(source.table, source.alias, predicate))
            elif source.scope is not None:
                self.visit(source.scope, None if refusal else predicate)
        self.unreferenced(scope.cte_scopes + scope.derived_table_scopes)

    def derived_names(self, scope: Scope) -> list[str | None] | None:
        """The output column names of a CTE / derived table (None when not known)."""
        query = scope.expression
        while isinstance(query, exp.SetOperation):
            query = query.this
        names = _output_names(query, self.fold)
        if names is None and isinstance(query, exp.Select) and not query.args.get("joins"):
            from_ = query.args.get("from_") or query.args.get("from")
            item = from_.this if from_ is not None else None
            only_star = len(query.expressions) == 1 and _bare_star(query.expressions[0])
            if only_star and isinstance(item, exp.Table) and not _renames_columns(item, None):
                known = self.known_table(item)
                target = scope.sources.get(item.alias_or_name)
                if known and isinstance(target, exp.Table):
                    schema = self.schemas[self.fold(known)][1]
                    names = list(_column_map(schema.names, self.fold))
        return names


_SHOWN_NODES = 400
_FEW_SOURCES = 16  # FROM items up to which a condition is converted for every one of them
_NO_ALIAS = "\x00"  # an alias no FROM item has


def _larger_than(node: exp.Expr, limit: int) -> bool:
    """Has ``node`` more than ``limit`` nodes (counted only up to ``limit + 1``)?"""
    return any(count >= limit for count, _ in enumerate(node.walk()))


def _bare_star(select: exp.Expr) -> bool:
    """``*`` with no REPLACE / RENAME / EXCLUDE (those change what the star outputs)."""
    return isinstance(select, exp.Star) and not any(
        select.args.get(key) for key in ("replace", "rename", "except", "exclude")
    )


def _outermost(query: exp.Query) -> bool:
    parent = query.parent
    while parent is not None:
        if isinstance(parent, exp.Query):
            return False
        parent = parent.parent
    return True


def _accepts_pushdown(query: exp.Select) -> bool:
    """May an enclosing query's filter on this SELECT's output columns reach its scans?"""
    if any(query.args.get(key) for key in ("limit", "offset", "fetch", "qualify", "sample")):
        return False
    distinct = query.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        return False
    if any(select.find(exp.Window) for select in query.expressions):
        return False
    group = query.args.get("group")
    grouping_sets = ("rollup", "cube", "grouping_sets", "all")
    return group is None or not any(group.args.get(key) for key in grouping_sets)


def _output_names(
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


def _renamed(pushed: Predicate, renames: dict[str, str], elsewhere: str) -> Predicate:
    """An enclosing query's filter on output columns, as a filter on the columns they are;
    a leaf on any other output becomes Unknown for the reason ``elsewhere``."""

    def leaf(part: Predicate) -> Predicate:
        column = getattr(part, "column", None)
        if column is None:
            return part
        target = renames.get(column)
        if target is None:
            return Unknown(elsewhere, str(part))
        return replace(part, column=target)  # type: ignore[type-var]

    return map_leaves(pushed, leaf)


def _refused(predicate: Predicate, reason: str) -> Predicate:
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


class _Resolver:
    """Resolves the columns of one SELECT's conditions to its FROM / JOIN items."""

    def __init__(self, sources: list[_Source], analyzer: _Analyzer) -> None:
        self.sources = {s.alias: s for s in sources}
        self.fold = analyzer.fold
        self.sql = analyzer.sql
        self.list_values = analyzer.list_values
        self.dialect = analyzer.dialect
        self._outputs: dict[str, tuple[str, str]] | None = None
        self._owners: dict[str, list[_Source]] = {}  # folded column name -> items that have it
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
        names = _output_names(query, self.fold)
        for position, select in enumerate(query.expressions):
            if _bare_star(select) and len(self.sources) == 1 and grouped is None:
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
            parts = [self._convert(part, alias, depth, kind) for part in node.flatten()]
            return and_(*parts) if kind is exp.And else or_(*parts)
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
            cast = _type_name(node.to)
            column_type = source.schema.field(inner).type if source.schema else None
            if column_type is not None and _preserves_values(column_type, cast):
                return inner
            return Unknown(f"cast of {inner} to {cast} changes its values", node.sql(self.dialect))
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

    def _equality(self, node: exp.Expr, alias: str, null_safe: bool) -> Predicate:
        left, right = node.this, node.expression
        for column_node, value_node in ((left, right), (right, left)):
            column = self._column(column_node, alias)
            if column is None:
                continue
            if isinstance(column, Unknown):
                return Unknown(column.reason, self.sql(node))
            literal = literal_from_sql(value_node)
            if literal is None:
                return Unknown(_why_not_value(value_node), self.sql(node))
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
            value = literal_from_sql(element)
            if value is None:
                return Unknown("IN list holds something other than constants", self.sql(node))
            values.append(value)
        return in_(column, values)


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


# Deep nesting: sqlglot's parser takes ~23 Python frames per level of parentheses and ~33 per
# NOT (...). Python 3.11 keeps pure-Python frames off the C stack, but a call through C (a
# generator, a builtin calling back) still takes C stack, and the recursion limit counts
# those too. So the analysis runs on a thread of its own whose C stack holds the whole
# limit's worth of such frames (4 KiB each; only the pages touched are ever allocated), and a
# query nested deeper than the limit is read whole instead of crashing the process.
_RECURSION_LIMIT = 60_000  # ~2,600 levels of parentheses, ~1,800 of NOT (...)
_STACK_BYTES = 256 * 2**20
# SQL this short cannot nest deeply: it is analysed on the caller's thread (starting one costs
# 0.1-0.25 ms, half a short query's analysis) under the limit the caller's stack can take.
_INLINE_CHARS = 2_000
_INLINE_RECURSION_LIMIT = 12_000
_limit_lock = threading.Lock()
_limit_users = 0
_limit_before = 0


_limit_raised = 0


@contextlib.contextmanager
def _deep_recursion(limit: int = _RECURSION_LIMIT) -> Iterator[None]:
    """Raise the interpreter's recursion limit to ``limit`` while any analysis runs (the
    limit is one for all threads: the first analysis in raises it, the last one out puts it
    back; a deep analysis raises it further while it runs)."""
    global _limit_users, _limit_before, _limit_raised
    with _limit_lock:
        if _limit_users == 0:
            _limit_before = _limit_raised = sys.getrecursionlimit()
        _limit_users += 1
        if limit > _limit_raised:
            _limit_raised = limit
            sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                sys.setrecursionlimit(_limit_before)


def _on_deep_stack(function: Callable[[], Analysis], sql: str) -> Analysis:
    """``function()`` on a thread with a ``_STACK_BYTES`` C stack, under the raised limit;
    for short SQL, or where no such thread can start, on this thread under a lower one."""

    def inline() -> Analysis:
        with _deep_recursion(_INLINE_RECURSION_LIMIT):
            return function()

    def deep() -> Analysis:
        with _deep_recursion():
            return function()

    if len(sql) <= _INLINE_CHARS:
        return inline()
    return on_big_stack(deep, _STACK_BYTES, "pruner-analyze", fallback=inline)


def _whole(sql: str, dialect: str, schemas: Mapping[str, pa.Schema], reason: str) -> Analysis:
    """Every table ``sql`` names, read whole, for ``reason``."""
    scans = tuple(
        Scan(name, name, Unknown(reason, "the whole query"))
        for name in schemas
        if names_table(name, sql)
    )
    return Analysis(sql, dialect, scans)


def names_table(name: str, sql: str) -> bool:
    """Can ``sql`` name the table ``name``: does it occur, plain or with its quote
    characters doubled as inside a quoted identifier?

    >>> names_table('a"b', 'SELECT * FROM "a""b" AS x'), names_table("users", "SELECT 1")
    (True, False)
    """
    text = sql.casefold()
    folded = name.casefold()
    forms = {folded, *(folded.replace(q, q + q) for q in "\"`'")}
    return any(form in text for form in forms)


def analyze_uncached(
    sql: str, dialect: str, schema_key: tuple[tuple[str, pa.Schema], ...]
) -> Analysis:
    if dialect not in DIALECTS:
        raise SqlSyntaxError(
            f"unknown SQL dialect {dialect!r}; use one of {', '.join(sorted(DIALECTS))}"
        )
    """:func:`analyze` without the cache: ``schema_key`` is the schemas mapping as sorted
    (name, schema) pairs."""
    schemas = dict(schema_key)
    try:
        return _on_deep_stack(lambda: _analyze_statements(sql, dialect, schemas), sql)
    except _TooComplex as err:
        return _whole(sql, dialect, schemas, str(err))
    except RecursionError:
        reason = (
            "the SQL is nested too deeply for pruner to analyse: every table it names is "
            "read whole (the engine runs it as written)"
        )
        return _whole(sql, dialect, schemas, reason)


analyze_cached = functools.lru_cache(maxsize=256)(analyze_uncached)
""":func:`analyze_uncached` behind a cache of the last 256 analyses (``cache_clear()``,
``cache_info()``); :func:`analyze` uses it for SQL of up to 65,536 characters."""


def _analyze_statements(sql: str, dialect: str, schemas: Mapping[str, pa.Schema]) -> Analysis:
    folded, statements = _parse_folded(sql, dialect)
    analyzer = _Analyzer(schemas, dialect, folded)
    for statement in statements:
        if dialect == "datafusion":
            statement = normalize_identifiers(statement, dialect=DIALECTS[dialect])
        analyzer.statement(statement)
    if any(isinstance(st, exp.Set | exp.Pragma | exp.Command) for st in statements):
        reason = "a SET / PRAGMA statement may change how values compare"
        analyzer.scans = [
            replace(scan, predicate=_refused(scan.predicate, reason)) for scan in analyzer.scans
        ]
    parameters = sorted(
        {text for scan in analyzer.scans for text in _parameter_keys(scan.predicate)},
        key=lambda key: (not key.isdigit(), int(key) if key.isdigit() else 0, key),
    )
    return Analysis(sql, dialect, tuple(analyzer.scans), tuple(parameters))


def _parameter_keys(predicate: Predicate) -> Iterator[str]:
    for leaf in leaves(predicate):
        values = getattr(leaf, "values", None) or (
            (leaf.value,) if isinstance(leaf, Equals | NotEquals) else ()
        )
        for value in values:
            if value.kind == "parameter":
                yield value.text


def analyze(sql: str, schemas: Mapping[str, pa.Schema], dialect: str = "duckdb") -> Analysis:
    """One predicate per scan of a known table in ``sql``.

    Args:
        sql: the statement(s), in ``dialect``.
        schemas: table name (as the SQL names it, case-insensitive) -> Arrow schema.
        dialect: ``duckdb`` (default), ``spark`` or ``datafusion``.

    Raises:
        SqlSyntaxError: the SQL does not parse; the message names the position.
    """
    key = tuple(sorted(schemas.items(), key=lambda item: item[0]))
    if len(sql) > _CACHED_CHARS:  # a cache of 256 such analyses could hold gigabytes
        return analyze_uncached(sql, dialect, key)
    return analyze_cached(sql, dialect, key)
