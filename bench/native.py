"""Point lookups on Parquet files that carry only their own bloom filters (no pruner index).

pruner probes the files' filters itself (pruner.index.native: the 32-byte block each key
points at, per row group, read by offset) and has the engine read only the row groups that
may match; the engines alone read the same filters their own way. Data: fixtures.lookup_data's
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

import common
import datafusion
import duckdb
import fixtures
import pyarrow as pa
from common import Report, measure, verdict
from engines import datafusion_alone, duckdb_alone, pruned

import pruner
from pruner.index import parquet_index_path

TARGET = 2.0


def main() -> None:
    made = common.parser(__doc__, rows=[1_000_000], repeat=10)
    made.add_argument("--copies", nargs="*", default=["bloom8k", "bloom"])
    args = common.parse(made, pruner, duckdb, datafusion, pa)
    report = Report()
    for rows in args.rows:
        data = fixtures.lookup_data(rows)
        present, absent, uuids = fixtures.key_kinds(data, rows)
        keys = {"present id": present, "absent id": absent, "absent trace_id": uuids}
        for copy in args.copies:
            path = data.path(copy)
            for column in ("id", "trace_id"):
                assert not parquet_index_path(path, column).exists(), "native filters only"
            probe = pruner.explain(fixtures.key_sql(present[0]), {"t": path}, check=False)
            (scan,) = probe.scans
            report.note(
                f"{rows:,} rows, {copy}: {scan.zones_total} row groups with filters; a "
                f"present id selects {scan.zones_selected} ({scan.terms[0].reason})"
            )
            lines = []
            for label, listed in keys.items():
                sqls = [fixtures.key_sql(k) for k in listed]
                for state in ("warm", "cold"):
                    warm = state == "warm"
                    # One engine's cases at a time: a query run right after DataFusion's
                    # took up to twice its time (common.turn_order), whichever engine ran it.
                    got: dict[str, float] = {}
                    for engine, alone in (
                        ("DuckDB", duckdb_alone({"t": path}, "no" if warm else "connection")),
                        ("DataFusion", datafusion_alone({"t": path}, reopen=not warm)),
                    ):
                        opened = "once" if warm else "path"
                        mine = pruned({"t": path}, engine.lower(), opened)
                        cases = {f"{engine} alone": alone, f"pruner on {engine}": mine}
                        for name, case in measure(
                            cases, sqls, args.repeat, check=fixtures.trace_ids
                        ).items():
                            got[name] = case.median()
                    best_alone = min(got["DuckDB alone"], got["DataFusion alone"])
                    best_pruner = min(got["pruner on DuckDB"], got["pruner on DataFusion"])
                    ratio = best_alone / best_pruner
                    times = [f"{ms:.1f}" for ms in got.values()]
                    lines.append(
                        [label, state, *times, f"{ratio:.1f}", verdict(ratio, TARGET, True)]
                    )
            report.table(
                f"{rows:,} rows, {copy}: median ms; best alone / best pruner (target {TARGET}x)",
                ["key", "state", *got, "best alone / best pruner", "target"],
                lines,
            )


if __name__ == "__main__":
    main()
