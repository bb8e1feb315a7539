"""Point lookups on a Delta Lake and an Iceberg table: pruner against each format's fastest
correct engine-alone path (issue 40).

The tables: ``--rows`` rows (``id`` a shuffled unique int64, ``payload``) in ``--files`` data
files, written as their users write them (Delta: ``write_deltalake`` appends, then a
checkpoint; Iceberg: one pyiceberg append into a SQLite catalog, its target file size set to
make ``--files`` files), each with a pruner index of ``id`` in ``_pruner/``. Cached under
``bench/data/table_formats/``. The query, a random key per turn::

    SELECT id, payload FROM t WHERE id = K

The engines alone, as the formats' users read them (every answer checked equal):

* Delta: DataFusion over deltalake's ``DeltaTable`` provider; DuckDB over the live files
  (``read_parquet(DeltaTable(path).file_uris())``: DuckDB 2.0 cannot load its Delta
  extension offline).
* Iceberg: pyiceberg's ``scan(row_filter=EqualTo("id", K)).to_arrow()``; DuckDB over the
  files pyiceberg plans.

Each warm (the table, provider or view made once) and opened per query (a new
``DeltaTable`` or metadata read, a new connection or context; pruner: ``open_table`` for each
query). pruner runs on DuckDB. Target: pruner >= 5x faster than the fastest engine alone,
warm and opened per query.

    .venv/bin/python bench/table_formats.py                       # 20M rows, 200 files
    .venv/bin/python bench/table_formats.py --rows 2000000 --files 20
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import datafusion
import deltalake
import duckdb
import fixtures
import numpy as np
import pyarrow as pa
import pyiceberg
from common import Report, measure, sorted_rows

import pruner
from pruner.index import build_index

SEED = 40
SQL = "SELECT id, payload FROM t WHERE id = {key}"


def _chunks(rows: int, files: int) -> list[pa.Table]:
    table = fixtures.id_table(rows, SEED)
    per = -(-rows // files)
    return [table.slice(start, per) for start in range(0, rows, per)]


def delta_table(rows: int, files: int) -> Path:
    def make(path: Path) -> None:
        for chunk in _chunks(rows, files):
            deltalake.write_deltalake(path, chunk, mode="append")
        deltalake.DeltaTable(str(path)).create_checkpoint()

    where = fixtures.data_path("table_formats", kind="delta", rows=rows, files=files)
    path = fixtures.cached(where, make)
    if not (path / "_pruner" / "id").is_dir():
        build_index(path, "id")
    return path


def iceberg_table(rows: int, files: int) -> Any:
    """The table as its catalog loads it (made where it stays: Iceberg's metadata names
    absolute paths, so it is not made in a scratch folder and renamed)."""
    from pyiceberg.catalog.sql import SqlCatalog

    where = fixtures.data_path("table_formats", kind="iceberg", rows=rows, files=files)
    done = where / "made"
    if not done.exists():
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{where}/catalog.db", warehouse=f"file://{where}")
    if not done.exists():
        chunks = _chunks(rows, files)
        catalog.create_namespace("ns")
        table = catalog.create_table(
            "ns.events",
            schema=chunks[0].schema,
            properties={"write.target-file-size-bytes": str(chunks[0].nbytes)},
        )
        table.append(pa.concat_tables(chunks))
        build_index(table, "id")
        done.write_text("")
    return catalog.load_table("ns.events")


def _duckdb_over(files: Callable[[], list[str]], reopen: bool) -> Callable[[str], pa.Table]:
    def view(connection: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        listed = ", ".join(f"'{f}'" for f in files())
        connection.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
        return connection

    kept = view(duckdb.connect())

    def run(sql: str) -> pa.Table:
        return (view(duckdb.connect()) if reopen else kept).sql(sql).arrow().read_all()

    return run


def _delta_cases(path: Path, reopen: bool) -> dict[str, Callable[[str], pa.Table]]:
    def context() -> datafusion.SessionContext:
        made = datafusion.SessionContext()
        made.register_table("t", deltalake.DeltaTable(str(path)))
        return made

    kept = context()

    def provider(sql: str) -> pa.Table:
        made = context() if reopen else kept  # held while DataFusion runs the query
        return made.sql(sql).to_arrow_table()

    return {
        "DataFusion over DeltaTable": provider,
        "DuckDB over the live files": _duckdb_over(
            lambda: deltalake.DeltaTable(str(path)).file_uris(), reopen
        ),
    }


def _iceberg_cases(table: Any, reopen: bool) -> dict[str, Callable[[str], pa.Table]]:
    from pyiceberg.expressions import EqualTo
    from pyiceberg.table import StaticTable

    def loaded() -> Any:
        return StaticTable.from_metadata(table.metadata_location) if reopen else table

    def scan(sql: str) -> pa.Table:
        key = int(sql.rsplit("=", 1)[1])
        found = loaded().scan(row_filter=EqualTo("id", key), selected_fields=("id", "payload"))
        return found.to_arrow()

    def planned() -> list[str]:
        return [task.file.file_path for task in loaded().scan().plan_files()]

    return {"pyiceberg scan": scan, "DuckDB over the planned files": _duckdb_over(planned, reopen)}


def _pruner(source: Any, reopen: bool) -> Callable[[str], pa.Table]:
    held = pruner.open_table(source)

    def run(sql: str) -> pa.Table:
        table = pruner.open_table(source) if reopen else held
        return pruner.query(sql, {"t": table})

    return run


def main() -> None:
    made = common.parser(__doc__, rows=20_000_000, repeat=5)
    made.add_argument("--files", type=int, default=200)
    output = common.ROOT / "docs" / "benchmarks-table-formats.md"
    made.add_argument("--output", type=Path, default=output)
    args = common.parse(made, duckdb, datafusion, deltalake, pyiceberg, pa, np)
    keys = np.random.default_rng(SEED + 1).choice(args.rows, args.repeat + 1, replace=False)
    inputs = [SQL.format(key=int(k)) for k in keys]
    sources: dict[str, Any] = {
        "Delta": delta_table(args.rows, args.files),
        "Iceberg": iceberg_table(args.rows, args.files),
    }
    report = Report()
    lines = []
    for name, source in sources.items():
        for reopen, how in ((False, "warm"), (True, "opened per query")):
            alone = (_delta_cases if name == "Delta" else _iceberg_cases)(source, reopen)
            got = measure(
                {**alone, "pruner on DuckDB": _pruner(source, reopen)},
                inputs,
                args.repeat,
                check=sorted_rows,
            )
            ours = got["pruner on DuckDB"].median()
            fastest = min(alone, key=lambda case: got[case].median())
            ratio = got[fastest].median() / ours
            lines.append(
                [
                    name,
                    how,
                    *(f"{got[case].median():.1f}" for case in alone),
                    f"{ours:.1f}",
                    f"{ratio:.1f}x",
                ]
            )
            report.target(f"{name}, {how}: pruner's speed-up over {fastest}", ratio, 5, True)
    report.table(
        f"Point lookup, {args.rows:,} rows in {args.files} files, median ms of {args.repeat}",
        ["table", "opened", "alone A ms", "alone B ms", "pruner ms", "speed-up"],
        lines,
    )
    report.note(
        "alone A / B: Delta, DataFusion over DeltaTable / DuckDB over the live files; "
        "Iceberg, pyiceberg's scan with a row filter / DuckDB over the planned files"
    )
    command = " ".join(["bench/table_formats.py", *sys.argv[1:]])
    intro = (
        f"Written by `{command}` (see its docstring for the cases). The speed-up is over "
        "the fastest engine-alone path of each row, on the same files in the same run."
    )
    report.write(
        args.output, "Delta and Iceberg point lookups: pruner against the engines alone", intro
    )


if __name__ == "__main__":
    main()
