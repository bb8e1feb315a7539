"""pruner against the engines alone, as their users call them: ``make bench`` (and ``make
bench-quick``) write ``docs/benchmarks.md`` and its plots.

The data is point_lookup.py's (cached under ``bench/data/point_lookup/``, generated when
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
opened once. Every timed SQL text is new to pruner (its cache of SQL texts is cleared before
each call; its templates, which serve new literals of a known shape, are kept, as they are for
users). The cases of a comparison run round-robin, one of each per repetition, so machine
noise hits all alike; each answer is checked against the engine alone's.

Run it (from the project root)::

    .venv/bin/python bench/compare.py            # 1M, 5M and 20M rows (hours for 20M data)
    .venv/bin/python bench/compare.py --quick    # 200k and 1M rows: a few minutes
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import matplotlib
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import point_lookup  # noqa: E402 (bench/ is sys.path[0] when run as a script)
from common import print_header, rotated  # noqa: E402

import pruner  # noqa: E402
from pruner.adapters import datafusion as df_adapter  # noqa: E402
from pruner.adapters import duckdb as duck_adapter  # noqa: E402
from pruner.analyzer import templates  # noqa: E402

DOCS = ROOT / "docs"
ROWS_PER_FRAGMENT = 100_000
IN_SIZES = (1, 10, 100, 1_000, 10_000)
NEVER_SLOWER = {
    "range": "SELECT count(*) AS n FROM t WHERE amount > 10",
    "like": "SELECT count(*) AS n FROM t WHERE trace_id LIKE 'a%'",
    "is not null": "SELECT count(*) AS n FROM t WHERE id IS NOT NULL",
    "is distinct from": "SELECT count(*) AS n FROM t WHERE id IS DISTINCT FROM 5",
    "group by": "SELECT amount > 500 AS big, count(*) AS n FROM t GROUP BY 1 ORDER BY 1",
}


# ------------------------------------------------------------------------------ engines


def duck_alone(data: point_lookup.Data, source: str) -> Callable[[str], pa.Table]:
    """DuckDB alone: the indexed LanceDataset registered, or a read_parquet glob view."""
    con = duckdb.connect()
    if source == "lance":
        con.register("t", lance.dataset(str(data.path("lance"))))
    else:
        glob = str(data.path(source) / "*.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")
    return lambda sql: con.sql(sql).to_arrow_table()


def datafusion_alone(data: point_lookup.Data, source: str) -> Callable[[str], pa.Table]:
    context = point_lookup.native_datafusion_context(data.path(source))
    return lambda sql: context.sql(sql).to_arrow_table()


def pruned(table: Any, engine: str, **options: Any) -> Callable[[str], pa.Table]:
    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        if engine == "duckdb":
            return duck_adapter.query(sql, {"t": table}, **options)
        return df_adapter.query(sql, {"t": table}, **options)

    return run


# ------------------------------------------------------------------------------ timing


@dataclass
class Case:
    name: str
    run: Callable[[str], pa.Table]
    times: list[float] = field(default_factory=list)

    def median_ms(self) -> float:
        return statistics.median(self.times) * 1000

    def p90_ms(self) -> float:
        return float(np.percentile(self.times, 90)) * 1000


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = [c.to_pylist() for c in table.columns]
    return sorted(zip(*columns, strict=True), key=repr)


def measure(cases: list[Case], sqls: list[str], repeat: int) -> None:
    """Each case runs every SQL ``repeat`` times round-robin (after one warm-up pass), in an
    order rotated each turn (:func:`common.rotated`); every answer must equal the turn's
    first."""
    for sql in sqls[:2]:
        for case in cases:
            case.run(sql)
    for rep in range(repeat):
        sql = sqls[rep % len(sqls)]
        reference = None
        for case in rotated(cases, rep):
            began = time.perf_counter()
            answer = case.run(sql)
            case.times.append(time.perf_counter() - began)
            rows = _rows(answer)
            if reference is None:
                reference = rows
            elif rows != reference:
                raise AssertionError(f"{case.name} answered differently for {sql!r}")


# --------------------------------------------------------------------------- comparisons


@dataclass
class Report:
    sections: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        self.sections.append("\n".join(lines))
        print("\n".join(lines), "\n")

    def target(self, text: str, value: float, limit: float, above: bool = False) -> None:
        met = value >= limit if above else value <= limit
        sign = ">=" if above else "<="
        line = f"{'met' if met else 'MISSED'}: {text}: {value:.2f} (target {sign} {limit})"
        self.targets.append(line)
        print(line)


def sql_point(column: str, key: Any) -> str:
    return point_lookup.sql_of(column, key)


def sql_in(column: str, keys: list[Any]) -> str:
    listed = ", ".join(str(int(k)) if column == "id" else f"'{k}'" for k in keys)
    return f"SELECT * FROM t WHERE {column} IN ({listed})"


def point_lookups(
    data: point_lookup.Data, rows: int, repeat: int, report: Report
) -> dict[str, dict[str, float]]:
    """Warm point lookups, per engine and format: pruner, the engine alone (and on bloom8k).
    pruner reads ``parquet8k``: the layout of ``bloom8k`` (8,192-row row groups) with pruner's
    index instead of native filters."""
    lance_table = pruner.open_table(data.path("lance"))
    parquet_table = pruner.open_table(data.path("parquet8k"))
    results: dict[str, dict[str, float]] = {}
    lines = []
    for column in point_lookup.COLUMNS:
        sqls = [sql_point(column, key) for key in data.keys[column]]
        groups = {
            "DuckDB / Lance": [
                Case("DuckDB alone (LanceDataset, Lance's index)", duck_alone(data, "lance")),
                Case("pruner", pruned(lance_table, "duckdb")),
            ],
            "DuckDB / Parquet": [
                Case("DuckDB alone (bloom8k)", duck_alone(data, "bloom8k")),
                Case("DuckDB alone (plain)", duck_alone(data, "parquet")),
                Case("pruner (parquet8k)", pruned(parquet_table, "duckdb")),
            ],
            "DataFusion / Parquet": [
                Case("DataFusion alone (bloom8k)", datafusion_alone(data, "bloom8k")),
                Case("DataFusion alone (plain)", datafusion_alone(data, "parquet")),
                Case("pruner (parquet8k)", pruned(parquet_table, "datafusion")),
            ],
        }
        for group, cases in groups.items():
            measure(cases, sqls, repeat)
            alone = cases[0].median_ms()
            mine = cases[-1].median_ms()
            results[f"{group} {column}"] = {c.name: c.median_ms() for c in cases}
            for case in cases:
                lines.append(
                    [
                        group,
                        column,
                        case.name,
                        f"{case.median_ms():.2f}",
                        f"{case.p90_ms():.2f}",
                        f"{case.median_ms() / mine:.2f}",
                    ]
                )
            if group == "DuckDB / Lance":
                report.target(
                    f"{rows:,} rows, {group}, {column}: pruner / DuckDB alone", mine / alone, 0.67
                )
            else:
                report.target(
                    f"{rows:,} rows, {group}, {column}: engine alone on bloom8k / pruner",
                    alone / mine,
                    3.0,
                    above=True,
                )
    report.table(
        f"Warm point lookup, {rows:,} rows (ms; ratio = case / pruner)",
        ["engine / format", "column", "case", "median", "p90", "x pruner"],
        lines,
    )
    return results


def in_lists(data: point_lookup.Data, rows: int, repeat: int, report: Report) -> dict[int, dict]:
    """IN lists of 1 to 10,000 ids; Parquet: both on ``parquet8k`` (8,192-row row groups)."""
    lance_table = pruner.open_table(data.path("lance"))
    parquet_table = pruner.open_table(data.path("parquet8k"))
    ids = pa.array(np.random.default_rng(3).choice(rows, max(IN_SIZES), replace=False))
    present = data.keys["id"]
    results: dict[int, dict[str, float]] = {}
    lines = []
    for size in IN_SIZES:
        if size > rows // 10:
            continue
        keys = [*present[: min(size, len(present))], *ids.to_pylist()][:size]
        sqls = [sql_in("id", keys[i:] + keys[:i]) for i in range(3)]  # new texts, same keys
        cases = [
            Case("DuckDB alone / Lance", duck_alone(data, "lance")),
            Case("pruner DuckDB / Lance", pruned(lance_table, "duckdb")),
            Case("DuckDB alone / Parquet", duck_alone(data, "parquet8k")),
            Case("pruner DuckDB / Parquet", pruned(parquet_table, "duckdb")),
            Case("DataFusion alone / Parquet", datafusion_alone(data, "parquet8k")),
            Case("pruner DataFusion / Parquet", pruned(parquet_table, "datafusion")),
        ]
        # answers compared within each engine pair (orders differ between engines)
        for pair in (cases[0:2], cases[2:4], cases[4:6]):
            measure(pair, sqls, max(3, repeat // 3))
        results[size] = {c.name: c.median_ms() for c in cases}
        for alone, mine in (cases[0:2], cases[2:4], cases[4:6]):
            lines.append(
                [
                    str(size),
                    mine.name.removeprefix("pruner "),
                    f"{alone.median_ms():.1f}",
                    f"{mine.median_ms():.1f}",
                    f"{mine.median_ms() / alone.median_ms():.2f}",
                ]
            )
            if size == 1_000:
                report.target(
                    f"{rows:,} rows, IN of 1,000 ids, {mine.name}: pruner / alone",
                    mine.median_ms() / alone.median_ms(),
                    0.2,
                )
    report.table(
        f"IN lists on id, {rows:,} rows (ms)",
        ["keys", "engine / format", "alone", "pruner", "pruner / alone"],
        lines,
    )
    return results


def never_slower(data: point_lookup.Data, rows: int, repeat: int, report: Report) -> None:
    """Queries pruner cannot prune: it must cost what the engine alone costs."""
    lance_table = pruner.open_table(data.path("lance"))
    parquet_table = pruner.open_table(data.path("parquet"))
    lines = []
    ratios: dict[str, list[float]] = {}
    for name, sql in NEVER_SLOWER.items():
        for label, alone, mine in (
            ("DuckDB / Lance", duck_alone(data, "lance"), pruned(lance_table, "duckdb")),
            ("DuckDB / Parquet", duck_alone(data, "parquet"), pruned(parquet_table, "duckdb")),
            (
                "DataFusion / Parquet",
                datafusion_alone(data, "parquet"),
                pruned(parquet_table, "datafusion"),
            ),
        ):
            cases = [Case("alone", alone), Case("pruner", mine)]
            measure(cases, [sql], max(3, repeat // 2))
            ratio = cases[1].median_ms() / cases[0].median_ms()
            ratios.setdefault(label, []).append(ratio)
            lines.append(
                [
                    name,
                    label,
                    f"{cases[0].median_ms():.1f}",
                    f"{cases[1].median_ms():.1f}",
                    f"{ratio:.2f}",
                ]
            )
    report.table(
        f"Queries that cannot prune, {rows:,} rows (ms)",
        ["query", "engine / format", "alone", "pruner", "pruner / alone"],
        lines,
    )
    for label, values in ratios.items():
        report.target(f"{label}: median pruner / alone", statistics.median(values), 1.05)
        report.target(f"{label}: worst pruner / alone", max(values), 1.15)


def callers_objects(data: point_lookup.Data, rows: int, repeat: int, report: Report) -> None:
    """The caller's own DuckDB connection / DataFusion context against pruner's own."""
    lines = []
    for source in ("lance", "parquet"):
        table = pruner.open_table(data.path(source))
        sqls = [sql_point("id", key) for key in data.keys["id"]]
        con = duckdb.connect()
        cases = [
            Case("shared", pruned(table, "duckdb")),
            Case("caller's connection", pruned(table, "duckdb", connection=con)),
        ]
        measure(cases, sqls, repeat)
        ratio = cases[1].median_ms() / cases[0].median_ms()
        lines.append(
            [
                "DuckDB",
                source,
                f"{cases[0].median_ms():.2f}",
                f"{cases[1].median_ms():.2f}",
                f"{ratio:.2f}",
            ]
        )
        report.target(f"DuckDB / {source}: caller's connection / shared", ratio, 1.1)
        if source == "parquet":
            context = datafusion.SessionContext()
            cases = [
                Case("own", pruned(table, "datafusion")),
                Case("caller's context", pruned(table, "datafusion", context=context)),
            ]
            measure(cases, sqls, repeat)
            ratio = cases[1].median_ms() / cases[0].median_ms()
            lines.append(
                [
                    "DataFusion",
                    source,
                    f"{cases[0].median_ms():.2f}",
                    f"{cases[1].median_ms():.2f}",
                    f"{ratio:.2f}",
                ]
            )
            report.target(f"DataFusion / {source}: caller's context / own", ratio, 1.1)
    report.table(
        f"The caller's own connection or context, point lookups on id, {rows:,} rows (ms)",
        ["engine", "format", "pruner's", "caller's", "caller's / pruner's"],
        lines,
    )


# ------------------------------------------------------------------------------- output


def plot_scale(results: dict[int, dict[str, dict[str, float]]], path: Path) -> None:
    sizes = sorted(results)
    figure, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=False)
    for axis, group in zip(
        axes, ("DuckDB / Lance", "DuckDB / Parquet", "DataFusion / Parquet"), strict=True
    ):
        key = f"{group} id"
        names = list(results[sizes[0]][key])
        for name in names:
            axis.plot(sizes, [results[s][key][name] for s in sizes], marker="o", label=name)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(f"{group}: id = K")
        axis.set_xlabel("rows")
        axis.set_ylabel("median ms")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_in(results: dict[int, dict[str, float]], rows: int, path: Path) -> None:
    sizes = sorted(results)
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name in results[sizes[0]]:
        axis.plot(sizes, [results[s][name] for s in sizes], marker="o", label=name)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_title(f"id IN (k keys), {rows:,} rows")
    axis.set_xlabel("keys in the IN list")
    axis.set_ylabel("median ms")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(report: Report, output: Path, command: str, images: list[str]) -> None:
    versions = ", ".join(
        f"{m.__name__} {m.__version__}" for m in (duckdb, datafusion, lance, pa, np)
    )
    text = [
        "# pruner against the engines alone",
        "",
        f"Made by `{command}` ({time.strftime('%Y-%m-%d')}); {versions}; "
        f"{os.cpu_count()} CPUs. Medians of runs alternated case by case; "
        "the baseline is always the engine alone, called as its users call it, on the same "
        "files (see `bench/compare.py`). Absolute times depend on the machine and on what "
        "else ran on it; the ratios are what to read.",
        "",
        "## Targets",
        "",
        *[f"- {line}" for line in report.targets],
        "",
        *[f"![{name}](img/{name})" for name in images],
        "",
        *report.sections,
        "",
    ]
    output.write_text("\n".join(text))
    print(f"wrote {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200k and 1M rows")
    parser.add_argument("--rows", type=int, nargs="*", help="sizes (default 1M 5M 20M)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--output", type=Path, default=DOCS / "benchmarks.md")
    args = parser.parse_args()
    sizes = args.rows or (
        [200_000, 1_000_000] if args.quick else [1_000_000, 5_000_000, 20_000_000]
    )
    print_header(pruner, duckdb, datafusion, lance, pa)
    report = Report()
    scale: dict[int, dict[str, dict[str, float]]] = {}
    for rows in sizes:
        data = point_lookup.load_data(rows, max(1, rows // ROWS_PER_FRAGMENT))
        scale[rows] = point_lookups(data, rows, args.repeat, report)
    largest = max(sizes)
    data = point_lookup.load_data(largest, max(1, largest // ROWS_PER_FRAGMENT))
    in_results = in_lists(data, largest, args.repeat, report)
    never_slower(data, largest, args.repeat, report)
    callers_objects(data, largest, args.repeat, report)
    first, last = min(sizes), max(sizes)
    for group in ("DuckDB / Lance", "DuckDB / Parquet", "DataFusion / Parquet"):
        key = f"{group} id"
        mine = next(name for name in scale[last][key] if name.startswith("pruner"))
        growth = scale[last][key][mine] / scale[first][key][mine]
        report.target(f"{group}: pruner's point lookup {last:,} / {first:,} rows", growth, 1.5)
    images = ["latency_vs_rows.png", "latency_vs_in_list.png"]
    folder = args.output.parent / "img"  # beside the report whose links name them
    folder.mkdir(parents=True, exist_ok=True)
    plot_scale(scale, folder / images[0])
    plot_in(in_results, largest, folder / images[1])
    command = "make bench-quick" if args.quick else "make bench"
    write_report(report, args.output, command, images)


if __name__ == "__main__":
    main()
