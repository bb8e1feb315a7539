"""Answers to check pruner against.

The oracle (:func:`engine_alone`, :func:`engine_answer`, :func:`multiset`) runs a query on
one engine over the raw files with that engine's own readers and no pruner code at all:
DuckDB ``read_parquet('<dir>/**/*.parquet')`` or a registered ``lance.dataset(path)``;
DataFusion ``register_parquet(name, dir)`` or the Lance rows read plainly
(``lance.dataset(path).to_table()``) registered as record batches (DataFusion's
``register_dataset`` of a LanceDataset fails in this version); Spark ``spark.read.parquet``
or the plain Lance read as a DataFrame. Nothing in that path imports pruner (a test checks it
in a fresh process), so a pruner bug cannot make the expected answer agree with itself.

The other helpers (:func:`read_with_addresses`, :func:`restrict`, :func:`run_duckdb`) use
pruner's table model to cut tables down to a Selection: a second check, not the oracle.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pruner.selection import Selection

# ------------------------------------------------------------------ the oracle: no pruner


def is_lance(path: Path) -> bool:
    return (Path(path) / "_versions").is_dir()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lance_rows(path: Path, version: int | None = None) -> pa.Table:
    import lance

    return lance.dataset(str(path), version=version).to_table()


def _duckdb(sql: str, tables: Mapping[str, Path], parameters: Sequence[Any]) -> pa.Table:
    import duckdb
    import lance

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, path in tables.items():
        if is_lance(path):
            con.register(name, lance.dataset(str(path)))
        else:
            files = str(Path(path) / "**" / "*.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {_quoted(name)} AS SELECT * FROM read_parquet('{files}')")
    relation = con.sql(sql, params=list(parameters)) if parameters else con.sql(sql)
    return relation.to_arrow_table()


def _datafusion(sql: str, tables: Mapping[str, Path], parameters: Sequence[Any]) -> pa.Table:
    import datafusion

    # join_reordering off: with it on, DataFusion 55 answers wrongly when it swaps an outer
    # join's inputs (tests/adapters/test_datafusion_bugs.py); the oracle must be right.
    config = datafusion.SessionConfig().set("datafusion.optimizer.join_reordering", "false")
    context = datafusion.SessionContext(config)
    for name, path in tables.items():
        if is_lance(path):
            rows = _lance_rows(path)
            batches = rows.to_batches() or [pa.RecordBatch.from_pylist([], schema=rows.schema)]
            context.register_record_batches(name, [batches])
        else:
            context.register_parquet(name, str(path))
    values = {str(i): v for i, v in enumerate(parameters, start=1)} or None
    return context.sql(sql, param_values=values).to_arrow_table()


def _spark(sql: str, tables: Mapping[str, Path], parameters: Sequence[Any], spark: Any) -> pa.Table:
    from pyspark.sql import SparkSession

    # A session of its own (the caller's temporary views are untouched); creating it makes
    # it the active session, so the caller's active session is put back afterwards.
    active = SparkSession._activeSession
    session = spark.newSession()
    try:
        for name, path in tables.items():
            if is_lance(path):
                frame = session.createDataFrame(_lance_rows(path))
            else:
                frame = session.read.parquet(str(path))
            frame.createOrReplaceTempView(name)
        frame = session.sql(sql, args=list(parameters)) if parameters else session.sql(sql)
        return frame.toArrow()
    finally:
        SparkSession._activeSession = active
        if active is not None:
            jvm = spark.sparkContext._jvm
            SparkSession._get_j_spark_session_class(jvm).setActiveSession(active._jsparkSession)


def engine_alone(
    engine: str,
    sql: str,
    tables: Mapping[str, Path],
    parameters: Sequence[Any] = (),
    spark: Any = None,
) -> pa.Table:
    """``sql`` on ``engine`` over the raw files of ``tables`` (name -> Lance dataset or
    Parquet directory), positional ``parameters`` in the engine's own way; the engine's own
    exception when it refuses the query."""
    if engine == "duckdb":
        return _duckdb(sql, tables, parameters)
    if engine == "datafusion":
        return _datafusion(sql, tables, parameters)
    if engine == "spark":
        if spark is None:
            raise ValueError("the Spark oracle needs a SparkSession")
        return _spark(sql, tables, parameters, spark)
    raise ValueError(f"unknown engine {engine!r}")


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value == 0:
            return "-0.0" if math.copysign(1.0, value) < 0 else 0.0
        return float(f"{value:.10g}")
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _normal(v)) for k, v in value.items()))
    return value


def multiset(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """A result's rows as a multiset: floats to 10 significant digits (an engine may sum in
    another order when it reads other batches), NaN as a string (NaN != NaN), -0.0 apart
    from 0.0 (which Python's ``==``, and so a Counter, would merge)."""
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return Counter(tuple(_normal(v) for v in row) for row in zip(*columns, strict=True))


@dataclass(frozen=True)
class Refused:
    """The engine refused the query: exactly which exception type and, when that type is a
    builtin one that says nothing of the cause (DataFusion raises ``Exception`` and
    ``ValueError``), the first line of its message too."""

    error: type[BaseException]
    message: str = ""

    @classmethod
    def of(cls, err: BaseException) -> Refused:
        generic = type(err).__module__ == "builtins"
        return cls(type(err), str(err).strip().splitlines()[0] if generic and str(err) else "")

    def __repr__(self) -> str:
        detail = f": {self.message}" if self.message else ""
        return f"Refused({self.error.__module__}.{self.error.__qualname__}{detail})"


Answer = Counter[tuple[Any, ...]] | Refused


def engine_answer(
    engine: str,
    sql: str,
    tables: Mapping[str, Path],
    parameters: Sequence[Any] = (),
    spark: Any = None,
) -> Answer:
    """The oracle's answer as a multiset, or :class:`Refused` with the exception's type."""
    try:
        return multiset(engine_alone(engine, sql, tables, parameters, spark))
    except Exception as err:
        return Refused.of(err)


def outcome(run: Any) -> Answer:
    """``run()`` (a pruner query returning a pyarrow Table) as a multiset, or Refused with
    the exact type of what it raised (and a builtin type's message): compared with
    :func:`engine_answer`, a pruner that refuses with another error (its own, or the
    engine's wrapped) is a difference."""
    try:
        return multiset(run())
    except Exception as err:
        return Refused.of(err)


# ------------------------------------------------ second checks, on pruner's table model


def read_with_addresses(path: Path) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The whole table, with each row's fragment id and physical offset."""
    from pruner.table import open_table

    table = open_table(path)
    parts, fragments, offsets = [], [], []
    if table.kind == "lance":
        for fragment in table.dataset.get_fragments():
            data = fragment.to_table(with_row_address=True)
            address = data.column("_rowaddr").to_numpy().astype(np.int64)
            parts.append(data.drop_columns(["_rowaddr"]))
            fragments.append(address >> 32)
            offsets.append(address & 0xFFFFFFFF)
    else:
        for fid, file in sorted((table.files or {}).items()):
            data = pq.read_table(file.path)
            parts.append(data)
            fragments.append(np.full(data.num_rows, fid, np.int64))
            offsets.append(np.arange(data.num_rows, dtype=np.int64))
    if not parts:  # every row deleted
        empty = np.empty(0, np.int64)
        return table.schema.empty_table(), empty, empty
    return pa.concat_tables(parts), np.concatenate(fragments), np.concatenate(offsets)


def run_duckdb(
    sql: str, tables: dict[str, pa.Table], parameters: Sequence[Any]
) -> Counter[tuple[Any, ...]]:
    """``sql`` (DuckDB's dialect) as a :func:`multiset`, on DuckDB over the given Arrow
    tables (the example tables cut down to pruner's selections, or whole)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, table in tables.items():
        con.register(name, table)
    relation = con.sql(sql, params=list(parameters)) if parameters else con.sql(sql)
    return multiset(relation.to_arrow_table())


def restrict(
    table: pa.Table, fragments: np.ndarray, offsets: np.ndarray, selection: Selection
) -> pa.Table:
    return table.filter(pa.array(selection.contains(fragments, offsets)))


def duckdb_bound_rows(prepared: Any, name: str = "t") -> int:
    """How many rows DuckDB scans of table ``name`` as pruner binds it for ``prepared`` (a
    :class:`pruner.plan.Plan`): what explain says the engine reads must equal it."""
    from pruner.adapters import duckdb as duck_adapter

    cursor = duck_adapter.registered(duck_adapter.shared_connection(), prepared)
    try:
        [(rows,)] = cursor.execute(f"SELECT count(*) FROM {_quoted(name)}").fetchall()
    finally:
        cursor.close()
    return int(rows)
