"""pruner against the engines alone, as their users call them: ``make bench`` (and ``make
bench-quick``) write ``docs/benchmarks.md`` and its plots.

The data is fixtures.lookup_data's (cached under ``bench/data/point_lookup/``, generated when
missing): ``id`` a shuffled unique int64, ``trace_id`` a UUID string, ``amount`` a float64, as
a Lance dataset indexed by pruner on ``id`` and ``trace_id`` (committed BLOOMFILTER indexes:
Lance's own scanner uses them), Parquet files indexed by pruner (one row group per file), and
Parquet files with native bloom filters in 8,192-row row groups (``bloom8k``).

The engine alone, on the same files, is the baseline of every comparison:

* DuckDB: ``con.sql`` over a registered ``lance.dataset(path)`` (DuckDB pushes ``id = K``
  into Lance, which uses its index) and over ``read_parquet('<dir>/*.parquet')`` (on
  ``bloom8k``, DuckDB uses the native bloom filters);
* DataFusion: ``register_parquet(<dir>)`` on a context with ``pushdown_filters`` and
  ``bloom_filter_on_read``.

pruner is called as users call it: ``pruner.query(sql, {"t": table}, engine=E)`` on a table
opened once (a Lance table's point lookups after the lookups pruner probes itself, which it
then leaves to Lance's scanner: :data:`WARM_UP_KEYS`). Every timed SQL text is new to
pruner (its cache of SQL texts is cleared before each call; its templates, which serve new
literals of a known shape, are kept, as they are for users). The cases of a comparison run
round-robin, one of each per repetition, so machine noise hits all alike; each answer is
checked against the engine alone's.

Run it (from the project root)::

    .venv/bin/python bench/compare.py            # 1M, 5M and 20M rows (hours for 20M data)
    .venv/bin/python bench/compare.py --quick    # 200k and 1M rows: a few minutes
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import datafusion
import duckdb
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Case, Panel, Report, measure, sorted_rows
from engines import datafusion_alone, duckdb_alone, pruned, warmed
from fixtures import LookupData

import pruner

IN_SIZES = (1, 10, 100, 1_000, 10_000)
GROUPS = ("DuckDB / Lance", "DuckDB / Parquet", "DataFusion / Parquet")
NEVER_SLOWER = {
    "range": "SELECT count(*) AS n FROM t WHERE amount > 10",
    "like": "SELECT count(*) AS n FROM t WHERE trace_id LIKE 'a%'",
    "is not null": "SELECT count(*) AS n FROM t WHERE id IS NOT NULL",
    "is distinct from": "SELECT count(*) AS n FROM t WHERE id IS DISTINCT FROM 5",
    "group by": "SELECT amount > 500 AS big, count(*) AS n FROM t GROUP BY 1 ORDER BY 1",
}

Run = Callable[[str], pa.Table]

WARM_UP_KEYS: dict[str, Callable[[int], Any]] = {"id": lambda n: -n, "trace_id": lambda n: f"w{n}"}
"""Absent keys, one per lookup, that a held Lance table is looked up on before it is timed
(``engines.warmed``): pruner probes a held table's first lookups itself and then leaves them
to Lance's scanner (:data:`pruner.costs.LANCE_WARM_LOOKUPS_PER_MIB`)."""


def against_alone(data: LookupData, copy: str) -> dict[str, list[Run]]:
    """Per engine / format (:data:`GROUPS`): the engine alone, the engine alone again (its
    own connection or context: the A/A control, whose ratio to the first is this machine's
    noise), then pruner (on a table opened once), on ``lance`` and on the Parquet ``copy``."""
    lance_table, parquet_table = (pruner.open_table(data.path(c)) for c in ("lance", copy))
    parquet = {"t": data.path(copy)}
    lance_alone = {"t": data.path("lance")}
    return {
        GROUPS[0]: [
            duckdb_alone(lance_alone),
            duckdb_alone(lance_alone),
            pruned({"t": lance_table}),
        ],
        GROUPS[1]: [duckdb_alone(parquet), duckdb_alone(parquet), pruned({"t": parquet_table})],
        GROUPS[2]: [
            datafusion_alone(parquet),
            datafusion_alone(parquet),
            pruned({"t": parquet_table}, "datafusion"),
        ],
    }


