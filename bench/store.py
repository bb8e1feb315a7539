"""pruner on an object store against the engines alone, with latency added per request.

Why: on a local disk a read costs microseconds and the number of reads hardly matters; on an
object store each request costs a round trip (tens of milliseconds between regions, 5-20
within one), so what a lookup costs is mostly how many requests it makes *one after the
other*. This benchmark measures exactly that, offline: moto's S3 server on 127.0.0.1
(``tests/support/s3.py``) behind a forwarding proxy (``bench/proxy.py``) that delays each
HTTP request by 0, 30 or 100 ms and counts requests and bytes. Every client (pruner's
obstore, Lance, DuckDB through obstore's fsspec file system, DataFusion, boto3 for the
upload) talks to the proxy, never to moto directly. No client is mocked.

The data, written once per run (``id`` an even int64 in shuffled order, so odd keys inside
the column's range are absent and no min/max statistics rule them out; ``payload`` an int64;
``label`` a string), in ``--fragments`` fragments or files:

* ``s3://B/lance_pruner``: Lance, indexed by ``pruner.build_index`` on ``id``;
* ``s3://B/lance_own``: the same rows, indexed by Lance's ``create_scalar_index("id",
  "BLOOMFILTER")``;
* ``s3://B/parquet``: one Parquet file per fragment (one row group each) with Parquet bloom
  filters on ``id``, indexed by pruner (``_pruner/id/``).

Cases, each at every delay (``--delays``, default 0 30 100 ms), medians of ``--repeat`` turns
run round-robin (common.measure; ``--warmup`` untimed turns at the first delay), a new key
every turn, every answer checked:

* cold: a new table object per query (pruner: ``pruner.open_table(uri,
  storage_options=...)``, nothing reused but the store client's connections; also pruner
  given the URI with its process cache of opened tables emptied, as a new process calls it;
  the engines: a new LanceDataset, connection, file system or context);
* absent: cold, with a key the table does not hold (pruner should read no data object);
* warm: the same Table / dataset / connection / context for every query;
* index build on the store (rebuilt in place) against the same build on a local copy, and
  against that local build plus an upload of the files it wrote (boto3, as the data was
  uploaded), timed at each delay.

Round trips = (time at the largest delay - time at 0 ms) / the largest delay: how many
requests a case waits for one after the other. Requests and bytes are counted at the proxy,
per request (so split by what they read: listings, index, Parquet footers, data).

moto and the proxy run in a child process (``proxy.DelayedS3``): in this one, a Lance call
that waited for the store while holding the GIL stopped the server answering it, for ever,
and the clients' Python work slowed the server down. A failing case is recorded (FAILED and
its error's first line in the tables, its traceback's last lines in the notes), never
raised: the others go on. On 2 cores: ``--quick`` 3-4 minutes, the default about 14.

    .venv/bin/python -m bench.store --quick        # 1M rows, 20 fragments
    .venv/bin/python -m bench.store                # 5M rows, 200 fragments
    .venv/bin/python -m bench.store --rows 20000000
"""

from __future__ import annotations

import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `-m bench.store`: its siblings

import common
import datafusion
import duckdb
import fixtures
import fsspec
import lance
import numpy as np
import obstore
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import Case, Report, measure
from datafusion.object_store import AmazonS3
from obstore.fsspec import register
from proxy import DelayedS3, Request

import pruner
import pruner.engines
from pruner import storage
from pruner.analyzer import templates
from pruner.table import cache as table_cache
from tests.support.s3 import KEY_ID, REGION, SECRET

DELAYS_MS = (0, 30, 100)
BLOOM_FPP = 0.01
Run = Callable[[str], pa.Table]


# ----------------------------------------------------------------------------- the store


