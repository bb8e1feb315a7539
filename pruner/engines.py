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
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pruner.discover import located, located_tables
from pruner.errors import InvalidParameterError
from pruner.evaluate import RowKeys
from pruner.explain import Explanation
from pruner.explain import explain as explain_selections
from pruner.lookup import Lookup, lookup
from pruner.parameters import Parameters
from pruner.plan import Plan, plan
from pruner.table import Table, TableSource, as_table, open_table

__all__ = ["ENGINES", "TimedQuery", "adapter", "explain", "find", "query", "timed_query"]

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
    storage_options: Mapping[str, str] | None = None,
) -> pa.Table:
    """Run ``sql`` on ``engine`` and return its result; the answer is the engine's own.

    Args:
        sql: the query in the engine's dialect; it runs unchanged.
        tables: table name as the SQL uses it -> Lance dataset or Parquet directory, by
            path or object store URI (``s3://bucket/key``), or an opened
            :class:`~pruner.table.Table`, which keeps its loaded indexes.
        engine: ``duckdb`` (default), ``datafusion`` or ``spark``.
        parameters: values for the query's placeholders.
        prune: False reads every table whole through the same sources (for comparison).
        prepared: a :func:`pruner.plan.plan` of this query, when already computed.
        storage_options: how to reach the tables given as URIs (Lance-style:
            ``aws_endpoint``, ``aws_access_key_id``, ``aws_secret_access_key``,
            ``aws_region``, ``allow_http``...); without them the ``AWS_*`` environment
            variables say. Never printed.
    """
    module = adapter(engine)
    tables = located_tables(tables, storage_options)
    result: pa.Table = module.query(
        sql, tables, parameters=parameters, prune=prune, prepared=prepared
    )
    return result


@dataclass(frozen=True)
class TimedQuery:
    """A query run by :func:`timed_query`: its plan, the engine's answer (or the engine's
    own error) and the time from the start of planning to the engine's answer."""

    plan: Plan
    result: pa.Table | None
    error: Exception | None
    seconds: float


def timed_query(
    sql: str,
    tables: Mapping[str, TableSource],
    *,
    engine: str = "duckdb",
    parameters: Parameters = (),
    prune: bool = True,
    storage_options: Mapping[str, str] | None = None,
) -> TimedQuery:
    """Plan ``sql`` (see :func:`pruner.plan.plan`), run it on ``engine`` and time both.

    A planning error (pruner's: bad SQL, an unknown engine...) is raised; the engine's own
    error (unknown table, SQL it refuses...) is returned in ``error``, with the plan and
    the time it took to fail. ``seconds`` counts planning (analysis and index probes) and
    the engine's query, not importing the adapter. Tables given as object store URIs are
    reached with ``storage_options`` (as :func:`query`'s), or the ``AWS_*`` environment
    variables.
    """
    module = adapter(engine)
    tables = located_tables(tables, storage_options)
    started = time.perf_counter()
    prepared = plan(sql, tables, dialect=engine, parameters=parameters, prune=prune)
    try:
        result = module.query(sql, tables, parameters=parameters, prepared=prepared)
    except Exception as err:  # the engine's own error
        return TimedQuery(prepared, None, err, time.perf_counter() - started)
    return TimedQuery(prepared, result, None, time.perf_counter() - started)


CHECKED_DIALECTS = ("duckdb", "datafusion")
"""Dialects whose engine :func:`explain` has plan the SQL (Spark is not started for it)."""


