"""Point lookups: pruner's zone bloom indexes against full scans and native Parquet blooms.

The data is fixtures.lookup_data's (default 5,000,000 rows in 50 fragments of 100,000 rows,
cached under ``bench/data/point_lookup/``, each copy generated only when missing): ``id`` a
shuffled unique int64, ``trace_id`` a random version-4 UUID string, ``amount`` a float64. The
same rows are stored six times:

1. ``lance``: a Lance dataset (``max_rows_per_file`` = rows per fragment), with pruner
   indexes on ``id`` and ``trace_id`` (defaults: 8,192-row zones, 32 KiB filters). They are
   committed Lance BLOOMFILTER indexes, so Lance's own scanner uses them too whenever an
   engine pushes ``id = K`` into it;
1b. ``lance_noidx``: the same dataset with no index at all (what a full scan costs);
2. ``parquet``: one Parquet file per fragment (pyarrow's default row groups: one per file),
   with pruner indexes in ``_pruner/``;
2b. ``parquet8k``: as 2 with 8,192-row row groups (a zone is then a row group: the finest
   unit DataFusion's Python API can read, and below it DuckDB decodes the whole group);
3. ``bloom``: the same files with native Parquet bloom filters on ``id`` and ``trace_id``
   (ndv = rows per row group, fpp 0.01), one row group per file;
3b. ``bloom8k``: as 3 but with 8,192-row row groups (one filter per 8,192 rows: the
   granularity of pruner's zones).

Each query is ``SELECT * FROM t WHERE id = K`` (or ``trace_id = 'uuid'``) for a fixed list of
20 present keys, cycled. The SQL carries the key as a literal, so every query is a new SQL
text: pruner's analysis cache is cleared before each timed call (untimed) so no query is
answered from a cached parse. For each engine (DuckDB, DataFusion), after a warm-up, the
cases are run round-robin (one of each per repetition, so machine noise hits all alike):

* pruned: ``pruner.query(sql, {"t": table}, engine=E)``, ``table = pruner.open_table(path)``
  opened once (indexes loaded by the warm-up); cold: the path string instead (dataset opened,
  index files read inside every call; the OS page cache is warm);
* unpruned: the same call with ``prune=False`` (the same adapter reads the whole table, on
  Lance with ``use_scalar_index=False``); also on ``lance_noidx``, which has no index to use;
* native: the engine alone, table registered once: DuckDB on one reused connection
  (``read_parquet([files])``, or the indexed ``LanceDataset`` registered: Lance then uses its
  own index), DataFusion on one context (``register_parquet`` with ``pushdown_filters=true``
  and ``bloom_filter_on_read=true``); on the bloom-filter files (3, 3b) and, for context, on
  the plain files of 2. DataFusion has no native Lance case: its dataset scan calls
  ``get_fragments(filter=...)``, which a plain ``LanceDataset`` refuses (checked and printed).

Every timed query must return exactly the one row with the key, and all answers (pruned,
unpruned, native) must be equal, key by key. It prints median and p90 ms, the ratios against
the targets (pruned vs unpruned >= 15x, pruned vs native bloom Parquet >= 3x) and where a
pruned query spends its time: ``pruner.plan`` (parse + analyze + probe) against the
execution, and inside the execution the per-query engine connection and source binding.

Run it (from the project root)::

    .venv/bin/python bench/point_lookup.py
    .venv/bin/python bench/point_lookup.py --rows 500000 --fragments 10 --repeat 5
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import common
import datafusion
import duckdb
import fixtures
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import Case, Report, measure, verdict
from engines import datafusion_alone, datafusion_context, duckdb_alone, parquet_scan, pruned
from fixtures import COLUMNS, INDEXED, KEYS, LookupData, sql_of, where

import pruner
from pruner.adapters import datafusion as df_adapter
from pruner.adapters import duckdb as duck_adapter
from pruner.analyzer import templates
from pruner.reads import parquet_parts

WARMUP = 3
ENGINES = ("duckdb", "datafusion")
PARQUET_COPIES = ("bloom", "bloom8k", "parquet")  # read natively by the engines
TARGET_UNPRUNED = 15.0
TARGET_NATIVE = 3.0

# ------------------------------------------------------------------------------- checks


def check_layout(data: LookupData, rows: int, fragments: int) -> None:
    """The copies are what they claim: fragments, row groups, indexes and filters."""
    for copy in ("lance", "lance_noidx"):
        ds = lance.dataset(str(data.path(copy)))
        indexes = sorted(i.field_names[0] for i in ds.describe_indices())
        assert ds.count_rows() == rows and len(ds.get_fragments()) == fragments
        assert indexes == (sorted(COLUMNS) if copy == "lance" else []), (copy, indexes)
        print(f"  {copy}: {fragments} fragments, Lance indexes on {indexes or 'nothing'}")
    for copy in ("parquet", "parquet8k", "bloom", "bloom8k"):
        files = data.files(copy)
        assert len(files) == fragments, (copy, len(files))
        groups = filters = 0
        for f in files:
            md = pq.ParquetFile(f).metadata
            groups += md.num_row_groups
            for g in range(md.num_row_groups):
                for c in range(md.num_columns):
                    filters += md.row_group(g).column(c).bloom_filter_offset is not None
        print(f"  {copy}: {len(files)} files, {groups} row groups, {filters} bloom filters")
        assert (filters == 0) == copy.startswith("parquet")
    for copy in INDEXED:
        table = pruner.open_table(data.path(copy))
        assert sorted(table.indexed_columns()) == sorted(COLUMNS), (copy, table.indexed_columns())


def check_native_blooms(data: LookupData) -> None:
    """DuckDB's parquet_bloom_probe and DataFusion's EXPLAIN ANALYZE show the filters used."""
    con = duckdb.connect()
    for copy in ("bloom", "bloom8k"):
        listing = "[" + ", ".join(duck_adapter.quote_string(f) for f in data.files(copy)) + "]"
        for column in COLUMNS:
            probed = excluded = 0
            for key in data.keys[column]:
                literal = key if column == "id" else duck_adapter.quote_string(key)
                found = con.execute(
                    f"SELECT file_name, row_group_id, bloom_filter_excludes FROM "
                    f"parquet_bloom_probe({listing}, '{column}', {literal})"
                ).fetchall()
                probed += len(found)
                excluded += sum(bool(e) for _, _, e in found)
                kept = [f for f, _, e in found if not e]
                hit = con.execute(
                    f"SELECT filename FROM read_parquet({listing}, filename = true) "
                    f"WHERE {where(column, key)}"
                ).fetchall()
                assert len(hit) == 1 and hit[0][0] in kept, (copy, column, key)
            print(
                f"  DuckDB parquet_bloom_probe {copy}.{column}: {excluded:,} of {probed:,} "
                f"row groups excluded over {len(data.keys[column])} keys; the key's file never"
            )
    for copy in ("bloom", "bloom8k"):
        ctx = datafusion_context({"t": data.path(copy)})
        for column in COLUMNS:
            key = data.keys[column][0]
            out = ctx.sql(f"EXPLAIN ANALYZE SELECT * FROM t WHERE {where(column, key)}")
            text = "\n".join(str(v) for v in out.to_arrow_table().column("plan").to_pylist())
            found = re.search(r"row_groups_pruned_bloom_filter=(\d+) total → (\d+) matched", text)
            assert found is not None, text
            total, matched = int(found.group(1)), int(found.group(2))
            print(
                f"  DataFusion EXPLAIN ANALYZE {copy}.{column}: row_groups_pruned_bloom_filter "
                f"{total} total -> {matched} matched"
            )
            assert 1 <= matched < total, (copy, column, total, matched)


def check_datafusion_lance(data: LookupData) -> None:
    """Can DataFusion read the indexed LanceDataset with a filter on its own (no pruner)?"""
    ctx = datafusion.SessionContext()
    ctx.register_dataset("t", lance.dataset(str(data.path("lance"))))
    try:
        ctx.sql(sql_of("id", data.keys["id"][0])).to_arrow_table()
    except Exception as err:  # DataFusion wraps the Python error in its own
        found = re.search(r"ValueError\('([^']*)'\)", str(err))
        reason = found.group(1) if found else str(err)[:200]
        print(f"  DataFusion on a plain LanceDataset with WHERE fails ({reason}): no native case")
    else:
        print("  DataFusion on a plain LanceDataset with WHERE works (not timed)")


# -------------------------------------------------------------------------------- cases


def make_cases(data: LookupData, engines: tuple[str, ...]) -> list[Case]:
    """Per engine and column, the cases; each is named ``engine source kind column`` and
    runs the lookup of the turn's key (its slot in ``data.keys``)."""
    opened = {c: pruner.open_table(data.path(c)) for c in (*INDEXED, "lance_noidx")}
    cases = []
    for engine in engines:
        natives: dict[str, Callable[[str], pa.Table]] = {}
        if engine == "duckdb":  # one connection: the LanceDataset registered, files read
            shared = duckdb_alone({"t": data.path("lance")})
            natives["lance"] = select_from(shared, "t")
            for copy in PARQUET_COPIES:
                natives[copy] = select_from(shared, parquet_scan(data.files(copy)))
        else:
            # No native Lance case: DataFusion's dataset scan calls get_fragments(filter=...),
            # which a plain LanceDataset refuses (checked in check_datafusion_lance).
            for copy in PARQUET_COPIES:
                natives[copy] = select_from(datafusion_alone({"t": data.path(copy)}), "t")
        for column in COLUMNS:

            def lookup(
                run: Callable[[str], pa.Table], text: Callable = sql_of, column: str = column
            ) -> Callable[[int], pa.Table]:
                """``run`` of the turn's key's ``text``: its query, or condition."""
                return lambda slot: run(text(column, data.keys[column][slot]))

            for source, kind, prune in (
                ("lance", "pruned", True),
                ("lance", "cold", True),
                ("lance", "unpruned", False),
                ("lance_noidx", "unpruned", False),
                ("parquet", "pruned", True),
                ("parquet", "cold", True),
                ("parquet", "unpruned", False),
                ("parquet8k", "pruned", True),
                ("parquet8k", "unpruned", False),
            ):
                cold = kind == "cold"
                target = str(data.path(source)) if cold else opened[source]
                run = pruned({"t": target}, engine, "path" if cold else "once", False, prune=prune)
                cases.append(Case(f"{engine} {source} {kind} {column}", lookup(run), new_texts))
            for copy, native in natives.items():
                cases.append(
                    Case(f"{engine} {copy} native {column}", lookup(native, where), new_texts)
                )
    return cases


