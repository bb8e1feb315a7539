"""Cold point lookups: pruner with a table opened for each query, against the engines alone.

"Cold" is a new ``pruner.open_table`` (and, for the engines alone, a new LanceDataset,
connection or context) for every query, with the OS page cache warm: a CLI call, a new
worker, a freshly opened dataset. pruner then opens its index through the hierarchy
companion (``bloomfilter.hierarchy``) and reads a few blocks of it; Lance, used by DuckDB
over a fresh ``lance.dataset(path)``, loads its whole index first.

Cases, on fixtures.lookup_data's data (``id``, a shuffled unique int64; companions are written
if the cached indexes predate them):

* DuckDB / Lance: DuckDB alone over a fresh LanceDataset (``id = K`` pushed into Lance, which
  uses its index), DuckDB's full scan (``id + 0 = K``: nothing to push), pruner;
* DuckDB / Parquet: ``read_parquet`` alone on ``bloom8k`` (native bloom filters) and on the
  plain copy (a full scan: one row group per file, random keys), pruner on ``parquet8k``;
* DataFusion / Parquet: ``register_parquet`` alone on a fresh context, same copies, pruner.

Also: the companion bytes a cold lookup reads, and the build's cost with and without the
hierarchy. Ratios are medians of round-robin runs in one process.

    .venv/bin/python bench/cold.py --rows 1000000 5000000
"""

from __future__ import annotations

import sys
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
from common import Report, measure
from engines import datafusion_alone, duckdb_alone
from fixtures import LookupData

import pruner
from pruner.analyzer import templates
from pruner.index import build as local_build
from pruner.index import companion_path, list_bloom_indexes


def full_scan(alone: Callable[[str], pa.Table]) -> Callable[[str], pa.Table]:
    """``alone`` on a condition it cannot push down: ``id + 0 = K``, ``trace_id || '' = K``."""

    def run(sql: str) -> pa.Table:
        sql = sql.replace("WHERE id =", "WHERE id + 0 =")
        return alone(sql.replace("WHERE trace_id =", "WHERE trace_id || '' ="))

    return run


def pruner_cold(path: Path, engine: str, seen: list[int]) -> Callable[[str], pa.Table]:
    """pruner on a table opened for the query; ``seen``: the companion bytes it read."""

    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        table = pruner.open_table(path)
        answer = pruner.query(sql, {"t": table}, engine=engine)
        bound = table.index("trace_id" if "trace_id" in sql else "id")
        if bound is not None and bound.index.hierarchy is not None:
            seen.append(bound.index.hierarchy.bytes_read)
        else:
            seen.append(-1)
        return answer

    return run


def cases(data: LookupData, seen: list[int]) -> dict[str, dict[str, Callable[[str], pa.Table]]]:
    """Per engine / format, its cases, each reopening what it reads for every query."""
    lance_copy, bloom, plain = ({"t": data.path(c)} for c in ("lance", "bloom8k", "parquet"))
    mine = data.path("parquet8k")
    return {
        "DuckDB / Lance": {
            "DuckDB alone, fresh LanceDataset": duckdb_alone(lance_copy, reopen="tables"),
            "DuckDB full scan (id + 0 = K, trace_id || '' = K)": full_scan(
                duckdb_alone(lance_copy, reopen="tables")
            ),
            "pruner": pruner_cold(data.path("lance"), "duckdb", seen),
        },
        "DuckDB / Parquet": {
            "DuckDB alone, bloom8k": duckdb_alone(bloom, reopen="connection"),
            "DuckDB alone, plain (full scan)": duckdb_alone(plain, reopen="connection"),
            "pruner (parquet8k)": pruner_cold(mine, "duckdb", seen),
        },
        "DataFusion / Parquet": {
            "DataFusion alone, bloom8k": datafusion_alone(bloom, reopen=True),
            "DataFusion alone, plain (full scan)": datafusion_alone(plain, reopen=True),
            "pruner (parquet8k)": pruner_cold(mine, "datafusion", seen),
        },
    }


def build_cost(data: LookupData, repeat: int = 2) -> tuple[float, float]:
    """Seconds to build the index of id on the Lance copy, with and without the hierarchy
    (a build that makes no coarse filters, as the Spark build, writes no companion), best of
    ``repeat``."""
    original = local_build.index_fragment

    def without(part: Any, num_bytes: int, probability: float) -> Any:
        return original(part, num_bytes)

    def build(hierarchy: bool) -> Callable[[object], None]:
        def run(_: object) -> None:
            local_build.index_fragment = original if hierarchy else without
            try:
                pruner.build_index(data.path("lance"), "id")
            finally:
                local_build.index_fragment = original

        return run

    got = measure({"without": build(False), "with": build(True)}, repeat=repeat, warmup=0)
    pruner.build_index(data.path("lance"), "id")  # the data as it was: with its companion
    return got["with"].best() / 1000, got["without"].best() / 1000


def main() -> None:
    made = common.parser(__doc__, rows=[1_000_000], repeat=10)
    made.add_argument("--output", type=Path, default=common.ROOT / "docs" / "benchmarks-cold.md")
    args = common.parse(made, pruner, duckdb, datafusion, lance, pa)
    report = Report()
    lines: list[list[str]] = []
    for rows in args.rows:
        data = fixtures.lookup_data(rows)
        seen: list[int] = []
        labels = ("present", "absent", "absent trace_id")
        for label, listed in zip(labels, fixtures.key_kinds(data, rows), strict=True):
            sqls = [fixtures.key_sql(k) for k in listed]
            for group, runs in cases(data, seen).items():
                got = measure(runs, sqls, args.repeat, check=fixtures.trace_ids)
                mine = next(c for n, c in got.items() if n.startswith("pruner")).median()
                for name, case in got.items():
                    ms = case.median()
                    lines.append([f"{rows:,}", label, group, name, f"{ms:.2f}", f"{ms / mine:.2f}"])
        counted = [b for b in seen if b >= 0]
        index_file = next(
            Path(i.path) for i in list_bloom_indexes(data.path("lance")) if i.column == "id"
        )
        report.note(
            f"{rows:,} rows: companion bytes read per cold lookup: median "
            f"{int(np.median(counted)) if counted else 'n/a'}, max {max(counted, default=0)}; "
            f"lookups without a companion: {sum(b < 0 for b in seen)}; "
            f"index file {index_file.stat().st_size:,} B, "
            f"companion {companion_path(index_file).stat().st_size:,} B"
        )
        with_hierarchy, without = build_cost(data)
        report.note(
            f"{rows:,} rows: build of id on Lance {with_hierarchy:.2f} s with the hierarchy, "
            f"{without:.2f} s without: {with_hierarchy / without:.2f}x"
        )
    report.table(
        "Cold point lookups (median ms; x pruner = case / pruner)",
        ["rows", "key", "engine / format", "case", "median ms", "x pruner"],
        lines,
    )
    command = " ".join(["bench/cold.py", *sys.argv[1:]])
    intro = (
        f"Written by `{command}` (see its docstring for the cases). A table is opened for "
        "each query; the OS page cache is warm. `absent` keys (id) are beyond the column's "
        "range, so Parquet readers skip them by min/max statistics too; `absent trace_id` "
        "keys are random UUIDs inside the range, which no statistics rule out."
    )
    report.write(args.output, "Cold point lookups: pruner against the engines alone", intro)


if __name__ == "__main__":
    main()