def explain(
    sql: str,
    tables: Mapping[str, TableSource],
    *,
    dialect: str = "duckdb",
    parameters: Parameters = (),
    check: bool = True,
    storage_options: Mapping[str, str] | None = None,
) -> Explanation:
    """What pruner would read for each scan of ``tables`` in ``sql``, and why (see
    :func:`pruner.explain.explain`).

    With ``check`` (the default), the dialect's engine, when installed, also plans ``sql``
    over empty tables of the same schemas first, so SQL the engine refuses (a misspelt
    column, an unknown table) raises the engine's own error here as in :func:`query`.

    Tables given as object store URIs (``s3://bucket/key``) are reached with
    ``storage_options`` (Lance-style, as :func:`query`'s), or the ``AWS_*`` environment
    variables; the explanation names them by URI, never with the options.
    """
    tables = located_tables(tables, storage_options)
    explanation = explain_selections(sql, tables, dialect=dialect, parameters=parameters)
    if check and dialect in CHECKED_DIALECTS:
        try:
            module = adapter(dialect)
        except ImportError:
            return explanation
        schemas = {s.scan.table: s.table.schema for s in explanation.scans if s.table is not None}
        module.check_sql(sql, schemas, parameters)
    return explanation


def find(
    source: TableSource,
    column: str | Sequence[str],
    keys: Iterable[Any],
    *,
    engine: str = "duckdb",
    storage_options: Mapping[str, str] | None = None,
) -> pa.Table:
    """The rows of ``source`` whose ``column`` equals one of ``keys`` (the seed's
    ``findByIds``), as ``engine`` answers ``SELECT * FROM t WHERE column IN (SELECT key FROM
    keys)``, reading only the ranges :func:`pruner.lookup.lookup` gives the keys.

    The keys are coerced to the column's type as a query's literals are; a key no value of
    the column can equal is left out.

    ``source`` may be an object store URI (``s3://bucket/key``): Lance-style
    ``storage_options`` (as :func:`query`'s) or the ``AWS_*`` environment variables say how
    to reach it.

    Raises:
        InvalidParameterError: a key pruner cannot compare exactly with the column (write
            the query in SQL instead), or an unknown column or engine.
        IndexNotFoundError: the column has no index.
    """
    table = as_table(located(source, storage_options))
    found = lookup(table, column, keys)
    if len(found.unknown):
        key = found.keys[int(found.unknown[0])]
        raise InvalidParameterError(
            f"key {key!r} cannot be compared exactly with {column!r}; run the query as SQL instead"
        )
    quote = "`" if engine == "spark" else '"'

    def name(column: str) -> str:
        return quote + column.replace(quote, quote * 2) + quote

    if not isinstance(column, str):
        return _find_tuples(table, column, found, engine, name)
    sql = f"SELECT * FROM t WHERE {name(column)} IN (SELECT k FROM k)"
    # A row holding a key lies in one of that key's ranges: the keys no range may hold
    # match no row read, so only the others (the candidates) are handed to the engine.
    candidate_values = found.candidate_values()
    with tempfile.TemporaryDirectory(prefix="pruner-keys-") as scratch:
        folder = Path(scratch)
        pq.write_table(pa.table({"k": candidate_values}), folder / "keys.parquet")
        keys_table = open_table(folder)
        # Every row the query keeps holds a candidate: a reader may drop the other rows of
        # the ranges (Lance: read the key column, then take the matches).
        column_type = table.schema.field(column).type
        exact = pa.types.is_integer(column_type) or pa.types.is_string(column_type)
        candidates = frozenset(candidate_values.to_pylist())
        prepared = Plan(
            {"t": table, "k": keys_table},
            {"t": found.selection(), "k": None},
            row_keys={"t": RowKeys(column, candidates)} if exact else {},
        )
        return query(sql, prepared.tables, engine=engine, prepared=prepared)


def _find_tuples(
    table: Table, columns: Sequence[str], found: Lookup, engine: str, name: Callable[[str], str]
) -> pa.Table:
    """:func:`find` of a compound key's tuples: ``SELECT * FROM t WHERE EXISTS (SELECT 1
    FROM k WHERE k.k0 = t.a AND k.k1 = t.b ...)``, reading only the tuples' ranges."""
    candidates = found.candidate_values()
    matches = " AND ".join(f"k.k{i} = t.{name(c)}" for i, c in enumerate(columns))
    sql = f"SELECT * FROM t WHERE EXISTS (SELECT 1 FROM k WHERE {matches})"
    with tempfile.TemporaryDirectory(prefix="pruner-keys-") as scratch:
        folder = Path(scratch)
        keys = pa.table({f"k{i}": candidates.field(i) for i in range(len(columns))})
        pq.write_table(keys, folder / "keys.parquet")
        prepared = Plan({"t": table, "k": open_table(folder)}, {"t": found.selection(), "k": None})
        return query(sql, prepared.tables, engine=engine, prepared=prepared)