def select_from(alone: Callable[[str], pa.Table], table: str) -> Callable[[str], pa.Table]:
    return lambda condition: alone(f"SELECT * FROM {table} WHERE {condition}")


def new_texts() -> None:
    """pruner's cache of SQL texts cleared (untimed, before every case's call): every query
    is new to pruner."""
    templates.clear(texts_only=True)


def the_row(data: LookupData) -> Callable[[int, pa.Table], list[dict[str, Any]]]:
    """The ``check``: an answer is exactly the turn's key's row, the same in every case."""

    def check(slot: int, answer: pa.Table) -> list[dict[str, Any]]:
        rows = answer.select(["id", "trace_id", "amount"]).to_pylist()
        assert len(rows) == 1 and rows[0]["id"] == data.keys["id"][slot], (slot, rows)
        return rows

    return check


# ------------------------------------------------------------------------------- report


def report_cases(cases: dict[str, Case], report: Report) -> None:
    rows = [[*n.split(), f"{c.median():.2f}", f"{c.p90():.2f}"] for n, c in cases.items()]
    columns = ["engine", "data", "path", "column", "median ms", "p90 ms"]
    report.table("Point lookups", columns, rows)

    def median(engine: str, source: str, kind: str, column: str) -> float:
        found = cases.get(f"{engine} {source} {kind} {column}")
        return found.median() if found is not None else float("nan")

    lines = []
    for engine in dict.fromkeys(n.split()[0] for n in cases):
        for source in INDEXED:
            for column in COLUMNS:
                pruned_ms = median(engine, source, "pruned", column)
                full = "lance_noidx" if source == "lance" else source
                parts = []
                for other, target in (
                    (median(engine, source, "unpruned", column), TARGET_UNPRUNED),
                    (median(engine, full, "unpruned", column), TARGET_UNPRUNED),
                    (median(engine, "bloom", "native", column), TARGET_NATIVE),
                    (median(engine, "bloom8k", "native", column), TARGET_NATIVE),
                    (median(engine, "lance", "native", column), None),
                ):
                    ratio = other / pruned_ms
                    if target is None:
                        parts.append(
                            "-" if source != "lance" or ratio != ratio else f"{ratio:.1f}x"
                        )
                    else:
                        parts.append(f"{ratio:.1f}x [{target:g} {verdict(ratio, target, True)}]")
                lines.append([engine, source, column, *parts])
    report.table(
        "Ratios of medians, other / pruned (> 1: pruned is faster) [target]",
        ["engine", "data", "column", "unpruned", "full scan", "bloom", "bloom8k", "native lance"],
        lines,
    )
    print(
        "unpruned = the same call with prune=False; full scan = prune=False on lance_noidx (no "
        "index; for parquet* the same as unpruned); bloom / bloom8k = the engine's own read of "
        "the bloom-filter Parquet; native lance = DuckDB alone on the indexed LanceDataset "
        "(Lance uses its own index)"
    )


