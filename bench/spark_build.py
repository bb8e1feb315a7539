"""Spark index build scaling: the zone bloom index of an int64 column on local[1] vs local[2].

Builds the index of ``id`` (a shuffled permutation of 0..rows-1, int64) of a generated Lance
dataset (default 20,000,000 rows in 20 fragments of 1M rows, Lance's default file size;
cached under ``bench/data/``) with ``build_zone_index_spark`` -- one Spark task per
fragment, only zone rows collected -- on a session with master ``local[1]``, then on one
with ``local[2]`` (a master is fixed when its SparkContext starts: the first session is
stopped before the second starts). Each session first runs one untimed build that starts
its Python workers; then ``--repeat`` timed builds, best kept. For context it also times
pruner's local build (``build_lance_index``: NumPy in a thread per core, no Spark) in the
same run. Timings cover the build only (no index file written, nothing committed) and
include opening the dataset; the defaults are used (8192 items per zone, probability
0.00057).

It prints seconds, ns/row, and the ratios local[1] / local[2] (target >= 1.5) and
local[2] / local build, then checks (untimed) that each Spark build gave the local build's
index, zone for zone and filter for filter.

Run it (from the project root)::

    .venv/bin/python bench/spark_build.py
    .venv/bin/python bench/spark_build.py --rows 2000000 --fragments 8 --repeat 1
"""

from __future__ import annotations

import common
import fixtures
import lance
import numpy as np
import pyarrow as pa
import pyspark
from common import Report, measure, timed

from pruner.adapters.spark import session
from pruner.adapters.spark.build import build_zone_index_spark
from pruner.index import build_lance_index

MASTERS = ("local[1]", "local[2]")
TARGET = 1.5


def main() -> None:
    made = common.parser(__doc__, rows=20_000_000, fragments=20, repeat=3)
    args = common.parse(made, np, pa, lance, pyspark)
    print(f"rows={args.rows:,} fragments={args.fragments} repeat={args.repeat}")
    path = fixtures.build_table(args.rows, args.fragments, names=False)
    active = pyspark.sql.SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    got = {}
    for master in MASTERS:
        started, spark = timed(lambda master=master: session(master))
        assert spark.sparkContext.master == master, spark.sparkContext.master
        first, _ = timed(lambda spark=spark: build_zone_index_spark(path, "id", spark=spark))
        print(
            f"  {master}: session start {started:.1f} s, first build (starts workers) {first:.2f} s"
        )
        build = {f"spark {master}": lambda _, s=spark: build_zone_index_spark(path, "id", spark=s)}
        got.update(measure(build, repeat=args.repeat, warmup=0))
        spark.stop()
    # the local build's warm-up warms the page cache as the Spark warm-up run did
    got.update(
        measure(
            {"local (NumPy, threads)": lambda _: build_lance_index(path, "id")}, repeat=args.repeat
        )
    )
    seconds = {name: case.best() / 1000 for name, case in got.items()}
    local = got["local (NumPy, threads)"].answer
    report = Report()
    report.table(
        f"Best of {args.repeat}; index of 'id' (int64), {local.num_zones:,} zones, build only "
        "(nothing written)",
        ["build", "seconds", "ns/row"],
        [[n, f"{s:.3f}", f"{s / args.rows * 1e9:.1f}"] for n, s in seconds.items()],
    )
    one, two = seconds["spark local[1]"], seconds["spark local[2]"]
    report.target("spark local[1] / local[2]", one / two, TARGET, above=True)
    print(
        f"spark local[2] / local build: {two / seconds['local (NumPy, threads)']:.2f}x "
        "(> 1: the local build is faster on this machine)"
    )
    print("\ncheck (untimed): each Spark build equals the local build")
    identical = True
    for master in MASTERS:
        problems = common.index_differences(got[f"spark {master}"].answer, local)
        identical = identical and not problems
        print(f"  {master}: {'identical' if not problems else 'DIFFERS: ' + ', '.join(problems)}")
    print(f"identical: {identical}")


if __name__ == "__main__":
    main()