@dataclass
class Store:
    """moto behind the delaying proxy (in a process of their own), one bucket, and how each
    client reaches it."""

    s3: DelayedS3
    bucket: str

    @property
    def options(self) -> dict[str, str]:
        """Lance-style storage options, pointing at the proxy."""
        return {
            "aws_endpoint": self.s3.endpoint,
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
            "aws_region": REGION,
            "allow_http": "true",
        }

    def uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{name}"

    def fsspec(self, fresh: bool) -> Any:
        """obstore's fsspec file system for ``s3://`` (what DuckDB reads the store through:
        its httpfs cannot be installed offline); ``fresh``: not fsspec's cached instance.

        Made as obstore documents it, by ``obstore.fsspec.register("s3")`` then
        ``fsspec.filesystem("s3", ...)``: a plain ``FsspecStore("s3", ...)`` (obstore
        0.12.1) keeps the class's protocol ``abstract``, so its ``glob`` does not strip
        ``s3://`` and finds nothing (DuckDB: "No files found that match the pattern")."""
        register("s3")
        config = {k: v for k, v in self.options.items() if k != "allow_http"}
        return fsspec.filesystem(
            "s3",
            config=config,
            client_options={"allow_http": True},
            skip_instance_cache=fresh,
        )

    def datafusion_store(self) -> AmazonS3:
        return AmazonS3(
            bucket_name=self.bucket,
            region=REGION,
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
            endpoint=self.s3.endpoint,
            allow_http=True,
        )


def start_store() -> Store:
    s3 = DelayedS3()
    return Store(s3, s3.new_bucket())


# ------------------------------------------------------------------------------ the data


@dataclass
class Data:
    """Where each copy is, local and on the store, and the keys to look up."""

    rows: int
    fragments: int
    local: Path
    present: list[int]
    setup: list[str] = field(default_factory=list)  # one-off timings, for the notes

    @property
    def local_lance(self) -> Path:
        return self.local / "lance"

    @property
    def local_parquet(self) -> Path:
        return self.local / "parquet"


def make_table(rows: int) -> pa.Table:
    """``id``: 0, 2, 4... shuffled (odd keys are absent, inside the range); ``payload``:
    ``id * 3``; ``label``: ``user-`` and the id in 12 digits."""
    ids = np.random.default_rng(20260601).permutation(rows).astype(np.int64) * 2
    digits = pc.utf8_lpad(pc.cast(pa.array(ids), pa.string()), 12, "0")
    return pa.table(
        {
            "id": ids,
            "payload": ids * 3,
            "label": pc.binary_join_element_wise("user-", digits, ""),
        }
    )


