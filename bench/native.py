"""Point lookups on Parquet files that carry only their own bloom filters (no pruner index).

pruner probes the files' filters itself (pruner.index.native: the 32-byte block each key
points at, per row group, read by offset) and has the engine read only the row groups that
may match; the engines alone read the same filters their own way. Data: point_lookup.py's
``bloom8k`` copy (8,192-row row groups, filters on ``id`` and ``trace_id``, fpp 0.01), which
has no pruner index; ``bloom`` (one row group per file) as a second layout.

Cases, per key kind (present ``id``, absent ``id`` outside the range, absent ``trace_id``
inside the range), medians of round-robin runs in one process, one engine's cases at a time
(a query right after DataFusion's ran up to twice as long, whichever engine ran it):

* DuckDB alone: ``read_parquet`` on a connection kept open (warm) / a new connection per
  query (cold);
* DataFusion alone: ``register_parquet`` on a context kept open / a new context per query;
* pruner on each engine: a table opened once (warm) / the path per query (cold).

Target (issue 18): pruner >= 2x faster than the best engine alone.

    .venv/bin/python bench/native.py --rows 1000000 5000000
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import datafusion
import duckdb
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import point_lookup  # noqa: E402 (bench/ is sys.path[0] when run as a script)
from common import print_header  # noqa: E402

import pruner  # noqa: E402
from pruner.analyzer import templates  # noqa: E402
from pruner.demo import uuid_strings  # noqa: E402
from pruner.index import parquet_index_path  # noqa: E402

ROWS_PER_FRAGMENT = 100_000
TARGET = 2.0


def duck_alone(path: Path, warm: bool) -> Callable[[str], pa.Table]:
    glob = str(path / "*.parquet").replace("'", "''")
    kept = duckdb.connect()
    kept.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")

    def run(sql: str) -> pa.Table:
        con = kept
        if not warm:
            con = duckdb.connect()
            con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")
        return con.sql(sql).to_arrow_table()

    return run


def datafusion_alone(path: Path, warm: bool) -> Callable[[str], pa.Table]:
    kept = point_lookup.native_datafusion_context(path)

    def run(sql: str) -> pa.Table:
        context = kept if warm else point_lookup.native_datafusion_context(path)
        return context.sql(sql).to_arrow_table()

    return run


def pruner_run(path: Path, engine: str, warm: bool) -> Callable[[str], pa.Table]:
    table = pruner.open_table(path)

    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        return pruner.query(sql, {"t": table if warm else path}, engine=engine)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--copies", nargs="*", default=["bloom8k", "bloom"])
    args = parser.parse_args()
    print_header(pruner, duckdb, datafusion, pa)
    for rows in args.rows:
        data = point_lookup.load_data(rows, max(1, rows // ROWS_PER_FRAGMENT))
        present = [int(k) for k in data.keys["id"]]
        absent = [rows + 1 + 7919 * i for i in range(len(present))]
        uuids = uuid_strings(np.random.default_rng(7), len(present)).to_pylist()
        for copy in args.copies:
            path = data.path(copy)
            for column in ("id", "trace_id"):
                assert not parquet_index_path(path, column).exists(), "native filters only"
            probe = pruner.explain(point_lookup.key_sql(present[0]), {"t": path}, check=False)
            (scan,) = probe.scans
            print(
                f"\n{rows:,} rows, {copy}: {scan.zones_total} row groups with filters; a "
                f"present id selects {scan.zones_selected} ({scan.terms[0].reason})"
            )
            for label, keys in (
                ("present id", present),
                ("absent id", absent),
                ("absent trace_id", uuids),
            ):
                for state in ("warm", "cold"):
                    warm = state == "warm"
                    # One engine's cases at a time: a query run right after DataFusion's
                    # took up to twice its time (common.rotated), whichever engine ran it.
                    got = {
                        **point_lookup.measure_keys(
                            {
                                "DuckDB alone": duck_alone(path, warm),
                                "pruner on DuckDB": pruner_run(path, "duckdb", warm),
                            },
                            keys,
                            args.repeat,
                        ),
                        **point_lookup.measure_keys(
                            {
                                "DataFusion alone": datafusion_alone(path, warm),
                                "pruner on DataFusion": pruner_run(path, "datafusion", warm),
                            },
                            keys,
                            args.repeat,
                        ),
                    }
                    best_alone = min(got["DuckDB alone"], got["DataFusion alone"])
                    best_pruner = min(got["pruner on DuckDB"], got["pruner on DataFusion"])
                    ratio = best_alone / best_pruner
                    verdict = "met" if ratio >= TARGET else "MISSED"
                    detail = ", ".join(f"{name} {ms:.1f} ms" for name, ms in got.items())
                    print(
                        f"  {label:16s} {state}: best alone / best pruner = {ratio:4.1f}x "
                        f"(target {TARGET}x: {verdict}); {detail}"
                    )


if __name__ == "__main__":
    main()
