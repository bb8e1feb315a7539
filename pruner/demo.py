"""``pruner demo``: realistic events data, zone bloom indexes, and the example queries.

Generates an events table (unsorted user ids, UUID trace ids, a nullable column) as a Lance
dataset and as a directory of Parquet files, and a users table, builds the indexes with
progress bars, then runs every query of ``pruner/sql_examples/`` (package data, read with
:mod:`importlib.resources`) on DuckDB with and without pruning and shows zones scanned, times
and that the answers are equal, to each other and to DuckDB alone over the raw files (the
promise: pruning never changes an answer), with DuckDB alone's time beside pruner's.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import math
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlglot
from rich import box
from rich.console import Console
from rich.table import Table

from pruner.index import DEFAULT_ITEMS, ProgressCallback, build_index
from pruner.progress import progress_bar

__all__ = [
    "COLD_EXAMPLES",
    "EXAMPLE_INDEXES",
    "GROUPS",
    "DemoRun",
    "SqlExample",
    "engine_sql",
    "make_events",
    "make_users",
    "read_sql_examples",
    "rows_multiset",
    "run_cold",
    "run_demo",
    "run_example",
    "summary",
    "uuid_strings",
    "write_example_tables",
]

SQL_EXAMPLES: Traversable = importlib.resources.files("pruner").joinpath(
    "sql_examples", "queries.sql"
)
"""The example queries, shipped as package data (they are in an installed wheel too)."""

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_strings(rng: np.random.Generator, count: int) -> pa.Array:
    """Random version-4 UUIDs as strings, built without a per-value Python loop."""
    raw = rng.integers(0, 256, (count, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    digits = np.empty((count, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 0x0F]
    text = np.full((count, 36), ord("-"), dtype=np.uint8)
    for source, target in (
        (slice(0, 8), slice(0, 8)),
        (slice(8, 12), slice(9, 13)),
        (slice(12, 16), slice(14, 18)),
        (slice(16, 20), slice(19, 23)),
        (slice(20, 32), slice(24, 36)),
    ):
        text[:, target] = digits[:, source]
    offsets = np.arange(0, 36 * (count + 1), 36, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text.reshape(-1))]
    )


def make_events(rows: int, seed: int = 7) -> pa.Table:
    """An events table: unsorted high-cardinality keys, as point lookups meet them."""
    rng = np.random.default_rng(seed)
    user_id = rng.integers(0, max(1, rows // 8), rows, dtype=np.int64)
    countries = pa.array(["DE", "FR", "JP", "US", "BR", "IN"])
    country = countries.take(pa.array(rng.integers(0, len(countries), rows)))
    country = pc.if_else(pa.array(rng.random(rows) < 0.02), pa.scalar(None, pa.string()), country)
    return pa.table(
        {
            "event_id": pa.array(np.arange(rows, dtype=np.int64)),
            "user_id": pa.array(user_id),
            "trace_id": uuid_strings(rng, rows),
            "country": country,
            "amount": pa.array(rng.gamma(2.0, 20.0, rows)),
        }
    )


def make_users(count: int, seed: int = 11) -> pa.Table:
    """A users table keyed by the events' user ids, for joins."""
    rng = np.random.default_rng(seed)
    plans = pa.array(["free", "pro", "team"])
    plan = plans.take(pa.array(rng.integers(0, len(plans), count)))
    plan = pc.if_else(pa.array(rng.random(count) < 0.1), pa.scalar(None, pa.string()), plan)
    signup = rng.integers(19_000, 20_000, count).astype(np.int32)
    return pa.table(
        {
            "user_id": pa.array(rng.permutation(count).astype(np.int64)),
            "name": pa.array([f"user-{i:07d}" for i in rng.permutation(count)]),
            "plan": plan,
            "signup": pa.array(signup, pa.date32()),
        }
    )


EXAMPLE_INDEXES = {
    "events": ("event_id", "user_id", "trace_id", "country"),
    "events_pq": ("user_id", "trace_id", "country"),
    "users": ("user_id", "name", "plan", "signup"),
}
"""The tables ``pruner/sql_examples/`` queries, and the columns indexed in each."""