def write_data(store: Store, rows: int, fragments: int, local: Path) -> Data:
    """Every copy written and indexed (through the proxy, at 0 ms), and checked: the
    fragment counts, the Parquet files' bloom filters."""
    table = make_table(rows)
    per = -(-rows // fragments)
    chosen = np.random.default_rng(7).choice(table.column("id"), 200, replace=False)
    present = [int(k) for k in chosen]
    data = Data(rows, fragments, local, present)

    def step(label: str, run: Callable[[], object]) -> None:
        seconds, _ = common.timed(run)
        data.setup.append(f"{label}: {seconds:.1f} s")
        print(f"setup: {label}: {seconds:.1f} s", flush=True)

    options = store.options
    for name in ("lance_pruner", "lance_own"):
        step(
            f"lance.write_dataset to {name}",
            lambda name=name: lance.write_dataset(
                table, store.uri(name), max_rows_per_file=per, storage_options=options
            ),
        )
        made = len(lance.dataset(store.uri(name), storage_options=options).get_fragments())
        if made != fragments:
            raise SystemExit(f"{rows:,} rows made {made} fragments, not {fragments}")
    step(
        "pruner.build_index on lance_pruner",
        lambda: pruner.build_index(store.uri("lance_pruner"), "id", storage_options=options),
    )
    step(
        "Lance create_scalar_index BLOOMFILTER on lance_own",
        lambda: lance.dataset(store.uri("lance_own"), storage_options=options).create_scalar_index(
            "id", "BLOOMFILTER"
        ),
    )

    def parquet() -> None:
        data.local_parquet.mkdir(parents=True)
        bloom = {"id": {"ndv": per, "fpp": BLOOM_FPP}}
        for i in range(fragments):
            part = table.slice(i * per, per)
            pq.write_table(
                part, data.local_parquet / f"part-{i:04d}.parquet", bloom_filter_options=bloom
            )

    step("Parquet written locally (bloom filters on id)", parquet)
    check_bloom_filters(data.local_parquet / "part-0000.parquet", table.slice(0, per))
    step("Parquet uploaded", lambda: store.s3.upload(data.local_parquet, store.uri("parquet")))
    step(
        "pruner.build_index on parquet",
        lambda: pruner.build_index(store.uri("parquet"), "id", storage_options=options),
    )
    step(
        "local Lance copy written", lambda: fixtures.write_lance(table, data.local_lance, fragments)
    )
    return data


def check_bloom_filters(file: Path, part: pa.Table) -> None:
    """The file's own bloom filter on ``id`` excludes an absent key and keeps a present one
    (DuckDB's ``parquet_bloom_probe``)."""
    present = int(part.column("id")[0])
    con = duckdb.connect()
    probe = "SELECT bool_and(bloom_filter_excludes) FROM parquet_bloom_probe(?, 'id', ?)"
    kept = con.execute(probe, [str(file), present]).fetchone()
    dropped = con.execute(probe, [str(file), present + 1]).fetchone()
    if kept != (False,) or dropped != (True,):
        raise SystemExit(f"{file.name}: no usable bloom filter on id ({kept}, {dropped})")


# ----------------------------------------------------------------------------- the cases


def pruner_fresh(uri: str, options: dict[str, str], engine: str = "duckdb") -> Run:
    """pruner on a Table opened for the query (public API: nothing of an earlier query's
    reused but the store client's connections, and the ranges it read ahead forgotten);
    every SQL text new to pruner."""

    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        storage.forget_read_ahead()  # companion heads kept by the last turn's opening
        table = pruner.open_table(uri, storage_options=options)
        return pruner.query(sql, {"t": table}, engine=engine)

    return run


def pruner_uri(uri: str, options: dict[str, str]) -> Run:
    """pruner given the URI, as a new process calls it: its cache of opened tables emptied
    first (so the URI is opened, with the LISTs that vouch the table unchanged around it)."""

    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        storage.forget_read_ahead()
        with table_cache._opened_lock:
            table_cache._opened.clear()
        return pruner.query(sql, {"t": storage.location(uri, options)})

    return run


def held_long_enough(table: pruner.Table) -> None:
    """A held table as it is once held for a while: it reads its index companion whole in
    the background after its second probe (docs/object-storage.md), as Lance loads a held
    dataset's index on its first query. Its probes until then read the store; this waits,
    up to a minute, until planning a lookup reads no byte from the store (explain says; a
    held Parquet table's one LIST, whether its files changed, reads none)."""
    deadline = time.monotonic() + 60
    for key in range(1_000_000):
        found = pruner.explain(f"SELECT * FROM t WHERE id = {2 * key}", {"t": table})
        read = found.store_reads[1] if found.store_reads is not None else 0
        if (key >= 2 and read == 0) or time.monotonic() > deadline:
            return
        time.sleep(0.05 if key >= 2 else 0)


def pruner_warm(uri: str, options: dict[str, str], engine: str = "duckdb") -> Run:
    table = pruner.open_table(uri, storage_options=options)
    held_long_enough(table)

    def run(sql: str) -> pa.Table:
        templates.clear(texts_only=True)
        return pruner.query(sql, {"t": table}, engine=engine)

    return run


def duckdb_lance(uri: str, options: dict[str, str], fresh: bool) -> Run:
    """DuckDB alone over a LanceDataset (``id = K`` pushed into Lance's scanner, which uses
    Lance's own index): a new one per query, or one kept."""
    con = duckdb.connect()
    if not fresh:
        con.register("t", lance.dataset(uri, storage_options=options))

    def run(sql: str) -> pa.Table:
        if fresh:
            con.register("t", lance.dataset(uri, storage_options=options))
        return con.sql(sql).to_arrow_table()

    return run


def duckdb_parquet(store: Store, uri: str, fresh: bool) -> Run:
    """DuckDB alone over ``read_parquet('<dir>/*.parquet')`` through obstore's fsspec file
    system: a new connection and file system per query, or one kept."""
    scan = f"CREATE VIEW t AS SELECT * FROM read_parquet('{uri}/*.parquet')"

    def connect() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        con.register_filesystem(store.fsspec(fresh))
        con.execute(scan)
        return con

    kept = None if fresh else connect()

    def run(sql: str) -> pa.Table:
        con = connect() if kept is None else kept
        return con.sql(sql).to_arrow_table()

    return run


def datafusion_parquet(store: Store, uri: str, fresh: bool) -> Run:
    """DataFusion alone: ``register_parquet`` on the store's directory (bloom filters read,
    filters pushed into the scan, as engines.datafusion_context sets them): a new context
    per query, or one kept."""

    def connect() -> datafusion.SessionContext:
        config = (
            datafusion.SessionConfig()
            .set("datafusion.execution.parquet.pushdown_filters", "true")
            .set("datafusion.execution.parquet.bloom_filter_on_read", "true")
        )
        context = datafusion.SessionContext(config)
        context.register_object_store("s3://", store.datafusion_store(), store.bucket)
        context.register_parquet("t", f"{uri}/")
        return context

    kept = None if fresh else connect()

    def run(sql: str) -> pa.Table:
        context = connect() if kept is None else kept
        return context.sql(sql).to_arrow_table()

    return run


@dataclass(frozen=True)
class Group:
    """Cases compared side by side, and the pairs whose ratios are reported (pruner's case,
    the engine alone's)."""

    name: str
    keys: str  # "present" or "absent"
    cases: dict[str, Callable[[], Run]]  # made when the group first runs (warm: kept)
    pairs: tuple[tuple[str, str], ...]


def groups(store: Store) -> list[Group]:
    options = store.options
    lance_pruner, lance_own, parquet = (
        store.uri(n) for n in ("lance_pruner", "lance_own", "parquet")
    )
    cold_lance = {
        "pruner (DuckDB), fresh Table": lambda: pruner_fresh(lance_pruner, options),
        "pruner (DuckDB), URI, cache emptied": lambda: pruner_uri(lance_pruner, options),
        "DuckDB alone, fresh LanceDataset (Lance's index)": lambda: duckdb_lance(
            lance_own, options, fresh=True
        ),
    }
    lance_pairs = (
        ("pruner (DuckDB), fresh Table", "DuckDB alone, fresh LanceDataset (Lance's index)"),
        ("pruner (DuckDB), URI, cache emptied", "DuckDB alone, fresh LanceDataset (Lance's index)"),
    )
    cold_parquet = {
        "pruner (DuckDB), fresh Table": lambda: pruner_fresh(parquet, options),
        "pruner (DataFusion), fresh Table": lambda: pruner_fresh(parquet, options, "datafusion"),
        "DuckDB alone, new connection": lambda: duckdb_parquet(store, parquet, fresh=True),
        "DataFusion alone, new context": lambda: datafusion_parquet(store, parquet, fresh=True),
    }
    parquet_pairs = (
        ("pruner (DuckDB), fresh Table", "DuckDB alone, new connection"),
        ("pruner (DataFusion), fresh Table", "DataFusion alone, new context"),
    )
    warm_parquet_pairs = (
        ("pruner (DuckDB), Table kept", "DuckDB alone, connection kept"),
        ("pruner (DataFusion), Table kept", "DataFusion alone, context kept"),
    )
    return [
        Group("cold / Lance", "present", cold_lance, lance_pairs),
        Group("cold / Parquet", "present", cold_parquet, parquet_pairs),
        Group("absent / Lance", "absent", cold_lance, lance_pairs),
        Group("absent / Parquet", "absent", cold_parquet, parquet_pairs),
        Group(
            "warm / Lance",
            "present",
            {
                "pruner (DuckDB), Table kept": lambda: pruner_warm(lance_pruner, options),
                "DuckDB alone, LanceDataset kept": lambda: duckdb_lance(
                    lance_own, options, fresh=False
                ),
            },
            (("pruner (DuckDB), Table kept", "DuckDB alone, LanceDataset kept"),),
        ),
        Group(
            "warm / Parquet",
            "present",
            {
                "pruner (DuckDB), Table kept": lambda: pruner_warm(parquet, options),
                "pruner (DataFusion), Table kept": lambda: pruner_warm(
                    parquet, options, "datafusion"
                ),
                "DuckDB alone, connection kept": lambda: duckdb_parquet(
                    store, parquet, fresh=False
                ),
                "DataFusion alone, context kept": lambda: datafusion_parquet(
                    store, parquet, fresh=False
                ),
            },
            warm_parquet_pairs,
        ),
    ]


# ----------------------------------------------------------------------------- measuring


@dataclass
class Outcome:
    """One case at one delay: its timed calls' seconds and requests, or its error."""

    seconds: list[float] = field(default_factory=list)
    requests: list[list[Request]] = field(default_factory=list)
    error: str | None = None

    def ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    def count(self, kind: str | None = None) -> int:
        """Median requests of a timed call (of one :func:`classify` kind only, if given)."""
        return int(
            statistics.median(
                sum(kind is None or classify(r) == kind for r in calls) for calls in self.requests
            )
        )

    def bytes_down(self) -> int:
        return int(statistics.median(sum(r.bytes_down for r in calls) for calls in self.requests))

    def bytes_up(self) -> int:
        return int(statistics.median(sum(r.bytes_up for r in calls) for calls in self.requests))


def classify(request: Request) -> str:
    """What a request is for: ``list``; ``index`` (pruner's ``_pruner/``, Lance's
    ``_indices/``); ``footer``, a suffix-range GET of a Parquet file (how pruner reads a
    footer: its last bytes, without knowing the size); ``data``, any other request of a data
    object (a Parquet file or a Lance data file: HEADs, ranged GETs of pages or footers);
    ``other``: the rest (Lance's manifests, a HEAD of the table's folder)."""
    path, _, query = request.target.partition("?")
    if "list-type" in query or "delimiter" in query or path.rstrip("/").count("/") <= 1:
        return "list"
    if "/_pruner/" in path or "/_indices/" in path:
        return "index"
    if path.endswith(".parquet") and request.range.startswith("bytes=-"):
        return "footer"
    if path.endswith(".parquet") or "/data/" in path:
        return "data"
    return "other"


KINDS = ("list", "index", "footer", "data", "other")


Failures = dict[str, str]
"""``case @ delay`` -> the last lines of its traceback."""


def first_line(err: BaseException) -> str:
    """The error's first line; where that is only "Traceback (most recent call last):" (DuckDB
    wraps an exception raised in Python code it called, say a file system's, with its
    traceback), the wrapped exception's own line."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        raised = [line for line in lines if re.match(r"[\w.]+(Error|Exception)\b.*:", line)]
        lines = raised[-1:] or lines
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:200]


def observed(
    make: Callable[[], Run],
    outcome: Outcome,
    proxy: DelayedS3,
    expected: dict[str, list[int]],
    failures: Failures,
    label: str,
) -> Callable[[str], object]:
    """``make()``'s run (made at the first call), timed (the call alone: not the proxy's
    bookkeeping around it), its requests recorded and its answer checked (the ids expected).
    An error or a wrong answer is recorded as the case's failure, never raised (the other
    cases go on), and the case is not run again at this delay."""

    def run(sql: str) -> object:
        if outcome.error is not None:
            return None
        before = proxy.mark()
        try:
            began = time.perf_counter()
            answer = make()(sql)
            outcome.seconds.append(time.perf_counter() - began)
            got = sorted(answer.column("id").to_pylist())
            if got != expected[sql]:
                raise AssertionError(f"wrong answer: ids {got[:5]}, expected {expected[sql]}")
        except Exception as err:
            outcome.error = first_line(err)
            failures[label] = "".join(traceback.format_exception(err)[-4:]).strip()
            print(f"FAILED {label}: {outcome.error}", flush=True)
            return None
        outcome.requests.append(proxy.since(before))
        return answer

    return run


def once(make: Callable[[], Run]) -> Callable[[], Run]:
    """``make``, called at most once: a warm case's objects are the same at every delay."""
    kept: list[Run] = []

    def get() -> Run:
        if not kept:
            kept.append(make())
        return kept[0]

    return get


