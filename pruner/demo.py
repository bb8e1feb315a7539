"""``pruner demo``: realistic events data, zone bloom indexes, and what they prune.

Generates an events table (unsorted user ids, UUID trace ids, a nullable column) as a Lance
dataset and as a directory of Parquet files, builds the indexes with progress bars, then for
a set of lookups shows how many zones may match, and checks against a full scan that every
matching row lies in a selected zone (the promise: a selection is never too narrow).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from pruner.hashing import hash_array
from pruner.index import ZoneIndex, build_index

__all__ = [
    "EXAMPLE_INDEXES",
    "SqlExample",
    "make_events",
    "make_users",
    "read_sql_examples",
    "run_demo",
    "write_example_tables",
]

SQL_EXAMPLES = Path(__file__).resolve().parents[1] / "sql_examples" / "queries.sql"

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _uuid_strings(rng: np.random.Generator, count: int) -> pa.Array:
    """Random version-4 UUIDs as strings, built without a per-value Python loop."""
    raw = rng.integers(0, 256, (count, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    digits = np.empty((count, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 0x0F]
    text = np.full((count, 36), ord("-"), dtype=np.uint8)
    for source, target in (
        (slice(0, 8), slice(0, 8)),
        (slice(8, 12), slice(9, 13)),
        (slice(12, 16), slice(14, 18)),
        (slice(16, 20), slice(19, 23)),
        (slice(20, 32), slice(24, 36)),
    ):
        text[:, target] = digits[:, source]
    offsets = np.arange(0, 36 * (count + 1), 36, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text.reshape(-1))]
    )


def make_events(rows: int, seed: int = 7) -> pa.Table:
    """An events table: unsorted high-cardinality keys, as point lookups meet them."""
    rng = np.random.default_rng(seed)
    user_id = rng.integers(0, max(1, rows // 8), rows, dtype=np.int64)
    countries = pa.array(["DE", "FR", "JP", "US", "BR", "IN"])
    country = countries.take(pa.array(rng.integers(0, len(countries), rows)))
    country = pc.if_else(pa.array(rng.random(rows) < 0.02), pa.scalar(None, pa.string()), country)
    return pa.table(
        {
            "event_id": pa.array(np.arange(rows, dtype=np.int64)),
            "user_id": pa.array(user_id),
            "trace_id": _uuid_strings(rng, rows),
            "country": country,
            "amount": pa.array(rng.gamma(2.0, 20.0, rows)),
        }
    )


def make_users(count: int, seed: int = 11) -> pa.Table:
    """A users table keyed by the events' user ids, for joins."""
    rng = np.random.default_rng(seed)
    plans = pa.array(["free", "pro", "team"])
    plan = plans.take(pa.array(rng.integers(0, len(plans), count)))
    plan = pc.if_else(pa.array(rng.random(count) < 0.1), pa.scalar(None, pa.string()), plan)
    signup = rng.integers(19_000, 20_000, count).astype(np.int32)
    return pa.table(
        {
            "user_id": pa.array(rng.permutation(count).astype(np.int64)),
            "name": pa.array([f"user-{i:07d}" for i in rng.permutation(count)]),
            "plan": plan,
            "signup": pa.array(signup, pa.date32()),
        }
    )


EXAMPLE_INDEXES = {
    "events": ("event_id", "user_id", "trace_id", "country"),
    "events_pq": ("user_id", "trace_id", "country"),
    "users": ("user_id", "name", "plan", "signup"),
}
"""The tables ``sql_examples/`` queries, and the columns indexed in each."""


