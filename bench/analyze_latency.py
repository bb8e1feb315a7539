"""Query-time cost of pruning: analyze + bind + evaluate on an index of 12,000 zones.

The index is built in memory from real values (``--zones`` zones of ``--items`` int64 ids
each, Lance's default 8,192 items and 32 KiB filters: a 98M-row table's index), and bound to
a table of that many rows. Then, warm (the index loaded and its probe layout built once, as in
a long-running process; analyses of the same SQL text cached), best of ``--repeat`` runs
(each case's back to back):

* ``id = ?``: analyze (cached) + bind one parameter + evaluate -> Selection;
* ``id IN (?, ... 1,000 ?)``: the same with 1,000 parameters;
* ``id IN (1,000 literals)``: a new SQL text each time (parse + analyze + evaluate);
* ``id = <literal>`` cold: parse and analyze an unseen SQL text each time.

Then the analysis alone of a new SQL text each time (what sqlglot's parser decides; no
target): an aggregate with a range (a query that cannot prune) and ``id IN (100 literals)``.

Evaluating is ``select_scans``, what ``pruner.plan`` runs on an analysis. It prints ms per
query, and checks the selections: every probed id's zone is selected. Targets (issue 3):
``id = ?`` under 1 ms, ``id IN (1,000 values)`` under 20 ms.

Run it (from the project root)::

    .venv/bin/python bench/analyze_latency.py
    .venv/bin/python bench/analyze_latency.py --zones 1000 --repeat 3
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import common
import numpy as np
import pyarrow as pa
from common import Report, measure, timed

from pruner import sbbf
from pruner.analyzer import analyze, templates
from pruner.evaluate import select_scans
from pruner.hashing import hash_array
from pruner.index import DEFAULT_ITEMS, DEFAULT_PROBABILITY, ZoneIndex
from pruner.selection import Selection
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


def main() -> None:
    made = common.parser(__doc__, repeat=20)
    made.add_argument("--zones", type=int, default=12_000)
    made.add_argument("--items", type=int, default=DEFAULT_ITEMS)
    args = common.parse(made, np, pa)
    seconds, (table, index) = timed(lambda: build(args.zones, args.items))
    print(
        f"index: {args.zones:,} zones x {index.filter_groups()[0][1].shape[1]:,} B "
        f"({args.zones * args.items:,} rows), built in {seconds:.1f} s"
    )
    seconds, _ = timed(index.prepare_probes)
    print(f"probe layout built once in {seconds:.2f} s (a warm process keeps it)")
    schemas = {"t": table.schema}
    rng = np.random.default_rng(3)
    total = args.zones * args.items

    def query(sql: str, parameters: list[int]) -> Selection:
        analysis = analyze(sql, schemas).with_parameters(parameters)
        return select_scans(analysis, {"t": table})[0].selection

    point = "SELECT * FROM t WHERE id = ?"
    inlist = "SELECT * FROM t WHERE id IN (" + ", ".join(["?"] * 1000) + ")"
    ids = [int(v) for v in rng.integers(0, total, 1000)]
    counter = itertools.count()

    def fresh_inlist(_: object) -> Selection:
        values = ", ".join(map(str, rng.integers(0, total, 1000).tolist()))
        return query(f"SELECT * FROM t WHERE id IN ({values}) -- {next(counter)}", [])

    cases = {
        "id = ? (warm)": (lambda _: query(point, ids[:1]), 1.0),
        "id IN (1,000 ?) (warm)": (lambda _: query(inlist, ids), 20.0),
        "id IN (1,000 literals) (new SQL)": (fresh_inlist, 20.0),
        "id = literal (new SQL, cold parse)": (
            lambda _: query(f"SELECT * FROM t WHERE id = {next(counter)}", []),
            1.0,
        ),
    }
    # Each alone, back to back (taking turns, one would run after the others had pushed its
    # data out of the CPU's caches)
    got = {n: measure({n: run}, repeat=args.repeat, warmup=0)[n] for n, (run, _) in cases.items()}
    report = Report()
    report.table(
        f"Best of {args.repeat}",
        ["query", "best ms", "target ms", "met"],
        [
            [
                name,
                f"{got[name].best():.3f}",
                f"{limit:.1f}",
                common.verdict(got[name].best(), limit),
            ]
            for name, (_, limit) in cases.items()
        ],
    )

    def fresh(make: str) -> Any:
        return lambda _: analyze(make.replace("@", str(next(counter))), schemas)

    hundred = ", ".join(map(str, rng.integers(0, total, 100).tolist()))
    alone = {
        "aggregate with a range": fresh(
            "SELECT id % 7 AS g, count(*) AS n FROM t WHERE id > @ GROUP BY 1 ORDER BY 2 DESC"
        ),
        "id IN (100 literals)": fresh(f"SELECT * FROM t WHERE id IN ({hundred}) AND id <> @"),
    }
    parsed = {n: measure({n: run}, repeat=args.repeat, warmup=1)[n] for n, run in alone.items()}
    report.table(
        f"The analysis alone of a new SQL text, best and median of {args.repeat}",
        ["query", "best ms", "median ms"],
        [[n, f"{parsed[n].best():.3f}", f"{parsed[n].median():.3f}"] for n in alone],
    )
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
