"""Spark point lookups: pruner's zone bloom indexes against Spark reading everything.

The data is :mod:`point_lookup`'s (default 5,000,000 rows in 50 fragments, cached under
``bench/data/point_lookup/``, generated when missing): ``id`` a shuffled unique int64,
``trace_id`` a random UUID string, as a Lance dataset and as Parquet files (one row group
per file), both with pruner indexes, and as Parquet with native bloom filters.

Each query is ``SELECT * FROM t WHERE id = K`` (or ``trace_id = 'uuid'``), K cycling over 20
present keys, on one local SparkSession (``local[2]``, started once, untimed). After a
warm-up the cases run round-robin, one of each per repetition:

* pruned: ``pruner.query(sql, {"t": table}, engine="spark")`` (table opened once): the
  selected Lance zones through the ``pruner`` data source, or the selected Parquet files
  through Spark's own Parquet reader;
* unpruned: the same call with ``prune=False`` (Lance: every fragment through the data
  source; Parquet: every file through Spark's reader);
* source: ``spark.read.format("pruner").option("pushdown", "true").load(path)
  .where("id = K")``, a new DataFrame per query: the data source alone, pruning with the
  filter Spark pushes into it;
* native bloom (context): Spark's Parquet reader on the bloom-filter files (a view made once).

Every answer must be the key's one row. It prints medians and p90 and the ratio pruned vs
unpruned against the target (>= 3x).

Run it (from the project root)::

    .venv/bin/python bench/spark_lookup.py
    .venv/bin/python bench/spark_lookup.py --rows 500000 --fragments 10 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyspark

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import print_header  # noqa: E402 (bench/ is sys.path[0] when run as a script)
from point_lookup import COLUMNS, load_data  # noqa: E402

import pruner  # noqa: E402
from pruner.adapters import spark as spark_adapter  # noqa: E402

TARGET = 3.0


def sql_of(column: str, key: Any) -> str:
    value = str(key) if column == "id" else "'" + str(key) + "'"
    return f"SELECT * FROM t WHERE {column} = {value}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--fragments", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per case")
    args = parser.parse_args()
    print_header(pyspark, pa, np)
    data = load_data(args.rows, args.fragments)
    spark = spark_adapter.session("local[2]")
    tables = {kind: pruner.open_table(data.path(kind)) for kind in ("lance", "parquet")}
    spark.read.parquet(*data.files("bloom")).createOrReplaceTempView("bloom")

    cases: dict[tuple[str, str, str], Callable[[Any], pa.Table]] = {}
    for column in COLUMNS:
        for kind, table in tables.items():
            for path, prune in (("pruned", True), ("unpruned", False)):

                def run(key: Any, c: str = column, t: Any = table, p: bool = prune) -> pa.Table:
                    return pruner.query(sql_of(c, key), {"t": t}, engine="spark", prune=p)

                cases[(kind, path, column)] = run

            def source(key: Any, c: str = column, k: str = kind) -> pa.Table:
                reader = spark.read.format("pruner").option("pushdown", "true")
                frame = reader.load(str(data.path(k)))
                return frame.where(sql_of(c, key).split("WHERE ", 1)[1]).toArrow()

            cases[(kind, "source", column)] = source

        def bloom(key: Any, c: str = column) -> pa.Table:
            return spark.sql(sql_of(c, key).replace("FROM t", "FROM bloom")).toArrow()

        cases[("bloom", "native", column)] = bloom

    times: dict[tuple[str, str, str], list[float]] = {case: [] for case in cases}
    began = time.perf_counter()
    for repetition in range(-2, args.repeat):  # two warm-up rounds
        for case, run in cases.items():
            key = data.keys[case[2]][repetition % len(data.keys[case[2]])]
            start = time.perf_counter()
            result = run(key)
            elapsed = time.perf_counter() - start
            found = result.column(case[2]).to_pylist()
            if found != [key]:
                raise SystemExit(f"{case} key {key!r}: wrong answer {found!r}")
            if repetition >= 0:
                times[case].append(elapsed)
    print(
        f"\n{len(cases)} cases x {args.repeat} runs (after 2 warm-up rounds), round-robin, "
        f"{time.perf_counter() - began:.0f} s; every answer is the key's one row\n"
    )
    print(f"{'data':8} {'path':9} {'column':9} {'median ms':>10} {'p90 ms':>8}")
    for (kind, path, column), seconds in times.items():
        median, p90 = np.median(seconds) * 1000, np.percentile(seconds, 90) * 1000
        print(f"{kind:8} {path:9} {column:9} {median:10.1f} {p90:8.1f}")
    print("\nratios of medians, other / pruned [target]")
    for column in COLUMNS:
        for kind in tables:
            pruned = np.median(times[(kind, "pruned", column)])
            unpruned = np.median(times[(kind, "unpruned", column)]) / pruned
            source = np.median(times[(kind, "source", column)]) / pruned
            bloom = np.median(times[("bloom", "native", column)]) / pruned
            verdict = "ok" if unpruned >= TARGET else "MISS"
            print(
                f"  {kind:8} {column:9} unpruned {unpruned:5.1f}x [{TARGET:g} {verdict}], "
                f"data source alone {source:4.1f}x, native bloom Parquet {bloom:4.1f}x"
            )
    spark.stop()


if __name__ == "__main__":
    main()
