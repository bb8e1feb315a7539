"""Pruner's own cost on hostile SQL, beside the engine's cost on the same SQL (issue 6).

For each input: pruner's planning (analyze + evaluate on a 100,000-row Lance table indexed
in 2,048-row zones, fixtures.hostile_table; a new SQL text each time, so nothing is cached)
with the peak of the Python memory it allocates, and DuckDB alone running the same SQL over
the same Lance dataset (no pruner); each once. The ratio is pruner / DuckDB: pruner should be
a small part of any query it lets the engine run. Inputs: IN of 100,000 integers, 100,000
strings; 5,000 and 200,000 ORed equalities (DuckDB alone is quadratic in them: only up to
20,000 are run on it); SQL over the parse limit; parentheses 5,000 deep (DuckDB refuses those
itself).

Run it (from the project root)::

    .venv/bin/python bench/hostile_sql.py
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import common
import duckdb
import fixtures
import lance
from common import Report, measure
from engines import duckdb_alone

import pruner
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


def refused(run: Callable[[str], Any]) -> Callable[[str], Any]:
    """``run``, answering with the error's name where the engine refuses the SQL."""

    def attempt(sql: str) -> Any:
        try:
            return run(sql)
        except Exception as err:
            return type(err).__name__

    return attempt


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
    common.parse(common.parser(__doc__), pruner, duckdb, lance)
    path = fixtures.hostile_table(ROWS, 2_048)
    tables = pruner.open_tables({"t": path})
    plan("SELECT * FROM t WHERE id = 1 OR s = 'v1'", tables, dialect="duckdb")  # load indexes
    planned = refused(lambda sql: plan(sql, tables, dialect="duckdb"))
    engine = refused(duckdb_alone({"t": path}, fetch=duckdb.DuckDBPyRelation.fetchall))
    lines = []
    for name, sql in inputs().items():
        cases = {"pruner": planned}
        if sql.count(" OR ") <= ENGINE_LIMIT_ORS:
            cases["DuckDB"] = engine
        got = measure(cases, [sql], warmup=0)
        seconds = got["pruner"].best() / 1000
        answer = got["pruner"].answer
        zones = answer if isinstance(answer, str) else "/".join(map(str, answer.zones()))
        deep = sql.count("(") > 1000
        peak = (
            "-" if deep else f"{peak_mib(lambda sql=sql: plan(sql, tables, dialect='duckdb')):.1f}"
        )
        alone = got.get("DuckDB")
        if alone is None:
            theirs, ratio = "skipped", "-"
        elif isinstance(alone.answer, str):
            theirs, ratio = alone.answer, "-"
        else:
            theirs = f"{alone.best() / 1000:.2f}"
            ratio = f"{seconds / (alone.best() / 1000):.2f}"
        lines.append([name, f"{seconds:.2f}", peak, theirs, ratio, zones])
    Report().table(
        "Hostile SQL: pruner's planning beside DuckDB alone (ratio = pruner / DuckDB)",
        ["input", "pruner s", "peak MiB", "DuckDB s", "ratio", "zones"],
        lines,
    )


if __name__ == "__main__":
    main()
