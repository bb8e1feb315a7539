"""Spark over a partitioned Delta table: pruner against Spark alone over the live files.

The table: ``--rows`` rows (``id`` a shuffled unique int64, ``payload``, ``part`` one of
``--partitions`` strings) written by ``write_deltalake(..., partition_by=["part"])``, one
file per partition, with a pruner index of ``id``; cached under
``bench/data/spark_partitions/``. The queries, on one local SparkSession (``local[2]``,
started untimed)::

    SELECT count(*) FROM t                      -- nothing to prune
    SELECT payload FROM t WHERE id = K          -- the index selects one file
    SELECT count(*) FROM t WHERE part = 'p3'    -- the log's partition values select

Spark alone reads the live files (``DeltaTable(path).file_uris()``; Spark 4.3 cannot load
Delta's connector offline) with its own partition discovery (``basePath``: the ``part=p3``
folders, right for this table's folders as deltalake writes them). pruner reads the table
as :func:`pruner.query` with ``engine="spark"`` does: every file in one scan where the
folders name the log's values, as here. Every answer is checked equal.

    .venv/bin/python bench/spark_partitions.py
    .venv/bin/python bench/spark_partitions.py --rows 300000 --partitions 30 --repeat 5
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import common
import deltalake
import fixtures
import numpy as np
import pyarrow as pa
import pyspark
from common import Report, measure

import pruner
from pruner.adapters.spark import session
from pruner.index import build_index

SEED = 44


def table(rows: int, partitions: int) -> Path:
    def make(path: Path) -> None:
        data = fixtures.id_table(rows, SEED)
        parts = pa.array([f"p{i % partitions}" for i in range(rows)])
        deltalake.write_deltalake(path, data.append_column("part", parts), partition_by=["part"])

    where = fixtures.data_path("spark_partitions", rows=rows, partitions=partitions)
    path = fixtures.cached(where, make)
    if not (path / "_pruner" / "id").is_dir():
        build_index(path, "id")
    return path


def main() -> None:
    made = common.parser(__doc__, rows=3_000_000, repeat=5)
    made.add_argument("--partitions", type=int, default=30)
    args = common.parse(made, deltalake, pyspark, pa, np)
    path = table(args.rows, args.partitions)
    spark = session()
    files = [uri.removeprefix("file://") for uri in deltalake.DeltaTable(str(path)).file_uris()]
    held = pruner.open_table(path)

    def alone(sql: str) -> list[Any]:
        frame = spark.read.option("basePath", str(path)).parquet(*files)
        frame.createOrReplaceTempView("t")
        return sorted(tuple(row) for row in spark.sql(sql).collect())

    def ours(sql: str) -> list[Any]:
        found = pruner.query(sql, {"t": held}, engine="spark")
        return sorted(tuple(row.values()) for row in found.to_pylist())

    key = int(fixtures.id_table(args.rows, SEED).column("id")[args.rows // 3].as_py())
    report = Report()
    lines = []
    for sql in [
        "SELECT count(*) AS n FROM t",
        f"SELECT payload FROM t WHERE id = {key}",
        "SELECT count(*) AS n FROM t WHERE part = 'p3'",
    ]:
        got = measure(
            {"Spark alone": alone, "pruner on Spark": ours},
            [sql],
            args.repeat,
            check=lambda _, answer: answer,
        )
        ratio = got["Spark alone"].median() / got["pruner on Spark"].median()
        lines.append(
            [
                sql,
                f"{got['Spark alone'].median():.0f}",
                f"{got['pruner on Spark'].median():.0f}",
                f"{ratio:.2f}x",
            ]
        )
    report.table(
        f"Spark, {args.rows:,} rows in {args.partitions} partitions, median ms of {args.repeat}",
        ["query", "Spark alone ms", "pruner ms", "speed-up"],
        lines,
    )


if __name__ == "__main__":
    main()
