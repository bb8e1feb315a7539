"""Zone bloom index build throughput: pruner (numpy) against Lance's own Rust build.

For each of the columns ``id`` (int64) and ``name`` (~20-byte strings) of a generated Lance
dataset (default 5,000,000 rows in 50 fragments, cached under ``bench/data/``), it times,
interleaved and best of ``--repeat`` runs:

* pruner build: ``build_lance_index(path, column)`` -- in memory, returns a ZoneIndex;
* pruner full: ``build_index(path, column)`` -- builds, streams the index file as fragments
  complete, and commits it into the dataset: the same work as Lance's build;
* Lance build: ``lance.dataset(path).create_scalar_index(column, "BLOOMFILTER")`` -- builds,
  writes the index file and commits a new dataset version (the index is dropped again
  after each run, untimed).

Both sides use the defaults (8192 items per zone, probability 0.00057) and both timings
include opening the dataset. It prints seconds, ns/row and the ratio lance / pruner (> 1.0
means pruner is faster), then checks (untimed) that pruner's index equals the file Lance
wrote, zone for zone.

Run it (from the project root)::

    .venv/bin/python bench/build_throughput.py
    .venv/bin/python bench/build_throughput.py --rows 500000 --fragments 10 --repeat 1
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Run as a script from a checkout whether or not pruner is installed into the venv.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402 (bench/ is sys.path[0] when run as a script)

from pruner.index import (  # noqa: E402
    ZoneIndex,
    build_index,
    build_lance_index,
    list_bloom_indexes,
    read_index_file,
)

DATA_DIR = Path(__file__).resolve().parent / "data"
COLUMNS = ("id", "name")


# ------------------------------------------------------------------------------- data


def make_table(rows: int) -> pa.Table:
    """``id``: a shuffled permutation of 0..rows-1; ``name``: 'user-' + 15 digits, shuffled."""
    rng = np.random.default_rng(42)
    ids = rng.permutation(rows).astype(np.int64)
    digits = pc.cast(pa.array(rng.permutation(rows).astype(np.int64)), pa.string())
    names = pc.binary_join_element_wise("user-", pc.utf8_lpad(digits, 15, "0"), "")
    return pa.table({"id": ids, "name": names})


def dataset_is_usable(path: Path, rows: int, fragments: int) -> bool:
    try:
        ds = lance.dataset(str(path))
        return ds.count_rows() == rows and len(ds.get_fragments()) == fragments
    except Exception:
        return False


def ensure_dataset(rows: int, fragments: int) -> Path:
    """The cached dataset for (rows, fragments), generated if missing or unusable."""
    path = DATA_DIR / f"build_throughput_{rows}r_{fragments}f.lance"
    if dataset_is_usable(path, rows, fragments):
        print(f"dataset: {path} (cached)")
        return path
    shutil.rmtree(path, ignore_errors=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    table = make_table(rows)
    t1 = time.perf_counter()
    per_file = math.ceil(rows / fragments)
    lance.write_dataset(table, str(path), max_rows_per_file=per_file)
    t2 = time.perf_counter()
    if not dataset_is_usable(path, rows, fragments):
        got = len(lance.dataset(str(path)).get_fragments())
        sys.exit(f"generated {path} has {got} fragments, wanted {fragments}")
    print(f"dataset: {path} (generated: table {t1 - t0:.1f} s, write {t2 - t1:.1f} s)")
    return path


# ---------------------------------------------------------------------------- timing


@dataclass
class Timings:
    pruner_build: list[float] = field(default_factory=list)
    pruner_build_write: list[float] = field(default_factory=list)
    lance_build: list[float] = field(default_factory=list)


def drop_bloom_indexes(path: Path, column: str | None = None) -> list[str]:
    """Drop every bloom index (on ``column``, or any); return the names that failed."""
    failed = []
    ds = lance.dataset(str(path))
    for info in list_bloom_indexes(ds):
        if column is None or info.column == column:
            try:
                ds.drop_index(info.name)
            except Exception as err:
                failed.append(f"{info.name}: {type(err).__name__}: {err}")
            ds = lance.dataset(str(path))
    for info in list_bloom_indexes(ds):
        if column is None or info.column == column:
            failed.append(f"{info.name}: still listed after drop_index")
    return failed


def time_pruner(path: Path, column: str) -> tuple[float, float, ZoneIndex]:
    """(build only, build + write + commit, the index built)."""
    t0 = time.perf_counter()
    index = build_lance_index(str(path), column)
    build = time.perf_counter() - t0
    drop_bloom_indexes(path, column)
    t0 = time.perf_counter()
    build_index(str(path), column)
    full = time.perf_counter() - t0
    drop_bloom_indexes(path, column)
    return build, full, index


def time_lance(path: Path, column: str) -> float:
    t0 = time.perf_counter()
    ds = lance.dataset(str(path))
    ds.create_scalar_index(column, index_type="BLOOMFILTER", replace=True)
    return time.perf_counter() - t0


def warm_up(path: Path, column: str) -> None:
    """Read the column once so neither side pays for a cold page cache."""
    lance.dataset(str(path)).to_table(columns=[column])


# ----------------------------------------------------------------------------- check


def compare(ours: ZoneIndex, theirs: ZoneIndex) -> list[str]:
    """Differences between two indexes (empty: identical)."""
    problems = []
    if (ours.items, ours.probability) != (theirs.items, theirs.probability):
        problems.append(
            f"params: pruner {ours.items}/{ours.probability}, "
            f"lance {theirs.items}/{theirs.probability}"
        )
    if ours.num_zones != theirs.num_zones:
        return [*problems, f"zones: pruner {ours.num_zones}, lance {theirs.num_zones}"]
    for name in ("fragment_id", "zone_start", "zone_length", "has_null"):
        if not np.array_equal(getattr(ours, name), getattr(theirs, name)):
            problems.append(f"{name} differs")
    zones = [0, ours.num_zones - 1] if ours.num_zones else []
    for z in zones:
        if ours.filter_bytes(z) != theirs.filter_bytes(z):
            problems.append(f"filter of zone {z} differs")
    differing = sum(ours.filter_bytes(z) != theirs.filter_bytes(z) for z in range(ours.num_zones))
    if differing:
        problems.append(f"{differing} of {ours.num_zones} zone filters differ")
    return problems


def sanity_check(path: Path, column: str, ours: ZoneIndex) -> bool:
    drop_bloom_indexes(path, column)
    lance.dataset(str(path)).create_scalar_index(column, index_type="BLOOMFILTER", replace=True)
    infos = [i for i in list_bloom_indexes(str(path)) if i.column == column]
    if len(infos) != 1:
        print(f"  {column}: expected one Lance bloom index, found {len(infos)}")
        return False
    theirs = read_index_file(infos[0].path, column)
    problems = compare(ours, theirs)
    width = len(ours.filter_bytes(0)) if ours.num_zones else 0
    print(
        f"  {column}: {ours.num_zones} zones, {width} B filters, "
        f"items={theirs.items} probability={theirs.probability} "
        f"(zone arrays, first/last/all filters compared) identical: {not problems}"
    )
    for problem in problems:
        print(f"    - {problem}")
    drop_bloom_indexes(path, column)
    return not problems


# ------------------------------------------------------------------------------ main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows (default 5,000,000)")
    parser.add_argument("--fragments", type=int, default=50, help="fragments (default 50)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side, best kept")
    args = parser.parse_args()
    if args.rows < 1 or args.fragments < 1 or args.repeat < 1 or args.fragments > args.rows:
        parser.error("need rows >= fragments >= 1 and repeat >= 1")
    return args


def main() -> None:
    args = parse_args()
    print_header(np, pa, lance)
    print(f"rows={args.rows:,} fragments={args.fragments} repeat={args.repeat}")
    path = ensure_dataset(args.rows, args.fragments)
    leftover = drop_bloom_indexes(path)
    drop_failures: list[str] = list(leftover)

    timings = {column: Timings() for column in COLUMNS}
    last_index: dict[str, ZoneIndex] = {}
    for column in COLUMNS:
        warm_up(path, column)
        t = timings[column]
        for run in range(args.repeat):
            build, build_write, last_index[column] = time_pruner(path, column)
            t.pruner_build.append(build)
            t.pruner_build_write.append(build_write)
            t.lance_build.append(time_lance(path, column))
            drop_failures += drop_bloom_indexes(path, column)
            print(
                f"  {column} run {run + 1}/{args.repeat}: pruner build {build:.3f} s, "
                f"full {build_write:.3f} s, lance {t.lance_build[-1]:.3f} s",
                flush=True,
            )

    rows = args.rows
    header = (
        f"{'column':<6} {'rows':>10} {'pruner build s':>14} {'ns/row':>7} "
        f"{'pruner full s':>13} {'ns/row':>7} {'lance build s':>13} {'ns/row':>7} "
        f"{'lance/pruner build':>18} {'lance/pruner full':>17}"
    )
    print()
    print(f"best of {args.repeat}; 'full' and lance both build, write the index file and commit")
    print(header)
    print("-" * len(header))
    for column in COLUMNS:
        t = timings[column]
        pb, pbw, lb = min(t.pruner_build), min(t.pruner_build_write), min(t.lance_build)
        print(
            f"{column:<6} {rows:>10,} {pb:>14.3f} {pb / rows * 1e9:>7.1f} "
            f"{pbw:>13.3f} {pbw / rows * 1e9:>7.1f} {lb:>13.3f} {lb / rows * 1e9:>7.1f} "
            f"{lb / pb:>18.2f} {lb / pbw:>17.2f}"
        )
    print("(ratio > 1.0: pruner is faster)")

    print()
    if drop_failures:
        print("drop_index failed (indexes/versions accumulate):")
        for failure in drop_failures:
            print(f"  {failure}")
    else:
        print("drop_index worked: each Lance run started with no bloom index")

    print()
    print("sanity check (untimed): pruner's index vs the file Lance wrote")
    ok = sanity_check(path, "id", last_index["id"])
    sanity_check(path, "name", last_index["name"])
    print(f"identical: {ok}")

    try:
        lance.dataset(str(path)).cleanup_old_versions(older_than=timedelta(0))
    except Exception as err:
        print(f"(cleanup_old_versions failed: {type(err).__name__}: {err})")


if __name__ == "__main__":
    main()
