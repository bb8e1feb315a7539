"""Index maintenance: ``pruner index update`` against a full rebuild and against Lance's own.

Two scenarios on a generated Lance dataset (``id``: a shuffled permutation, int64; cached
under ``bench/data/``), each measured side by side in one run, best of ``--repeat``; between
runs the dataset is put back with Lance's ``restore`` (the index goes back with it):

1. **Append**: ``--append`` (default 1%) new rows as one new fragment after an indexed
   dataset of ``--rows`` rows in ``--fragments`` fragments. Timed: pruner's update (indexes
   the new fragment, keeps every other zone, commits), pruner's full rebuild
   (``pruner.build_index``), Lance's own incremental ``optimize_indices`` (a delta segment)
   and Lance's own full ``create_scalar_index(..., "BLOOMFILTER", replace=True)``.
   Target (issue 17): update <= 5% of a full rebuild.
2. **Compaction**: the same dataset, then ``--small`` small appends holding ``--compacted``
   (10%) more rows, all indexed; then Lance's ``compact_files`` merges the small fragments
   (the big ones are at the target size). Timed: pruner's update; the rebuild of the
   compacted fragments alone (what a build does for exactly those fragments: their zone
   filters, the index file and its hierarchy companion, in a scratch folder; no commit);
   the zone filters alone (the per-fragment work only, no file); and a full rebuild.
   Target (issue 17): update <= 1.2x the rebuild of the compacted fragments alone.
   Then a point lookup on a compacted row: Lance's own scanner
   (``to_table(filter="id = K")``) before the update (Lance cannot remap a bloom index
   after compaction: it scans the compacted fragments) and after it, with the rows its
   index does not cover.

Run it (from the project root)::

    .venv/bin/python bench/update.py                      # 20M rows
    .venv/bin/python bench/update.py --rows 5000000 --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402

from pruner.index import (  # noqa: E402
    DEFAULT_ITEMS,
    INDEX_FILE_NAME,
    IndexFileWriter,
    build_index,
    plan_update,
    update_index,
    write_hierarchy_of,
)
from pruner.index.build import assemble  # noqa: E402
from pruner.index.update import fragment_rows_to_index, local_fragment_rows  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"


def _write(path: Path, rows: int, fragments: int, seed: int = 7) -> None:
    if path.exists():
        shutil.rmtree(path)
    ids = np.random.default_rng(seed).permutation(rows).astype(np.int64)
    table = pa.table({"id": ids, "payload": pa.array(ids * 3)})
    per = -(-rows // fragments)
    lance.write_dataset(table, str(path), max_rows_per_file=per, max_rows_per_group=per)


def _best(run: Callable[[], object], reset: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        reset()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    reset()
    return best


def _restorer(path: Path) -> Callable[[], None]:
    version = lance.dataset(str(path)).version

    def reset() -> None:
        ds = lance.dataset(str(path))
        if ds.version != version:
            lance.dataset(str(path), version=version).restore()

    return reset


def _report(timings: dict[str, float], base: str, target: float) -> None:
    """Each timing as a ratio of ``base``'s, and pruner's update against ``target``."""
    for name, seconds in timings.items():
        print(f"  {name:40s} {seconds:8.3f} s   {seconds / timings[base]:7.3f}x")
    ratio = timings["pruner update"] / timings[base]
    verdict = "met" if ratio <= target else "NOT met"
    print(f"  target: update <= {target}x {base}: {ratio:.3f}x ({verdict})")


def append(rows: int, fragments: int, share: float, repeat: int) -> None:
    path = DATA_DIR / f"update-append-{rows}-{fragments}.lance"
    _write(path, rows, fragments)
    build_index(path, "id")
    added = max(1, int(rows * share))
    extra = np.arange(rows, rows + added, dtype=np.int64)
    lance.write_dataset(
        pa.table({"id": extra, "payload": pa.array(extra * 3)}), str(path), mode="append"
    )
    reset = _restorer(path)
    plan = plan_update(path, "id")
    print(
        f"append: {rows:,} rows in {fragments} fragments + {added:,} rows; the update "
        f"indexes {len(plan.add)} fragment(s) and keeps {len(plan.kept)}"
    )
    timings = {
        "pruner update": _best(lambda: update_index(path, "id"), reset, repeat),
        "pruner full rebuild": _best(lambda: build_index(path, "id"), reset, repeat),
        "Lance optimize_indices": _best(
            lambda: lance.dataset(str(path)).optimize.optimize_indices(index_names=["id_idx"]),
            reset,
            repeat,
        ),
        "Lance create_scalar_index": _best(
            lambda: lance.dataset(str(path)).create_scalar_index(
                "id", index_type="BLOOMFILTER", name="id_idx", replace=True
            ),
            reset,
            repeat,
        ),
    }
    _report(timings, "pruner full rebuild", 0.05)
    # A second append: the update rewrites the newest segment (the first append's) with it.
    update_index(path, "id")
    more = np.arange(rows + added, rows + 2 * added, dtype=np.int64)
    lance.write_dataset(
        pa.table({"id": more, "payload": pa.array(more * 3)}), str(path), mode="append"
    )
    plan = plan_update(path, "id")
    seconds = _best(lambda: update_index(path, "id"), _restorer(path), repeat)
    print(
        f"  a second append: the update indexes {len(plan.add)} fragment(s), rewrites "
        f"{len(plan.keep)} of the segment it replaces ({len(plan.replaces)}), leaves "
        f"{len(plan.others)}: {seconds:.3f} s, {seconds / timings['pruner full rebuild']:.3f}x "
        "the full rebuild"
    )


def compaction(rows: int, fragments: int, small: int, share: float, repeat: int) -> None:
    path = DATA_DIR / f"update-compact-{rows}-{fragments}-{small}.lance"
    _write(path, rows, fragments)
    per = -(-rows // fragments)
    added = max(small, int(rows * share))
    extra = np.arange(rows, rows + added, dtype=np.int64)
    for part in np.array_split(extra, small):  # small appends, one fragment each
        table = pa.table({"id": part, "payload": pa.array(part * 3)})
        lance.write_dataset(table, str(path), mode="append")
    build_index(path, "id")
    before = len(lance.dataset(str(path)).get_fragments())
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=per)
    ds = lance.dataset(str(path))
    reset = _restorer(path)
    plan = plan_update(path, "id")
    print(
        f"compaction: {rows:,} rows in {fragments} fragments and {added:,} in {small} small "
        f"ones ({before} fragments) compacted into {len(ds.get_fragments())}; the update "
        f"indexes {len(plan.add)}, drops {len(plan.drop)}, keeps {len(plan.kept)}"
    )
    compacted = plan.to_index()
    scratch = DATA_DIR / "update-scratch"

    def filters_alone() -> None:
        for _ in local_fragment_rows(plan, compacted):
            pass

    def rebuild_alone() -> None:
        shutil.rmtree(scratch, ignore_errors=True)
        location = scratch / INDEX_FILE_NAME
        rows = local_fragment_rows(plan, compacted)
        total = fragment_rows_to_index(plan, compacted)
        with IndexFileWriter(location) as sink:
            index = assemble("id", plan.items, plan.probability, rows, total, None, sink)
            sink.finish(index)
        assert not isinstance(write_hierarchy_of(location, index, index.build_coarse or {}), str)

    timings = {
        "pruner update": _best(lambda: update_index(path, "id"), reset, repeat),
        "rebuild of the compacted fragments alone": _best(rebuild_alone, reset, repeat),
        "their zone filters alone (no file)": _best(filters_alone, reset, repeat),
        "pruner full rebuild": _best(lambda: build_index(path, "id"), reset, repeat),
    }
    shutil.rmtree(scratch, ignore_errors=True)
    _report(timings, "rebuild of the compacted fragments alone", 1.2)
    value = int(extra[len(extra) // 2])
    for when in ("before the update", "after the update"):
        if when == "after the update":
            update_index(path, "id")
        ds = lance.dataset(str(path))
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            found = ds.to_table(filter=f"id = {value}")
            best = min(best, time.perf_counter() - started)
        unindexed = ds.stats.index_stats("id_idx")["num_unindexed_rows"]
        print(
            f"  Lance's own point lookup on a compacted row {when}: {best * 1000:7.1f} ms, "
            f"{found.num_rows} row; rows its index does not cover (scanned): {unindexed:,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--fragments", type=int, default=20)
    parser.add_argument("--append", type=float, default=0.01, help="share of rows appended")
    parser.add_argument("--small", type=int, default=200, help="small appends to compact")
    parser.add_argument(
        "--compacted", type=float, default=0.1, help="their rows, a share of --rows"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    DATA_DIR.mkdir(exist_ok=True)
    print_header(lance, np, pa)
    print(f"items per zone {DEFAULT_ITEMS:,}")
    append(args.rows, args.fragments, args.append, args.repeat)
    compaction(args.rows, args.fragments, args.small, args.compacted, args.repeat)


if __name__ == "__main__":
    main()
