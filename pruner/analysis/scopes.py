"""Walking a statement's scopes: which conditions may prune which scan.

:class:`Analyzer` visits every SELECT of a statement (CTEs, derived tables, subqueries,
set-operation branches), follows its joins to see which FROM items a condition filters
(outer joins null-extend), pushes an enclosing query's filters into the subqueries they
commute with, and records one :class:`~pruner.analysis.model.Scan` per read of a known table.
What equalities imply and the join edges are :mod:`pruner.analysis.joins`; what a pushed
filter becomes, :mod:`pruner.analysis.pushdown`; what null extension refuses,
:mod:`pruner.analysis.nulls`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from pruner.analysis.conditions import (
    Origin,
    Resolver,
    Source,
    bare_star,
    column_map,
    output_names,
)
from pruner.analysis.joins import _conjuncts, _edge, _edges, _implied, _same_equality
from pruner.analysis.model import JoinEdge, Scan
from pruner.analysis.nulls import _can_be_true_on_nulls, refused
from pruner.analysis.parsing import DIALECTS
from pruner.analysis.pushdown import _accepts_pushdown, _renamed
from pruner.expressions import (
    AlwaysTrue,
    Literal,
    Predicate,
    Unknown,
    and_,
    rewrite_not,
)
from pruner.folding import Folded

__all__ = ["Analyzer"]

_JOIN_SIDES = {"", "LEFT", "RIGHT", "FULL"}
_JOIN_KINDS = {"", "INNER", "OUTER", "CROSS", "SEMI", "ANTI"}
_SHOWN_NODES = 400


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


class Analyzer:
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
        names = output_names(query, self.fold)
        if names is None or not isinstance(query, exp.Select):
            return None
        resolver = Resolver(self.sources(scope, query), self)
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

    def sources(self, scope: Scope, query: exp.Select) -> list[Source]:
        items: list[exp.Expr] = []
        from_ = query.args.get("from_")
        if from_ is not None:
            items.append(from_.this)
            items.extend(from_.expressions or [])
        items.extend(join.this for join in query.args.get("joins") or [])
        result = []
        for item in items:
            alias = self.fold(item.alias_or_name) if isinstance(item, exp.Expr) else ""
            source = Source(alias=alias, node=item)
            target = scope.sources.get(item.alias_or_name)
            renamed = _renames_columns(item, target if isinstance(target, Scope) else None)
            if isinstance(item, exp.Table) and isinstance(target, exp.Table):
                known = self.known_table(item)
                if known and not renamed:
                    schema = self.schemas[self.fold(known)][1]
                    source.table, source.schema = known, schema
                    source.columns = column_map(schema.names, self.fold)
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
                source.origin = self.origin(target)
            result.append(source)
        return result

    def origin(self, scope: Scope) -> Origin | None:
        """The :class:`Origin` of a CTE / derived table: its body one SELECT (no set
        operation, no join, no USING SAMPLE) reading one known table it may prune."""
        query = scope.expression
        if not isinstance(query, exp.Select) or query.args.get("sample"):
            return None
        from_ = query.args.get("from_")
        item = from_.this if from_ is not None else None
        if not isinstance(item, exp.Table) or not isinstance(
            scope.sources.get(item.alias_or_name), exp.Table
        ):
            return None  # not a table: a CTE's origin is not followed (each is its own scan)
        inner = self.sources(scope, query)
        if len(inner) != 1 or inner[0].table is None or not inner[0].prunable:
            return None
        resolver = Resolver(inner, self)
        columns = {output: column for output, (_, column) in resolver.outputs(query).items()}
        where = query.args.get("where")
        predicate: Predicate = AlwaysTrue()
        if where is not None:
            predicate = rewrite_not(resolver.predicate(where.this, inner[0].alias))
        return Origin(inner[0], columns, predicate)

    def select(self, scope: Scope, query: exp.Select, pushed: Predicate | None) -> None:
        sources = self.sources(scope, query)
        resolver = Resolver(sources, self)
        constraints: dict[str, list[Predicate]] = {s.alias: [] for s in sources}
        null_extended: set[str] = set()
        refusal = ""
        if query.args.get("sample"):
            refusal = "USING SAMPLE picks rows before the WHERE clause"
        if len({s.alias for s in sources}) < len(sources):
            refusal = "two FROM items share a name"
        seen: list[str] = [sources[0].alias] if sources else []
        from_ = query.args.get("from_")
        extra_from = len(from_.expressions) if from_ is not None and from_.expressions else 0
        seen.extend(s.alias for s in sources[1 : 1 + extra_from])
        inner_on: list[exp.Expr] = []  # ON clauses of inner and semi joins

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
            if on is not None and side == "" and kind in ("", "INNER", "CROSS", "SEMI"):
                inner_on.append(on)
            if on is not None:
                joined = {*seen, source.alias}
                targets = [s.alias for s in sources if s.alias in joined]
                pruned = set(prunes)
                for alias, converted in resolver.conditions(on, targets).items():
                    part = rewrite_not(converted)
                    if alias not in pruned:
                        part = refused(part, f"the {side or kind} JOIN keeps {alias}'s rows")
                    elif alias in null_extended and _can_be_true_on_nulls(part):
                        part = refused(part, f"outer join may null-extend {alias}")
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
        held = [where.this] if where is not None else []
        implied_parts, join_pairs = _implied(resolver, sources, [*held, *inner_on])
        for alias, implied in implied_parts.items():
            stated = where_parts.get(alias)
            where_parts[alias] = implied if stated is None else and_(stated, implied)
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
                part = refused(part, f"outer join may null-extend {source.alias}")
            constraints[source.alias].append(part)

        subquery_edges = self.subquery_edges(
            scope, resolver, where.this if where is not None else None
        )
        predicates: dict[str, Predicate] = {}
        for source in sources:
            predicate = and_(*constraints[source.alias])
            if refusal:
                predicate = refused(predicate, refusal)
            if not source.prunable:
                predicate = refused(predicate, "TABLESAMPLE or time travel on the table")
            predicates[source.alias] = predicate
        by_alias = {s.alias: s for s in sources}
        for source in sources:
            predicate = predicates[source.alias]
            if source.table is not None:
                joins = (
                    ()
                    if refusal or not source.prunable
                    else _edges(source, by_alias, predicates, join_pairs)
                    + tuple(subquery_edges.get(source.alias, ()))
                )
                self.visited.add(id(source.node))
                self.scans.append(Scan(source.table, source.alias, predicate, joins))
            elif source.scope is not None:
                self.visit(source.scope, None if refusal else predicate)
        self.unreferenced(scope.cte_scopes + scope.derived_table_scopes)

    def subquery_edges(
        self, scope: Scope, resolver: Resolver, where: exp.Expr | None
    ) -> dict[str, list[JoinEdge]]:
        """Per FROM item, the edges of the top-level ``x.a IN (SELECT t.b FROM t ...)``
        terms of the WHERE clause: a row of x the query keeps holds a value of t.b in a row
        of t that meets the subquery's conditions (a superset of the subquery's values,
        whatever its LIMIT, GROUP BY or DISTINCT)."""
        found: dict[str, list[JoinEdge]] = {}
        if where is None:
            return found
        for part in _conjuncts(where):
            query = part.args.get("query") if isinstance(part, exp.In) else None
            target = part.this if isinstance(part, exp.In) else None
            while isinstance(target, exp.Paren):
                target = target.this
            if not isinstance(target, exp.Column) or not isinstance(query, exp.Subquery):
                continue
            inner = query.this
            if not isinstance(inner, exp.Select) or inner.args.get("joins"):
                continue
            if len(inner.expressions) != 1 or not isinstance(inner.expressions[0], exp.Column):
                continue
            mine = resolver.column(target)
            sub = next((s for s in scope.subquery_scopes if s.expression is inner), None)
            if mine is None or sub is None:
                continue
            sources = self.sources(sub, inner)
            other = sources[0] if len(sources) == 1 else None
            if other is None:
                continue
            inner_resolver = Resolver(sources, self)
            theirs = inner_resolver.column(inner.expressions[0])
            if theirs is None:
                continue
            types = (
                resolver.sources[mine[0]].column_type(mine[1]),
                other.column_type(theirs[1]),
            )
            if not _same_equality(*types):
                continue
            condition = inner.args.get("where")
            predicate: Predicate = AlwaysTrue()
            if condition is not None:
                predicate = rewrite_not(inner_resolver.predicate(condition.this, other.alias))
            edge = _edge(mine[1], other, theirs[1], predicate, resolver.sql(part))
            if edge is not None:
                found.setdefault(mine[0], []).append(edge)
        return found

    def derived_names(self, scope: Scope) -> list[str | None] | None:
        """The output column names of a CTE / derived table (None when not known)."""
        query = scope.expression
        while isinstance(query, exp.SetOperation):
            query = query.this
        names = output_names(query, self.fold)
        if names is None and isinstance(query, exp.Select) and not query.args.get("joins"):
            from_ = query.args.get("from_")
            item = from_.this if from_ is not None else None
            only_star = len(query.expressions) == 1 and bare_star(query.expressions[0])
            if only_star and isinstance(item, exp.Table) and not _renames_columns(item, None):
                known = self.known_table(item)
                target = scope.sources.get(item.alias_or_name)
                if known and isinstance(target, exp.Table):
                    schema = self.schemas[self.fold(known)][1]
                    names = list(column_map(schema.names, self.fold))
        return names


def _larger_than(node: exp.Expr, limit: int) -> bool:
    """Has ``node`` more than ``limit`` nodes (counted only up to ``limit + 1``)?"""
    return any(count >= limit for count, _ in enumerate(node.walk()))


def _outermost(query: exp.Query) -> bool:
    parent = query.parent
    while parent is not None:
        if isinstance(parent, exp.Query):
            return False
        parent = parent.parent
    return True
