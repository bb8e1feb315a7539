"""Point lookups: pruner's zone bloom indexes against full scans and native Parquet blooms.

The data (default 5,000,000 rows in 50 fragments of 100,000 rows, cached under
``bench/data/point_lookup/`` and generated only when missing): ``id`` a shuffled unique int64,
``trace_id`` a random version-4 UUID string, ``amount`` a float64. The same rows are stored
four times:

1. ``lance``: a Lance dataset (``max_rows_per_file`` = rows per fragment), with pruner
   indexes on ``id`` and ``trace_id`` (defaults: 8,192-row zones, 32 KiB filters);
2. ``parquet``: one Parquet file per fragment (pyarrow's default row groups), with pruner
   indexes in ``_pruner/``;
3. ``bloom``: the same files with native Parquet bloom filters on ``id`` and ``trace_id``
   (ndv = rows per row group, fpp 0.01), one row group per file;
3b. ``bloom8k``: as 3 but with 8,192-row row groups (one filter per 8,192 rows: the
   granularity of pruner's zones).

Each query is ``SELECT * FROM t WHERE id = K`` (or ``trace_id = 'uuid'``) for a fixed list of
present keys, cycled. The SQL carries the key as a literal, so every query is a new SQL text:
pruner's analysis cache is cleared before each timed call (untimed) so no query is answered
from a cached parse. For each engine (DuckDB, DataFusion), after a warm-up, the cases are run
round-robin (one of each per repetition, so machine noise hits all alike) and timed:

* pruned: ``pruner.query(sql, {"t": table}, engine=E)``, ``table = pruner.open_table(path)``
  opened once (indexes loaded by the warm-up); cold: the path string instead (dataset opened,
  index files read inside every call; the OS page cache is warm);
* unpruned: the same call with ``prune=False`` (the same adapter reads the whole table);
* native: the engine alone on Parquet files: DuckDB ``read_parquet([files])`` on one reused
  connection, DataFusion ``register_parquet`` once (``pushdown_filters=true``,
  ``bloom_filter_on_read=true``), on the bloom-filter files (3, 3b) and, for context, on the
  plain files of 2.

Every timed query must return exactly the one row with the key, and pruned, unpruned and
native answers must be equal. It prints median and p90 ms, the ratios against the targets
(pruned vs unpruned >= 15x, pruned vs native bloom Parquet >= 3x), and where a pruned query
spends its time: ``pruner.plan`` (parse + analyze + probe) against the engine's execution.

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

from common import print_header  # noqa: E402 (bench/ is sys.path[0] when run as a script)

import pruner  # noqa: E402
from pruner.adapters import datafusion as df_adapter  # noqa: E402
from pruner.adapters import duckdb as duck_adapter  # noqa: E402
from pruner.adapters.sources import parquet_parts  # noqa: E402
from pruner.analyzer import _analyze_cached  # noqa: E402
from pruner.demo import _uuid_strings  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data" / "point_lookup"
SEED = 20240601
KEYS = 20
WARMUP = 3
COLUMNS = ("id", "trace_id")
ENGINES = ("duckdb", "datafusion")
BLOOM_FPP = 0.01
TARGET_UNPRUNED = 15.0
TARGET_NATIVE = 3.0


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Data:
    root: Path
    lance: Path
    parquet: Path
    bloom: Path
    bloom8k: Path
    keys: dict[str, list[Any]]

    def files(self, directory: Path) -> list[str]:
        return sorted(str(p) for p in directory.glob("*.parquet"))


def generate(root: Path, rows: int, fragments: int) -> None:
    """Write the four copies, the pruner indexes and the keys into ``root``."""
    per_file = rows // fragments
    began = time.perf_counter()
    rng = np.random.default_rng(SEED)
    table = pa.table(
        {
            "id": pa.array(rng.permutation(rows).astype(np.int64)),
            "trace_id": _uuid_strings(rng, rows),
            "amount": pa.array(rng.random(rows) * 1000.0),
        }
    )
    picks = np.random.default_rng(SEED + 1).choice(rows, KEYS, replace=False)
    keys = {c: table.column(c).take(pa.array(picks)).to_pylist() for c in COLUMNS}
    print(f"  rows generated: {time.perf_counter() - began:.1f} s")

    step = time.perf_counter()
    lance.write_dataset(table, str(root / "lance"), max_rows_per_file=per_file)
    for column in COLUMNS:
        pruner.build_index(root / "lance", column)
    print(f"  lance + 2 pruner indexes: {time.perf_counter() - step:.1f} s")

    variants: dict[str, dict[str, Any]] = {
        "parquet": {},
        "bloom": {
            "bloom_filter_options": {c: {"ndv": per_file, "fpp": BLOOM_FPP} for c in COLUMNS}
        },
        "bloom8k": {
            "row_group_size": 8192,
            "bloom_filter_options": {c: {"ndv": 8192, "fpp": BLOOM_FPP} for c in COLUMNS},
        },
    }
    for name, options in variants.items():
        step = time.perf_counter()
        directory = root / name
        directory.mkdir()
        for i in range(fragments):
            part = table.slice(i * per_file, per_file if i < fragments - 1 else None)
            pq.write_table(part, directory / f"part-{i:03d}.parquet", **options)
        if name == "parquet":
            for column in COLUMNS:
                pruner.build_index(directory, column)
        print(f"  {name}: {time.perf_counter() - step:.1f} s")
    (root / "keys.json").write_text(json.dumps(keys))
    print(f"generated in {time.perf_counter() - began:.1f} s")


def load_data(rows: int, fragments: int) -> Data:
    root = DATA_DIR / f"rows{rows}_fragments{fragments}_seed{SEED}"
    if not (root / "keys.json").exists():
        print(f"generating {rows:,} rows in {fragments} fragments into {root}")
        shutil.rmtree(root, ignore_errors=True)
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        generate(tmp, rows, fragments)
        tmp.rename(root)
    else:
        print(f"data: cached in {root}")
    keys = json.loads((root / "keys.json").read_text())
    return Data(root, *(root / n for n in ("lance", "parquet", "bloom", "bloom8k")), keys)


def check_layout(data: Data, rows: int, fragments: int) -> None:
    """The copies are what they claim: fragment and row-group counts, filters where wanted."""
    ds = lance.dataset(str(data.lance))
    assert ds.count_rows() == rows and len(ds.get_fragments()) == fragments
    for name in ("parquet", "bloom", "bloom8k"):
        files = data.files(data.root / name)
        assert len(files) == fragments, (name, len(files))
        groups = filters = 0
        for f in files:
            md = pq.ParquetFile(f).metadata
            groups += md.num_row_groups
            for g in range(md.num_row_groups):
                for c in range(md.num_columns):
                    filters += md.row_group(g).column(c).bloom_filter_offset is not None
        print(f"  {name}: {len(files)} files, {groups} row groups, {filters} bloom filters")
        assert (filters == 0) == (name == "parquet")
    for path in (data.lance, data.parquet):
        table = pruner.open_table(path)
        assert sorted(table.indexed_columns()) == sorted(COLUMNS), (path, table.indexed_columns())


def check_native_blooms(data: Data) -> None:
    """DuckDB's parquet_bloom_probe and DataFusion's EXPLAIN ANALYZE show the filters used."""
    con = duckdb.connect()
    for name in ("bloom", "bloom8k"):
        listing = (
            "["
            + ", ".join(duck_adapter.quote_string(f) for f in data.files(data.root / name))
            + "]"
        )
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
                kept = [(f, g) for f, g, e in found if not e]
                hit = con.execute(
                    f"SELECT filename, file_row_number FROM read_parquet({listing}, "
                    f"filename = true, file_row_number = true) WHERE {where(column, key)}"
                ).fetchall()
                assert len(hit) == 1 and any(f == hit[0][0] for f, _ in kept), (name, column, key)
            print(
                f"  DuckDB parquet_bloom_probe {name}.{column}: {excluded:,} of {probed:,} "
                f"row groups excluded over {len(data.keys[column])} keys; "
                f"the key's row group never"
            )
    for name in ("bloom", "bloom8k"):
        ctx = native_datafusion_context(data.root / name)
        for column in COLUMNS:
            key = data.keys[column][0]
            out = ctx.sql(f"EXPLAIN ANALYZE SELECT * FROM t WHERE {where(column, key)}")
            text = "\n".join(str(v) for v in out.to_arrow_table().column("plan").to_pylist())
            found = re.search(r"row_groups_pruned_bloom_filter=(\d+) total → (\d+) matched", text)
            assert found is not None, text
            total, matched = int(found.group(1)), int(found.group(2))
            print(
                f"  DataFusion EXPLAIN ANALYZE {name}.{column}: row_groups_pruned_bloom_filter "
                f"{total} total -> {matched} matched"
            )
            assert 1 <= matched < total, (name, column, total, matched)


# ------------------------------------------------------------------------------- queries


def where(column: str, key: Any) -> str:
    return f"id = {int(key)}" if column == "id" else f"trace_id = '{key}'"


def sql_of(column: str, key: Any) -> str:
    return f"SELECT * FROM t WHERE {where(column, key)}"


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
    source: str  # lance / parquet / bloom / bloom8k
    kind: str  # pruned / cold / unpruned / native
    column: str
    run: Callable[[Any], pa.Table]
    times: list[float] = field(default_factory=list)
    answers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.engine:<10} {self.source:<8} {self.kind:<9} {self.column}"


def make_cases(data: Data, engines: tuple[str, ...]) -> list[Case]:
    opened = {"lance": pruner.open_table(data.lance), "parquet": pruner.open_table(data.parquet)}
    paths = {"lance": str(data.lance), "parquet": str(data.parquet)}
    cases = []
    for engine in engines:
        natives: dict[str, Callable[[str], pa.Table]] = {}
        if engine == "duckdb":
            con = duckdb.connect()
            for name in ("bloom", "bloom8k", "parquet"):
                listing = ", ".join(
                    duck_adapter.quote_string(f) for f in data.files(data.root / name)
                )
                natives[name] = _duck_native(con, listing)
        else:
            for name in ("bloom", "bloom8k", "parquet"):
                natives[name] = _df_native(native_datafusion_context(data.root / name))
        for column in COLUMNS:
            for source in ("lance", "parquet"):
                table = opened[source]
                for kind, target, prune in (
                    ("pruned", table, True),
                    ("cold", paths[source], True),
                    ("unpruned", table, False),
                ):
                    cases.append(
                        Case(
                            engine, source, kind, column, _pruner_run(engine, column, target, prune)
                        )
                    )
            for name in ("bloom", "bloom8k", "parquet"):
                native = natives[name]
                cases.append(
                    Case(
                        engine, name, "native", column, lambda k, n=native, c=column: n(where(c, k))
                    )
                )
    return cases


def _pruner_run(engine: str, column: str, target: Any, prune: bool) -> Callable[[Any], pa.Table]:
    def run(key: Any) -> pa.Table:
        return pruner.query(sql_of(column, key), {"t": target}, engine=engine, prune=prune)

    return run


def _duck_native(con: duckdb.DuckDBPyConnection, listing: str) -> Callable[[str], pa.Table]:
    def run(condition: str) -> pa.Table:
        return con.sql(
            f"SELECT * FROM read_parquet([{listing}]) WHERE {condition}"
        ).to_arrow_table()

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
        for case in cases:
            key = keys[case.column][slot]
            _analyze_cached.cache_clear()
            began = time.perf_counter()
            result = case.run(key)
            case.times.append(time.perf_counter() - began)
            case.answers[slot] = answer(case, result, key)


def check_answers(cases: list[Case]) -> None:
    """Pruned == unpruned == native, key by key, per engine and column."""
    for engine in {c.engine for c in cases}:
        for column in COLUMNS:
            group = [c for c in cases if c.engine == engine and c.column == column]
            reference = next(c for c in group if c.source == "lance" and c.kind == "unpruned")
            for case in group:
                assert case.answers == reference.answers, (case.label, reference.label)


# ------------------------------------------------------------------------------- report


def ms(seconds: list[float], q: float = 50) -> float:
    return float(np.percentile(np.asarray(seconds) * 1e3, q))


def report(cases: list[Case]) -> None:
    print(f"\n{'engine':<10} {'data':<8} {'path':<9} {'column':<9} {'median ms':>10} {'p90 ms':>8}")
    for case in cases:
        print(f"{case.label:<38} {ms(case.times):>10.2f} {ms(case.times, 90):>8.2f}")

    def find(engine: str, source: str, kind: str, column: str) -> Case:
        return next(
            c
            for c in cases
            if (c.engine, c.source, c.kind, c.column) == (engine, source, kind, column)
        )

    print("\nratios of medians (x = other / pruned; target in brackets)")
    for engine in dict.fromkeys(c.engine for c in cases):
        for source in ("lance", "parquet"):
            for column in COLUMNS:
                pruned = ms(find(engine, source, "pruned", column).times)
                parts = []
                for other, target, name in (
                    (find(engine, source, "unpruned", column), TARGET_UNPRUNED, "unpruned"),
                    (find(engine, "bloom", "native", column), TARGET_NATIVE, "bloom"),
                    (find(engine, "bloom8k", "native", column), TARGET_NATIVE, "bloom8k"),
                ):
                    ratio = ms(other.times) / pruned
                    verdict = "ok" if ratio >= target else "MISS"
                    parts.append(f"vs {name} {ratio:6.1f}x [{target:g}x {verdict}]")
                print(f"  {engine:<10} {source:<7} {column:<8} " + "  ".join(parts))


def breakdown(data: Data, engines: tuple[str, ...], repeat: int) -> None:
    """Where a pruned query's time goes: plan (uncached / cached analysis) vs execution."""
    print(
        "\nwhere pruned time goes (medians, ms): plan = pruner.plan (parse + analyze + probe), "
        "analysis cache cleared; plan* = same SQL again (analysis cached); exec = "
        "pruner.query(prepared=plan), of which (measured apart) connect = the new "
        "duckdb.connect() / SessionContext the adapter makes per query and bind = registering "
        "the pruned source"
    )
    print(
        f"  {'engine':<10} {'data':<8} {'column':<9} {'plan':>6} {'plan*':>6} {'exec':>6} "
        f"{'connect':>7} {'bind':>6}  rows the engine reads"
    )
    opened = {"lance": pruner.open_table(data.lance), "parquet": pruner.open_table(data.parquet)}
    for engine in engines:
        for source, table in opened.items():
            for column in COLUMNS:
                plans, cached, execs, connects, binds = [], [], [], [], []
                for rep in range(max(repeat, WARMUP) + WARMUP):
                    key = data.keys[column][rep % KEYS]
                    sql = sql_of(column, key)
                    _analyze_cached.cache_clear()
                    t0 = time.perf_counter()
                    prepared = pruner.plan(sql, {"t": table}, dialect=engine)
                    t1 = time.perf_counter()
                    pruner.plan(sql, {"t": table}, dialect=engine)
                    t2 = time.perf_counter()
                    result = pruner.query(sql, {"t": table}, engine=engine, prepared=prepared)
                    t3 = time.perf_counter()
                    connect, bind = _setup(engine, table, prepared.selections["t"])
                    assert result.num_rows == 1
                    if rep >= WARMUP:
                        plans.append(t1 - t0)
                        cached.append(t2 - t1)
                        execs.append(t3 - t2)
                        connects.append(connect)
                        binds.append(bind)
                zones, zones_total = prepared.zones()
                read, total = prepared.rows()
                reads = f"{zones} of {zones_total} zones, {read:,} of {total:,} rows"
                if source == "parquet":
                    parts = parquet_parts(table, prepared.selections["t"])
                    groups = sum(
                        len(p.file.row_group_rows if p.row_groups is None else p.row_groups)
                        for p in parts
                    )
                    grouped = sum(
                        sum(p.file.row_group_rows)
                        if p.row_groups is None
                        else sum(p.file.row_group_rows[g] for g in p.row_groups)
                        for p in parts
                    )
                    reads += f" -> {groups} row groups, {grouped:,} rows"
                print(
                    f"  {engine:<10} {source:<8} {column:<9} {ms(plans):6.2f} {ms(cached):6.2f} "
                    f"{ms(execs):6.2f} {ms(connects):7.2f} {ms(binds):6.2f}  {reads}"
                )


