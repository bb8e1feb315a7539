"""Pruner's own cost on hostile SQL, beside the engine's cost on the same SQL (issue 6).

For each input: pruner's planning (analyze + evaluate on a 100,000-row Lance table indexed
in 2,048-row zones; a new SQL text each time, so nothing is cached) with the peak of the Python
memory it allocates, and DuckDB alone running the same SQL over the same Lance dataset
(no pruner). The ratio is pruner / DuckDB: pruner should be a small part of any query it
lets the engine run. Inputs: IN of 100,000 integers, 100,000 strings; 5,000 and 200,000
ORed equalities (DuckDB alone is quadratic in them: only up to 20,000 are run on it);
SQL over the parse limit; parentheses 5,000 deep (DuckDB refuses those itself).

Run it (from the project root)::

    .venv/bin/python bench/hostile_sql.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import duckdb
import lance
import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pruner
from bench.common import print_header
from pruner.index import build_index
from pruner.plan import plan

ROWS = 100_000
ENGINE_LIMIT_ORS = 20_000  # DuckDB's time grows with the square of ORed terms


def inputs() -> dict[str, str]:
    ored = " OR ".join(f"id = {i}" for i in range(200_000))
    return {
        "IN 100,000 ints": "SELECT count(*) FROM t WHERE id IN ("
        + ", ".join(map(str, range(0, 200_000, 2)))
        + ")",
        "IN 100,000 strings": "SELECT count(*) FROM t WHERE s IN ("
        + ", ".join(f"'v{i}'" for i in range(0, 200_000, 2))
        + ")",
        "OR 5,000": "SELECT count(*) FROM t WHERE "
        + " OR ".join(f"id = {i}" for i in range(5_000)),
        "OR 200,000 (2.9 MB)": f"SELECT count(*) FROM t WHERE {ored}",
        "OR 200,000 two columns": "SELECT count(*) FROM t WHERE "
        + " OR ".join(f"{'id' if i % 2 else 's'} = {i}" for i in range(200_000)),
        "parentheses 5,000 deep": "SELECT count(*) FROM t WHERE "
        + "(" * 5000
        + "id = 1"
        + ")" * 5000,
    }


def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    """Result and seconds (an engine refusing the SQL is a result here)."""
    start = time.perf_counter()
    try:
        result = function()
    except Exception as err:
        result = f"{type(err).__name__}"
    return result, time.perf_counter() - start


def peak_mib(function: Callable[[], Any]) -> float:
    """Peak of the Python memory ``function()`` allocates (a separate run: tracemalloc slows
    deep recursion a hundredfold)."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    print_header(pruner, duckdb, lance)
    path = os.path.join(tempfile.mkdtemp(), "t.lance")
    ids = pa.array(range(ROWS), pa.int64())
    lance.write_dataset(pa.table({"id": ids, "s": [f"v{i}" for i in range(ROWS)]}), path)
    build_index(path, "id", items=2_048)
    build_index(path, "s", items=2_048)
    tables = pruner.open_tables({"t": path})
    plan("SELECT * FROM t WHERE id = 1 OR s = 'v1'", tables, dialect="duckdb")  # load indexes
    connection = duckdb.connect()
    connection.register("t", lance.dataset(path))
    print(f"{'input':26s} {'pruner s':>9s} {'peak MiB':>9s} {'DuckDB s':>9s} {'ratio':>6s}  zones")
    for name, sql in inputs().items():
        planned, seconds = timed(lambda: plan(sql, tables, dialect="duckdb"))  # noqa: B023
        zones = "/".join(map(str, planned.zones())) if not isinstance(planned, str) else planned
        deep = sql.count("(") > 1000
        peak = "-" if deep else f"{peak_mib(lambda: plan(sql, tables, dialect='duckdb')):.1f}"  # noqa: B023
        if sql.count(" OR ") > ENGINE_LIMIT_ORS:
            engine = "skipped"
        else:
            result, engine_seconds = timed(lambda: connection.sql(sql).fetchall())  # noqa: B023
            engine = f"{engine_seconds:.2f}" if not isinstance(result, str) else result
        ratio = f"{seconds / float(engine):.2f}" if engine[0].isdigit() else "-"
        print(f"{name:26s} {seconds:9.2f} {peak:>9s} {engine:>9s} {ratio:>6s}  {zones}")


if __name__ == "__main__":
    main()