@dataclass
class Lookups:
    """What the lookup groups measured: group -> case -> delay -> outcome."""

    outcomes: dict[str, dict[str, dict[int, Outcome]]] = field(default_factory=dict)
    failures: Failures = field(default_factory=dict)


def run_lookups(
    store: Store, data: Data, delays: Sequence[int], repeat: int, warmup: int
) -> Lookups:
    """Every group at every delay: its cases side by side (common.measure: round-robin,
    each turn in its own shuffled order), a new key every turn. ``warmup`` untimed turns at the
    first delay only: they make what the cases keep (warm cases' tables, connections) and
    import what the first calls import; at the later delays nothing is left to warm."""
    found = Lookups()
    keys = iter(data.present)
    largest = 2 * (data.rows - 1)
    made: dict[str, Callable[[], Run]] = {}
    for delay in delays:
        store.s3.delay = delay / 1000
        untimed = warmup if delay == delays[0] else 0
        for group in groups(store):
            expected: dict[str, list[int]] = {}
            for _ in range(untimed + repeat):
                key = next(k for k in keys if k < largest)
                if group.keys == "absent":
                    key += 1  # odd: inside the range, in no row
                expected[f"SELECT * FROM t WHERE id = {key}"] = (
                    [key] if group.keys == "present" else []
                )
            sqls = list(expected)
            outcomes = {}
            cases = []
            for name, make in group.cases.items():
                made.setdefault(f"{group.name}/{name}", once(make))
                outcomes[name] = Outcome()
                label = f"{group.name} / {name} @ {delay} ms"
                run = observed(
                    made[f"{group.name}/{name}"],
                    outcomes[name],
                    store.s3,
                    expected,
                    found.failures,
                    label,
                )
                cases.append(Case(name, run))
            began = time.perf_counter()
            # common.measure orders the turns (round-robin, each turn shuffled; the timed turns take
            # sqls[0..repeat-1], the warm-up turns the last ones); each case times its own
            # call, without the proxy's bookkeeping
            measure(cases, sqls, repeat, warmup=untimed)
            for name, outcome in outcomes.items():
                outcome.seconds = outcome.seconds[-repeat:]
                outcome.requests = outcome.requests[-repeat:]
                found.outcomes.setdefault(group.name, {}).setdefault(name, {})[delay] = outcome
            print(
                f"{delay:>3} ms  {group.name}: {time.perf_counter() - began:.1f} s  "
                + ", ".join(
                    f"{n} {o.ms():.0f} ms" if o.error is None else f"{n} FAILED"
                    for n, o in outcomes.items()
                ),
                flush=True,
            )
    return found


