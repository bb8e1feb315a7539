"""Index maintenance: ``pruner index update`` against a full rebuild and against Lance's own.

Two scenarios on a generated Lance dataset (``id``: a shuffled permutation, int64;
fixtures.update_table, cached under ``bench/data/``; each scenario changes a copy of it),
each measured side by side in one run, best of ``--repeat``; before each run the dataset is
put back with Lance's ``restore`` (the index goes back with it):

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

import shutil
from collections.abc import Callable
from pathlib import Path

import common
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Case, Report, measure

from pruner.index import (
    DEFAULT_ITEMS,
    INDEX_FILE_NAME,
    IndexFileWriter,
    build_index,
    plan_update,
    update_index,
    write_hierarchy_of,
)
from pruner.index.build import assemble
from pruner.index.update import fragment_rows_to_index, local_fragment_rows


def append_rows(path: Path, ids: np.ndarray) -> None:
    table = pa.table({"id": ids, "payload": pa.array(ids * 3)})
    lance.write_dataset(table, str(path), mode="append")


def restorer(path: Path) -> Callable[[], None]:
    """Puts the dataset back at its version now (untimed, before each run)."""
    version = lance.dataset(str(path)).version

    def reset() -> None:
        if lance.dataset(str(path)).version != version:
            lance.dataset(str(path), version=version).restore()

    return reset


def best_of(
    runs: dict[str, Callable[[object], object]], path: Path, repeat: int
) -> dict[str, float]:
    """Seconds, best of ``repeat`` runs taken in turns, each from the dataset as it is now."""
    reset = restorer(path)
    got = measure([Case(n, run, reset) for n, run in runs.items()], repeat=repeat, warmup=0)
    reset()
    return {name: case.best() / 1000 for name, case in got.items()}


def against(report: Report, title: str, seconds: dict[str, float], base: str, limit: float) -> None:
    """Each timing as a ratio of ``base``'s, and pruner's update against ``limit``."""
    rows = [[n, f"{s:.3f}", f"{s / seconds[base]:.3f}"] for n, s in seconds.items()]
    report.table(title, ["run", "seconds", f"x {base}"], rows)
    report.target(f"update / {base}", seconds["pruner update"] / seconds[base], limit)


def append(rows: int, fragments: int, share: float, repeat: int, report: Report) -> None:
    path = fixtures.working_copy(fixtures.update_table(rows, fragments), "append")
    build_index(path, "id")
    added = max(1, int(rows * share))
    append_rows(path, np.arange(rows, rows + added, dtype=np.int64))
    plan = plan_update(path, "id")
    seconds = best_of(
        {
            "pruner update": lambda _: update_index(path, "id"),
            "pruner full rebuild": lambda _: build_index(path, "id"),
            "Lance optimize_indices": lambda _: lance.dataset(str(path)).optimize.optimize_indices(
                index_names=["id_idx"]
            ),
            "Lance create_scalar_index": lambda _: lance.dataset(str(path)).create_scalar_index(
                "id", index_type="BLOOMFILTER", name="id_idx", replace=True
            ),
        },
        path,
        repeat,
    )
    against(
        report,
        f"Append: {rows:,} rows in {fragments} fragments + {added:,} rows; the update indexes "
        f"{len(plan.add)} fragment(s) and keeps {len(plan.kept)}",
        seconds,
        "pruner full rebuild",
        0.05,
    )
    # A second append: the update rewrites the newest segment (the first append's) with it.
    update_index(path, "id")
    append_rows(path, np.arange(rows + added, rows + 2 * added, dtype=np.int64))
    plan = plan_update(path, "id")
    again = best_of({"update": lambda _: update_index(path, "id")}, path, repeat)["update"]
    report.note(
        f"a second append: the update indexes {len(plan.add)} fragment(s), rewrites "
        f"{len(plan.keep)} of the segment it replaces ({len(plan.replaces)}), leaves "
        f"{len(plan.others)}: {again:.3f} s, {again / seconds['pruner full rebuild']:.3f}x "
        "the full rebuild"
    )


def compaction(
    rows: int, fragments: int, small: int, share: float, repeat: int, report: Report
) -> None:
    path = fixtures.working_copy(fixtures.update_table(rows, fragments), "compaction")
    per = -(-rows // fragments)
    added = max(small, int(rows * share))
    extra = np.arange(rows, rows + added, dtype=np.int64)
    for part in np.array_split(extra, small):  # small appends, one fragment each
        append_rows(path, part)
    build_index(path, "id")
    before = len(lance.dataset(str(path)).get_fragments())
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=per)
    after = len(lance.dataset(str(path)).get_fragments())
    plan = plan_update(path, "id")
    compacted = plan.to_index()
    scratch = path.with_name("scratch")

    def filters_alone(_: object) -> None:
        for _ in local_fragment_rows(plan, compacted):
            pass

    def rebuild_alone(_: object) -> None:
        shutil.rmtree(scratch, ignore_errors=True)
        location = scratch / INDEX_FILE_NAME
        rows = local_fragment_rows(plan, compacted)
        total = fragment_rows_to_index(plan, compacted)
        with IndexFileWriter(location) as sink:
            index = assemble("id", plan.items, plan.probability, rows, total, None, sink)
            sink.finish(index)
        assert not isinstance(write_hierarchy_of(location, index, index.build_coarse or {}), str)

    seconds = best_of(
        {
            "pruner update": lambda _: update_index(path, "id"),
            "rebuild of the compacted fragments alone": rebuild_alone,
            "their zone filters alone (no file)": filters_alone,
            "pruner full rebuild": lambda _: build_index(path, "id"),
        },
        path,
        repeat,
    )
    shutil.rmtree(scratch, ignore_errors=True)
    against(
        report,
        f"Compaction: {rows:,} rows in {fragments} fragments and {added:,} in {small} small "
        f"ones ({before} fragments) compacted into {after}; the update indexes "
        f"{len(plan.add)}, drops {len(plan.drop)}, keeps {len(plan.kept)}",
        seconds,
        "rebuild of the compacted fragments alone",
        1.2,
    )
    value = int(extra[len(extra) // 2])
    for when in ("before the update", "after the update"):
        if when == "after the update":
            update_index(path, "id")
        ds = lance.dataset(str(path))
        got = measure(
            {"": lambda _, ds=ds: ds.to_table(filter=f"id = {value}")}, repeat=repeat, warmup=0
        )[""]
        unindexed = ds.stats.index_stats("id_idx")["num_unindexed_rows"]
        report.note(
            f"Lance's own point lookup on a compacted row {when}: {got.best():7.1f} ms, "
            f"{got.answer.num_rows} row; rows its index does not cover (scanned): {unindexed:,}"
        )


def main() -> None:
    made = common.parser(__doc__, rows=20_000_000, fragments=20, repeat=3)
    made.add_argument("--append", type=float, default=0.01, help="share of rows appended")
    made.add_argument("--small", type=int, default=200, help="small appends to compact")
    made.add_argument("--compacted", type=float, default=0.1, help="their rows, a share of --rows")
    args = common.parse(made, lance, np, pa)
    print(f"items per zone {DEFAULT_ITEMS:,}")
    report = Report()
    append(args.rows, args.fragments, args.append, args.repeat, report)
    compaction(args.rows, args.fragments, args.small, args.compacted, args.repeat, report)


if __name__ == "__main__":
    main()
