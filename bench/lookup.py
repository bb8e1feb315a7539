"""Batch key lookup: ``pruner.lookup`` and ``pruner.find`` against the engine alone.

A generated Lance dataset (``id``: a shuffled permutation, int64, and a payload; cached under
``bench/data/``) of ``--rows`` rows in ``--fragments`` fragments, indexed on ``id``; then
``--keys`` keys of which ``--present`` (a share) exist. Measured side by side in one run,
best of ``--repeat``:

- ``pruner.lookup`` of all the keys, against separate point probes through
  ``pruner.explain`` (``SELECT * FROM t WHERE id = K``, one per key, on one opened table):
  ``--sample`` of them are timed and the time per key scaled to all keys.
  Target (issue 19): lookup >= 20x faster.
- ``pruner.find`` (DuckDB) against DuckDB alone running the semi-join
  ``SELECT * FROM t WHERE id IN (SELECT k FROM keys)`` over ``lance.dataset(path)``, the
  keys an Arrow table. Target (issue 19): find >= 5x faster. Best of ``--repeat`` on one
  opened table; the first call on a newly opened table is printed too.

Run it (from the project root)::

    .venv/bin/python bench/lookup.py                   # 20M rows, 200 fragments
    .venv/bin/python bench/lookup.py --rows 2000000 --fragments 20 --repeat 2
    .venv/bin/python bench/lookup.py --items 1024       # zones of 1,024 rows
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import lance
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402

import pruner  # noqa: E402
from pruner.index import DEFAULT_ITEMS, build_index  # noqa: E402
from pruner.table import open_table  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"


def _dataset(rows: int, fragments: int, items: int = DEFAULT_ITEMS) -> Path:
    suffix = "" if items == DEFAULT_ITEMS else f"-items{items}"
    path = DATA_DIR / f"lookup-{rows}-{fragments}{suffix}.lance"
    if path.exists() and lance.dataset(str(path)).count_rows() == rows:
        return path
    shutil.rmtree(path, ignore_errors=True)
    ids = np.random.default_rng(11).permutation(rows).astype(np.int64)
    table = pa.table({"id": ids, "payload": pa.array(ids * 3)})
    per = -(-rows // fragments)
    lance.write_dataset(table, str(path), max_rows_per_file=per, max_rows_per_group=per)
    build_index(path, "id", items=items)
    return path


def _best(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--present", type=float, default=0.01)
    parser.add_argument("--sample", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--items", type=int, default=DEFAULT_ITEMS, help="rows per zone of the index on id"
    )
    args = parser.parse_args()
    DATA_DIR.mkdir(exist_ok=True)
    print_header(lance, np, pa, duckdb)
    path = _dataset(args.rows, args.fragments, args.items)
    rng = np.random.default_rng(5)
    present = int(args.keys * args.present)
    keys = np.concatenate(
        [
            rng.choice(args.rows, present, replace=False),
            rng.integers(args.rows, 1 << 62, args.keys - present),
        ]
    ).astype(np.int64)
    rng.shuffle(keys)
    key_list = keys.tolist()
    print(
        f"{args.rows:,} rows in {args.fragments} fragments, zones of {args.items:,} rows; "
        f"{args.keys:,} keys, {present:,} of them present"
    )

    table = open_table(path)
    seconds, found = _best(lambda: pruner.lookup(table, "id", key_list), args.repeat)
    sample = key_list[: args.sample]
    started = time.perf_counter()
    for key in sample:
        pruner.explain(f"SELECT * FROM t WHERE id = {key}", {"t": table}, check=False)
    per_key = (time.perf_counter() - started) / len(sample)
    separate = per_key * len(key_list)
    selection = found.selection()
    print(
        f"  pruner.lookup of {len(key_list):,} keys: {seconds:.3f} s; their ranges: "
        f"{selection.num_rows:,} rows in {selection.num_ranges:,} ranges"
    )
    print(
        f"  separate point probes through pruner.explain: {per_key * 1000:.2f} ms per key "
        f"(timed on {len(sample):,}), {separate:.1f} s for all"
    )
    ratio = separate / seconds
    print(f"  target: lookup >= 20x faster: {ratio:.1f}x ({'met' if ratio >= 20 else 'NOT met'})")

    keys_table = pa.table({"k": pa.array(key_list, pa.int64())})
    connection = duckdb.connect()
    dataset = lance.dataset(str(path))
    connection.register("t", dataset)
    connection.register("keys", keys_table)
    semi = "SELECT * FROM t WHERE id IN (SELECT k FROM keys)"
    alone, expected = _best(lambda: connection.sql(semi).to_arrow_table(), args.repeat)
    # The first find of a newly opened table reads and checks the companion's units; later
    # ones on the same table use them as checked (pruner.index.hierarchy, _KEEP_BYTES).
    first, _ = _best(lambda: pruner.find(open_table(path), "id", key_list), 1)
    mine, got = _best(lambda: pruner.find(table, "id", key_list), args.repeat)
    assert sorted(got.column("id").to_pylist()) == sorted(expected.column("id").to_pylist())
    print(
        f"  DuckDB alone, semi-join over lance.dataset: {alone:.3f} s, {expected.num_rows:,} rows"
    )
    print(f"  pruner.find (DuckDB):                       {mine:.3f} s, {got.num_rows:,} rows")
    print(
        f"  pruner.find, first call on a newly opened table: {first:.3f} s "
        f"({alone / first:.2f}x DuckDB alone)"
    )
    ratio = alone / mine
    print(f"  target: find >= 5x faster: {ratio:.2f}x ({'met' if ratio >= 5 else 'NOT met'})")


if __name__ == "__main__":
    main()