# --------------------------------------------------------------------------------- builds


@dataclass(frozen=True)
class Build:
    """One index build, on the store and on the local copy."""

    name: str
    store: Callable[[], object]
    local: Callable[[], object]
    local_path: Path


def builds(store: Store, data: Data) -> list[Build]:
    options = store.options
    own = data.local / "lance_own"
    if not own.exists():
        shutil.copytree(data.local_lance, own)

    def lance_own_index(where: str, storage_options: dict[str, str] | None) -> None:
        dataset = lance.dataset(where, storage_options=storage_options)
        dataset.create_scalar_index("id", "BLOOMFILTER", replace=True)

    return [
        Build(
            "pruner.build_index, Lance",
            lambda: pruner.build_index(store.uri("lance_pruner"), "id", storage_options=options),
            lambda: pruner.build_index(data.local_lance, "id"),
            data.local_lance,
        ),
        Build(
            "pruner.build_index, Parquet",
            lambda: pruner.build_index(store.uri("parquet"), "id", storage_options=options),
            lambda: pruner.build_index(data.local_parquet, "id"),
            data.local_parquet,
        ),
        Build(
            "Lance create_scalar_index BLOOMFILTER",
            lambda: lance_own_index(store.uri("lance_own"), options),
            lambda: lance_own_index(str(own), None),
            own,
        ),
    ]