def write_example_tables(
    directory: Path,
    rows: int,
    fragments: int = 4,
    items: int = DEFAULT_ITEMS,
    progress_bar: Callable[[str], AbstractContextManager[ProgressCallback | None]] | None = None,
) -> dict[str, Path]:
    """The tables of ``pruner/sql_examples/``: events (Lance), events_pq (Parquet), users
    (Parquet).

    Returns ``{table name: path}``, with every column of :data:`EXAMPLE_INDEXES` indexed,
    and also ``users_lance``: the users as a Lance dataset, so that every query can run with
    each table in either format.
    """
    import lance

    directory.mkdir(parents=True, exist_ok=True)
    events = make_events(rows)
    users = make_users(max(1, rows // 8))
    per_fragment = -(-rows // fragments)
    paths = {
        "events": directory / "events.lance",
        "events_pq": directory / "events_pq",
        "users": directory / "users",
        "users_lance": directory / "users.lance",
    }
    for path in paths.values():
        shutil.rmtree(path, ignore_errors=True)
    lance.write_dataset(events, str(paths["events"]), max_rows_per_file=per_fragment)
    users_per_fragment = max(1, -(-users.num_rows // 2))
    lance.write_dataset(users, str(paths["users_lance"]), max_rows_per_file=users_per_fragment)
    for name, table, per_file in (
        ("events_pq", events, per_fragment),
        ("users", users, -(-users.num_rows // 2)),
    ):
        paths[name].mkdir()
        for number, start in enumerate(range(0, table.num_rows, per_file)):
            pq.write_table(
                table.slice(start, per_file),
                paths[name] / f"part-{number:04d}.parquet",
                row_group_size=max(1, items // 2),
            )
    for name, columns in (*EXAMPLE_INDEXES.items(), ("users_lance", EXAMPLE_INDEXES["users"])):
        for column in columns:
            bar = progress_bar(f"{name}: {column}") if progress_bar else contextlib.nullcontext()
            with bar as progress:
                build_index(paths[name], column, items=items, progress=progress)
    return paths


@dataclass(frozen=True)
class SqlExample:
    name: str
    dialect: str
    why: str
    sql: str
    parameters: tuple[object, ...] = ()


def read_sql_examples(path: Traversable | Path = SQL_EXAMPLES) -> list[SqlExample]:
    """The named queries of ``pruner/sql_examples/queries.sql`` (blocks of ``-- key: value``
    + SQL)."""
    examples = []
    for block in path.read_text().split("\n\n"):
        keys: dict[str, str] = {}
        body: list[str] = []
        for line in block.strip().splitlines():
            if line.startswith("-- ") and ":" in line and not body:
                key, _, value = line[3:].partition(":")
                keys[key.strip()] = value.strip()
            elif not line.startswith("--"):
                body.append(line)
        if "name" in keys and body:
            sql = "\n".join(body).strip().rstrip(";")
            parameters = tuple(json.loads(keys.get("parameters", "[]")))
            examples.append(
                SqlExample(keys["name"], keys["dialect"], keys.get("why", ""), sql, parameters)
            )
    return examples


def rows_multiset(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """A result's rows as a multiset, floats to 10 significant digits (an engine may sum in
    another order when it reads other batches) and NaN as a string (NaN != NaN)."""

    def normal(value: Any) -> Any:
        if isinstance(value, float):
            return "nan" if math.isnan(value) else float(f"{value:.10g}")
        if isinstance(value, list):
            return tuple(normal(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, normal(v)) for k, v in value.items()))
        return value

    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return Counter(tuple(normal(v) for v in row) for row in zip(*columns, strict=True))


def engine_sql(example: SqlExample, engine: str) -> str:
    """The example's SQL in ``engine``'s dialect (sqlglot transpiles other dialects), its
    parameters in the engine's own placeholder syntax: DuckDB and DataFusion ``$1``, ``$2``...
    (numbered as written, or ``?`` counted in order), Spark ``?`` (so a numbered parameter
    must appear once each, in order)."""
    from pruner.analysis.parsing import DIALECTS

    if example.dialect == engine:
        return example.sql
    tree = sqlglot.parse_one(example.sql, read=DIALECTS[example.dialect])
    marks = [
        node
        for node in tree.find_all(sqlglot.exp.Placeholder, sqlglot.exp.Parameter, bfs=False)
        if not isinstance(node.parent, (sqlglot.exp.Placeholder, sqlglot.exp.Parameter))
    ]
    numbers = [_parameter_number(node, position) for position, node in enumerate(marks, 1)]
    if engine == "spark" and numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"{example.name}: Spark's ? needs parameters numbered once, in order")
    for node, number in zip(marks, numbers, strict=True):
        mark = sqlglot.exp.Placeholder() if engine == "spark" else sqlglot.exp.var(f"${number}")
        node.replace(mark)
    return tree.sql(dialect=DIALECTS[engine])


def _parameter_number(node: sqlglot.exp.Expression, position: int) -> int:
    """``$n`` / ``:n`` is n; ``?`` is its position among the statement's parameters."""
    name = node.this.name if isinstance(node.this, sqlglot.exp.Expression) else node.this
    if name is None or name == "":
        return position
    if not str(name).isdigit():
        raise ValueError(f"named parameter {name!r}: the examples bind parameters by position")
    return int(name)


@dataclass(frozen=True)
class DemoRun:
    """One example run pruned, unpruned and on DuckDB alone."""

    example: SqlExample
    zones: tuple[int, int]
    rows: tuple[int, int]
    pruned_seconds: float
    unpruned_seconds: float
    outcome: str  # "equal", "refused both ways" or what differed
    alone_seconds: float = math.nan  # DuckDB alone over the raw files (nan: not run)
    kinds: tuple[str, ...] = ()  # "lance" / "parquet", per table the query names

    @property
    def ok(self) -> bool:
        return self.outcome in ("equal", "refused both ways")

    @property
    def speedup(self) -> float:
        """DuckDB alone's time over pruner's (above 1: pruner is faster)."""
        return self.alone_seconds / self.pruned_seconds

    @property
    def group(self) -> str:
        """What the summary reports it under: a query that reads under half the rows by
        what it is (a join, an IN list, a lookup on Lance or on Parquet), any other "cannot
        prune"."""
        read, total = self.rows
        if read * 2 >= total:
            return "cannot prune"
        if len(self.kinds) > 1:
            return "joins"
        if _IN_LIST.search(self.example.sql):
            return "IN lists"
        return "lookups, Parquet" if "parquet" in self.kinds else "lookups, Lance"


_IN_LIST = re.compile(r"\bIN\s*\(\s*(?!SELECT\b)", re.IGNORECASE)
"""An IN list of values (not of a subquery) in an example's SQL."""


def run_example(
    example: SqlExample, tables: dict[str, Any], engine: str = "duckdb", repeat: int = 3
) -> DemoRun:
    """Run ``example`` on ``engine`` with and without pruning; median times of ``repeat``
    runs after one more, untimed (warm: indexes loaded, caches filled, as in a long-running
    process; DuckDB alone is warmed the same way), planning (analysis and index probes)
    included in the pruned time."""
    from pruner.engines import adapter, timed_query

    adapter(engine)  # a missing engine is an ImportError here, not a refused query
    sql = engine_sql(example, engine)
    answers: dict[bool, Any] = {}
    seconds: dict[bool, float] = {}
    zones, rows = (0, 0), (0, 0)
    kinds: tuple[str, ...] = ()
    for prune in (True, False):
        times = []
        for _ in range(1 + repeat):
            started = time.perf_counter()
            try:
                run = timed_query(
                    sql, tables, engine=engine, parameters=example.parameters, prune=prune
                )
            except Exception as err:  # pruner refuses to plan the query
                answers[prune] = type(err).__name__
                times.append(time.perf_counter() - started)
                continue
            try:
                if run.error is not None:  # the engine refuses the query
                    raise run.error
                answers[prune] = rows_multiset(run.result)
            except Exception as err:
                answers[prune] = type(err).__name__
            # the time includes reading the answer into rows_multiset, as it always has
            times.append(time.perf_counter() - started)
            if prune:
                zones, rows = run.plan.zones(), run.plan.rows()
                kinds = tuple(table.kind for table in run.plan.tables.values())
        seconds[prune] = float(np.median(times[1:]))
    alone_seconds = math.nan
    if engine == "duckdb":
        alone, alone_seconds = _duckdb_alone(example, tables, sql, repeat)
        if alone != answers[True]:
            return DemoRun(
                example,
                zones,
                rows,
                seconds[True],
                seconds[False],
                f"DIFFERENT: pruned {_describe(answers[True])}, DuckDB alone {_describe(alone)}",
                alone_seconds,
                kinds,
            )
    if answers[True] == answers[False]:
        outcome = "refused both ways" if isinstance(answers[True], str) else "equal"
    else:
        outcome = f"DIFFERENT: pruned {_describe(answers[True])}, not {_describe(answers[False])}"
    return DemoRun(
        example, zones, rows, seconds[True], seconds[False], outcome, alone_seconds, kinds
    )


def _duckdb_alone(
    example: SqlExample, tables: dict[str, Any], sql: str, repeat: int, cold: bool = False
) -> tuple[Any, float]:
    """The example's answer and median time on DuckDB alone, as a DuckDB user reads the
    files: each Lance table its ``lance.dataset`` registered (DuckDB pushes filters into
    Lance, which uses its own indexes, pruner's BLOOMFILTER ones included), each Parquet
    table a view over ``read_parquet('<dir>/**/*.parquet')``. No pruner code runs. ``cold``:
    a new connection and new datasets for each run, inside its time (else one untimed run
    first)."""
    import duckdb
    import lance

    def connect() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        for name, table in tables.items():
            path = Path(getattr(table, "path", table))
            if (path / "_versions").is_dir():
                con.register(name, lance.dataset(str(path)))
            else:
                glob = str(path / "**" / "*.parquet").replace("'", "''")
                con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{glob}')")
        return con

    con = None if cold else connect()
    answer: Any = None
    times = []
    for _ in range(repeat if cold else 1 + repeat):
        started = time.perf_counter()
        opened = connect() if con is None else con
        try:
            relation = opened.sql(sql, params=list(example.parameters) or None)
            answer = rows_multiset(relation.to_arrow_table())
        except Exception as err:
            answer = type(err).__name__
        times.append(time.perf_counter() - started)
        if opened is not con:
            opened.close()
    if con is not None:
        con.close()
    return answer, float(np.median(times if cold else times[1:]))


COLD_EXAMPLES = {"point_lookup": "events", "parquet_point_lookup": "events_pq"}
"""The examples the demo also runs cold, and the table each reads."""


def run_cold(example: SqlExample, name: str, path: Path, repeat: int = 5) -> tuple[float, float]:
    """``example`` with its table opened for each run (a new process, a CLI call, a new
    worker): pruner's median time, with :func:`pruner.open_table` inside it, and DuckDB
    alone's, with a new connection and dataset inside it.

    Raises:
        RuntimeError: the two answer differently.
    """
    from pruner.engines import timed_query
    from pruner.table import open_table

    sql = engine_sql(example, "duckdb")
    times = []
    answer: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        run = timed_query(sql, {name: open_table(path)}, parameters=example.parameters)
        answer = rows_multiset(run.result)
        times.append(time.perf_counter() - started)
    alone, alone_seconds = _duckdb_alone(example, {name: path}, sql, repeat, cold=True)
    if alone != answer:
        raise RuntimeError(f"{example.name} cold: pruner and DuckDB alone answer differently")
    return float(np.median(times)), alone_seconds


def _describe(answer: Any) -> str:
    return answer if isinstance(answer, str) else f"{sum(answer.values()):,} rows"


SLOWER = 0.9
"""The demo names every query whose speed-up over DuckDB alone is under this."""

GROUPS = {
    "lookups, Lance": "Equals / IS NULL on a Lance dataset; DuckDB alone pushes them into "
    "Lance, which probes the same index",
    "lookups, Parquet": "DuckDB alone reads every row group's footer and rows it cannot rule "
    "out by min/max",
    "IN lists": "one batched probe for every value",
    "joins": "the small side's keys prune the big side",
    "cannot prune": "ranges, !=, NOT IN, LIKE, functions: pruner plans, then reads what "
    "DuckDB alone reads",
}
"""The summary's groups (:attr:`DemoRun.group`) and what decides each one's speed."""


def summary(runs: list[DemoRun], cold: dict[str, tuple[float, float]]) -> Table:
    """The demo's verdict: per group of queries, how many and pruner's speed-up over DuckDB
    alone (median, worst, best: none hidden); then the cold examples, each with its table
    opened per query."""
    table = Table(
        box=box.SIMPLE_HEAD,
        title="speed-up over DuckDB alone (its time / pruner's; under 1.0x pruner is slower)",
    )
    table.add_column("")
    for heading in ("queries", "median", "worst", "best"):
        table.add_column(heading, justify="right")
    table.add_column("why")
    for group, why in GROUPS.items():
        speedups = [run.speedup for run in runs if run.group == group]
        if not speedups:
            continue
        table.add_row(
            f"{group}, warm",
            f"{len(speedups)}",
            f"{float(np.median(speedups)):.2f}x",
            f"{min(speedups):.2f}x",
            f"{max(speedups):.2f}x",
            why,
        )
    for name, (pruned, alone) in cold.items():
        table.add_row(
            f"{name}, cold",
            "1",
            f"{alone / pruned:.2f}x",
            "",
            "",
            "a table opened per query: pruner reads a few blocks of its index; Lance alone "
            "loads its whole index, read_parquet every footer",
        )
    return table


def run_demo(directory: Path, rows: int = 2_000_000, fragments: int = 20) -> int:
    """Generate the example tables, index them, run every query of pruner/sql_examples/ on
    DuckDB pruned and unpruned, and print what was scanned, the times and whether the answers
    are equal."""
    from pruner.table import open_tables

    console = Console() if Console().is_terminal else Console(width=130)
    started = time.perf_counter()
    console.print(f"writing {rows:,} events in {fragments} fragments (Lance and Parquet)...")
    paths = write_example_tables(directory, rows, fragments, progress_bar=progress_bar)
    console.print(
        f"data and {sum(len(c) for c in EXAMPLE_INDEXES.values()) + 4} indexes ready in "
        f"{time.perf_counter() - started:.1f} s under {directory}"
    )
    tables = open_tables({name: paths[name] for name in EXAMPLE_INDEXES})
    report = Table(box=box.SIMPLE_HEAD)
    report.add_column("query", no_wrap=True)
    for heading in ("zones scanned", "rows read", "pruner ms", "DuckDB alone ms", "speed-up"):
        report.add_column(heading, justify="right", no_wrap=True)
    report.add_column("answer")
    runs = []
    for example in read_sql_examples():
        run = run_example(example, tables)
        runs.append(run)
        selected, total = run.zones
        read, all_rows = run.rows
        report.add_row(
            example.name,
            f"{selected:,} / {total:,}",
            f"{read / max(all_rows, 1):.1%}",
            f"{run.pruned_seconds * 1000:.1f}",
            f"{run.alone_seconds * 1000:.1f}",
            f"{run.alone_seconds / run.pruned_seconds:.1f}x",
            run.outcome if run.ok else f"[red]{run.outcome}[/red]",
        )
    console.print(report)
    bad = [run for run in runs if not run.ok]
    refused = sum(run.outcome == "refused both ways" for run in runs)
    console.print(
        f"{len(runs)} queries on DuckDB: {len(runs) - len(bad)} answers equal with and without "
        f"pruning and on DuckDB alone ({refused} refused by DuckDB both ways), {len(bad)} "
        "different."
    )
    cold = {
        example.name: run_cold(example, table, paths[table])
        for example in read_sql_examples()
        if (table := COLD_EXAMPLES.get(example.name)) is not None
    }
    console.print(summary([run for run in runs if run.outcome == "equal"], cold))
    slower = sorted(
        (run for run in runs if run.outcome == "equal" and run.speedup < SLOWER),
        key=lambda run: run.speedup,
    )
    if slower:
        console.print(
            f"Slower than DuckDB alone (under {SLOWER}x), with what each query tries: "
            + "; ".join(
                f"{run.example.name} {run.speedup:.2f}x ({run.example.why})" for run in slower
            )
        )
    console.print(f"Total {time.perf_counter() - started:.0f} s.")
    return 1 if bad else 0