def side_by_side(cases: dict[str, Run], sqls: list[str], repeat: int) -> dict[str, Case]:
    """The cases measured after two warm-up turns, answers alike."""
    return measure(cases, sqls, repeat, warmup=2, check=sorted_rows)


def medians(cases: dict[str, Run], sqls: list[str], repeat: int) -> list[float]:
    return [case.median() for case in side_by_side(cases, sqls, repeat).values()]


def point_lookups(
    data: LookupData, rows: int, repeat: int, report: Report
) -> dict[str, dict[str, float]]:
    """Warm point lookups, per engine and format: pruner, the engine alone (and on bloom8k).
    pruner reads ``parquet8k``: the layout of ``bloom8k`` (8,192-row row groups) with pruner's
    index instead of native filters."""
    lance_table = pruner.open_table(data.path("lance"))
    for column in fixtures.COLUMNS:  # held past the lookups pruner probes itself
        warmed(lance_table, lambda n, c=column: fixtures.sql_of(c, WARM_UP_KEYS[c](n)))
    parquet_table = pruner.open_table(data.path("parquet8k"))
    copies = {"bloom8k": {"t": data.path("bloom8k")}, "plain": {"t": data.path("parquet")}}
    results: dict[str, dict[str, float]] = {}
    lines = []
    for column in fixtures.COLUMNS:
        sqls = [fixtures.sql_of(column, key) for key in data.keys[column]]
        groups = {
            GROUPS[0]: {
                "DuckDB alone (LanceDataset, Lance's index)": duckdb_alone(
                    {"t": data.path("lance")}
                ),
                "pruner": pruned({"t": lance_table}),
            },
            GROUPS[1]: {
                **{f"DuckDB alone ({c})": duckdb_alone(t) for c, t in copies.items()},
                "pruner (parquet8k)": pruned({"t": parquet_table}),
            },
            GROUPS[2]: {
                **{f"DataFusion alone ({c})": datafusion_alone(t) for c, t in copies.items()},
                "pruner (parquet8k)": pruned({"t": parquet_table}, "datafusion"),
            },
        }
        for group, cases in groups.items():
            got = side_by_side(cases, sqls, repeat)
            results[f"{group} {column}"] = {name: case.median() for name, case in got.items()}
            alone, *_, mine = (case.median() for case in got.values())
            lines += [
                [
                    group,
                    column,
                    n,
                    f"{c.median():.2f}",
                    f"{c.p90():.2f}",
                    f"{c.median() / mine:.2f}",
                ]
                for n, c in got.items()
            ]
            if group == GROUPS[0]:
                text = f"{rows:,} rows, {group}, {column}: pruner / DuckDB alone"
                report.target(text, mine / alone, 0.67)
            else:
                text = f"{rows:,} rows, {group}, {column}: engine alone on bloom8k / pruner"
                report.target(text, alone / mine, 3.0, above=True)
    report.table(
        f"Warm point lookup, {rows:,} rows (ms; ratio = case / pruner)",
        ["engine / format", "column", "case", "median", "p90", "x pruner"],
        lines,
    )
    return results


AGAINST_COLUMNS = ["alone", "pruner", "pruner / alone", "A/A: alone again / alone"]


def _against(alone_ms: float, again_ms: float, mine_ms: float) -> list[str]:
    """A row's :data:`AGAINST_COLUMNS`: the engine alone's and pruner's ms, their ratio, and
    the A/A control's (:func:`against_alone`)."""
    return [
        f"{alone_ms:.1f}",
        f"{mine_ms:.1f}",
        f"{mine_ms / alone_ms:.2f}",
        f"{again_ms / alone_ms:.2f}",
    ]