def timed_writes(folder: Path, run: Callable[[], object]) -> tuple[float, list[Path]]:
    """Seconds of ``run()``, and the files it made or changed under ``folder``."""

    def files() -> dict[Path, tuple[int, int]]:
        return {
            p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
        }

    before = files()
    seconds, _ = common.timed(run)
    return seconds, [p for p, st in files().items() if before.get(p) != st]


def staged(written: list[Path], root: Path) -> Path:
    """A folder of hard links to the ``written`` files (under ``root``): what a build's upload
    carries, for timing its upload alone."""
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
    for number, path in enumerate(written):
        target = folder / f"{number}-{path.name}"
        try:
            target.hardlink_to(path)
        except OSError:
            shutil.copyfile(path, target)
    return folder


@dataclass
class BuildOutcome:
    local_seconds: list[float] = field(default_factory=list)
    local_bytes: int = 0
    store: dict[int, Outcome] = field(default_factory=dict)
    # seconds to upload the local build's files (boto3, as the data was) at each delay
    upload: dict[int, float] = field(default_factory=dict)
    error: str | None = None


def run_builds(
    store: Store, data: Data, delays: Sequence[int], repeat: int, failures: Failures
) -> dict[str, BuildOutcome]:
    """Each build on the local copy, then on the store at every delay; ``repeat`` times each
    (a build rewrites the index in place: every one is a whole build)."""
    found: dict[str, BuildOutcome] = {}
    for build in builds(store, data):
        outcome = found[build.name] = BuildOutcome()
        try:
            for _ in range(repeat):
                seconds, written = timed_writes(build.local_path, build.local)
                outcome.local_seconds.append(seconds)
            outcome.local_bytes = sum(p.stat().st_size for p in written)
            upload = staged(written, data.local)
            for delay in delays:
                store.s3.delay = delay / 1000
                scratch = store.uri(f"upload-{len(found)}-{delay}")
                outcome.upload[delay], _ = common.timed(partial(store.s3.upload, upload, scratch))
                at = outcome.store[delay] = Outcome()
                for _ in range(repeat):
                    before = store.s3.mark()
                    seconds, _ = common.timed(build.store)
                    at.seconds.append(seconds)
                    at.requests.append(store.s3.since(before))
                print(f"{delay:>3} ms  build {build.name}: {at.ms() / 1000:.1f} s", flush=True)
            shutil.rmtree(upload)
        except Exception as err:
            outcome.error = first_line(err)
            failures[f"build / {build.name}"] = "".join(traceback.format_exception(err)[-4:])
            print(f"FAILED build {build.name}: {outcome.error}", flush=True)
    return found


