"""Cold point lookups: pruner with a table opened for each query, against the engines alone.

"Cold" is a new ``pruner.open_table`` (and, for the engines alone, a new LanceDataset,
connection or context) for every query, with the OS page cache warm: a CLI call, a new
worker, a freshly opened dataset. pruner then opens its index through the hierarchy
companion (``bloomfilter.hierarchy``) and reads a few blocks of it; Lance, used by DuckDB
over a fresh ``lance.dataset(path)``, loads its whole index first.

Cases, on point_lookup.py's data (``id``, a shuffled unique int64; companions are written if
the cached indexes predate them):

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

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import point_lookup  # noqa: E402 (bench/ is sys.path[0] when run as a script)
from common import print_header  # noqa: E402

import pruner  # noqa: E402
from pruner.analyzer import templates  # noqa: E402
from pruner.demo import uuid_strings  # noqa: E402
from pruner.index import build as local_build  # noqa: E402
from pruner.index import companion_path, list_bloom_indexes, parquet_index_path  # noqa: E402

ROWS_PER_FRAGMENT = 100_000


def _index_files(data: point_lookup.Data) -> list[Path]:
    lance_files = [Path(i.path) for i in list_bloom_indexes(data.path("lance")) if i.column == "id"]
    return [*lance_files, parquet_index_path(data.path("parquet8k"), "id")]


def duck_lance(data: point_lookup.Data, full_scan: bool = False) -> Callable[[str], pa.Table]:
    con = duckdb.connect()

    def run(sql: str) -> pa.Table:
        con.register("t", lance.dataset(str(data.path("lance"))))
        if full_scan:
            sql = sql.replace("WHERE id =", "WHERE id + 0 =")
            sql = sql.replace("WHERE trace_id =", "WHERE trace_id || '' =")
        return con.sql(sql).to_arrow_table()

    return run


def duck_parquet(data: point_lookup.Data, copy: str) -> Callable[[str], pa.Table]:
    glob = str(data.path(copy) / "*.parquet").replace("'", "''")

    def run(sql: str) -> pa.Table:
        con = duckdb.connect()
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")
        return con.sql(sql).to_arrow_table()

    return run


def datafusion_parquet(data: point_lookup.Data, copy: str) -> Callable[[str], pa.Table]:
    def run(sql: str) -> pa.Table:
        context = point_lookup.native_datafusion_context(data.path(copy))
        return context.sql(sql).to_arrow_table()

    return run


def pruner_cold(path: Path, engine: str, seen: list[int]) -> Callable[[str], pa.Table]:
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


def build_cost(data: point_lookup.Data, repeat: int = 2) -> tuple[float, float]:
    """Seconds to build the index of id on the Lance copy, with and without the hierarchy
    (a build that makes no coarse filters, as the Spark build, writes no companion), best of
    ``repeat``."""
    original = local_build.index_fragment

    def without(part: Any, num_bytes: int, probability: float) -> Any:
        return original(part, num_bytes)

    best = {True: float("inf"), False: float("inf")}
    for _ in range(repeat):
        for hierarchy in (False, True):
            local_build.index_fragment = original if hierarchy else without
            try:
                began = time.perf_counter()
                pruner.build_index(data.path("lance"), "id")
                best[hierarchy] = min(best[hierarchy], time.perf_counter() - began)
            finally:
                local_build.index_fragment = original
    return best[True], best[False]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print_header(pruner, duckdb, datafusion, lance, pa)
    lines: list[str] = []
    notes: list[str] = []
    for rows in args.rows:
        data = point_lookup.load_data(rows, max(1, rows // ROWS_PER_FRAGMENT))
        present = [int(k) for k in data.keys["id"]]
        absent = [rows + 1 + 7919 * i for i in range(len(present))]
        # Random UUIDs: absent, and inside the column's min/max range (no statistics help).
        uuids = uuid_strings(np.random.default_rng(7), len(present)).to_pylist()
        seen: list[int] = []
        cases: list[tuple[str, list[int] | list[str]]] = [
            ("present", present),
            ("absent", absent),
            ("absent trace_id", uuids),
        ]
        for label, keys in cases:
            groups = {
                "DuckDB / Lance": {
                    "DuckDB alone, fresh LanceDataset": duck_lance(data),
                    "DuckDB full scan (id + 0 = K, trace_id || '' = K)": duck_lance(
                        data, full_scan=True
                    ),
                    "pruner": pruner_cold(data.path("lance"), "duckdb", seen),
                },
                "DuckDB / Parquet": {
                    "DuckDB alone, bloom8k": duck_parquet(data, "bloom8k"),
                    "DuckDB alone, plain (full scan)": duck_parquet(data, "parquet"),
                    "pruner (parquet8k)": pruner_cold(data.path("parquet8k"), "duckdb", seen),
                },
                "DataFusion / Parquet": {
                    "DataFusion alone, bloom8k": datafusion_parquet(data, "bloom8k"),
                    "DataFusion alone, plain (full scan)": datafusion_parquet(data, "parquet"),
                    "pruner (parquet8k)": pruner_cold(data.path("parquet8k"), "datafusion", seen),
                },
            }
            for group, cases in groups.items():
                medians = point_lookup.measure_keys(cases, keys, args.repeat)
                mine = medians[next(n for n in medians if n.startswith("pruner"))]
                for name, ms in medians.items():
                    lines.append(
                        f"| {rows:,} | {label} | {group} | {name} | {ms:.2f} | {ms / mine:.2f} |"
                    )
                    print(lines[-1])
        counted = [b for b in seen if b >= 0]
        notes.append(
            f"- {rows:,} rows: companion bytes read per cold lookup: median "
            f"{int(np.median(counted)) if counted else 'n/a'}, max {max(counted, default=0)}; "
            f"lookups without a companion: {sum(b < 0 for b in seen)}; "
            f"index file {sum(f.stat().st_size for f in _index_files(data)[:1]):,} B, "
            f"companion {companion_path(_index_files(data)[0]).stat().st_size:,} B"
        )
        print(notes[-1])
        with_hierarchy, without = build_cost(data)
        notes.append(
            f"- {rows:,} rows: build of id on Lance {with_hierarchy:.2f} s with the hierarchy, "
            f"{without:.2f} s without: {with_hierarchy / without:.2f}x"
        )
        print(notes[-1])
    table = [
        "| rows | key | engine / format | case | median ms | x pruner |",
        "|---|---|---|---|---|---|",
        *lines,
    ]
    print("\n" + "\n".join(table))
    command = " ".join(["bench/cold.py", *sys.argv[1:]])
    text = [
        "# Cold point lookups: pruner against the engines alone",
        "",
        f"Written by `{command}` (see its docstring for the cases). A table is opened for "
        "each query; the OS page cache is warm. `absent` keys (id) are beyond the column's "
        "range, so Parquet readers skip them by min/max statistics too; `absent trace_id` "
        "keys are random UUIDs inside the range, which no statistics rule out.",
        "",
        *notes,
        "",
        *table,
        "",
    ]
    (ROOT / "docs" / "benchmarks-cold.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
