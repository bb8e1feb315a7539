"""What an analysis is: one predicate per scan of a known table, and the parameters
it waits for (substituted by :meth:`Analysis.with_parameters`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pruner.expressions import (
    Equals,
    In,
    IsNull,
    Literal,
    NotEquals,
    NotIn,
    NotNull,
    Predicate,
    map_leaves,
)
from pruner.literal_text import literal_from_python

__all__ = ["DIALECTS", "Analysis", "JoinEdge", "Scan"]

# pruner dialect -> sqlglot dialect. DataFusion parses with sqlparser-rs' generic dialect,
# which reads SQL as PostgreSQL does (double-quoted identifiers, ::casts, $1 parameters).
DIALECTS = {"duckdb": "prunerduckdb", "spark": "spark", "datafusion": "postgres"}


@dataclass(frozen=True, slots=True)
class JoinEdge:
    """``column = other.other_column`` holds for every row of a scan the query keeps
    (a top-level conjunct of the WHERE clause or of an inner or semi join's ON), between
    columns that compare as their values; ``other_predicate`` is what every row of the
    other table that joins meets. The scan's rows hold one of the other side's keys, which
    a small other side can give at run time (sideways information passing)."""

    column: str
    other_table: str
    other_alias: str
    other_column: str
    other_predicate: Predicate
    condition: str  # the equality as written


@dataclass(frozen=True, slots=True)
class Scan:
    """One read of a known table: the conditions every row it reads must meet."""

    table: str  # the name as given in the schemas mapping
    alias: str
    predicate: Predicate
    joins: tuple[JoinEdge, ...] = ()

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
    # Every join of the statement an inner or cross join, and no query inside an expression
    # (an engine may turn IN / EXISTS / scalar subqueries into semi, anti, mark or outer
    # joins): swapping any join's inputs cannot change the answer.
    inner_joins_only: bool = False

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

        scans = tuple(
            replace(
                s,
                predicate=map_leaves(s.predicate, leaf),
                joins=tuple(
                    replace(j, other_predicate=map_leaves(j.other_predicate, leaf)) for j in s.joins
                ),
            )
            for s in self.scans
        )
        return replace(self, scans=scans)
