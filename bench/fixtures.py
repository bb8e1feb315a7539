"""The data the benchmarks run on, made once and cached under ``bench/data/`` by its
parameters (:func:`cached`: made in a scratch path, renamed when whole)."""

from __future__ import annotations

import functools
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common  # noqa: F401 (the checkout's pruner first)
import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import pruner
from pruner.demo import uuid_strings
from pruner.index import DEFAULT_ITEMS, build_index, list_bloom_indexes, parquet_index_path
from pruner.index.hierarchy import Hierarchy, HierarchyUnusable

DATA_DIR = Path(__file__).resolve().parent / "data"


def data_path(name: str, **parameters: object) -> Path:
    """Where the data ``name`` made with ``parameters`` is kept:
    ``data/name/key1value1_key2value2``."""
    return DATA_DIR / name / "_".join(f"{key}{value}" for key, value in parameters.items())


def cached(path: Path, make: Callable[[Path], object]) -> Path:
    """``path``, made first by ``make(scratch)`` if missing: into a scratch path beside it,
    renamed to ``path`` when whole, so a path that exists is complete."""
    if path.exists():
        return path
    scratch = path.with_name(path.name + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.unlink(missing_ok=True)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    make(scratch)
    scratch.rename(path)
    print(f"data: made {path.relative_to(DATA_DIR)} in {time.perf_counter() - began:.1f} s")
    return path


def working_copy(path: Path, label: str) -> Path:
    """A copy of ``path`` to change (anew each call): ``<path>-<label>``."""
    target = path.with_name(f"{path.name}-{label}")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(path, target)
    return target


def id_table(rows: int, seed: int, payload: bool = True) -> pa.Table:
    """``id``: a shuffled permutation of 0..rows-1 (int64); ``payload``: ``id * 3``."""
    ids = np.random.default_rng(seed).permutation(rows).astype(np.int64)
    return pa.table({"id": ids, "payload": ids * 3} if payload else {"id": ids})


def write_lance(table: pa.Table, path: Path, fragments: int, groups: bool = False) -> None:
    """``table`` as a Lance dataset of ``fragments`` fragments (with ``groups``, one row
    group each)."""
    per = -(-table.num_rows // fragments)
    options = {"max_rows_per_group": per} if groups else {}
    lance.write_dataset(table, str(path), max_rows_per_file=per, **options)
    made = len(lance.dataset(str(path)).get_fragments())
    if made != fragments:
        raise SystemExit(f"{table.num_rows:,} rows made {made} fragments, not {fragments}")


# ------------------------------------------------------------------- point lookups' data

SEED = 20240601
KEYS = 20
COLUMNS = ("id", "trace_id")
COPIES = ("lance", "lance_noidx", "parquet", "parquet8k", "bloom", "bloom8k")
INDEXED = ("lance", "parquet", "parquet8k")
BLOOM_FPP = 0.01


@dataclass(frozen=True)
class LookupData:
    """The point lookups' rows stored six times: ``lance`` (indexed by pruner on ``id`` and
    ``trace_id``: committed BLOOMFILTER indexes, which Lance's own scanner uses too),
    ``lance_noidx``; Parquet, one file per fragment: ``parquet`` (one row group a file),
    ``parquet8k`` (8,192-row row groups), both indexed by pruner; ``bloom`` and ``bloom8k``,
    the same layouts with native bloom filters on both columns (fpp 0.01), no pruner index.
    ``keys``: 20 rows' ``id`` and ``trace_id`` (the same rows, in the same order)."""

    root: Path
    keys: dict[str, list[Any]]

    def path(self, copy: str) -> Path:
        return self.root / copy

    def files(self, copy: str) -> list[str]:
        return sorted(str(p) for p in self.path(copy).glob("*.parquet"))


def lookup_data(rows: int, fragments: int | None = None) -> LookupData:
    """``id`` a shuffled unique int64, ``trace_id`` a random UUID string, ``amount`` a
    float64, in ``fragments`` fragments (by default one per 100,000 rows); each copy made
    when missing."""
    fragments = fragments or max(1, rows // 100_000)
    root = data_path("point_lookup", rows=rows, fragments=fragments, seed=SEED)

    @functools.cache
    def table() -> pa.Table:
        rng = np.random.default_rng(SEED)
        return pa.table(
            {
                "id": pa.array(rng.permutation(rows).astype(np.int64)),
                "trace_id": uuid_strings(rng, rows),
                "amount": pa.array(rng.random(rows) * 1000.0),
            }
        )

    for copy in COPIES:
        cached(root / copy, lambda tmp, copy=copy: _write_copy(table(), copy, tmp, fragments))

    def keys(tmp: Path) -> None:
        picks = pa.array(np.random.default_rng(SEED + 1).choice(rows, KEYS, replace=False))
        tmp.write_text(json.dumps({c: table().column(c).take(picks).to_pylist() for c in COLUMNS}))

    cached(root / "keys.json", keys)
    print(f"data: {root.relative_to(DATA_DIR)}")
    data = LookupData(root, json.loads((root / "keys.json").read_text()))
    _ensure_companions(data)
    return data


def _write_copy(table: pa.Table, copy: str, target: Path, fragments: int) -> None:
    if copy.startswith("lance"):
        write_lance(table, target, fragments)
    else:
        per_file = table.num_rows // fragments
        options: dict[str, Any] = {}
        if copy.endswith("8k"):
            options["row_group_size"] = 8192
        if copy.startswith("bloom"):
            ndv = 8192 if copy.endswith("8k") else per_file
            options["bloom_filter_options"] = {c: {"ndv": ndv, "fpp": BLOOM_FPP} for c in COLUMNS}
        target.mkdir()
        for i in range(fragments):
            part = table.slice(i * per_file, per_file if i < fragments - 1 else None)
            pq.write_table(part, target / f"part-{i:03d}.parquet", **options)
    if copy in INDEXED:
        for column in COLUMNS:
            build_index(target, column)


def _ensure_companions(data: LookupData) -> None:
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


def where(column: str, key: Any) -> str:
    return f"id = {int(key)}" if column == "id" else f"trace_id = '{key}'"


def sql_of(column: str, key: Any) -> str:
    return f"SELECT * FROM t WHERE {where(column, key)}"


def key_sql(key: int | str) -> str:
    """The point lookup of ``key``: a string is a ``trace_id``, an integer an ``id``."""
    return sql_of("trace_id" if isinstance(key, str) else "id", key)


def key_kinds(data: LookupData, rows: int) -> tuple[list[int], list[int], list[str]]:
    """Keys of three kinds, as many of each as ``data.keys``: present ids, absent ids beyond
    the column's range (min/max statistics rule them out too), random UUIDs (absent
    trace_ids inside the column's range: no statistics help)."""
    present = [int(k) for k in data.keys["id"]]
    absent = [rows + 1 + 7919 * i for i in range(len(present))]
    return present, absent, uuid_strings(np.random.default_rng(7), len(present)).to_pylist()


def trace_ids(_: object, answer: pa.Table) -> list[str]:
    """What every case of a lookup must find alike (a ``check`` of :func:`common.measure`)."""
    return sorted(answer.column("trace_id").to_pylist())


# ------------------------------------------------------------------------- other tables


def lookup_table(rows: int, fragments: int, items: int = DEFAULT_ITEMS) -> Path:
    """lookup.py's table, join.py's fact table: :func:`id_table` (seed 11) in Lance, one
    row group a fragment, indexed on ``id`` in zones of ``items`` rows."""

    def make(tmp: Path) -> None:
        write_lance(id_table(rows, 11), tmp, fragments, groups=True)
        build_index(tmp, "id", items=items)

    return cached(data_path("lookup", rows=rows, fragments=fragments, items=items), make)


JOIN_ROW_GROUP = 8192  # a zone reads its own row group, not its file
DIMENSION_ROWS = 10_000


def join_tables(rows: int, fragments: int) -> dict[str, Path]:
    """The fact table as Lance (:func:`lookup_table`) and as Parquet (its fragments, one
    file each, 8,192-row row groups, indexed on ``id``); the dimension: 10,000 ids drawn
    from the fact's, ``region`` one of 100 values, one Parquet file."""
    fact = lookup_table(rows, fragments)

    def parquet(tmp: Path) -> None:
        tmp.mkdir()
        for number, fragment in enumerate(lance.dataset(str(fact)).get_fragments()):
            name = tmp / f"part-{number:04d}.parquet"
            pq.write_table(fragment.to_table(), name, row_group_size=JOIN_ROW_GROUP)
        build_index(tmp, "id")

    def dimension(tmp: Path) -> None:
        tmp.mkdir()
        ids = np.random.default_rng(5).choice(rows, DIMENSION_ROWS, replace=False)
        regions = [f"r{i % 100:02d}" for i in range(DIMENSION_ROWS)]
        pq.write_table(pa.table({"id": ids.astype(np.int64), "region": regions}), tmp / "d.parquet")

    grouped = data_path("join", rows=rows, fragments=fragments, group=JOIN_ROW_GROUP)
    return {
        "lance": fact,
        "parquet": cached(grouped, parquet),
        "dimension": cached(data_path("join_dimension", rows=rows), dimension),
    }


B_VALUES = 1000


def compound_tables(rows: int, fragments: int) -> dict[str, Path]:
    """Pairs ``(a, b)`` unique while ``a`` (rows / 1000 values) and ``b`` (1,000) each
    repeat, rows shuffled, and a payload; in Lance and in Parquet (``fragments`` files),
    each indexed on ``a``, on ``b`` and on the key ``(a, b)``."""
    per = -(-rows // fragments)

    @functools.cache
    def table() -> pa.Table:
        pairs = np.random.default_rng(7).permutation(rows).astype(np.int64)
        b = pa.array([f"b{x:04d}" for x in (pairs % B_VALUES).tolist()])
        return pa.table({"a": pairs // B_VALUES, "b": b, "payload": pairs * 3})

    def indexed(write: Callable[[Path], object]) -> Callable[[Path], None]:
        def make(tmp: Path) -> None:
            write(tmp)
            for target in ("a", "b", ["a", "b"]):
                build_index(tmp, target)

        return make

    def parquet(tmp: Path) -> None:
        tmp.mkdir()
        for number, start in enumerate(range(0, rows, per)):
            pq.write_table(table().slice(start, per), tmp / f"part-{number:04d}.parquet")

    root = data_path("compound", rows=rows, fragments=fragments)
    return {
        "lance": cached(
            root / "lance", indexed(lambda p: write_lance(table(), p, fragments, True))
        ),
        "parquet": cached(root / "parquet", indexed(parquet)),
    }


def build_table(rows: int, fragments: int, names: bool) -> Path:
    """:func:`id_table`'s ids (seed 42) in Lance, not indexed; with ``names``, also
    ``name``: 'user-' and 15 digits, shuffled (build_throughput.py; spark_build.py: ids)."""

    def make(tmp: Path) -> None:
        rng = np.random.default_rng(42)
        columns = {"id": rng.permutation(rows).astype(np.int64)}
        if names:
            digits = pc.cast(pa.array(rng.permutation(rows).astype(np.int64)), pa.string())
            columns["name"] = pc.binary_join_element_wise(
                "user-", pc.utf8_lpad(digits, 15, "0"), ""
            )
        write_lance(pa.table(columns), tmp, fragments)

    name = "build_throughput" if names else "spark_build"
    return cached(data_path(name, rows=rows, fragments=fragments), make)


def hostile_table(rows: int, items: int) -> Path:
    """``id`` 0..rows-1 and ``s`` 'v0'.. in Lance, both indexed in zones of ``items``."""

    def make(tmp: Path) -> None:
        strings = [f"v{i}" for i in range(rows)]
        ids = pa.array(range(rows), pa.int64())
        lance.write_dataset(pa.table({"id": ids, "s": strings}), str(tmp))
        for column in ("id", "s"):
            build_index(tmp, column, items=items)

    return cached(data_path("hostile_sql", rows=rows, items=items), make)


def update_table(rows: int, fragments: int) -> Path:
    """:func:`id_table` (seed 7) in Lance, one row group a fragment, not indexed (copy it
    with :func:`working_copy` to change it)."""
    made = data_path("update", rows=rows, fragments=fragments)
    return cached(made, lambda tmp: write_lance(id_table(rows, 7), tmp, fragments, groups=True))
