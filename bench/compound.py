"""A compound key against the intersection of its columns' own indexes.

The data (fixtures.compound_tables, cached under ``bench/data/``): ``--rows`` rows whose pair
``(a, b)`` is unique while ``a`` and ``b`` each repeat across the table (``a`` takes rows /
1000 values, ``b`` 1000, every pair once, rows shuffled), as a Lance dataset and a Parquet
directory of ``--fragments`` fragments. Each table gets indexes on ``a``, on ``b`` and on the
key ``(a, b)``. For ``--lookups`` present pairs, ``SELECT * FROM t WHERE a = ? AND b = ?``:

- zones selected with the compound index against the intersection of the single-column
  indexes (the compound index hidden). Target (issue 19): >= 10x fewer zones;
- the query on DuckDB through pruner against DuckDB alone (``lance.dataset(path)`` /
  ``read_parquet``), all the lookups a run, best of ``--repeat`` runs taken in turns, as a
  ratio; every run's answers must agree.

Run it (from the project root)::

    .venv/bin/python bench/compound.py                          # 4M rows, 40 fragments
    .venv/bin/python bench/compound.py --rows 1000000 --fragments 10
"""

from __future__ import annotations

import common
import duckdb
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Report, measure
from engines import duckdb_alone
from fixtures import B_VALUES

import pruner
from pruner.table import open_table

SQL = "SELECT * FROM t WHERE a = ? AND b = ?"


def main() -> None:
    made = common.parser(__doc__, rows=4_000_000, fragments=40, repeat=3)
    made.add_argument("--lookups", type=int, default=20)
    args = common.parse(made, duckdb, lance, pa, np)
    tables = fixtures.compound_tables(args.rows, args.fragments)
    pairs = np.random.default_rng(1).integers(0, args.rows, args.lookups)
    lookups = [[int(p // B_VALUES), f"b{p % B_VALUES:04d}"] for p in pairs.tolist()]
    print(
        f"{args.rows:,} rows, {args.fragments} fragments; a: {args.rows // B_VALUES:,} values, "
        f"b: {B_VALUES:,} values, (a, b) unique; {len(lookups)} present pairs"
    )
    report = Report()
    lines = []
    for kind, path in tables.items():
        table = open_table(path)
        singles = open_table(path)
        singles._keys = []  # the compound index hidden
        compound_zones = single_zones = total = 0
        for key in lookups:
            scan = pruner.explain(SQL, {"t": table}, parameters=key).scans[0]
            alone = pruner.explain(SQL, {"t": singles}, parameters=key).scans[0]
            compound_zones += scan.zones_selected
            single_zones += alone.zones_selected
            total = scan.zones_total
        fewer = single_zones / max(compound_zones, 1)
        report.target(f"{kind}: zones selected, a's and b's / the compound's", fewer, 10, True)
        duck = duckdb_alone({"t": path})
        got = measure(
            {
                "DuckDB alone": lambda _, duck=duck: [duck(SQL, key) for key in lookups],
                "pruner": lambda _, t=table: [
                    pruner.query(SQL, {"t": t}, parameters=key) for key in lookups
                ],
            },
            repeat=args.repeat,
            warmup=0,
            check=lambda _, answers: [sorted(a.column("payload").to_pylist()) for a in answers],
        )
        alone_ms, pruned_ms = (got[n].best() / len(lookups) for n in ("DuckDB alone", "pruner"))
        lines.append(
            [
                kind,
                f"{total:,}",
                f"{compound_zones / len(lookups):.1f}",
                f"{single_zones / len(lookups):.1f}",
                f"{fewer:.0f}",
                f"{alone_ms:.1f}",
                f"{pruned_ms:.1f}",
                f"{alone_ms / pruned_ms:.1f}",
            ]
        )
    report.table(
        f"{len(lookups)} lookups: zones selected per lookup, and ms per lookup on DuckDB (best "
        f"of {args.repeat})",
        [
            "data",
            "zones",
            "compound (a, b)",
            "a's and b's intersected",
            "x fewer (target >= 10)",
            "DuckDB alone",
            "pruner",
            "alone / pruner",
        ],
        lines,
    )


if __name__ == "__main__":
    main()
