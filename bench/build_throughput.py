"""Zone bloom index build throughput: pruner (numpy) against Lance's own Rust build.

For each of the columns ``id`` (int64) and ``name`` (~20-byte strings) of a generated Lance
dataset (default 5,000,000 rows in 50 fragments, cached under ``bench/data/``), it times,
interleaved and best of ``--repeat`` runs:

* pruner build: ``build_lance_index(path, column)`` -- in memory, returns a ZoneIndex;
* pruner full: ``build_index(path, column)`` -- builds, streams the index file as fragments
  complete, and commits it into the dataset: the same work as Lance's build;
* Lance build: ``lance.dataset(path).create_scalar_index(column, "BLOOMFILTER")`` -- builds,
  writes the index file and commits a new dataset version.

Before each run (untimed) the column's bloom indexes are dropped. Both sides use the
defaults (8192 items per zone, probability 0.00057) and both timings include opening the
dataset. It prints seconds, ns/row and the ratio lance / pruner (> 1.0 means pruner is
faster), then checks (untimed) that pruner's index equals the file Lance wrote, zone for zone.

Run it (from the project root)::

    .venv/bin/python bench/build_throughput.py
    .venv/bin/python bench/build_throughput.py --rows 500000 --fragments 10 --repeat 1
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import common
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Case, Report, measure

from pruner.index import build_index, build_lance_index, list_bloom_indexes, read_index_file

COLUMNS = ("id", "name")


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


def sanity_check(path: Path, column: str, ours: object) -> bool:
    """pruner's index against the file Lance writes (untimed)."""
    drop_bloom_indexes(path, column)
    lance.dataset(str(path)).create_scalar_index(column, index_type="BLOOMFILTER", replace=True)
    infos = [i for i in list_bloom_indexes(str(path)) if i.column == column]
    if len(infos) != 1:
        print(f"  {column}: expected one Lance bloom index, found {len(infos)}")
        return False
    theirs = read_index_file(infos[0].path, column)
    problems = common.index_differences(ours, theirs)
    width = len(theirs.filter_bytes(0)) if theirs.num_zones else 0
    print(
        f"  {column}: {theirs.num_zones} zones, {width} B filters, items={theirs.items} "
        f"probability={theirs.probability} (zone arrays and every filter compared) "
        f"identical: {not problems}"
    )
    for problem in problems:
        print(f"    - {problem}")
    drop_bloom_indexes(path, column)
    return not problems


def main() -> None:
    made = common.parser(__doc__, rows=5_000_000, fragments=50, repeat=3)
    args = common.parse(made, np, pa, lance)
    print(f"rows={args.rows:,} fragments={args.fragments} repeat={args.repeat}")
    path = fixtures.build_table(args.rows, args.fragments, names=True)
    failures = drop_bloom_indexes(path)
    built = {}
    lines = []
    for column in COLUMNS:
        lance.dataset(str(path)).to_table(columns=[column])  # neither pays for a cold cache

        def drop(column: str = column) -> None:
            failures.extend(drop_bloom_indexes(path, column))

        def lance_build(_: object, column: str = column) -> None:
            ds = lance.dataset(str(path))
            ds.create_scalar_index(column, index_type="BLOOMFILTER", replace=True)

        cases = [
            Case("pruner build", lambda _, c=column: build_lance_index(str(path), c), drop),
            Case("pruner full", lambda _, c=column: build_index(str(path), c), drop),
            Case("lance build", lance_build, drop),
        ]
        got = measure(cases, repeat=args.repeat, warmup=0)
        drop()
        built[column] = got["pruner build"].answer
        best = [got[name].best() / 1000 for name in ("pruner build", "pruner full", "lance build")]
        line = [column, f"{args.rows:,}"]
        for seconds in best:
            line += [f"{seconds:.3f}", f"{seconds / args.rows * 1e9:.1f}"]
        lines.append([*line, f"{best[2] / best[0]:.2f}", f"{best[2] / best[1]:.2f}"])
    report = Report()
    report.table(
        f"Best of {args.repeat}; 'full' and lance both build, write the index file and commit "
        "(ratio > 1.0: pruner is faster)",
        [
            "column",
            "rows",
            "pruner build s",
            "ns/row",
            "pruner full s",
            "ns/row",
            "lance build s",
            "ns/row",
            "lance/pruner build",
            "lance/pruner full",
        ],
        lines,
    )
    if failures:
        print("drop_index failed (indexes/versions accumulate):")
        for failure in failures:
            print(f"  {failure}")
    else:
        print("drop_index worked: each Lance run started with no bloom index")
    print("\nsanity check (untimed): pruner's index vs the file Lance wrote")
    identical = [sanity_check(path, column, built[column]) for column in COLUMNS]
    print(f"identical: {all(identical)}")
    try:
        lance.dataset(str(path)).cleanup_old_versions(older_than=timedelta(0))
    except Exception as err:
        print(f"(cleanup_old_versions failed: {type(err).__name__}: {err})")


if __name__ == "__main__":
    main()