def breakdown(data: LookupData, engines: tuple[str, ...], repeat: int, report: Report) -> None:
    """Where a pruned query's time goes: plan (uncached / cached analysis) vs execution. The
    parts follow one another in each turn (the cached plan needs the plan before it; the
    execution, its plan), so they are timed in sequence, not in turns."""
    lines = []
    opened = {c: pruner.open_table(data.path(c)) for c in INDEXED}
    for engine in engines:
        shared_con = duckdb.connect()
        shared_ctx = datafusion.SessionContext()
        for source, table in opened.items():
            for column in COLUMNS:
                times: dict[str, list[float]] = {}
                for rep in range(max(repeat, WARMUP) + WARMUP):
                    sql = sql_of(column, data.keys[column][rep % KEYS])
                    templates.clear(texts_only=True)
                    t0 = time.perf_counter()
                    prepared = pruner.plan(sql, {"t": table}, dialect=engine)
                    t1 = time.perf_counter()
                    pruner.plan(sql, {"t": table}, dialect=engine)
                    t2 = time.perf_counter()
                    result = pruner.query(sql, {"t": table}, engine=engine, prepared=prepared)
                    t3 = time.perf_counter()
                    if engine == "duckdb":
                        reused = duck_adapter.query(
                            sql, {"t": table}, connection=shared_con, prepared=prepared
                        )
                    else:
                        reused = df_adapter.query(
                            sql, {"t": table}, context=shared_ctx, prepared=prepared
                        )
                    t4 = time.perf_counter()
                    connect, bind = _setup(engine, table, prepared.selections["t"])
                    assert result.num_rows == 1 and reused.num_rows == 1
                    if rep >= WARMUP:
                        parts = (t1 - t0, t2 - t1, t3 - t2, connect, bind, t4 - t3)
                        for name, value in zip(BREAKDOWN, parts, strict=True):
                            times.setdefault(name, []).append(value)
                medians = [f"{statistics.median(times[n]) * 1e3:.2f}" for n in BREAKDOWN]
                lines.append([engine, source, column, *medians, _reads(table, prepared)])
    report.table(
        "Where pruned time goes (medians, ms; each part timed on its own)",
        ["engine", "data", "column", *BREAKDOWN, "what the engine reads"],
        lines,
    )
    print(
        "plan = pruner.plan (parse + analyze + probe; analysis cache cleared), plan* = the same "
        "SQL again (analysis cached), exec = pruner.query(prepared=plan), of which conn = the "
        "adapter's per-query connection (DuckDB: a cursor of its shared database; DataFusion: "
        "a new SessionContext) and bind = registering the pruned source; reuse = the adapter's "
        "query(prepared=plan) on one connection / context reused for all queries"
    )