def write_example_tables(
    directory: Path, rows: int, fragments: int = 4, items: int = 8192
) -> dict[str, Path]:
    """The tables of ``sql_examples/``: events (Lance), events_pq (Parquet), users (Parquet).

    Returns ``{table name: path}``, with every column of :data:`EXAMPLE_INDEXES` indexed,
    and also ``users_lance``: the users as a Lance dataset, so that every query can run with
    each table in either format.
    """
    import lance

    directory.mkdir(parents=True, exist_ok=True)
    events = make_events(rows)
    users = make_users(max(1, rows // 8))
    per_fragment = -(-rows // fragments)
    paths = {
        "events": directory / "events.lance",
        "events_pq": directory / "events_pq",
        "users": directory / "users",
        "users_lance": directory / "users.lance",
    }
    for path in paths.values():
        shutil.rmtree(path, ignore_errors=True)
    lance.write_dataset(events, str(paths["events"]), max_rows_per_file=per_fragment)
    users_per_fragment = max(1, -(-users.num_rows // 2))
    lance.write_dataset(users, str(paths["users_lance"]), max_rows_per_file=users_per_fragment)
    for name, table, per_file in (
        ("events_pq", events, per_fragment),
        ("users", users, -(-users.num_rows // 2)),
    ):
        paths[name].mkdir()
        for number, start in enumerate(range(0, table.num_rows, per_file)):
            pq.write_table(
                table.slice(start, per_file),
                paths[name] / f"part-{number:04d}.parquet",
                row_group_size=max(1, items // 2),
            )
    for name, columns in (*EXAMPLE_INDEXES.items(), ("users_lance", EXAMPLE_INDEXES["users"])):
        for column in columns:
            build_index(paths[name], column, items=items)
    return paths


@dataclass(frozen=True)
class SqlExample:
    name: str
    dialect: str
    why: str
    sql: str
    parameters: tuple[object, ...] = ()


def read_sql_examples(path: Path = SQL_EXAMPLES) -> list[SqlExample]:
    """The named queries of ``sql_examples/queries.sql`` (blocks of ``-- key: value`` + SQL)."""
    examples = []
    for block in path.read_text().split("\n\n"):
        keys: dict[str, str] = {}
        body: list[str] = []
        for line in block.strip().splitlines():
            if line.startswith("-- ") and ":" in line and not body:
                key, _, value = line[3:].partition(":")
                keys[key.strip()] = value.strip()
            elif not line.startswith("--"):
                body.append(line)
        if "name" in keys and body:
            sql = "\n".join(body).strip().rstrip(";")
            parameters = tuple(json.loads(keys.get("parameters", "[]")))
            examples.append(
                SqlExample(keys["name"], keys["dialect"], keys.get("why", ""), sql, parameters)
            )
    return examples


def _zones_holding(
    index: ZoneIndex, fragment_of_row: np.ndarray, offset_of_row: np.ndarray
) -> set[int]:
    """Zones (by number) that contain the given rows."""
    zones = set()
    for fragment, offset in zip(fragment_of_row.tolist(), offset_of_row.tolist(), strict=True):
        in_fragment = index.fragment_id == fragment
        inside = (
            in_fragment
            & (index.zone_start <= offset)
            & (offset < index.zone_start + index.zone_length)
        )
        zones.update(np.flatnonzero(inside).tolist())
    return zones


def run_demo(directory: Path, rows: int = 2_000_000, fragments: int = 20) -> int:
    import lance

    console = Console()
    directory.mkdir(parents=True, exist_ok=True)
    lance_path, parquet_path = directory / "events.lance", directory / "events_parquet"
    started = time.perf_counter()
    table = make_events(rows)
    per_fragment = -(-rows // fragments)
    shutil.rmtree(lance_path, ignore_errors=True)
    shutil.rmtree(parquet_path, ignore_errors=True)
    lance.write_dataset(table, str(lance_path), max_rows_per_file=per_fragment)
    parquet_path.mkdir()
    for number, start in enumerate(range(0, rows, per_fragment)):
        pq.write_table(
            table.slice(start, per_fragment),
            parquet_path / f"part-{number:04d}.parquet",
            row_group_size=64 * 1024,
        )
    console.print(
        f"generated {rows:,} events in {fragments} fragments "
        f"({time.perf_counter() - started:.1f} s): {lance_path}, {parquet_path}"
    )

    from pruner.cli import _progress_bar

    indexes: dict[tuple[str, str], ZoneIndex] = {}
    for source, path in (("lance", lance_path), ("parquet", parquet_path)):
        for column in ("user_id", "trace_id", "country"):
            began = time.perf_counter()
            with _progress_bar(f"{source}: indexing {column}") as progress:
                indexes[(source, column)] = build_index(path, column, progress=progress)
            console.print(
                f"{source}: {column} indexed in {time.perf_counter() - began:.2f} s, "
                f"{indexes[(source, column)].num_zones} zones"
            )

    rng = np.random.default_rng(1)
    picks = rng.integers(0, rows, 3)
    lookups = [("user_id", table.column("user_id")[int(i)]) for i in picks]
    lookups += [("trace_id", table.column("trace_id")[int(i)]) for i in picks]
    lookups += [("trace_id", pa.scalar("00000000-0000-4000-8000-000000000000"))]

    report = Table(
        "source", "lookup", "zones that may match", "matching rows", "all matches in selected zones"
    )
    all_good = True
    row_fragment = np.arange(rows) // per_fragment
    row_offset = np.arange(rows) % per_fragment
    for source in ("lance", "parquet"):
        for column, value in lookups:
            index = indexes[(source, column)]
            hashes, _ = hash_array(pa.array([value.as_py()], table.schema.field(column).type))
            selected = set(np.flatnonzero(index.zone_mask(hashes)).tolist())
            matches = np.flatnonzero(
                pc.equal(table.column(column), value).to_numpy(zero_copy_only=False)
            )
            # Parquet fragment ids are file numbers; Lance fragment ids are 0.. in order too.
            needed = _zones_holding(index, row_fragment[matches], row_offset[matches])
            good = needed <= selected
            all_good &= good
            shown = str(value.as_py())
            report.add_row(
                source,
                f"{column} = {shown[:13]}{'…' if len(shown) > 13 else ''}",
                f"{len(selected)} / {index.num_zones}",
                f"{len(matches):,}",
                "yes" if good else "NO",
            )
    console.print(report)
    console.print("every answer safe" if all_good else "[red]a selection was too narrow[/red]")
    return 0 if all_good else 1
