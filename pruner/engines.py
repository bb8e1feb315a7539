"""``pruner.query``: run SQL on an engine, each table scan reading only what may match.

>>> import tempfile, pyarrow as pa, lance
>>> from pruner.index import build_index
>>> path = tempfile.mkdtemp() + "/t.lance"
>>> _ = lance.write_dataset(pa.table({"id": list(range(20000))}), path)
>>> _ = build_index(path, "id")
>>> query("SELECT id FROM t WHERE id IN (7, 19999)", {"t": path}).column("id").to_pylist()
[7, 19999]
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType

import pyarrow as pa

from pruner.errors import InvalidParameterError
from pruner.parameters import Parameters
from pruner.plan import Plan
from pruner.table import TableSource

__all__ = ["ENGINES", "adapter", "query"]

ENGINES = ("duckdb", "datafusion", "spark")
"""Engine names; each runs SQL of the dialect of the same name."""


def adapter(engine: str) -> ModuleType:
    """The adapter module of ``engine`` (imported now; an ImportError names a missing extra)."""
    if engine not in ENGINES:
        raise InvalidParameterError(
            f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}"
        )
    return importlib.import_module(f"pruner.adapters.{engine}")


def query(
    sql: str,
    tables: Mapping[str, TableSource],
    *,
    engine: str = "duckdb",
    parameters: Parameters = (),
    prune: bool = True,
    prepared: Plan | None = None,
) -> pa.Table:
    """Run ``sql`` on ``engine`` and return its result; the answer is the engine's own.

    Args:
        sql: the query in the engine's dialect; it runs unchanged.
        tables: table name as the SQL uses it -> Lance dataset or Parquet directory (or an
            opened :class:`~pruner.table.Table`, which keeps its loaded indexes).
        engine: ``duckdb`` (default), ``datafusion`` or ``spark``.
        parameters: values for the query's placeholders.
        prune: False reads every table whole through the same sources (for comparison).
        prepared: a :func:`pruner.plan.plan` of this query, when already computed.
    """
    module = adapter(engine)
    result: pa.Table = module.query(
        sql, tables, parameters=parameters, prune=prune, prepared=prepared
    )
    return result
