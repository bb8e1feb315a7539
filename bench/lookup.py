"""Batch key lookup: ``pruner.lookup`` and ``pruner.find`` against the engine alone.

A generated Lance dataset (``id``: a shuffled permutation, int64, and a payload;
fixtures.lookup_table, cached under ``bench/data/``) of ``--rows`` rows in ``--fragments``
fragments, indexed on ``id``; then ``--keys`` keys of which ``--present`` (a share) exist.
Measured in one run:

- ``pruner.lookup`` of all the keys (best of ``--repeat``), against separate point probes
  through ``pruner.explain`` (``SELECT * FROM t WHERE id = K``, one per key, on one opened
  table): ``--sample`` of them are timed once and the time per key scaled to all keys.
  Target (issue 19): lookup >= 20x faster.
- ``pruner.find`` (DuckDB) against DuckDB alone running the semi-join
  ``SELECT * FROM t WHERE id IN (SELECT k FROM keys)`` over ``lance.dataset(path)``, the
  keys an Arrow table, side by side. Target (issue 19): find >= 5x faster. Best of
  ``--repeat`` on one opened table; the first call on a newly opened table is printed too.

Run it (from the project root)::

    .venv/bin/python bench/lookup.py                   # 20M rows, 200 fragments
    .venv/bin/python bench/lookup.py --rows 2000000 --fragments 20 --repeat 2
    .venv/bin/python bench/lookup.py --items 1024       # zones of 1,024 rows
"""

from __future__ import annotations

import common
import duckdb
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Report, measure, timed
from engines import duckdb_alone

import pruner
from pruner.index import DEFAULT_ITEMS
from pruner.table import open_table


def main() -> None:
    made = common.parser(__doc__, rows=20_000_000, fragments=200, repeat=3)
    made.add_argument("--keys", type=int, default=100_000)
    made.add_argument("--present", type=float, default=0.01)
    made.add_argument("--sample", type=int, default=2_000)
    made.add_argument("--items", type=int, default=DEFAULT_ITEMS, help="rows per zone of id")
    args = common.parse(made, lance, np, pa, duckdb)
    path = fixtures.lookup_table(args.rows, args.fragments, args.items)
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
    report = Report()
    table = open_table(path)
    sample = key_list[: args.sample]

    def probes(_: object) -> None:
        for key in sample:
            pruner.explain(f"SELECT * FROM t WHERE id = {key}", {"t": table}, check=False)

    lookup = measure(
        {"lookup": lambda _: pruner.lookup(table, "id", key_list)}, repeat=args.repeat, warmup=0
    )
    lookup.update(measure({"probes": probes}, warmup=0))
    seconds = lookup["lookup"].best() / 1000
    per_key = lookup["probes"].best() / 1000 / len(sample)
    selection = lookup["lookup"].answer.selection()
    report.note(
        f"pruner.lookup of {len(key_list):,} keys: {seconds:.3f} s; their ranges: "
        f"{selection.num_rows:,} rows in {selection.num_ranges:,} ranges"
    )
    report.note(
        f"separate point probes through pruner.explain: {per_key * 1000:.2f} ms per key "
        f"(timed on {len(sample):,}), {per_key * len(key_list):.1f} s for all"
    )
    report.target("separate probes / lookup", per_key * len(key_list) / seconds, 20, above=True)

    keys_table = pa.table({"k": pa.array(key_list, pa.int64())})
    semi = duckdb_alone({"t": path, "keys": keys_table})
    # The first find of a newly opened table reads and checks the companion's units; later
    # ones on the same table use them as checked (pruner.index.hierarchy, _KEEP_BYTES).
    first, _ = timed(lambda: pruner.find(open_table(path), "id", key_list))
    got = measure(
        {
            "DuckDB alone, semi-join over lance.dataset": lambda _: semi(
                "SELECT * FROM t WHERE id IN (SELECT k FROM keys)"
            ),
            "pruner.find (DuckDB)": lambda _: pruner.find(table, "id", key_list),
        },
        repeat=args.repeat,
        warmup=0,
        check=lambda _, answer: sorted(answer.column("id").to_pylist()),
    )
    alone, mine = (case.best() / 1000 for case in got.values())
    report.table(
        f"Best of {args.repeat}",
        ["case", "seconds", "rows"],
        [[name, f"{c.best() / 1000:.3f}", f"{c.answer.num_rows:,}"] for name, c in got.items()],
    )
    report.note(
        f"pruner.find, first call on a newly opened table: {first:.3f} s "
        f"({alone / first:.2f}x DuckDB alone)"
    )
    report.target("DuckDB alone / find", alone / mine, 5, above=True)


if __name__ == "__main__":
    main()
