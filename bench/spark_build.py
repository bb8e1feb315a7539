"""Spark index build scaling: the zone bloom index of an int64 column on local[1] vs local[2].

Builds the index of ``id`` (a shuffled permutation of 0..rows-1, int64) of a generated Lance
dataset (default 20,000,000 rows in 20 fragments of 1M rows, Lance's default file size;
cached under ``bench/data/``) with ``build_zone_index_spark`` -- one Spark task per
fragment, only zone rows collected -- on a session with master ``local[1]``, then on one
with ``local[2]`` (a master is fixed when its SparkContext starts: the first session is
stopped before the second starts). Each session first runs one untimed build that starts
its Python workers; then ``--repeat`` timed builds, best kept. For context it also times
pruner's local build (``build_lance_index``: NumPy in a thread per core, no Spark) in the
same run. Timings cover the build only (no index file written, nothing committed) and
include opening the dataset; the defaults are used (8192 items per zone, probability
0.00057).

It prints seconds, ns/row, and the ratios local[1] / local[2] (target >= 1.5) and
local[2] / local build, then checks (untimed) that each Spark build gave the local build's
index, zone for zone and filter for filter.

Run it (from the project root)::

    .venv/bin/python bench/spark_build.py
    .venv/bin/python bench/spark_build.py --rows 2000000 --fragments 8 --repeat 1
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyspark

# Run as a script from a checkout whether or not pruner is installed into the venv.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402 (bench/ is sys.path[0] when run as a script)

from pruner.adapters.spark import session  # noqa: E402
from pruner.adapters.spark.build import build_zone_index_spark  # noqa: E402
from pruner.index import ZoneIndex, build_lance_index  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"
MASTERS = ("local[1]", "local[2]")
TARGET = 1.5


def dataset_is_usable(path: Path, rows: int, fragments: int) -> bool:
    try:
        ds = lance.dataset(str(path))
        return ds.count_rows() == rows and len(ds.get_fragments()) == fragments
    except Exception:
        return False


def ensure_dataset(rows: int, fragments: int) -> Path:
    """The cached dataset for (rows, fragments), generated if missing or unusable."""
    path = DATA_DIR / f"spark_build_{rows}r_{fragments}f.lance"
    if dataset_is_usable(path, rows, fragments):
        print(f"dataset: {path} (cached)")
        return path
    shutil.rmtree(path, ignore_errors=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ids = np.random.default_rng(42).permutation(rows).astype(np.int64)
    lance.write_dataset(
        pa.table({"id": ids}), str(path), max_rows_per_file=math.ceil(rows / fragments)
    )
    if not dataset_is_usable(path, rows, fragments):
        got = len(lance.dataset(str(path)).get_fragments())
        sys.exit(f"generated {path} has {got} fragments, wanted {fragments}")
    print(f"dataset: {path} (generated in {time.perf_counter() - t0:.1f} s)")
    return path


def differences(ours: ZoneIndex, local: ZoneIndex) -> list[str]:
    """How ``ours`` differs from the local build's index (empty: identical)."""
    if ours.num_zones != local.num_zones:
        return [f"zones: {ours.num_zones} vs local {local.num_zones}"]
    problems = [
        name
        for name in ("fragment_id", "zone_start", "zone_length", "has_null", "filter_data")
        if not np.array_equal(getattr(ours, name), getattr(local, name))
    ]
    if {k: v.tolist() for k, v in (ours.null_rows or {}).items()} != {
        k: v.tolist() for k, v in (local.null_rows or {}).items()
    }:
        problems.append("null_rows")
    return problems


def time_spark(path: Path, master: str, repeat: int) -> tuple[list[float], float, ZoneIndex]:
    """(timed runs, session start seconds, the last index) on a new session of ``master``."""
    t0 = time.perf_counter()
    spark = session(master)
    started = time.perf_counter() - t0
    assert spark.sparkContext.master == master, spark.sparkContext.master
    t0 = time.perf_counter()
    index = build_zone_index_spark(path, "id", spark=spark)
    print(
        f"  {master}: session start {started:.1f} s, first build (starts workers) "
        f"{time.perf_counter() - t0:.2f} s",
        flush=True,
    )
    runs = []
    for run in range(repeat):
        t0 = time.perf_counter()
        index = build_zone_index_spark(path, "id", spark=spark)
        runs.append(time.perf_counter() - t0)
        print(f"  {master} run {run + 1}/{repeat}: {runs[-1]:.3f} s", flush=True)
    spark.stop()
    return runs, started, index


def time_local(path: Path, repeat: int) -> tuple[list[float], ZoneIndex]:
    build_lance_index(path, "id")  # warm the page cache as the Spark warm-up run did
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        index = build_lance_index(path, "id")
        runs.append(time.perf_counter() - t0)
    print(f"  local build runs: {', '.join(f'{t:.3f}' for t in runs)} s", flush=True)
    return runs, index


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000, help="rows (default 20M)")
    parser.add_argument("--fragments", type=int, default=20, help="fragments (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side, best kept")
    args = parser.parse_args()
    if args.rows < 1 or args.fragments < 1 or args.repeat < 1 or args.fragments > args.rows:
        parser.error("need rows >= fragments >= 1 and repeat >= 1")
    return args


def main() -> None:
    args = parse_args()
    print_header(np, pa, lance, pyspark)
    print(f"rows={args.rows:,} fragments={args.fragments} repeat={args.repeat}")
    path = ensure_dataset(args.rows, args.fragments)

    active = pyspark.sql.SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    spark_runs, built = {}, {}
    for master in MASTERS:
        spark_runs[master], _, built[master] = time_spark(path, master, args.repeat)
    local_runs, local_index = time_local(path, args.repeat)

    rows = args.rows
    best = {master: min(runs) for master, runs in spark_runs.items()}
    local_best = min(local_runs)
    print()
    print(
        f"best of {args.repeat}; index of 'id' (int64), {local_index.num_zones:,} zones, "
        "build only (nothing written)"
    )
    header = f"{'build':<28} {'seconds':>8} {'ns/row':>7}"
    print(header)
    print("-" * len(header))
    for master in MASTERS:
        label = f"spark {master}"
        print(f"{label:<28} {best[master]:>8.3f} {best[master] / rows * 1e9:>7.1f}")
    print(f"{'local (NumPy, threads)':<28} {local_best:>8.3f} {local_best / rows * 1e9:>7.1f}")
    ratio = best["local[1]"] / best["local[2]"]
    verdict = "met" if ratio >= TARGET else "MISSED"
    print()
    print(f"spark local[1] / local[2]: {ratio:.2f}x (target >= {TARGET}x: {verdict})")
    print(
        f"spark local[2] / local build: {best['local[2]'] / local_best:.2f}x "
        "(> 1: the local build is faster on this machine)"
    )

    print()
    print("check (untimed): each Spark build equals the local build")
    identical = True
    for master in MASTERS:
        problems = differences(built[master], local_index)
        identical = identical and not problems
        print(f"  {master}: {'identical' if not problems else 'DIFFERS: ' + ', '.join(problems)}")
    print(f"identical: {identical}")


if __name__ == "__main__":
    main()
