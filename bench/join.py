"""A fact table joined on its indexed key to a small filtered dimension (issue 19).

The fact table: ``--rows`` rows in ``--fragments`` fragments, ``id`` a shuffled permutation
(int64) with a bloom index, and a payload; as a Lance dataset (the one ``bench/lookup.py``
uses, cached under ``bench/data/``) and as a Parquet directory. The dimension: 10,000 rows,
``id`` drawn from the fact's ids, ``region`` one of 100 values (so a region holds 100 rows),
one Parquet file. The query::

    SELECT count(*), sum(f.payload) FROM f JOIN d ON f.id = d.id WHERE d.region = 'r07'

pruner reads the dimension's 100 keys of region r07 at run time, looks them up in the fact's
index and has the engine scan only their zones. Measured side by side, best of ``--repeat``:
the engine through pruner against the engine alone (DuckDB over ``lance.dataset`` and over
``read_parquet``; DataFusion ``register_parquet``), each with a table opened per query (as a
new process would) and warm. Target: pruner >= 5x faster than the engine alone.

Run it (from the project root)::

    .venv/bin/python bench/join.py                         # 20M rows, 200 fragments
    .venv/bin/python bench/join.py --rows 2000000 --fragments 20
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import datafusion
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
ROW_GROUP = 8192  # rows per Parquet row group: a zone reads its own group, not its file
SQL = (
    "SELECT count(*) AS n, sum(f.payload) AS total "
    "FROM f JOIN d ON f.id = d.id WHERE d.region = 'r07'"
)


def _facts(rows: int, fragments: int) -> dict[str, Path]:
    lance_path = DATA_DIR / f"lookup-{rows}-{fragments}.lance"  # bench/lookup.py's table
    parquet_path = DATA_DIR / f"join-{rows}-{fragments}-{ROW_GROUP}.parquet"
    if not (lance_path.exists() and lance.dataset(str(lance_path)).count_rows() == rows):
        shutil.rmtree(lance_path, ignore_errors=True)
        ids = np.random.default_rng(11).permutation(rows).astype(np.int64)
        table = pa.table({"id": ids, "payload": pa.array(ids * 3)})
        per = -(-rows // fragments)
        lance.write_dataset(table, str(lance_path), max_rows_per_file=per, max_rows_per_group=per)
        build_index(lance_path, "id")
    if not (parquet_path / "_pruner" / "id").exists():
        shutil.rmtree(parquet_path, ignore_errors=True)
        parquet_path.mkdir(parents=True)
        for number, fragment in enumerate(lance.dataset(str(lance_path)).get_fragments()):
            pq.write_table(
                fragment.to_table(),
                parquet_path / f"part-{number:04d}.parquet",
                row_group_size=ROW_GROUP,
            )
        build_index(parquet_path, "id")
    return {"lance": lance_path, "parquet": parquet_path}


def _dimension(rows: int) -> Path:
    path = DATA_DIR / f"join-dim-{rows}"
    if path.exists():
        return path
    path.mkdir(parents=True)
    rng = np.random.default_rng(5)
    ids = rng.choice(rows, 10_000, replace=False).astype(np.int64)
    regions = [f"r{i % 100:02d}" for i in range(10_000)]
    pq.write_table(pa.table({"id": ids, "region": regions}), path / "d.parquet")
    return path


def _best(run: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def _duckdb_alone(fact: Path, dim: Path, kind: str) -> pa.Table:
    con = duckdb.connect()
    if kind == "lance":
        con.register("f", lance.dataset(str(fact)))
    else:
        con.execute(f"CREATE VIEW f AS SELECT * FROM read_parquet('{fact}/*.parquet')")
    con.execute(f"CREATE VIEW d AS SELECT * FROM read_parquet('{dim}/*.parquet')")
    return con.sql(SQL).to_arrow_table()


def _datafusion_alone(fact: Path, dim: Path) -> pa.Table:
    context = datafusion.SessionContext()
    context.register_parquet("f", str(fact))
    context.register_parquet("d", str(dim))
    return context.sql(SQL).to_arrow_table()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print_header(duckdb, datafusion, lance, pa, np)
    facts = _facts(args.rows, args.fragments)
    dim = _dimension(args.rows)
    print(
        f"fact: {args.rows:,} rows, {args.fragments} fragments; dimension 10,000 rows, "
        f"100 of them in region r07"
    )
    print(SQL)
    cases = [
        ("duckdb", "lance", lambda: _duckdb_alone(facts["lance"], dim, "lance")),
        ("duckdb", "parquet", lambda: _duckdb_alone(facts["parquet"], dim, "parquet")),
        ("datafusion", "parquet", lambda: _datafusion_alone(facts["parquet"], dim)),
    ]
    for engine, kind, alone in cases:
        tables = {"f": facts[kind], "d": dim}
        opened = {"f": open_table(facts[kind]), "d": open_table(dim)}

        def cold(engine: str = engine, tables: dict[str, Path] = tables) -> pa.Table:
            fresh = {name: open_table(path) for name, path in tables.items()}
            return pruner.query(SQL, fresh, engine=engine)

        def warm(engine: str = engine, opened: dict = opened) -> pa.Table:  # type: ignore[type-arg]
            return pruner.query(SQL, opened, engine=engine)

        alone_s, expected = _best(alone, args.repeat)
        cold_s, got_cold = _best(cold, args.repeat)
        warm_s, got_warm = _best(warm, args.repeat)
        assert isinstance(expected, pa.Table)
        for got in (got_cold, got_warm):
            assert isinstance(got, pa.Table)
            assert got.to_pylist() == expected.to_pylist(), (got, expected)
        scan = next(
            s for s in pruner.explain(SQL, opened, dialect=engine).scans if s.scan.alias == "f"
        )
        print(
            f"{engine} over {kind}: pruner {alone_s / cold_s:.1f}x faster opened per query, "
            f"{alone_s / warm_s:.1f}x warm, than {engine} alone (alone {alone_s * 1e3:.0f} ms); "
            f"f: {scan.zones_selected:,} of {scan.zones_total:,} zones read (target >= 5x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
