"""The curve to 100M rows: index build, memory, sizes and point lookups, against Lance.

For each size (``--sizes ROWS:FRAGMENTS ...``; default 5M rows in 200 fragments, 20M in 200
and in 1,000, 100M in 1,000), a Lance dataset of ``id`` (a shuffled permutation of
0..rows-1, int64) and ``payload`` (``id * 3``) is made twice (cached under
``bench/data/scale/``): ``pruner``, indexed by pruner, and ``lance``, indexed by Lance's own
``create_scalar_index(..., "BLOOMFILTER")``. Each of these runs in a new process, which
reports its seconds (the work only, not the imports) and its peak resident memory
(``VmHWM``, the process's own; not ``ru_maxrss``, which counts the parent's size at the fork):

* build: ``pruner.build_index(path, "id")`` (index file, companion, commit), best of
  ``--repeat``; Lance's build on its copy, the same way; the Spark build (``engine="spark"``,
  ``local[2]``, a new session: its first build, which starts Spark's Python workers, and the
  second);
* lookups: ``SELECT * FROM t WHERE id = K`` for ``--keys`` random present keys, round-robin in
  one process: warm (the table held: ``pruner.open_table`` once; DuckDB alone with
  ``lance.dataset`` registered once, over Lance's own index and over pruner's, which Lance
  uses too), warm past the lookups after which pruner leaves a held table's point lookups
  to Lance's scanner (a second table held, looked up that many times first:
  ``engines.warmed``), and cold (a table opened, a dataset registered, for each query); the
  median of each, and the companion bytes a cold pruner lookup read;
* queries, warm, side by side in one process (``--query-repeat`` turns each): those no index
  can prune (:data:`CANNOT_PRUNE`) and ``id IN`` lists of 100 and 1,000 random present keys,
  pruner against the engine alone (:data:`QUERY_GROUPS`): DuckDB over the Lance copy with
  Lance's own index, and DuckDB and DataFusion over a third copy, ``parquet`` (one file per
  fragment, 8,192-row row groups, pruner's index on ``id``);
* the peak memory of a process that only runs pruner's warm and cold lookups.

Then, on paper (:func:`paper`), what each level costs at 1B and 10B rows, checked against
the measured sizes and bytes. Everything goes to ``docs/scale.md`` and ``docs/img/scale.png``.

Run it (from the project root; 100M rows take about 20 minutes, mostly making the data)::

    .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --sizes 1000000:20 --keys 5 --no-spark --output /tmp/s.md
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import common
import fixtures
import lance
import numpy as np
import pyarrow.parquet as pq
from common import Panel, Report

import pruner
from pruner import sbbf
from pruner.index import DEFAULT_ITEMS, DEFAULT_PROBABILITY, companion_path, list_bloom_indexes
from pruner.index.hierarchy.layout import zones_codec

SEED = 20261128
SIZES = ("5000000:200", "20000000:200", "20000000:1000", "100000000:1000")

# ------------------------------------------------------------------------------------ data


def dataset(rows: int, fragments: int, copy: str) -> Path:
    """The ``copy`` of the size's data, made when missing: ``pruner`` and ``lance``, Lance
    datasets (indexed by the build measured); ``parquet``, one Parquet file per fragment in
    8,192-row row groups without bloom filters of their own, indexed by pruner on ``id``."""
    root = fixtures.data_path("scale", rows=rows, fragments=fragments)

    def make(target: Path) -> None:
        table = fixtures.id_table(rows, SEED)
        if copy != "parquet":
            fixtures.write_lance(table, target, fragments)
            return
        target.mkdir()
        per_file = -(-rows // fragments)
        for i in range(fragments):
            part = table.slice(i * per_file, per_file)
            pq.write_table(part, target / f"part-{i:04d}.parquet", row_group_size=8192)
        pruner.build_index(target, "id")

    return fixtures.cached(root / copy, make)


# --------------------------------------------------------------------- child processes


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import common  # the checkout's pruner first
task, path, arguments = {task!r}, {path!r}, {arguments!r}

def peak_mib():
    # VmHWM: this process's own resident peak. ru_maxrss also counts the parent's resident
    # size when it forked this process (Linux carries it across exec): a parent that had
    # just made 100M rows of data gave every child its 1.7 GiB.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

import lance
import pruner
from pruner.index import list_bloom_indexes

def drop():
    ds = lance.dataset(path)
    for info in list_bloom_indexes(ds):
        if info.column == "id":
            ds.drop_index(info.name)
            ds = lance.dataset(path)

result = {{}}
if task == "build":
    drop()
    before = peak_mib()
    began = time.perf_counter()
    pruner.build_index(path, "id")
    result = {{"seconds": time.perf_counter() - began, "peak_mib": peak_mib(), "base_mib": before}}
elif task == "lance_build":
    drop()
    before = peak_mib()
    began = time.perf_counter()
    lance.dataset(path).create_scalar_index("id", index_type="BLOOMFILTER")
    result = {{"seconds": time.perf_counter() - began, "peak_mib": peak_mib(), "base_mib": before}}
elif task == "spark_build":
    from pruner.adapters.spark.runtime import session
    spark = session("local[2]")
    seconds = []
    for _ in range(2):
        began = time.perf_counter()
        pruner.build_index(path, "id", engine="spark", spark=spark)
        seconds.append(time.perf_counter() - began)
    spark.stop()
    result = {{"first": seconds[0], "second": seconds[1]}}
elif task == "lookups":
    from scale import lookups
    result = lookups(path, arguments)
elif task == "queries":
    from scale import queries
    result = queries(arguments)
elif task == "memory":
    from pruner.analyzer import templates
    keys = arguments["keys"]
    before = peak_mib()
    table = pruner.open_table(path)
    for key in keys:
        pruner.query(f"SELECT * FROM t WHERE id = {{key}}", {{"t": table}})
    for key in keys:
        templates.clear(texts_only=True)
        pruner.query(f"SELECT * FROM t WHERE id = {{key}}", {{"t": pruner.open_table(path)}})
    result = {{"peak_mib": peak_mib(), "base_mib": before}}
print("RESULT " + json.dumps(result))
"""


