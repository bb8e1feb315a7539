"""A compound key against the intersection of its columns' own indexes.

The data (cached under ``bench/data/``): ``--rows`` rows whose pair ``(a, b)`` is unique
while ``a`` and ``b`` each repeat across the table (``a`` takes rows / 1000 values, ``b``
1000, every pair once, rows shuffled), as a Lance dataset and a Parquet directory of
``--fragments`` fragments. Each table gets indexes on ``a``, on ``b`` and on the key
``(a, b)``. For ``--lookups`` present pairs, ``SELECT * FROM t WHERE a = ? AND b = ?``:

- zones selected with the compound index against the intersection of the single-column
  indexes (the compound index hidden). Target (issue 19): >= 10x fewer zones;
- the query on DuckDB through pruner against DuckDB alone (``lance.dataset(path)`` /
  ``read_parquet``), best of ``--repeat``, as a ratio.

Run it (from the project root)::

    .venv/bin/python bench/compound.py                          # 4M rows, 40 fragments
    .venv/bin/python bench/compound.py --rows 1000000 --fragments 10
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402

import pruner  # noqa: E402
from pruner.index import build_index  # noqa: E402
from pruner.table import open_table  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"
B_VALUES = 1000


def _data(rows: int) -> pa.Table:
    pairs = np.random.default_rng(7).permutation(rows).astype(np.int64)
    return pa.table(
        {
            "a": pairs // B_VALUES,
            "b": pa.array([f"b{x:04d}" for x in (pairs % B_VALUES).tolist()]),
            "payload": pairs * 3,
        }
    )


def _tables(rows: int, fragments: int) -> dict[str, Path]:
    lance_path = DATA_DIR / f"compound-{rows}-{fragments}.lance"
    parquet_path = DATA_DIR / f"compound-{rows}-{fragments}.parquet"
    ready = lance_path / "_pruner" / "a,b" / "bloomfilter.lance"
    if ready.exists() and (parquet_path / "_pruner" / "a,b" / "bloomfilter.lance").exists():
        return {"lance": lance_path, "parquet": parquet_path}
    shutil.rmtree(lance_path, ignore_errors=True)
    shutil.rmtree(parquet_path, ignore_errors=True)
    table = _data(rows)
    per = -(-rows // fragments)
    lance.write_dataset(table, str(lance_path), max_rows_per_file=per, max_rows_per_group=per)
    parquet_path.mkdir(parents=True)
    for number, start in enumerate(range(0, rows, per)):
        pq.write_table(table.slice(start, per), parquet_path / f"part-{number:04d}.parquet")
    for path in (lance_path, parquet_path):
        for target in ("a", "b", ["a", "b"]):
            build_index(path, target)
    return {"lance": lance_path, "parquet": parquet_path}


def _best(run, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--fragments", type=int, default=40)
    parser.add_argument("--lookups", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print_header(duckdb, lance, pa, np)
    tables = _tables(args.rows, args.fragments)
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, args.rows, args.lookups)
    lookups = [(int(p // B_VALUES), f"b{p % B_VALUES:04d}") for p in pairs.tolist()]
    sql = "SELECT * FROM t WHERE a = ? AND b = ?"
    print(
        f"{args.rows:,} rows, {args.fragments} fragments; a: {args.rows // B_VALUES:,} values, "
        f"b: {B_VALUES:,} values, (a, b) unique; {len(lookups)} present pairs"
    )
    for kind, path in tables.items():
        table = open_table(path)
        singles = open_table(path)
        singles._keys = []
        compound_zones, single_zones, total = 0, 0, 0
        for key in lookups:
            scan = pruner.explain(sql, {"t": table}, parameters=list(key)).scans[0]
            alone = pruner.explain(sql, {"t": singles}, parameters=list(key)).scans[0]
            compound_zones += scan.zones_selected
            single_zones += alone.zones_selected
            total = scan.zones_total
        print(
            f"{kind}: zones selected per lookup (of {total:,}): compound (a, b) "
            f"{compound_zones / len(lookups):.1f}, a's and b's indexes intersected "
            f"{single_zones / len(lookups):.1f}: {single_zones / max(compound_zones, 1):.0f}x "
            "fewer with the compound index (target >= 10x)"
        )
        con = duckdb.connect()
        if kind == "lance":
            dataset = lance.dataset(str(path))
            con.register("t", dataset)
        else:
            con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}/*.parquet')")
        for key in lookups[:3]:  # the answers agree
            expected = con.sql(sql, params=list(key)).to_arrow_table()
            got = pruner.query(sql, {"t": table}, parameters=list(key))
            assert sorted(got.column("payload").to_pylist()) == sorted(
                expected.column("payload").to_pylist()
            ), key

        def alone_run(con: duckdb.DuckDBPyConnection = con) -> None:
            for key in lookups:
                con.sql(sql, params=list(key)).to_arrow_table()

        def pruner_run(table=table) -> None:  # type: ignore[no-untyped-def]
            for key in lookups:
                pruner.query(sql, {"t": table}, parameters=list(key))

        alone_s = _best(alone_run, args.repeat)
        pruned_s = _best(pruner_run, args.repeat)
        print(
            f"{kind}: DuckDB, {len(lookups)} lookups: pruner {alone_s / pruned_s:.1f}x faster "
            f"than DuckDB alone ({pruned_s / len(lookups) * 1e3:.1f} ms vs "
            f"{alone_s / len(lookups) * 1e3:.1f} ms per lookup)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