def in_lists(data: LookupData, rows: int, repeat: int, report: Report) -> dict[int, dict]:
    """IN lists of 1 to 10,000 ids; Parquet: both on ``parquet8k`` (8,192-row row groups)."""
    ids = pa.array(np.random.default_rng(3).choice(rows, max(IN_SIZES), replace=False))
    present = data.keys["id"]
    results: dict[int, dict[str, float]] = {}
    lines = []
    for size in IN_SIZES:
        if size > rows // 10:
            continue
        keys = [*present[: min(size, len(present))], *ids.to_pylist()][:size]
        sqls = [sql_in(keys[i:] + keys[:i]) for i in range(3)]  # new texts, same keys
        results[size] = {}
        # answers compared within each engine pair (orders differ between engines)
        for group, (alone, again, mine) in against_alone(data, "parquet8k").items():
            alone_name, mine_name = group.replace(" / ", " alone / "), f"pruner {group}"
            cases = {alone_name: alone, "again": again, mine_name: mine}
            alone_ms, again_ms, mine_ms = medians(cases, sqls, repeat)  # turns cycle the texts
            results[size].update({alone_name: alone_ms, mine_name: mine_ms})
            lines.append([str(size), group, *_against(alone_ms, again_ms, mine_ms)])
            if size >= 100:  # issue 44: never slower than the engine alone
                text = f"{rows:,} rows, IN of {size:,} ids, {mine_name}: pruner / alone"
                report.target(text, mine_ms / alone_ms, 1.0)
    report.table(
        f"IN lists on id, {rows:,} rows (ms)",
        ["keys", "engine / format", *AGAINST_COLUMNS],
        lines,
    )
    return results


def sql_in(keys: list[Any]) -> str:
    return f"SELECT * FROM t WHERE id IN ({', '.join(str(int(k)) for k in keys)})"


def never_slower(data: LookupData, rows: int, repeat: int, report: Report) -> None:
    """Queries pruner cannot prune: it must cost what the engine alone costs."""
    lines = []
    ratios: dict[str, list[float]] = {}
    noise: dict[str, list[float]] = {}  # the A/A control's ratios
    for name, sql in NEVER_SLOWER.items():
        for label, (alone, again, mine) in against_alone(data, "parquet").items():
            cases = {"alone": alone, "again": again, "pruner": mine}
            alone_ms, again_ms, mine_ms = medians(cases, [sql], repeat)
            ratios.setdefault(label, []).append(mine_ms / alone_ms)
            noise.setdefault(label, []).append(again_ms / alone_ms)
            lines.append([name, label, *_against(alone_ms, again_ms, mine_ms)])
    report.table(
        f"Queries that cannot prune, {rows:,} rows (ms)",
        ["query", "engine / format", *AGAINST_COLUMNS],
        lines,
    )
    for label, values in ratios.items():
        report.target(f"{label}: median pruner / alone", statistics.median(values), 1.05)
        report.target(f"{label}: worst pruner / alone", max(values), 1.10)
        control = noise[label]
        report.note(
            f"Cannot prune, {label}: the A/A control (the engine alone against itself, in the "
            f"same turns) gave median {statistics.median(control):.2f}, range "
            f"{min(control):.2f}-{max(control):.2f}: ratios within that range of 1.0 are "
            "this machine's noise"
        )


