"""A fact table joined on its indexed key to a small filtered dimension (issue 19).

The fact table: ``--rows`` rows in ``--fragments`` fragments, ``id`` a shuffled permutation
(int64) with a bloom index, and a payload; as a Lance dataset (the one ``bench/lookup.py``
uses, cached under ``bench/data/``) and as a Parquet directory. The dimension: 10,000 rows,
``id`` drawn from the fact's ids, ``region`` one of 100 values (so a region holds 100 rows),
one Parquet file (fixtures.join_tables). The query::

    SELECT count(*), sum(f.payload) FROM f JOIN d ON f.id = d.id WHERE d.region = 'r07'

pruner reads the dimension's 100 keys of region r07 at run time, looks them up in the fact's
index and has the engine scan only their zones. Measured side by side, best of ``--repeat``:
the engine through pruner against the engine alone (DuckDB over ``lance.dataset`` and over
``read_parquet``; DataFusion ``register_parquet``; a new connection or context per query),
each with a table opened per query (as a new process would) and warm. Target: pruner >= 5x
faster than the engine alone.

Run it (from the project root)::

    .venv/bin/python bench/join.py                         # 20M rows, 200 fragments
    .venv/bin/python bench/join.py --rows 2000000 --fragments 20
"""

from __future__ import annotations

import common
import datafusion
import duckdb
import fixtures
import lance
import numpy as np
import pyarrow as pa
from common import Report, measure
from engines import datafusion_alone, duckdb_alone, pruned

import pruner

SQL = (
    "SELECT count(*) AS n, sum(f.payload) AS total "
    "FROM f JOIN d ON f.id = d.id WHERE d.region = 'r07'"
)


def main() -> None:
    made = common.parser(__doc__, rows=20_000_000, fragments=200, repeat=3)
    args = common.parse(made, duckdb, datafusion, lance, pa, np)
    tables = fixtures.join_tables(args.rows, args.fragments)
    print(
        f"fact: {args.rows:,} rows, {args.fragments} fragments; dimension "
        f"{fixtures.DIMENSION_ROWS:,} rows, 100 of them in region r07\n{SQL}"
    )
    report = Report()
    lines = []
    for engine, kind in (("duckdb", "lance"), ("duckdb", "parquet"), ("datafusion", "parquet")):
        paths = {"f": tables[kind], "d": tables["dimension"]}
        if engine == "duckdb":
            alone = duckdb_alone(paths, reopen="connection")
        else:
            alone = datafusion_alone(paths, reopen=True, native_filters=False)
        got = measure(
            {
                "alone": alone,
                "opened per query": pruned(paths, engine, "each", clear=False),
                "warm": pruned(paths, engine, clear=False),
            },
            [SQL],
            args.repeat,
            warmup=0,
            check=lambda _, answer: answer.to_pylist(),
        )
        opened = {name: pruner.open_table(path) for name, path in paths.items()}
        explained = pruner.explain(SQL, opened, dialect=engine).scans
        scan = next(s for s in explained if s.scan.alias == "f")
        alone_ms = got["alone"].best()
        cold, warm = (alone_ms / got[n].best() for n in ("opened per query", "warm"))
        lines.append(
            [
                engine,
                kind,
                f"{alone_ms:.0f}",
                f"{cold:.1f}",
                f"{warm:.1f}",
                f"{scan.zones_selected:,} of {scan.zones_total:,}",
            ]
        )
    report.table(
        f"Join, best of {args.repeat}: pruner's speed-up over the engine alone (target >= 5x)",
        ["engine", "fact", "alone ms", "x opened per query", "x warm", "f: zones read"],
        lines,
    )


if __name__ == "__main__":
    main()