BREAKDOWN = ("plan", "plan*", "exec", "conn", "bind", "reuse")


def _reads(table: pruner.Table, prepared: pruner.Plan) -> str:
    zones, zones_total = prepared.zones()
    read, total = prepared.rows()
    text = f"{zones} of {zones_total} zones, {read:,} of {total:,} rows"
    if table.kind == "parquet":
        groups = rows = 0
        for part in parquet_parts(table, prepared.selections["t"]):
            sizes = part.file.row_group_rows
            chosen = range(len(sizes)) if part.row_groups is None else part.row_groups
            groups += len(chosen)
            rows += sum(sizes[g] for g in chosen)
        text += f" -> {groups} row group(s), {rows:,} rows"
    return text


def _setup(engine: str, table: pruner.Table, selection: Any) -> tuple[float, float]:
    """Seconds the adapter spends per query before the engine runs: its connection (DuckDB:
    a cursor of the shared in-memory database; DataFusion: a new SessionContext), then
    binding the pruned source (Lance dataset / DuckDB view / pyarrow dataset)."""
    prepared = pruner.Plan({"t": table}, {"t": selection})
    began = time.perf_counter()
    if engine == "duckdb":
        cursor = duck_adapter.shared_connection().cursor()
        connected = time.perf_counter()
        for name, bound in prepared.tables.items():
            duck_adapter.register(cursor, name, bound, prepared.selections[name])
        cursor.close()
    else:
        ctx = datafusion.SessionContext()
        connected = time.perf_counter()
        with df_adapter.registered(ctx, prepared):
            pass
    return connected - began, time.perf_counter() - connected


# --------------------------------------------------------------------------------- main


def main() -> None:
    made = common.parser(__doc__, rows=5_000_000, fragments=50, repeat=20)
    made.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    args = common.parse(made, duckdb, datafusion, lance, pa, np, pruner)
    engines = tuple(e for e in args.engines.split(",") if e)
    data = fixtures.lookup_data(args.rows, args.fragments)
    check_layout(data, args.rows, args.fragments)
    check_native_blooms(data)
    if "datafusion" in engines:
        check_datafusion_lance(data)
    report = Report()
    cases = make_cases(data, engines)
    began = time.perf_counter()
    got = measure(cases, range(KEYS), args.repeat, warmup=WARMUP, check=the_row(data))
    print(
        f"\n{len(cases)} cases x {args.repeat} runs (after {WARMUP} warm-up runs each), "
        f"round-robin, {time.perf_counter() - began:.0f} s; every answer is the key's one row, "
        "the same in every case"
    )
    report_cases(got, report)
    breakdown(data, engines, args.repeat, report)


if __name__ == "__main__":
    main()
