"""The engine-neutral build: from Lance fragments or Parquet files to a ZoneIndex.

Each fragment (a Lance fragment, or a Parquet file) is read (:mod:`pruner.index.reading`)
and indexed on its own (:func:`index_fragment`); the fragments' zone rows are then
assembled in fragment order (:func:`assemble`). The local build runs the fragments in
threads (:func:`build_lance_index`, :func:`build_parquet_index`); another engine runs the
same steps elsewhere and assembles with the same last step.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from pruner import sbbf, storage
from pruner.buffers import RowsAppended, scratch
from pruner.hashing import hash_array
from pruner.index.fileformat import IndexFileWriter
from pruner.index.hierarchy import DatasetFill, FragmentCoarse
from pruner.index.keys import KEY_ENCODING, Key, lance_key_files
from pruner.index.model import ZoneIndex
from pruner.index.reading import (
    FragmentColumn,
    lance_fragments,
    lance_readers,
    parquet_fragments,
    parquet_index_value_type,
    read_parquet_fragment,
)

__all__ = [
    "DEFAULT_ITEMS",
    "DEFAULT_PROBABILITY",
    "FragmentZoneRows",
    "ProgressCallback",
    "assemble",
    "build_lance_index",
    "build_parquet_index",
    "index_fragment",
    "index_in_threads",
]

_NOTHING = np.zeros(0, np.uint8)  # what assemble leaves in the fragments' rows it took

DEFAULT_ITEMS = 8192
DEFAULT_PROBABILITY = 0.00057

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(rows_done, rows_total)`` after each fragment is indexed."""


@dataclass(frozen=True, slots=True)
class FragmentZoneRows:
    """The index rows of one fragment (small: no column data)."""

    fragment_id: int
    zone_fragment_id: np.ndarray  # the fragment id once per zone, as stored
    zone_start: np.ndarray
    zone_length: np.ndarray
    has_null: np.ndarray
    filters: np.ndarray
    null_offsets: np.ndarray | None
    rows: int
    coarse: FragmentCoarse | None = None  # its share of the hierarchy (local builds)


def index_fragment(
    part: FragmentColumn, num_bytes: int, probability: float | None = None
) -> FragmentZoneRows:
    """The zones of one fragment; given the index's ``probability``, also its share of the
    hierarchy companion's coarse filters (a Spark build makes none)."""
    zones = part.zones
    hashes, valid = hash_array(
        part.values, scratch("fragment-hashes", len(part.values), np.uint64), compiled=True
    )
    null_offsets = None
    present = hashes if valid is None else hashes[valid]  # the non-null values' hashes
    if valid is None:
        bounds = zones.first_row
        has_null = np.zeros(zones.num_zones, dtype=bool)
    else:
        # Zone bounds among the non-null values: count the valid rows of each zone.
        valid_per_zone = np.add.reduceat(valid, zones.first_row[:-1], dtype=np.int64)
        bounds = np.concatenate(([0], np.cumsum(valid_per_zone)))
        has_null = valid_per_zone < np.diff(zones.first_row)
        null_rows = np.flatnonzero(~valid)
        if len(null_rows):
            offsets = null_rows if part.live_offsets is None else part.live_offsets[null_rows]
            null_offsets = offsets.astype(np.uint32)
    coarse = None
    if probability is None:
        filters = sbbf.insert(present, bounds, num_bytes)
    else:
        coarse, filters = FragmentCoarse.with_zones(present, probability, bounds, num_bytes)
    return FragmentZoneRows(
        part.fragment_id,
        np.full(zones.num_zones, part.fragment_id, dtype=np.uint64),
        zones.zone_start,
        zones.zone_length,
        has_null,
        filters,
        null_offsets,
        len(part.values),
        coarse,
    )


def _build(
    column: str,
    readers: Sequence[Callable[[], FragmentColumn | list[FragmentColumn]]],
    items: int,
    probability: float,
    total_rows: int,
    progress: ProgressCallback | None,
    threads: int | None,
    sink: IndexFileWriter | None = None,
) -> ZoneIndex:
    """Index fragments in parallel threads; keep their zones in the readers' order.

    NumPy's array passes and Lance's reader release the GIL, so fragments build side by
    side (2 threads on 2 cores: 1.4x). Memory holds at most ``threads`` fragments' columns.
    With a ``sink``, each fragment's zones are written while the next ones build.
    """
    built = index_in_threads(readers, items, probability, threads)
    return assemble(column, items, probability, built, total_rows, progress, sink, total_rows)


STORE_READERS = 32
"""Fragments read side by side by a build on an object store, where a fragment's read is a
few round trips of waiting, not work (a local build reads as many as there are cores)."""


def reading_threads(threads: int | None, where: storage.Location) -> int | None:
    """The threads a build reads fragments of the table at ``where`` with: as given, else
    :data:`STORE_READERS` on a store (None: one a core)."""
    return threads if threads or not storage.is_remote(where) else STORE_READERS


def index_in_threads(
    readers: Sequence[Callable[[], FragmentColumn | list[FragmentColumn]]],
    items: int,
    probability: float,
    threads: int | None,
) -> Iterator[FragmentZoneRows]:
    """Each reader's fragment (or fragments: :func:`read_lance_fragments`) indexed with its
    share of the hierarchy, in the readers' order, ``threads`` readers at a time."""
    num_bytes = sbbf.optimal_num_bytes(items, probability)
    workers = threads or os.cpu_count() or 1

    def index_all(read: Callable[[], FragmentColumn | list[FragmentColumn]]) -> list[Any]:
        got = read()
        return [
            index_fragment(p, num_bytes, probability)
            for p in (got if isinstance(got, list) else [got])
        ]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for indexed in pool.map(index_all, readers):
            yield from indexed


