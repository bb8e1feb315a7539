"""Spark point lookups: pruner's zone bloom indexes against Spark reading everything.

The data is fixtures.lookup_data's (default 5,000,000 rows in 50 fragments, cached under
``bench/data/point_lookup/``, generated when missing): ``id`` a shuffled unique int64,
``trace_id`` a random UUID string, as a Lance dataset and as Parquet files (one row group
per file), both with pruner indexes, and as Parquet with native bloom filters.

Each query is ``SELECT * FROM t WHERE id = K`` (or ``trace_id = 'uuid'``), K cycling over 20
present keys, on one local SparkSession (``local[2]``, started once, untimed). After two
warm-up rounds the cases run round-robin, one of each per repetition:

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

import time
from collections.abc import Callable
from typing import Any

import common
import fixtures
import numpy as np
import pyarrow as pa
import pyspark
from common import Report, measure, verdict
from fixtures import COLUMNS, KEYS, sql_of, where

import pruner
from pruner.adapters import spark as spark_adapter

TARGET = 3.0


def main() -> None:
    made = common.parser(__doc__, rows=5_000_000, fragments=50, repeat=10)
    args = common.parse(made, pyspark, pa, np)
    data = fixtures.lookup_data(args.rows, args.fragments)
    spark = spark_adapter.session("local[2]")
    tables = {kind: pruner.open_table(data.path(kind)) for kind in ("lance", "parquet")}
    spark.read.parquet(*data.files("bloom")).createOrReplaceTempView("bloom")

    cases: dict[str, Callable[[int], pa.Table]] = {}
    for column in COLUMNS:
        for kind, table in tables.items():
            for path, prune in (("pruned", True), ("unpruned", False)):

                def run(slot: int, c: str = column, t: Any = table, p: bool = prune) -> pa.Table:
                    sql = sql_of(c, data.keys[c][slot])
                    return pruner.query(sql, {"t": t}, engine="spark", prune=p)

                cases[f"{kind} {path} {column}"] = run

            def source(slot: int, c: str = column, k: str = kind) -> pa.Table:
                reader = spark.read.format("pruner").option("pushdown", "true")
                frame = reader.load(str(data.path(k)))
                return frame.where(where(c, data.keys[c][slot])).toArrow()

            cases[f"{kind} source {column}"] = source

        def bloom(slot: int, c: str = column) -> pa.Table:
            return spark.sql(f"SELECT * FROM bloom WHERE {where(c, data.keys[c][slot])}").toArrow()

        cases[f"bloom native {column}"] = bloom

    def the_row(slot: int, answer: pa.Table) -> list[dict[str, Any]]:
        found = answer.select(["id", "trace_id"]).to_pylist()
        if found != [{c: data.keys[c][slot] for c in COLUMNS}]:
            raise SystemExit(f"key {slot}: wrong answer {found!r}")
        return found

    began = time.perf_counter()
    got = measure(cases, range(KEYS), args.repeat, warmup=2, check=the_row)
    print(
        f"\n{len(cases)} cases x {args.repeat} runs (after 2 warm-up rounds), round-robin, "
        f"{time.perf_counter() - began:.0f} s; every answer is the key's one row"
    )
    report = Report()
    rows = [[*n.split(), f"{c.median():.1f}", f"{c.p90():.1f}"] for n, c in got.items()]
    report.table("Spark point lookups", ["data", "path", "column", "median ms", "p90 ms"], rows)
    lines = []
    for column in COLUMNS:
        for kind in tables:
            pruned = got[f"{kind} pruned {column}"].median()
            unpruned = got[f"{kind} unpruned {column}"].median() / pruned
            source = got[f"{kind} source {column}"].median() / pruned
            bloom = got[f"bloom native {column}"].median() / pruned
            lines.append(
                [
                    kind,
                    column,
                    f"{unpruned:.1f}x [{TARGET:g} {verdict(unpruned, TARGET, True)}]",
                    f"{source:.1f}x",
                    f"{bloom:.1f}x",
                ]
            )
    report.table(
        "Ratios of medians, other / pruned [target]",
        ["data", "column", "unpruned", "data source alone", "native bloom Parquet"],
        lines,
    )
    spark.stop()


if __name__ == "__main__":
    main()
