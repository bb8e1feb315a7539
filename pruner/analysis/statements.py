"""A parsed SQL text's statements -> its :class:`~pruner.analysis.model.Analysis`: each
statement walked by :class:`~pruner.analysis.scopes.Analyzer`, the parameters it waits for
in order, and whether its joins are all inner (:mod:`pruner.analyzer` calls it, on the
stack deep SQL needs)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from pruner.analysis.model import DIALECTS, Analysis
from pruner.analysis.nulls import refused
from pruner.analysis.parsing import parse_folded
from pruner.analysis.scopes import Analyzer
from pruner.expressions import Equals, NotEquals, Predicate, leaves

__all__ = ["analyze_statements"]


def analyze_statements(sql: str, dialect: str, schemas: Mapping[str, pa.Schema]) -> Analysis:
    folded, statements = parse_folded(sql, dialect)
    analyzer = Analyzer(schemas, dialect, folded)
    for statement in statements:
        if dialect == "datafusion":
            statement = normalize_identifiers(statement, dialect=DIALECTS[dialect])
        analyzer.statement(statement)
    if any(isinstance(st, exp.Set | exp.Pragma | exp.Command) for st in statements):
        reason = "a SET / PRAGMA statement may change how values compare"
        analyzer.scans = [
            replace(scan, predicate=refused(scan.predicate, reason)) for scan in analyzer.scans
        ]
    parameters = sorted(
        {text for scan in analyzer.scans for text in _parameter_keys(scan.predicate)},
        key=lambda key: (not key.isdigit(), int(key) if key.isdigit() else 0, key),
    )
    return Analysis(
        sql,
        dialect,
        tuple(analyzer.scans),
        tuple(parameters),
        inner_joins_only=all(_inner_joins_only(statement) for statement in statements),
    )


def _inner_joins_only(statement: exp.Expr) -> bool:
    """Is every join of ``statement`` an inner or cross join (plain, comma, NATURAL or
    USING), and every query in it the statement itself, a UNION's member, a CTE or a FROM /
    JOIN source, none inside an expression (IN, EXISTS, a scalar subquery) and no INTERSECT
    or EXCEPT (which engines run as semi and anti joins)?

    >>> from sqlglot import parse_one
    >>> [_inner_joins_only(parse_one(q)) for q in (
    ...     "SELECT * FROM a JOIN b ON a.k = b.k, (SELECT 1 AS k) AS c",
    ...     "SELECT * FROM a LEFT JOIN b ON a.k = b.k",
    ...     "SELECT * FROM a WHERE k IN (SELECT k FROM b)",
    ... )]
    [True, False, False]
    """
    if not isinstance(statement, exp.Query) or any(
        statement.find_all(exp.Lateral, exp.Intersect, exp.Except)  # semi and anti joins
    ):
        return False
    for join in statement.find_all(exp.Join):
        if join.side or join.kind not in ("", "INNER", "CROSS"):
            return False
    for query in statement.find_all(exp.Query):
        node = query
        while node is not statement:
            parent = node.parent
            if isinstance(parent, exp.Subquery | exp.Union):
                node = parent
            elif isinstance(parent, exp.From | exp.Join | exp.CTE | exp.With):
                break
            else:
                return False
    return True


def _parameter_keys(predicate: Predicate) -> Iterator[str]:
    for leaf in leaves(predicate):
        values = getattr(leaf, "values", None) or (
            (leaf.value,) if isinstance(leaf, Equals | NotEquals) else ()
        )
        for value in values:
            if value.kind == "parameter":
                yield value.text
