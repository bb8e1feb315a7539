"""Point lookups: pruner's zone bloom indexes against full scans and native Parquet blooms.

The data (default 5,000,000 rows in 50 fragments of 100,000 rows, cached under
``bench/data/point_lookup/``, each copy generated only when missing): ``id`` a shuffled
unique int64, ``trace_id`` a random version-4 UUID string, ``amount`` a float64. The same rows
are stored six times:

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

import argparse
import json
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# Run as a script from a checkout whether or not pruner is installed into the venv.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import medians_of, print_header, rotated  # noqa: E402 (bench/ is sys.path[0] when run as a script)

import pruner  # noqa: E402
from pruner.adapters import datafusion as df_adapter  # noqa: E402
from pruner.adapters import duckdb as duck_adapter  # noqa: E402
from pruner.analyzer import templates  # noqa: E402
from pruner.demo import uuid_strings  # noqa: E402
from pruner.index import list_bloom_indexes, parquet_index_path  # noqa: E402
from pruner.index.hierarchy import Hierarchy, HierarchyUnusable  # noqa: E402
from pruner.reads import parquet_parts  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data" / "point_lookup"
SEED = 20240601
KEYS = 20
WARMUP = 3
COLUMNS = ("id", "trace_id")
ENGINES = ("duckdb", "datafusion")
COPIES = ("lance", "lance_noidx", "parquet", "parquet8k", "bloom", "bloom8k")
INDEXED = ("lance", "parquet", "parquet8k")
PARQUET_COPIES = ("bloom", "bloom8k", "parquet")  # read natively by the engines
BLOOM_FPP = 0.01
TARGET_UNPRUNED = 15.0
TARGET_NATIVE = 3.0


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Data:
    root: Path
    keys: dict[str, list[Any]]

    def path(self, copy: str) -> Path:
        return self.root / copy

    def files(self, copy: str) -> list[str]:
        return sorted(str(p) for p in self.path(copy).glob("*.parquet"))


def make_rows(rows: int) -> pa.Table:
    rng = np.random.default_rng(SEED)
    return pa.table(
        {
            "id": pa.array(rng.permutation(rows).astype(np.int64)),
            "trace_id": uuid_strings(rng, rows),
            "amount": pa.array(rng.random(rows) * 1000.0),
        }
    )


def write_copy(table: pa.Table, copy: str, target: Path, fragments: int) -> None:
    per_file = table.num_rows // fragments
    if copy.startswith("lance"):
        lance.write_dataset(table, str(target), max_rows_per_file=per_file)
        if copy == "lance":
            for column in COLUMNS:
                pruner.build_index(target, column)
        return
    options: dict[str, Any] = {}
    if copy == "bloom":
        options["bloom_filter_options"] = {c: {"ndv": per_file, "fpp": BLOOM_FPP} for c in COLUMNS}
    elif copy == "parquet8k":
        options["row_group_size"] = 8192
    elif copy == "bloom8k":
        options["row_group_size"] = 8192
        options["bloom_filter_options"] = {c: {"ndv": 8192, "fpp": BLOOM_FPP} for c in COLUMNS}
    target.mkdir()
    for i in range(fragments):
        part = table.slice(i * per_file, per_file if i < fragments - 1 else None)
        pq.write_table(part, target / f"part-{i:03d}.parquet", **options)
    if copy in INDEXED:
        for column in COLUMNS:
            pruner.build_index(target, column)


def load_data(rows: int, fragments: int) -> Data:
    """The cached copies; the missing ones (and the keys) are generated first."""
    root = DATA_DIR / f"rows{rows}_fragments{fragments}_seed{SEED}"
    missing = [c for c in COPIES if not (root / c).exists()]
    if (root / "keys.json").exists() and not missing:
        print(f"data: cached in {root}")
    else:
        print(f"generating {', '.join(missing) or 'keys'} ({rows:,} rows, {fragments} fragments)")
        began = time.perf_counter()
        table = make_rows(rows)
        print(f"  rows: {time.perf_counter() - began:.1f} s")
        root.mkdir(parents=True, exist_ok=True)
        for copy in missing:
            step = time.perf_counter()
            tmp = root / (copy + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            write_copy(table, copy, tmp, fragments)
            tmp.rename(root / copy)
            indexed = " + pruner indexes on id, trace_id" if copy in INDEXED else ""
            print(f"  {copy}{indexed}: {time.perf_counter() - step:.1f} s")
        picks = np.random.default_rng(SEED + 1).choice(rows, KEYS, replace=False)
        keys = {c: table.column(c).take(pa.array(picks)).to_pylist() for c in COLUMNS}
        (root / "keys.json").write_text(json.dumps(keys))
        print(f"generated in {time.perf_counter() - began:.1f} s, into {root}")
    data = Data(root, json.loads((root / "keys.json").read_text()))
    ensure_companions(data)
    return data


def ensure_companions(data: Data) -> None:
    """Rebuild the indexes of the cached copies whose hierarchy companion this pruner cannot
    use (missing, or written by a pruner whose companion layout was another): pruner would
    read those index files whole, and a cold lookup would measure that, not pruner."""
    for copy in INDEXED:
        for column in COLUMNS:
            if copy.startswith("lance"):
                infos = list_bloom_indexes(data.path(copy))
                files = [Path(i.path) for i in infos if i.column == column]
            else:
                files = [parquet_index_path(data.path(copy), column)]
            if not files or not all(_usable(f) for f in files):
                print(f"  rebuilding the index of {column} on {copy} (no usable companion)")
                pruner.build_index(data.path(copy), column)


def _usable(index_file: Path) -> bool:
    try:
        Hierarchy(index_file)
    except HierarchyUnusable:
        return False
    return True


def check_layout(data: Data, rows: int, fragments: int) -> None:
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


def check_native_blooms(data: Data) -> None:
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
        ctx = native_datafusion_context(data.path(copy))
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


def check_datafusion_lance(data: Data) -> None:
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


# ------------------------------------------------------------------------------- queries


def where(column: str, key: Any) -> str:
    return f"id = {int(key)}" if column == "id" else f"trace_id = '{key}'"


def sql_of(column: str, key: Any) -> str:
    return f"SELECT * FROM t WHERE {where(column, key)}"


def key_sql(key: int | str) -> str:
    """The point lookup of ``key``: a string is a ``trace_id``, an integer an ``id``."""
    return sql_of("trace_id" if isinstance(key, str) else "id", key)


def measure_keys(
    cases: dict[str, Callable[[str], pa.Table]], keys: list[int] | list[str], repeat: int
) -> dict[str, float]:
    """Median ms per case of the point lookups of ``keys`` (:func:`common.medians_of`:
    round-robin, rotated each turn); every case must find the same trace_ids."""
    return medians_of(
        cases,
        [key_sql(k) for k in keys],
        repeat,
        lambda answer: sorted(answer.column("trace_id").to_pylist()),
    )


def native_datafusion_context(directory: Path) -> datafusion.SessionContext:
    config = (
        datafusion.SessionConfig()
        .set("datafusion.execution.parquet.pushdown_filters", "true")
        .set("datafusion.execution.parquet.bloom_filter_on_read", "true")
    )
    ctx = datafusion.SessionContext(config)
    ctx.register_parquet("t", str(directory))
    return ctx


@dataclass
class Case:
    engine: str
    source: str  # one of COPIES
    kind: str  # pruned / cold / unpruned / native
    column: str
    run: Callable[[Any], pa.Table]
    times: list[float] = field(default_factory=list)
    answers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.engine:<10} {self.source:<11} {self.kind:<8} {self.column:<8}"


def make_cases(data: Data, engines: tuple[str, ...]) -> list[Case]:
    opened = {c: pruner.open_table(data.path(c)) for c in (*INDEXED, "lance_noidx")}
    cases = []
    for engine in engines:
        natives: dict[str, Callable[[str], pa.Table]] = {}
        if engine == "duckdb":
            con = duckdb.connect()
            con.register("t", lance.dataset(str(data.path("lance"))))
            natives["lance"] = _duck_native(con, "t")
            for copy in PARQUET_COPIES:
                listing = ", ".join(duck_adapter.quote_string(f) for f in data.files(copy))
                natives[copy] = _duck_native(con, f"read_parquet([{listing}])")
        else:
            # No native Lance case: DataFusion's dataset scan calls get_fragments(filter=...),
            # which a plain LanceDataset refuses (checked in check_datafusion_lance).
            for copy in PARQUET_COPIES:
                natives[copy] = _df_native(native_datafusion_context(data.path(copy)))

        for column in COLUMNS:
            for source, kind, target, prune in (
                ("lance", "pruned", opened["lance"], True),
                ("lance", "cold", str(data.path("lance")), True),
                ("lance", "unpruned", opened["lance"], False),
                ("lance_noidx", "unpruned", opened["lance_noidx"], False),
                ("parquet", "pruned", opened["parquet"], True),
                ("parquet", "cold", str(data.path("parquet")), True),
                ("parquet", "unpruned", opened["parquet"], False),
                ("parquet8k", "pruned", opened["parquet8k"], True),
                ("parquet8k", "unpruned", opened["parquet8k"], False),
            ):
                run = _pruner_run(engine, column, target, prune)
                cases.append(Case(engine, source, kind, column, run))
            for copy, native in natives.items():
                cases.append(Case(engine, copy, "native", column, _native_run(native, column)))
    return cases


def _pruner_run(engine: str, column: str, target: Any, prune: bool) -> Callable[[Any], pa.Table]:
    def run(key: Any) -> pa.Table:
        return pruner.query(sql_of(column, key), {"t": target}, engine=engine, prune=prune)

    return run


def _native_run(native: Callable[[str], pa.Table], column: str) -> Callable[[Any], pa.Table]:
    def run(key: Any) -> pa.Table:
        return native(where(column, key))

    return run


def _duck_native(con: duckdb.DuckDBPyConnection, source: str) -> Callable[[str], pa.Table]:
    def run(condition: str) -> pa.Table:
        return con.sql(f"SELECT * FROM {source} WHERE {condition}").to_arrow_table()

    return run


def _df_native(ctx: datafusion.SessionContext) -> Callable[[str], pa.Table]:
    def run(condition: str) -> pa.Table:
        return ctx.sql(f"SELECT * FROM t WHERE {condition}").to_arrow_table()

    return run


def answer(case: Case, result: pa.Table, key: Any) -> list[dict[str, Any]]:
    rows = result.select(["id", "trace_id", "amount"]).to_pylist()
    assert len(rows) == 1 and rows[0][case.column] == key, (case.label, key, rows)
    return rows


def measure(cases: list[Case], keys: dict[str, list[Any]], repeat: int) -> None:
    for case in cases:  # warm-up: imports, OS page cache, the opened tables' indexes
        for i in range(WARMUP):
            key = keys[case.column][-1 - i]
            answer(case, case.run(key), key)
    for rep in range(repeat):
        slot = rep % KEYS
        for case in rotated(cases, rep):
            key = keys[case.column][slot]
            templates.clear(texts_only=True)
            began = time.perf_counter()
            result = case.run(key)
            case.times.append(time.perf_counter() - began)
            case.answers[slot] = answer(case, result, key)


def check_answers(cases: list[Case]) -> None:
    """Every case answers every key with the same row (per engine and column)."""
    for engine in {c.engine for c in cases}:
        for column in COLUMNS:
            group = [c for c in cases if c.engine == engine and c.column == column]
            for case in group:
                assert case.answers == group[0].answers, (case.label, group[0].label)


# ------------------------------------------------------------------------------- report


def ms(seconds: list[float], q: float = 50) -> float:
    return float(np.percentile(np.asarray(seconds) * 1e3, q))


def report(cases: list[Case]) -> None:
    print(
        f"\n{'engine':<10} {'data':<11} {'path':<8} {'column':<8} {'median ms':>10} {'p90 ms':>8}"
    )
    for case in cases:
        print(f"{case.label} {ms(case.times):>10.2f} {ms(case.times, 90):>8.2f}")

    def median(engine: str, source: str, kind: str, column: str) -> float:
        found = [
            c
            for c in cases
            if (c.engine, c.source, c.kind, c.column) == (engine, source, kind, column)
        ]
        return ms(found[0].times) if found else float("nan")

    print(
        "\nratios of medians, other / pruned (> 1: pruned is faster) [target]\n"
        "  unpruned = the same call with prune=False; full scan = prune=False on lance_noidx "
        "(no index;\n  for parquet* the same as unpruned); bloom / bloom8k = the engine's own "
        "read of the bloom-filter\n  Parquet; native lance = DuckDB alone on the indexed "
        "LanceDataset (Lance uses its own index)"
    )
    for engine in dict.fromkeys(c.engine for c in cases):
        for source in INDEXED:
            for column in COLUMNS:
                pruned = median(engine, source, "pruned", column)
                full = "lance_noidx" if source == "lance" else source
                parts = []
                for name, other, target in (
                    ("unpruned", median(engine, source, "unpruned", column), TARGET_UNPRUNED),
                    ("full scan", median(engine, full, "unpruned", column), TARGET_UNPRUNED),
                    ("bloom", median(engine, "bloom", "native", column), TARGET_NATIVE),
                    ("bloom8k", median(engine, "bloom8k", "native", column), TARGET_NATIVE),
                    ("native lance", median(engine, "lance", "native", column), None),
                ):
                    if name == "native lance" and (source != "lance" or other != other):
                        continue
                    ratio = other / pruned
                    verdict = "" if target is None else f" [{target:g} {_verdict(ratio, target)}]"
                    parts.append(f"{name} {ratio:.1f}x{verdict}")
                print(f"  {engine:<10} {source:<9} {column:<8} " + ", ".join(parts))


def _verdict(ratio: float, target: float) -> str:
    return "ok" if ratio >= target else "MISS"


def breakdown(data: Data, engines: tuple[str, ...], repeat: int) -> None:
    """Where a pruned query's time goes: plan (uncached / cached analysis) vs execution."""
    print(
        "\nwhere pruned time goes (medians, ms; each part timed on its own):\n"
        "  plan = pruner.plan (parse + analyze + probe; analysis cache cleared), plan* = the "
        "same SQL again\n  (analysis cached), exec = pruner.query(prepared=plan), of which "
        "conn = the adapter's per-query\n  connection (DuckDB: a cursor of its shared "
        "database; DataFusion: a new SessionContext) and bind =\n  registering the pruned "
        "source; reuse = the adapter's query(prepared=plan) on one connection / context\n  "
        "reused for all queries"
    )
    print(
        f"  {'engine':<10} {'data':<9} {'column':<9} {'plan':>6} {'plan*':>6} {'exec':>6} "
        f"{'conn':>6} {'bind':>6} {'reuse':>6}  what the engine reads"
    )
    opened = {c: pruner.open_table(data.path(c)) for c in INDEXED}
    for engine in engines:
        shared_con = duckdb.connect()
        shared_ctx = datafusion.SessionContext()
        for source, table in opened.items():
            for column in COLUMNS:
                times: dict[str, list[float]] = {}
                for rep in range(max(repeat, WARMUP) + WARMUP):
                    key = data.keys[column][rep % KEYS]
                    sql = sql_of(column, key)
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
                        for name, value in (
                            ("plan", t1 - t0),
                            ("plan*", t2 - t1),
                            ("exec", t3 - t2),
                            ("connect", connect),
                            ("bind", bind),
                            ("reuse", t4 - t3),
                        ):
                            times.setdefault(name, []).append(value)
                print(
                    f"  {engine:<10} {source:<9} {column:<9} {ms(times['plan']):6.2f} "
                    f"{ms(times['plan*']):6.2f} {ms(times['exec']):6.2f} "
                    f"{ms(times['connect']):6.2f} {ms(times['bind']):6.2f} "
                    f"{ms(times['reuse']):6.2f}  {_reads(table, prepared)}"
                )


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


# ------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--fragments", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per case (>= 20)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    args = parser.parse_args()
    engines = tuple(e for e in args.engines.split(",") if e)

    print_header(duckdb, datafusion, lance, pa, np, pruner)
    data = load_data(args.rows, args.fragments)
    check_layout(data, args.rows, args.fragments)
    check_native_blooms(data)
    if "datafusion" in engines:
        check_datafusion_lance(data)

    cases = make_cases(data, engines)
    began = time.perf_counter()
    measure(cases, data.keys, args.repeat)
    check_answers(cases)
    print(
        f"\n{len(cases)} cases x {args.repeat} runs (after {WARMUP} warm-up runs each), "
        f"round-robin, {time.perf_counter() - began:.0f} s; every answer is the key's one row, "
        "the same in every case"
    )
    report(cases)
    breakdown(data, engines, args.repeat)


if __name__ == "__main__":
    main()