# --------------------------------------------------------------------------------- report


def kb(value: float) -> str:
    return f"{value / 1024:,.0f}"


def mb(value: float) -> str:
    return f"{value / 2**20:,.1f}"


def round_trips(at: dict[int, Outcome], delays: Sequence[int]) -> str:
    low, high = min(delays), max(delays)
    if high == low or any(at[d].error for d in (low, high)):
        return "-"
    return f"{(at[high].ms() - at[low].ms()) / (high - low):.1f}"


def report_lookups(report: Report, found: Lookups, delays: Sequence[int]) -> None:
    rows = []
    for group, cases in found.outcomes.items():
        for name, at in cases.items():
            first = at[delays[0]]
            if first.error is not None:
                traffic = [f"FAILED: {first.error}", *["-"] * (len(KINDS) + 1)]
            else:
                kinds = [str(first.count(kind)) for kind in KINDS]
                traffic = [str(first.count()), *kinds, kb(first.bytes_down())]
            times = [f"{at[d].ms():,.0f}" if at[d].error is None else "FAILED" for d in delays]
            rows.append([group, name, *traffic, *times, round_trips(at, delays)])
    report.table(
        "Point lookups on the store (median of the timed turns)",
        [
            "group",
            "case",
            "requests",
            *KINDS,
            "KB down",
            *(f"ms @{d}" for d in delays),
            "round trips",
        ],
        rows,
    )


def report_ratios(
    report: Report, found: Lookups, delays: Sequence[int], pairs: dict[str, Sequence[Any]]
) -> None:
    rows = []
    for group, listed in pairs.items():
        cases = found.outcomes[group]
        for mine, theirs in listed:
            a, b = cases[mine], cases[theirs]
            ratio = [
                "FAILED" if a[d].error or b[d].error else f"{a[d].ms() / b[d].ms():.2f}x"
                for d in delays
            ]
            first_a, first_b = a[delays[0]], b[delays[0]]
            if first_a.error or first_b.error:
                traffic = ["-", "-"]
            else:
                traffic = [
                    f"{first_a.count()} / {first_b.count()}",
                    f"{kb(first_a.bytes_down())} / {kb(first_b.bytes_down())}",
                ]
            trips = f"{round_trips(a, delays)} / {round_trips(b, delays)}"
            rows.append([group, mine, theirs, *ratio, *traffic, trips])
    report.table(
        "pruner / the engine alone (time ratio: below 1 pruner is faster)",
        [
            "group",
            "pruner",
            "engine alone",
            *(f"time x @{d} ms" for d in delays),
            "requests",
            "KB down",
            "round trips",
        ],
        rows,
    )


