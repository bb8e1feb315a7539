"""Query-time cost of pruning: analyze + bind + evaluate on an index of 12,000 zones.

The index is built in memory from real values (``--zones`` zones of ``--items`` int64 ids
each, Lance's default 8,192 items and 32 KiB filters: a 98M-row table's index), and bound to
a table of that many rows. Then, warm (the index loaded and its probe layout built once, as in
a long-running process; analyses of the same SQL text cached), best of ``--repeat``:

* ``id = ?``: analyze (cached) + bind one parameter + evaluate -> Selection;
* ``id IN (?, ... 1,000 ?)``: the same with 1,000 parameters;
* ``id IN (1,000 literals)``: a new SQL text each time (parse + analyze + evaluate);
* ``id = <literal>`` cold: parse and analyze an unseen SQL text each time.

It prints ms per query, and checks the selections: every probed id's zone is selected.
Targets (issue 3): ``id = ?`` under 1 ms, ``id IN (1,000 values)`` under 20 ms.

Run it (from the project root)::

    .venv/bin/python bench/analyze_latency.py
    .venv/bin/python bench/analyze_latency.py --zones 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pruner import sbbf
from pruner.analyzer import analyze, templates
from pruner.evaluate import evaluate
from pruner.hashing import hash_array
from pruner.index import DEFAULT_ITEMS, DEFAULT_PROBABILITY, ZoneIndex
from pruner.table import Table

ZONES_PER_FRAGMENT = 100


def build(zones: int, items: int) -> tuple[Table, ZoneIndex]:
    num_bytes = sbbf.optimal_num_bytes(items, DEFAULT_PROBABILITY)
    filters = np.empty((zones, num_bytes), dtype=np.uint8)
    for first in range(0, zones, 500):
        count = min(500, zones - first)
        ids = np.arange(first * items, (first + count) * items, dtype=np.int64)
        hashes, _ = hash_array(pa.array(ids))
        bounds = np.arange(count + 1, dtype=np.int64) * items
        filters[first : first + count] = sbbf.insert(hashes, bounds, num_bytes)
    zone = np.arange(zones)
    index = ZoneIndex(
        column="id",
        items=items,
        probability=DEFAULT_PROBABILITY,
        fragment_id=(zone // ZONES_PER_FRAGMENT).astype(np.uint32),
        zone_start=((zone % ZONES_PER_FRAGMENT) * items).astype(np.uint64),
        zone_length=np.full(zones, items, dtype=np.uint64),
        has_null=np.zeros(zones, dtype=bool),
        filter_data=filters,
    )
    fragments = -(-zones // ZONES_PER_FRAGMENT)
    rows = {
        f: min(ZONES_PER_FRAGMENT, zones - f * ZONES_PER_FRAGMENT) * items for f in range(fragments)
    }
    table = Table(Path("memory"), "lance", pa.schema([("id", pa.int64())]), rows)
    table.use_index("id", index)
    return table, index


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zones", type=int, default=12_000)
    parser.add_argument("--items", type=int, default=DEFAULT_ITEMS)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    began = time.perf_counter()
    table, index = build(args.zones, args.items)
    print(
        f"index: {args.zones:,} zones x {index.filter_groups()[0][1].shape[1]:,} B "
        f"({args.zones * args.items:,} rows), built in {time.perf_counter() - began:.1f} s"
    )
    began = time.perf_counter()
    index.prepare_probes()
    print(
        f"probe layout built once in {time.perf_counter() - began:.2f} s (a warm process keeps it)"
    )
    schemas = {"t": table.schema}
    rng = np.random.default_rng(3)
    total = args.zones * args.items

    def query(sql: str, parameters: list[int]) -> object:
        analysis = analyze(sql, schemas).with_parameters(parameters)
        return evaluate(analysis.scans[0].predicate, table)

    point = "SELECT * FROM t WHERE id = ?"
    inlist = "SELECT * FROM t WHERE id IN (" + ", ".join(["?"] * 1000) + ")"
    ids = [int(v) for v in rng.integers(0, total, 1000)]
    results = []

    def one(sql: str, params: list[int]) -> Callable[[], object]:
        return lambda: results.append(query(sql, params))

    rows = [
        ("id = ? (warm)", best(args.repeat, one(point, ids[:1])), 1.0),
        ("id IN (1,000 ?) (warm)", best(args.repeat, one(inlist, ids)), 20.0),
    ]
    counter = iter(range(10**9))

    def fresh_inlist() -> None:
        values = rng.integers(0, total, 1000).tolist()
        results.append(
            query(
                f"SELECT * FROM t WHERE id IN ({', '.join(map(str, values))}) -- {next(counter)}",
                [],
            )
        )

    def fresh_point() -> None:
        results.append(query(f"SELECT * FROM t WHERE id = {next(counter)}", []))

    rows.append(("id IN (1,000 literals) (new SQL)", best(args.repeat, fresh_inlist), 20.0))
    rows.append(("id = literal (new SQL, cold parse)", best(args.repeat, fresh_point), 1.0))
    print(f"{'query':<38}{'best ms':>10}{'target ms':>11}  met")
    for name, ms, target in rows:
        print(f"{name:<38}{ms:>10.3f}{target:>11.1f}  {'yes' if ms < target else 'NO'}")

    selection = query(inlist, ids)
    addresses = np.array(ids) // args.items
    fragments = addresses // ZONES_PER_FRAGMENT
    offsets = (addresses % ZONES_PER_FRAGMENT) * args.items
    found = selection.contains(fragments, offsets).all()
    print(
        f"every probed id's zone selected: {bool(found)}; "
        f"zones selected for 1,000 ids: {selection.num_rows // args.items:,} of {args.zones:,}"
    )
    print(f"analysis cache: {templates.info()}")


if __name__ == "__main__":
    main()
