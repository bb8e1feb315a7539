"""How a case calls its engine: the engine alone, as its users call it (the baseline of
every comparison), and pruner on an engine, as pruner's users call it. Each returns the
case's ``run(sql)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import common  # noqa: F401 (the checkout's pruner first)
import datafusion
import duckdb
import lance
import pyarrow as pa

import pruner
from pruner.adapters import duckdb as duck_adapter
from pruner.analyzer import templates
from pruner.engines import adapter

Source = Path | Sequence[str] | pa.Table


def is_lance(path: Path) -> bool:
    return (path / "_versions").is_dir()


def duckdb_alone(
    tables: Mapping[str, Source],
    reopen: Literal["no", "tables", "connection"] = "no",
    fetch: Callable[[duckdb.DuckDBPyRelation], Any] = duckdb.DuckDBPyRelation.to_arrow_table,
) -> Callable[..., Any]:
    """DuckDB alone, each table as its users give it: a Lance dataset registered
    (``lance.dataset(path)``: DuckDB pushes ``id = K`` into Lance, which uses its own
    index), a Parquet directory as a view of ``read_parquet('<dir>/*.parquet')`` (a list of
    files: ``read_parquet([files])``), an Arrow table registered. ``reopen``: ``no``, one
    connection, tables registered once; ``tables``, registered anew for each query (a
    fresh LanceDataset); ``connection``, a new connection for each query. ``run(sql,
    parameters=None)``."""

    def register(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        for name, source in tables.items():
            if isinstance(source, pa.Table):
                con.register(name, source)
            elif isinstance(source, Path) and is_lance(source):
                con.register(name, lance.dataset(str(source)))
            else:
                con.execute(
                    f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {parquet_scan(source)}"
                )
        return con

    kept = register(duckdb.connect()) if reopen == "no" else duckdb.connect()

    def run(sql: str, parameters: list[Any] | None = None) -> Any:
        con = kept if reopen == "no" else register(kept if reopen == "tables" else duckdb.connect())
        return fetch(con.sql(sql, params=parameters))

    return run


def parquet_scan(source: Path | Sequence[str]) -> str:
    """DuckDB's read of a Parquet directory (``read_parquet('<dir>/*.parquet')``) or of a
    list of files (``read_parquet([files])``)."""
    if isinstance(source, Path):
        return f"read_parquet({duck_adapter.quote_string(str(source / '*.parquet'))})"
    return "read_parquet([" + ", ".join(duck_adapter.quote_string(f) for f in source) + "])"


def datafusion_context(
    tables: Mapping[str, Path], native_filters: bool = True
) -> datafusion.SessionContext:
    """A context with each directory registered (``register_parquet``); with
    ``native_filters``, ``pushdown_filters`` and ``bloom_filter_on_read`` on, as a user
    reading the files' own bloom filters sets them."""
    if native_filters:
        config = (
            datafusion.SessionConfig()
            .set("datafusion.execution.parquet.pushdown_filters", "true")
            .set("datafusion.execution.parquet.bloom_filter_on_read", "true")
        )
        context = datafusion.SessionContext(config)
    else:
        context = datafusion.SessionContext()
    for name, path in tables.items():
        context.register_parquet(name, str(path))
    return context


def datafusion_alone(
    tables: Mapping[str, Path], reopen: bool = False, native_filters: bool = True
) -> Callable[[str], pa.Table]:
    """DataFusion alone on :func:`datafusion_context` (a new one for each query, with
    ``reopen``)."""
    kept = datafusion_context(tables, native_filters)

    def run(sql: str) -> pa.Table:
        context = datafusion_context(tables, native_filters) if reopen else kept
        return context.sql(sql).to_arrow_table()

    return run


def pruned(
    tables: Mapping[str, Any],
    engine: str = "duckdb",
    opened: Literal["once", "path", "each"] = "once",
    clear: bool = True,
    **options: Any,
) -> Callable[[str], pa.Table]:
    """pruner on ``engine`` as its users call it: ``pruner.query(sql, tables,
    engine=engine, **options)`` (given the caller's ``connection`` or ``context``, the
    adapter's own ``query``, which takes them). ``opened``: ``once``, the tables opened
    before (warm; an opened Table is used as it is); ``path``, the paths passed (pruner
    opens a path once per process while its files stay the same); ``each``, opened anew
    for each query (cold). With ``clear``, pruner's cache of SQL texts is cleared before each
    query, timed (its templates, which serve new literals of a known shape, are kept, as
    they are for users): every query is new to pruner."""
    if opened == "once":
        tables = {
            name: t if isinstance(t, pruner.Table) else pruner.open_table(t)
            for name, t in tables.items()
        }
    caller_objects = {"connection", "context"} & options.keys()

    def run(sql: str) -> pa.Table:
        if clear:
            templates.clear(texts_only=True)
        given = {n: pruner.open_table(t) for n, t in tables.items()} if opened == "each" else tables
        if caller_objects:
            answer: pa.Table = adapter(engine).query(sql, given, **options)
            return answer
        return pruner.query(sql, given, engine=engine, **options)

    return run


def warmed(table: pruner.Table, sql_of: Callable[[int], str], limit: int = 100_000) -> int:
    """Plan point lookups of ``table`` (held open) on DuckDB, the ``n``-th ``sql_of(n)``, until
    one is left to Lance's scanner to probe the index (read whole, or given the fragments
    pruner's probe selects: :func:`pruner.costs.lance_probes_reason`), as a table a user holds
    is after that many lookups: how many it took; 0 for a table of so many fragments that
    pruner keeps its lookups (:data:`pruner.costs.LANCE_OWN_FRAGMENTS`). Raises when ``limit``
    lookups are not enough."""
    from pruner import costs
    from pruner.plan import plan

    if len(table.fragment_rows) >= costs.LANCE_OWN_FRAGMENTS:
        return 0
    for count in range(1, limit + 1):
        prepared = plan(sql_of(count), {"t": table}, dialect="duckdb")
        if prepared.reads_whole("t") or prepared.lance_probes:
            return count
    raise SystemExit(f"{table.path}: no lookup left to Lance's scanner after {limit:,}")