def report_builds(report: Report, found: dict[str, BuildOutcome], delays: Sequence[int]) -> None:
    rows = []
    for name, outcome in found.items():
        if outcome.error is not None:
            rows.append([name, f"FAILED: {outcome.error}", *["-"] * (5 + 4 * len(delays))])
            continue
        local = statistics.median(outcome.local_seconds)
        first = outcome.store[delays[0]]
        rows.append(
            [
                name,
                f"{local:.2f}",
                mb(outcome.local_bytes),
                str(first.count()),
                mb(first.bytes_up()),
                mb(first.bytes_down()),
                *(f"{outcome.store[d].ms() / 1000:.2f}" for d in delays),
                round_trips(outcome.store, delays),
                *(f"{outcome.store[d].ms() / 1000 / local:.1f}x" for d in delays),
                *(f"{outcome.upload[d]:.2f}" for d in delays),
                *(
                    f"{outcome.store[d].ms() / 1000 / (local + outcome.upload[d]):.2f}x"
                    for d in delays
                ),
            ]
        )
    report.table(
        "Index builds: on the store against a local copy (median s)",
        [
            "build",
            "local s",
            "local MB written",
            "store requests",
            "MB up",
            "MB down",
            *(f"store s @{d}" for d in delays),
            "round trips",
            *(f"x local @{d}" for d in delays),
            *(f"upload s @{d}" for d in delays),
            *(f"x (local + upload) @{d}" for d in delays),
        ],
        rows,
    )


# ----------------------------------------------------------------------------------- main


def checkout() -> str:
    """The commit measured, and whether pruner/ differs from it (read-only git calls)."""
    import subprocess

    def git(*arguments: str) -> str:
        done = subprocess.run(["git", *arguments], cwd=common.ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "pruner")
    return git("rev-parse", "--short", "HEAD") + (" with pruner/ changed" if changed else "")


def main() -> None:
    made = common.parser(__doc__, rows=5_000_000, fragments=200, repeat=3)
    made.add_argument("--quick", action="store_true", help="1M rows, 20 fragments")
    made.add_argument("--delays", type=int, nargs="+", default=list(DELAYS_MS), help="ms")
    made.add_argument("--warmup", type=int, default=1, help="untimed turns per group (first delay)")
    made.add_argument("--build-repeat", type=int, default=1, help="builds per place and delay")
    made.add_argument("--output", type=Path, help="also write the tables to this markdown page")
    args = common.parse(made, pruner, duckdb, datafusion, lance, pa, obstore)
    if args.quick:
        args.rows, args.fragments = 1_000_000, 20
    delays = sorted(set(args.delays))
    if delays[0] != 0:
        made.error("--delays must include 0 (round trips are measured against it)")
    print(f"rows {args.rows:,}, fragments {args.fragments}, delays {delays} ms", flush=True)
    measured = checkout()
    print(f"pruner at {measured}", flush=True)
    for engine in ("duckdb", "datafusion"):
        pruner.engines.adapter(engine)  # all of pruner loaded now, not halfway through the run

    store = start_store()
    report = Report()
    try:
        with tempfile.TemporaryDirectory(prefix="pruner-store-") as local:
            data = write_data(store, args.rows, args.fragments, Path(local))
            lookups = run_lookups(store, data, delays, args.repeat, args.warmup)
            built = run_builds(store, data, delays, args.build_repeat, lookups.failures)
    finally:
        store.s3.close()

    report.note(f"pruner at commit {measured}; {args.rows:,} rows in {args.fragments} fragments")
    for line in data.setup:
        report.note(f"setup (0 ms): {line}")
    report_lookups(report, lookups, delays)
    report_ratios(report, lookups, delays, {g.name: g.pairs for g in groups(store)})
    report_builds(report, built, delays)
    for label, trace in lookups.failures.items():
        report.note(f"FAILED {label}:\n{trace}")
    if args.output:
        command = " ".join([".venv/bin/python -m bench.store", *sys.argv[1:]])
        intro = f"Written by `{command}`; see bench/store.py's docstring."
        report.write(args.output, "pruner on an object store, with latency", intro)


if __name__ == "__main__":
    main()
