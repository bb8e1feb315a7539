"""The keys of a join's other side, read when a query runs: the distinct keys of the rows
its own predicate may keep (a superset of the keys that join), which
:mod:`pruner.evaluate` looks up in the index of this side's join column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pruner import storage
from pruner.analysis.model import JoinEdge
from pruner.binding import bind
from pruner.discover import ParquetFile, open_parquet
from pruner.expressions import (
    AlwaysFalse,
    And,
    BoundLiterals,
    IsNull,
    Or,
    Predicate,
    PredicateVisitor,
    columns_of,
    visit,
)
from pruner.hashing import plain_type
from pruner.reads import as_table, file_columns
from pruner.table import Table

__all__ = ["JOIN_KEYS", "other_keys"]


JOIN_KEYS = 100_000
"""Most distinct keys the other side may give; past it the join prunes nothing."""


class _TrueRows(PredicateVisitor[np.ndarray]):
    """A bound predicate over the rows of ``data``: False only where the predicate is
    surely not TRUE (a term pruner cannot evaluate exactly counts as TRUE)."""

    def __init__(self, data: pa.Table) -> None:
        self.data = data
        self.everywhere = np.ones(data.num_rows, bool)

    def visit_and(self, node: And) -> np.ndarray:
        result = self.everywhere
        for child in node.children:
            result = result & visit(child, self)
        return result

    def visit_or(self, node: Or) -> np.ndarray:
        result = ~self.everywhere
        for child in node.children:
            result = result | visit(child, self)
        return result

    def visit_false(self, node: AlwaysFalse) -> np.ndarray:
        return ~self.everywhere

    def visit_bound(self, node: BoundLiterals) -> np.ndarray:
        if node.values is None:
            return ~self.everywhere if node.no_match else self.everywhere
        values = self.data.column(node.column)
        arrow_type = plain_type(values.type)
        if pa.types.is_dictionary(values.type) or values.type != arrow_type:
            values = pc.cast(values, arrow_type)
        wanted = pa.array(list(node.values), arrow_type)
        found = pc.fill_null(pc.is_in(values, value_set=wanted), False)
        return np.asarray(found.to_numpy(zero_copy_only=False), bool)

    def visit_is_null(self, node: IsNull) -> np.ndarray:
        return np.asarray(self.data.column(node.column).is_null().to_numpy(), bool)

    def visit_other(self, node: Predicate) -> np.ndarray:
        return self.everywhere


def other_keys(other: Table, edge: JoinEdge, dialect: str) -> list[Any] | None:
    """The distinct non-null keys of ``edge.other_column`` in the rows of ``other`` its
    predicate may keep (a superset of the keys that join), or None past :data:`JOIN_KEYS`."""
    bound = bind(edge.other_predicate, other.schema, dialect, lambda column: None)
    columns = sorted(({edge.other_column} | columns_of(bound)) & set(other.schema.names))
    if other.kind == "lance":
        data = other.dataset.to_table(columns=columns)
    else:
        parts = [
            as_table(other, f, _read_columns(f, file_columns(other, f, columns)))
            for _, f in sorted((other.files or {}).items())
        ]
        data = pa.concat_tables(parts, promote_options="permissive")
    kept = data.column(edge.other_column).filter(pa.array(visit(bound, _TrueRows(data))))
    keys = pc.unique(kept).drop_null()
    if len(keys) > JOIN_KEYS:
        return None
    return keys.to_pylist()


def _read_columns(file: ParquetFile, columns: list[str]) -> pa.Table:
    """``columns`` of a table's Parquet file (on a store: its chunks of them fetched at
    once, conditional on the ETag the table was opened with)."""
    if storage.is_remote(file.path):
        opened = open_parquet(file.path, file.metadata, columns, known=file.as_opened())
        return opened.read(columns=columns)
    return pq.read_table(file.path, columns=columns)