def child(task: str, path: Path, arguments: Any = None) -> dict[str, Any]:
    """Run ``task`` on ``path`` in a new Python process; its result."""
    code = CHILD.format(
        bench=str(Path(__file__).parent), task=task, path=str(path), arguments=arguments
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=common.ROOT
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{task} on {path} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def lookups(path: str, arguments: dict[str, Any]) -> dict[str, float]:
    """The lookups' medians (ms) side by side in this process, and the companion bytes a
    cold pruner lookup read (median)."""
    from cold import pruner_cold
    from engines import duckdb_alone, pruned, warmed

    import pruner

    mine, theirs = Path(path), Path(arguments["lance"])
    sqls = [f"SELECT * FROM t WHERE id = {key}" for key in arguments["keys"]]
    seen: list[int] = []
    held = pruner.open_table(mine)
    warm_up = warmed(held, lambda n: f"SELECT * FROM t WHERE id = {-n}")  # absent keys
    cases = {
        "pruner warm": pruned({"t": mine}, opened="once"),
        "pruner warm, left to Lance": pruned({"t": held}),
        "pruner cold": pruner_cold(mine, "duckdb", seen),
        "alone warm, Lance index": duckdb_alone({"t": theirs}),
        "alone warm, pruner index": duckdb_alone({"t": mine}),
        "alone cold, Lance index": duckdb_alone({"t": theirs}, reopen="tables"),
    }
    got = common.measure(cases, sqls, repeat=len(sqls), check=common.sorted_rows)
    result = {name: case.median() for name, case in got.items()}
    result["warm-up lookups"] = float(warm_up)
    result["cold bytes"] = float(np.median([b for b in seen if b >= 0] or [-1]))
    return result


CANNOT_PRUNE = {
    "range": "SELECT count(*) AS n FROM t WHERE payload > {rows}",
    "is not null": "SELECT count(*) AS n FROM t WHERE id IS NOT NULL",
    "is distinct from": "SELECT count(*) AS n FROM t WHERE id IS DISTINCT FROM 5",
    "group by": "SELECT id % 2 AS odd, count(*) AS n FROM t GROUP BY 1 ORDER BY 1",
}
"""Queries no index can prune (the data's ``payload`` is ``id * 3``), at each size."""

IN_KEYS = (100, 1_000)

QUERY_GROUPS = {
    "DuckDB / Lance": ("pruner", "duckdb"),
    "DuckDB / Parquet": ("parquet", "duckdb"),
    "DataFusion / Parquet": ("parquet", "datafusion"),
}
"""Each engine / format the queries compare: the copy pruner reads (the Lance dataset
pruner indexed, or the Parquet copy) and the engine. The engine alone reads Lance's own
copy (DuckDB pushes filters into Lance, which probes its own index) or the same Parquet
files (which hold no bloom filters of their own)."""


def queries(arguments: dict[str, Any]) -> dict[str, list[float]]:
    """The times (ms) of pruner (the table held) and of the engine alone, for each of
    :data:`QUERY_GROUPS` (``arguments["copies"]``: its copy's path, and the path the
    engine alone reads), side by side in this process, of each query of
    :data:`CANNOT_PRUNE` and of ``id IN`` lists of :data:`IN_KEYS` random present keys (a
    new list each turn): ``"<query> <group> pruner"`` and ``"... alone"``, turn by turn."""
    from engines import datafusion_alone, duckdb_alone, pruned

    rows, repeat = arguments["rows"], arguments["repeat"]
    cases = {}
    for group, (mine, theirs) in arguments["copies"].items():
        engine = QUERY_GROUPS[group][1]
        cases[f"{group} pruner"] = pruned({"t": Path(mine)}, engine, opened="once")
        alone = duckdb_alone if engine == "duckdb" else datafusion_alone
        cases[f"{group} alone"] = alone({"t": Path(theirs)})
    random = np.random.default_rng(rows + 1)
    inputs = {name: [sql.format(rows=rows)] for name, sql in CANNOT_PRUNE.items()}
    for keys in IN_KEYS:
        lists = [random.choice(rows, keys, replace=False) for _ in range(repeat)]
        inputs[f"IN {keys}"] = [
            f"SELECT * FROM t WHERE id IN ({', '.join(map(str, chosen))})" for chosen in lists
        ]
    result: dict[str, list[float]] = {}
    for name, sqls in inputs.items():
        got = common.measure(cases, sqls, repeat=repeat, check=common.sorted_rows)
        for case, timed in got.items():
            result[f"{name} {case}"] = [s * 1e3 for s in timed.seconds]
    return result


def index_sizes(path: Path) -> tuple[int, int]:
    """The bytes of the index file of ``id`` in the dataset, and of its companion (0: none)."""
    info = next(i for i in list_bloom_indexes(str(path)) if i.column == "id")
    index_file = Path(info.path)
    companion = companion_path(index_file)
    return index_file.stat().st_size, Path(str(companion)).stat().st_size if Path(
        str(companion)
    ).exists() else 0


# ------------------------------------------------------------------------------- paper


def paper(rows: int, fragments: int) -> dict[str, float]:
    """What the layout costs at ``rows`` in ``fragments`` equal fragments of distinct values,
    from the formats' rules alone (docs/format.md, ``pruner.index.hierarchy``): bytes of the
    index file and companion, and what a cold point lookup of a present key reads of the
    companion locally (its header, the zones' table, a dataset chunk, the fragment row, one
    fragment's zones in one row, and their checksums)."""
    per = rows // fragments
    zones_each = -(-per // DEFAULT_ITEMS)
    zones = zones_each * fragments
    zone_bytes = sbbf.optimal_num_bytes(DEFAULT_ITEMS, DEFAULT_PROBABILITY)
    fragment_bytes = sbbf.optimal_num_bytes(per, DEFAULT_PROBABILITY)
    dataset_bytes = sbbf.optimal_num_bytes(rows, DEFAULT_PROBABILITY)
    blocks = zone_bytes // 32
    starts = np.arange(zones_each, dtype="<u8") * DEFAULT_ITEMS
    lengths = np.minimum(DEFAULT_ITEMS, per - starts.astype(np.int64)).astype("<u8")
    table = len(
        zones_codec().compress(
            np.concatenate(
                [
                    np.repeat(np.arange(fragments, dtype="<u8"), zones_each).view(np.uint8),
                    np.tile(starts, fragments).view(np.uint8),
                    np.tile(lengths, fragments).view(np.uint8),
                    np.zeros(zones, np.uint8),
                ]
            ),
            asbytes=True,
        )
    )
    lists = [list(range(fragments)), list(range(0, zones, zones_each)), [per] * fragments]
    header = 700 + sum(len(json.dumps(listed)) for listed in lists)
    companion = (
        header
        + table
        + dataset_bytes * (1 + 8 / 1024)
        + fragments * fragment_bytes
        + fragment_bytes // 32 * 8
        + zones * zone_bytes
        + blocks * fragments * 8
    )
    cold = header + table + 1024 + 8 + 32 * fragments + 8 + 32 * zones_each + 8
    return {
        "zones": zones,
        "index_bytes": zones * (zone_bytes + 25),
        "companion_bytes": companion,
        "cold_bytes": cold,
        "header_bytes": header,
        "table_bytes": table,
        "dataset_bytes": dataset_bytes,
        "dataset_fpp": sbbf.fpp_at(rows, dataset_bytes),
        "fragment_bytes": fragment_bytes,
    }


PAPER_NOTES = (
    "Each level of a cold point lookup, on paper (the model above, checked against the "
    "measured sizes and bytes): the companion's header (700 B and about 20 B a fragment: its "
    "fragments, first zones and distinct counts), the zones' table (zstd, 2-6 KB per 10,000 "
    "regular zones), one 1 KiB chunk of the dataset filter, the fragment row (32 B a "
    "fragment: one block of every fragment filter), and one fragment's zones in one row "
    "(32 B a zone of the fragment), each with an 8 B checksum.",
    "The dataset filter is capped at 128 MiB (the largest SBBF Lance and Parquet accept); "
    "past about 55M distinct values it holds its values at more than the index's rate "
    "(0.9% at 100M, 99.5% at 1B): at a billion rows it rules nothing out, and a lookup of an "
    "absent key reads the fragment row as a present one does.",
    "What grows with the number of fragments dominates past 10,000 of them: the header's "
    "lists and the fragment row are 0.5 MB a cold lookup at 10,000 fragments and 5.5 MB at "
    "100,000. A level between the dataset and the fragments (a filter per group of "
    "fragments) would bound it; none is built yet.",
    "On an object store a cold lookup takes its round trips, not its bytes: the open (the "
    "companion's first 128 KiB, which holds the header and zones' table up to about 5,000 "
    "fragments, beside the index file's tail), then the dataset chunk, fragment row and, "
    "when they come to at most 256 KiB, every fragment's zones of the key's row, in one "
    "batch; past that the zones a round trip later: 2-3 round trips to the selection, then "
    "the data's own.",
    "The build's memory: the zone filters (the index file's size, put in one array as they "
    "come); the fragments' coarse filters (about 2.6 B a row); and for the dataset filter "
    "at most 8M values' hashes (64 MB) beside the filter (128 MiB at most). On paper 1B rows "
    "would hold 4 GB of zone filters: past a few hundred million rows a build wants them "
    "streamed from the index file, not held.",
)


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def kib(n: float) -> str:
    return f"{n / 2**10:,.1f}"


# -------------------------------------------------------------------------------- main


def main() -> None:
    made = common.parser(__doc__, repeat=2)
    made.add_argument("--sizes", nargs="*", default=list(SIZES), help="ROWS:FRAGMENTS ...")
    made.add_argument("--keys", type=int, default=15, help="point lookups per case")
    made.add_argument("--no-spark", action="store_true", help="skip the Spark build")
    made.add_argument(
        "--query-repeat", type=int, default=9, help="timed turns of each query at each size"
    )
    made.add_argument("--output", type=Path, default=common.ROOT / "docs" / "scale.md")
    args = common.parse(made, np, lance)
    sizes = [tuple(int(part) for part in size.split(":")) for size in args.sizes]
    report = Report()
    builds, lookups, sizes_rows, memory, query_rows = [], [], [], [], []
    query_ratios: dict[tuple[int, str, str], tuple[float, float, float, float]] = {}
    curve: dict[str, tuple[list[float], list[float]]] = {}
    first_warm = None
    for rows, fragments in sizes:
        mine, theirs = dataset(rows, fragments, "pruner"), dataset(rows, fragments, "lance")
        label = f"{rows:,} / {fragments:,}"
        repeat = 1 if rows > 50_000_000 else args.repeat
        ours = [child("build", mine) for _ in range(repeat)]
        lance_runs = [child("lance_build", theirs) for _ in range(repeat)]
        best, lance_best = min(r["seconds"] for r in ours), min(r["seconds"] for r in lance_runs)
        spark = None if args.no_spark else child("spark_build", mine)
        if spark is not None:
            child("build", mine)  # the local build's index, for the lookups
        builds.append(
            [
                label,
                f"{best:.2f}",
                f"{lance_best:.2f}",
                f"{best / lance_best:.2f}",
                "-" if spark is None else f"{spark['first']:.1f} / {spark['second']:.1f}",
                f"{max(r['peak_mib'] for r in ours):,.0f}",
                f"{max(r['peak_mib'] for r in lance_runs):,.0f}",
            ]
        )
        index_bytes, companion_bytes = index_sizes(mine)
        lance_index_bytes, _ = index_sizes(theirs)
        keys = [int(k) for k in np.random.default_rng(rows).choice(rows, args.keys, replace=False)]
        got = child("lookups", mine, {"keys": keys, "lance": str(theirs)})
        warm, cold = got["pruner warm"], got["pruner cold"]
        first_warm = first_warm or warm
        left = got["pruner warm, left to Lance"]
        lookups.append(
            [
                label,
                f"{warm:.2f}",
                f"{left:.2f} ({got['warm-up lookups']:,.0f})",
                f"{got['alone warm, Lance index']:.2f}",
                f"{got['alone warm, pruner index']:.2f}",
                f"{warm / got['alone warm, Lance index']:.2f}",
                f"{left / got['alone warm, Lance index']:.2f}",
                f"{warm / first_warm:.2f}",
                f"{cold:.1f}",
                f"{got['alone cold, Lance index']:.1f}",
                f"{got['alone cold, Lance index'] / cold:.1f}",
                kib(got["cold bytes"]),
            ]
        )
        parquet = dataset(rows, fragments, "parquet")
        copies = {"DuckDB / Lance": (str(mine), str(theirs))}
        copies |= {group: (str(parquet), str(parquet)) for group in list(QUERY_GROUPS)[1:]}
        timed = child(
            "queries",
            mine,
            {"copies": copies, "rows": rows, "repeat": args.query_repeat},
        )
        names = [*CANNOT_PRUNE, *(f"IN {k}" for k in IN_KEYS)]
        for group in QUERY_GROUPS:
            mine_ms = {name: timed[f"{name} {group} pruner"] for name in names}
            alone_ms = {name: timed[f"{name} {group} alone"] for name in names}
            ratios = {n: float(np.median(mine_ms[n]) / np.median(alone_ms[n])) for n in names}
            worst_turn = max(  # each turn's two runs side by side
                p / a
                for name in CANNOT_PRUNE
                for p, a in zip(mine_ms[name], alone_ms[name], strict=True)
            )
            query_rows.append(
                [
                    label,
                    group,
                    *(
                        f"{np.median(alone_ms[name]):,.1f} / {np.median(mine_ms[name]):,.1f} "
                        f"({ratios[name]:.2f})"
                        for name in names
                    ),
                ]
            )
            print(" | ".join(query_rows[-1]), flush=True)
            cannot = [ratios[name] for name in CANNOT_PRUNE]
            query_ratios[(rows, label, group)] = (
                float(np.median(cannot)),
                max(cannot),
                worst_turn,
                ratios[f"IN {IN_KEYS[0]}"],
            )
        used = child("memory", mine, {"keys": keys[:5]})
        memory.append([label, f"{used['peak_mib']:,.0f}", f"{used['base_mib']:,.0f}"])
        for path in (mine, theirs):  # the builds' dropped indexes stay on disk until then:
            # two runs of every size left 35 GB under bench/data/scale
            lance.dataset(str(path)).cleanup_old_versions(older_than=timedelta(0))
        model = paper(rows, fragments)
        sizes_rows.append(
            [
                label,
                f"{model['zones']:,}",
                mib(index_bytes),
                mib(model["index_bytes"]),
                mib(companion_bytes),
                mib(model["companion_bytes"]),
                mib(lance_index_bytes),
                kib(got["cold bytes"]),
                kib(model["cold_bytes"]),
            ]
        )
        for done in (builds, lookups, memory, sizes_rows):
            print(" | ".join(done[-1]), flush=True)
        for name, value in (
            ("pruner build s", best),
            ("Lance build s", lance_best),
            ("pruner warm lookup ms", warm),
            ("DuckDB + Lance index, warm ms", got["alone warm, Lance index"]),
            ("pruner cold lookup ms", cold),
            ("DuckDB + Lance index, cold ms", got["alone cold, Lance index"]),
        ):
            xs, ys = curve.setdefault(name, ([], []))
            xs.append(rows)
            ys.append(value * (1000 if name.endswith(" s") else 1))
    last = sizes[-1]
    report.target(
        "build / Lance's build, worst of the sizes", max(float(b[3]) for b in builds), 1.0
    )
    report.target(
        f"{last[0]:,} rows: the build's peak memory, GiB",
        float(builds[-1][5].replace(",", "")) / 1024,
        2.0,
    )
    report.target(
        f"{last[0]:,} rows: warm point lookup / at {sizes[0][0]:,}", float(lookups[-1][7]), 1.5
    )
    report.target(
        f"{last[0]:,} rows: companion KiB a cold lookup reads", float(lookups[-1][11]), 128
    )
    report.target(
        "warm point lookup left to Lance / DuckDB alone over Lance's index, worst of the sizes",
        max(float(row[6]) for row in lookups),
        1.0,
    )
    report.table(
        "Index build (seconds, best of runs, each in a new process; peak MiB: the process's "
        "resident peak)",
        [
            "rows / fragments",
            "pruner s",
            "Lance s",
            "pruner / Lance",
            "Spark local[2] s (1st / 2nd)",
            "pruner peak MiB",
            "Lance peak MiB",
        ],
        builds,
    )
    report.table(
        "Point lookups (median ms of the keys; warm: the table held, its first lookups probed by "
        "pruner, and a table held past the N lookups after which pruner leaves them to Lance's "
        "scanner over the index it checked (pruner.costs.LANCE_WARM_LOOKUPS_PER_MIB; N = 0: "
        "a table of so many fragments that pruner keeps them, pruner.costs.LANCE_OWN_FRAGMENTS); "
        "cold: opened per query)",
        [
            "rows / fragments",
            "pruner warm",
            "pruner warm, left to Lance (after N lookups)",
            "alone, Lance index",
            "alone, pruner index",
            "pruner / alone (Lance index)",
            "left to Lance / alone (Lance index)",
            "pruner warm / first size",
            "pruner cold",
            "alone cold, Lance index",
            "alone / pruner (cold)",
            "companion KiB read (cold)",
        ],
        lookups,
    )
    for (rows, label, group), ratios_of in query_ratios.items():
        median, worst_median, worst_turn, in_first = ratios_of
        report.target(
            f"{label}, {group}: cannot prune, median of the queries' median pruner / alone",
            median,
            1.05,
        )
        report.target(
            f"{label}, {group}: cannot prune, worst query's median pruner / alone",
            worst_median,
            1.1,
        )
        report.note(
            f"{label}, {group}: cannot prune, the worst single turn (pruner / alone run "
            f"side by side): {worst_turn:.2f}"
        )
        if rows >= 20_000_000:
            report.target(
                f"{label}, {group}: IN of {IN_KEYS[0]} ids, pruner / alone", in_first, 0.3
            )
    report.table(
        "Queries (median ms of the turns, the engine alone / pruner, and the ratio pruner / "
        "alone; DuckDB alone over Lance's own copy with Lance's index, each engine alone over "
        "the Parquet files pruner reads, which hold no bloom filters of their own; the "
        "cannot-prune queries: "
        + "; ".join(f"{name}: `{sql.format(rows='ROWS')}`" for name, sql in CANNOT_PRUNE.items())
        + "; IN: `SELECT * FROM t WHERE id IN (...)` of random present keys, a new list each "
        "turn)",
        ["rows / fragments", "engine / format", *CANNOT_PRUNE, *(f"IN of {k:,}" for k in IN_KEYS)],
        query_rows,
    )
    report.table(
        "Memory of a query process (pruner's warm and cold lookups; MiB)",
        ["rows / fragments", "peak", "after imports"],
        memory,
    )
    report.table(
        "Sizes, measured against the paper model (MiB; cold bytes in KiB)",
        [
            "rows / fragments",
            "zones",
            "index file",
            "paper",
            "companion",
            "paper",
            "Lance's index file",
            "cold KiB read",
            "paper",
        ],
        sizes_rows,
    )
    projected = []
    for rows, fragments in (
        (10**8, 1_000),
        (10**9, 10_000),
        (10**9, 100_000),
        (10**10, 100_000),
    ):
        model = paper(rows, fragments)
        projected.append(
            [
                f"{rows:,} / {fragments:,}",
                f"{model['zones']:,}",
                mib(model["index_bytes"]),
                mib(model["companion_bytes"]),
                mib(model["dataset_bytes"]),
                f"{model['dataset_fpp']:.4f}",
                kib(model["fragment_bytes"]),
                kib(model["header_bytes"]),
                kib(model["table_bytes"]),
                kib(model["cold_bytes"]),
            ]
        )
    report.table(
        "On paper: beyond the measured sizes (MiB; filters and cold bytes in KiB)",
        [
            "rows / fragments",
            "zones",
            "index file",
            "companion",
            "dataset filter",
            "its false-positive rate",
            "fragment filter",
            "header",
            "zones' table",
            "cold KiB read",
        ],
        projected,
    )
    for line in PAPER_NOTES:
        report.note(line)
    image = args.output.parent / "img" / "scale.png"
    image.parent.mkdir(parents=True, exist_ok=True)
    common.plot(
        image,
        [
            Panel("Index build", "rows", {k: v for k, v in curve.items() if k.endswith(" s")}),
            Panel("Point lookup", "rows", {k: v for k, v in curve.items() if k.endswith(" ms")}),
        ],
    )
    command = " ".join(["bench/scale.py", *sys.argv[1:]])
    intro = f"Written by `{command}` (see its docstring for the cases)."
    report.write(args.output, "The curve to 100M rows", intro, images=[image.name])


if __name__ == "__main__":
    main()