def assemble(
    column: str,
    items: int,
    probability: float,
    fragments: Iterable[FragmentZoneRows],
    total_rows: int,
    progress: ProgressCallback | None,
    sink: IndexFileWriter | None,
    distinct_at_most: int | None = None,
) -> ZoneIndex:
    """The index of the fragments' zones, in the order given (every build's last step).

    Each fragment's zones go to ``sink`` and ``progress`` hears of it as soon as the iterable
    yields it, so a lazy iterable overlaps writing with building. ``distinct_at_most``: a
    full build's rows, which bound the distinct values its companion's dataset filter is
    sized for (:class:`DatasetFill`; an update's filter holds other fragments' values too).
    """
    num_bytes = sbbf.optimal_num_bytes(items, probability)
    results: list[FragmentZoneRows] = []
    # what the build holds goes where it is used: the zone filters into the index's one
    # array, the hashes into the dataset filter (a build held both twice over at the end)
    fill = (
        DatasetFill()
        if distinct_at_most is None
        else DatasetFill(sbbf.optimal_num_bytes(max(distinct_at_most, 1), probability))
    )
    filters = RowsAppended(total_rows // items + 1024, num_bytes)
    done = 0
    for rows in fragments:
        done += rows.rows
        if rows.zone_start.size:
            if sink is not None:
                sink.write_zones(
                    rows.zone_fragment_id,
                    rows.zone_start,
                    rows.zone_length,
                    rows.has_null,
                    rows.filters,
                )
            filters.add(rows.filters)
            coarse = rows.coarse
            if coarse is not None and len(coarse.hashes):
                fill.add(coarse.hashes)
                coarse = dataclasses.replace(coarse, hashes=_NOTHING.view(np.uint64))
            results.append(dataclasses.replace(rows, filters=_NOTHING, coarse=coarse))
        if progress is not None:
            progress(done, total_rows)

    def cat(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)

    return ZoneIndex(
        column=column,
        items=items,
        probability=probability,
        fragment_id=cat([r.zone_fragment_id for r in results], np.uint64),
        zone_start=cat([r.zone_start for r in results], np.uint64),
        zone_length=cat([r.zone_length for r in results], np.uint64),
        has_null=cat([r.has_null for r in results], np.bool_),
        filter_data=filters.result(),
        null_rows={r.fragment_id: r.null_offsets for r in results if r.null_offsets is not None},
        build_coarse={r.fragment_id: r.coarse for r in results if r.coarse is not None},
        build_fill=fill,
    )


def build_lance_index(
    dataset: object,
    column: str | Key,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    threads: int | None = None,
    sink: IndexFileWriter | None = None,
) -> ZoneIndex:
    """Build the zone bloom index of ``column`` over a Lance dataset, fragment by fragment.

    Memory is bounded by ``threads`` fragments' columns. The result equals the index Lance builds
    with ``IndexConfig(index_type="bloomfilter", parameters={"number_of_items": items,
    "probability": probability})``.
    """
    ds, fragments = lance_fragments(dataset, column)
    sbbf.optimal_num_bytes(items, probability)
    counts = [f.count_rows() for f in fragments]
    total = sum(counts)
    readers = lance_readers(ds, fragments, counts, column, items)
    threads = reading_threads(threads, storage.dataset_location(ds))
    if not isinstance(column, Key):
        return _build(column, readers, items, probability, total, progress, threads, sink)
    files = lance_key_files(ds, fragments, column)
    name = column.describe(column.types(ds.schema, f"Lance dataset {ds.uri}"))
    index = _build(name, readers, items, probability, total, progress, threads, sink)
    index.files, index.value_encoding = files, KEY_ENCODING
    return index


def build_parquet_index(
    directory: storage.PathLike,
    column: str | Key,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    threads: int | None = None,
    sink: IndexFileWriter | None = None,
) -> ZoneIndex:
    """Build the zone bloom index of ``column`` over a directory of Parquet files.

    Each file is a fragment; zones never straddle a row group. Fragment ids stay stable
    across rebuilds (a file keeps the id the previous index gave it). A compound ``Key``
    indexes its encoded tuples (:mod:`pruner.index.keys`).
    """
    metas, files, names = parquet_fragments(directory, column)
    sbbf.optimal_num_bytes(items, probability)
    total = sum(f.rows for f in files)
    root = storage.location(directory)
    readers = [
        partial(
            read_parquet_fragment,
            root / file.path,
            file.fragment_id,
            name or column,
            items,
            meta.metadata,
            file.identity.as_stat(),
        )
        for meta, file, name in zip(metas, files, names, strict=True)
    ]
    threads = reading_threads(threads, root)
    name = column if isinstance(column, str) else ""
    if isinstance(column, Key):
        name = column.describe(column.types(metas[0].schema_arrow, f"Parquet file {directory}"))
    index = _build(name, readers, items, probability, total, progress, threads, sink)
    index.files = files
    if isinstance(column, Key):
        index.value_encoding = KEY_ENCODING
    else:
        index.value_type = parquet_index_value_type(metas[0], names[0])
    return index