@dataclass(frozen=True)
class UpsertPlan:
    """What an upsert of ``records`` into a table must do, found by :func:`upsert_plan`.

    ``updates``: the records whose key some row of the table holds (update those rows);
    ``inserts``: the others (append them, nothing to match); ``fragments``: the fragments
    (Lance) or files (Parquet, their fragment ids) that may hold the updated keys' rows, a
    superset: the only ones a Parquet rewrite must touch.
    """

    inserts: pa.Table
    updates: pa.Table
    fragments: tuple[int, ...]


def upsert_plan(
    source: TableSource,
    column: str | Sequence[str],
    records: pa.Table,
    *,
    engine: str = "duckdb",
    storage_options: Mapping[str, str] | None = None,
) -> UpsertPlan:
    """Split ``records`` into the ones whose key (``column``, or a compound key's columns)
    the table already holds and the new ones, reading only the keys' candidate ranges
    (:func:`find`). For a Lance dataset, append ``inserts`` and ``merge_insert`` only
    ``updates``; for Parquet, rewrite only the files in ``fragments``.

    ``source`` may be an object store URI (``s3://bucket/key``): Lance-style
    ``storage_options`` (as :func:`query`'s) or the ``AWS_*`` environment variables say how
    to reach it.

    Raises:
        InvalidParameterError: ``records`` lacks a key column, or a key cannot be compared
            exactly with its column.
    """
    columns = [column] if isinstance(column, str) else list(column)
    missing = [c for c in columns if c not in records.column_names]
    if missing:
        raise InvalidParameterError(f"the records have no column {missing[0]!r} of the key")
    values = [records.column(c).to_pylist() for c in columns]
    keys: list[Any] = values[0] if isinstance(column, str) else list(zip(*values, strict=True))
    table = as_table(located(source, storage_options))
    found = lookup(table, column, keys)
    rows = find(table, column, keys, engine=engine)
    names = [f"k{i}" for i in range(len(columns))]
    # the table's values at the records' types (a record that no value can equal stays new)
    held = pa.table(
        [_at_type(rows.column(c), records.schema.field(c).type) for c in columns], names=names
    )
    mine = pa.table([records.column(c) for c in columns], names=names)
    mine = mine.append_column("_position", pa.array(range(records.num_rows), pa.int64()))
    matched = mine.join(held.group_by(names).aggregate([]), names, join_type="inner")
    is_update = np.zeros(records.num_rows, bool)
    is_update[matched.column("_position").to_numpy()] = True
    fragments = np.unique(found.fragment[np.isin(found.key, np.flatnonzero(is_update))])
    return UpsertPlan(
        inserts=records.filter(pa.array(~is_update)),
        updates=records.filter(pa.array(is_update)),
        fragments=tuple(fragments.tolist()),
    )


def _at_type(values: pa.ChunkedArray, arrow_type: pa.DataType) -> pa.ChunkedArray:
    """``values`` (the table's) at a record column's type: those the type cannot hold
    exactly become NULL, which no record's key equals."""
    if values.type == arrow_type:
        return values
    try:
        return values.cast(arrow_type)
    except pa.ArrowException:
        kept = [v if _fits(v, arrow_type) else None for v in values.to_pylist()]
        return pa.chunked_array([pa.array(kept, arrow_type)])


def _fits(value: Any, arrow_type: pa.DataType) -> bool:
    try:
        return pa.scalar(value, arrow_type).as_py() == value
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return False