def callers_objects(data: LookupData, rows: int, repeat: int, report: Report) -> None:
    """The caller's own DuckDB connection / DataFusion context against pruner's own."""
    lines = []
    sqls = [fixtures.sql_of("id", key) for key in data.keys["id"]]
    for source, engines in (("lance", ["DuckDB"]), ("parquet", ["DuckDB", "DataFusion"])):
        table = pruner.open_table(data.path(source))
        if source == "lance":
            warmed(table, lambda n: fixtures.sql_of("id", WARM_UP_KEYS["id"](n)))
        for engine in engines:
            if engine == "DuckDB":
                text, given = "caller's connection / shared", {"connection": duckdb.connect()}
            else:
                text, given = "caller's context / own", {"context": datafusion.SessionContext()}
            cases = {
                "pruner's": pruned({"t": table}, engine.lower()),
                "caller's": pruned({"t": table}, engine.lower(), **given),
            }
            ours, theirs = medians(cases, sqls, repeat)
            lines.append([engine, source, f"{ours:.2f}", f"{theirs:.2f}", f"{theirs / ours:.2f}"])
            report.target(f"{engine} / {source}: {text}", theirs / ours, 1.1)
    report.table(
        f"The caller's own connection or context, point lookups on id, {rows:,} rows (ms)",
        ["engine", "format", "pruner's", "caller's", "caller's / pruner's"],
        lines,
    )


def plots(
    scale: dict[int, dict[str, dict[str, float]]],
    in_lists: dict[int, dict[str, float]],
    rows: int,
    folder: Path,
) -> list[str]:
    """The point lookups' medians against the table's rows, and the IN lists' against their
    keys, written into ``folder`` (beside the report whose links name them)."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes, keys = sorted(scale), sorted(in_lists)
    by_rows = [
        Panel(
            f"{group}: id = K",
            "rows",
            {
                n: (sizes, [scale[s][f"{group} id"][n] for s in sizes])
                for n in scale[sizes[0]][f"{group} id"]
            },
        )
        for group in GROUPS
    ]
    by_keys = {n: (keys, [in_lists[k][n] for k in keys]) for n in in_lists[keys[0]]}
    common.plot(folder / "latency_vs_rows.png", by_rows)
    common.plot(
        folder / "latency_vs_in_list.png",
        [Panel(f"id IN (k keys), {rows:,} rows", "keys in the IN list", by_keys)],
    )
    return ["latency_vs_rows.png", "latency_vs_in_list.png"]


def main() -> None:
    made = common.parser(__doc__, rows=[], repeat=20)
    made.add_argument("--quick", action="store_true", help="200k and 1M rows (else 1M 5M 20M)")
    made.add_argument("--output", type=Path, default=common.ROOT / "docs" / "benchmarks.md")
    args = common.parse(made, pruner, duckdb, datafusion, lance, pa)
    sizes = args.rows or (
        [200_000, 1_000_000] if args.quick else [1_000_000, 5_000_000, 20_000_000]
    )
    report = Report()
    scale: dict[int, dict[str, dict[str, float]]] = {}
    for rows in sizes:
        data = fixtures.lookup_data(rows)
        scale[rows] = point_lookups(data, rows, args.repeat, report)
    largest = max(sizes)
    data = fixtures.lookup_data(largest)
    in_results = in_lists(data, largest, args.repeat, report)
    never_slower(data, largest, args.repeat, report)
    callers_objects(data, largest, args.repeat, report)
    first, last = min(sizes), max(sizes)
    for group in GROUPS:
        key = f"{group} id"
        mine = next(name for name in scale[last][key] if name.startswith("pruner"))
        growth = scale[last][key][mine] / scale[first][key][mine]
        report.target(f"{group}: pruner's point lookup {last:,} / {first:,} rows", growth, 1.5)
    images = plots(scale, in_results, largest, args.output.parent / "img")
    versions = ", ".join(
        f"{m.__name__} {m.__version__}" for m in (duckdb, datafusion, lance, pa, np)
    )
    command = "make bench-quick" if args.quick else "make bench"
    intro = (
        f"Made by `{command}` ({time.strftime('%Y-%m-%d')}); {versions}; {os.cpu_count()} CPUs. "
        "Medians of runs alternated case by case; the baseline is always the engine alone, "
        "called as its users call it, on the same files (see `bench/compare.py`). Absolute "
        "times depend on the machine and on what else ran on it; the ratios are what to read."
    )
    report.write(args.output, "pruner against the engines alone", intro, images)


if __name__ == "__main__":
    main()