def _setup(engine: str, table: pruner.Table, selection: Any) -> tuple[float, float]:
    """Seconds the adapter spends per query before the engine runs: a new connection or
    context, then binding the pruned source (Lance dataset / DuckDB view / pyarrow dataset)."""
    prepared = pruner.Plan({"t": table}, {"t": selection})
    began = time.perf_counter()
    if engine == "duckdb":
        con = duckdb.connect()
        connected = time.perf_counter()
        duck_adapter.bind(con, prepared).close()
    else:
        ctx = df_adapter.new_context()
        connected = time.perf_counter()
        df_adapter.bind(ctx, prepared)
    return connected - began, time.perf_counter() - connected


# ------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--fragments", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    engines = tuple(e for e in args.engines.split(",") if e)

    print_header(duckdb, datafusion, lance, pa, np, pruner)
    data = load_data(args.rows, args.fragments)
    check_layout(data, args.rows, args.fragments)
    check_native_blooms(data)

    cases = make_cases(data, engines)
    began = time.perf_counter()
    measure(cases, data.keys, args.repeat)
    check_answers(cases)
    print(
        f"\n{len(cases)} cases x {args.repeat} repetitions (after {WARMUP} warm-up each), "
        f"round-robin, in {time.perf_counter() - began:.0f} s; every answer 1 row; pruned == "
        "unpruned == native for every key"
    )
    report(cases)
    breakdown(data, engines, args.repeat)


if __name__ == "__main__":
    main()
