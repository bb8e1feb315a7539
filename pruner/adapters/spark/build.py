"""Build a zone bloom index as a Spark job: one task per fragment, zone rows to the driver.

The work on each fragment is the local build's (:mod:`pruner.index.build`): the same
module-level reader (``read_lance_fragment`` / ``read_parquet_fragment``) and
``index_fragment``. Only where it runs differs:

- the driver plans as the local build does (checks the column, lists the fragments, gives
  Parquet files their stable fragment ids) and makes a DataFrame of one row per fragment,
  one partition per row, so that each fragment is a task of its own;
- ``mapInArrow`` reads and indexes the fragment of each row and yields only its zone rows
  as Arrow record batches: no column data leaves the executor;
- the driver collects the zone rows (with the defaults 32 KiB of filter per 8,192 rows),
  puts them in the local build's fragment order and assembles the index with the local
  build's own last step (``assemble``), so both builds give the same index.

A one-row-per-fragment ``mapInArrow`` measured best: a ``groupBy().applyInArrow`` shuffles
every row of the column. Executors import lance only
inside a task: Spark forks Python workers, and lance is not fork-safe.

Executors open the Lance dataset (at the version the driver planned with) or the Parquet
file by its path, so the path must name the same data on every executor: a local path
with a local master, shared storage on a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import sbbf, storage
from pruner.adapters.spark.runtime import session
from pruner.discover import is_lance_dataset
from pruner.errors import EngineError
from pruner.index import (
    DEFAULT_ITEMS,
    DEFAULT_PROBABILITY,
    IndexFileWriter,
    ProgressCallback,
    UpdatePlan,
    ZoneIndex,
)
from pruner.index.build import FragmentZoneRows, assemble, index_fragment
from pruner.index.hierarchy import FragmentCoarse
from pruner.index.keys import KEY_ENCODING, Key, lance_key_files
from pruner.index.reading import (
    FragmentColumn,
    lance_fragments,
    parquet_fragments,
    parquet_index_value_type,
    read_lance_fragment,
    read_parquet_fragment,
)

__all__ = [
    "ZONE_ROWS_SCHEMA",
    "ZoneJob",
    "build_zone_index_spark",
    "fragment_rows",
    "index_fragments_spark",
    "run_job",
]

ZONE_ROWS_SCHEMA = pa.schema(
    [
        pa.field("fragment_id", pa.int64(), nullable=False),
        pa.field("zone_start", pa.int64(), nullable=False),
        pa.field("zone_length", pa.int64(), nullable=False),
        pa.field("has_null", pa.bool_(), nullable=False),
        pa.field("bloom_filter_data", pa.binary(), nullable=False),
        # The zone's null rows: physical offsets in its fragment, uint32 little-endian.
        pa.field("null_offsets", pa.binary(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),  # live rows in the zone
        # The fragment's share of the hierarchy companion (hierarchy.FragmentCoarse), in its
        # first zone's row (empty, and a count of -1, in the others): its non-null values'
        # hashes in order (uint64 little-endian), its coarse filter, and the distinct count
        pa.field("coarse_hashes", pa.binary(), nullable=False),
        pa.field("coarse_filter", pa.binary(), nullable=False),
        pa.field("coarse_count", pa.int64(), nullable=False),
    ]
)
"""What a task yields per zone (Spark has no unsigned types: ids and offsets as int64)."""

# Filter bytes per yielded batch: keeps each Binary column far below its 2 GiB offset limit.
_BATCH_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class ZoneJob:
    """The function ``mapInArrow`` runs: picklable, no open handles, only paths.

    Row ``i`` of the input (a ``spark.range``) is the fragment ``fragments[i]``: its id and
    the path an executor reads it from (the dataset URI for Lance, the file for Parquet).
    """

    column: str | Key
    items: int
    num_bytes: int
    # on a store, the location with its options (an ObjectPath pickles with them)
    fragments: list[tuple[int, str | storage.ObjectPath]]
    lance_version: int | None  # the Lance dataset version planned with; None: Parquet
    # Parquet: each file's (by fragment id) name for the column, where it differs (a Delta
    # or Iceberg table's)
    stored: tuple[tuple[int, str], ...] = ()
    # the index's false positive probability: each task makes its fragment's share of the
    # hierarchy companion, as the local build does (None: no companion)
    probability: float | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for position in batch.column(0).to_pylist():
                fragment_id, path = self.fragments[position]
                part: FragmentColumn
                if self.lance_version is None:
                    column = dict(self.stored).get(fragment_id, self.column)
                    part = read_parquet_fragment(path, fragment_id, column, self.items)
                else:
                    part = read_lance_fragment(
                        path, fragment_id, self.column, self.items, self.lance_version
                    )
                indexed = index_fragment(part, self.num_bytes, self.probability)
                yield from _zone_batches(part, indexed)


def _zone_batches(part: FragmentColumn, rows: FragmentZoneRows) -> Iterator[pa.RecordBatch]:
    """The zone rows of one indexed fragment, as record batches of ``ZONE_ROWS_SCHEMA``."""
    zones = len(rows.zone_start)
    nulls = rows.null_offsets if rows.null_offsets is not None else np.zeros(0, np.uint32)
    # Null offsets ascend, and so do the zones: cut them at each zone's first offset.
    null_cuts = np.append(np.searchsorted(nulls, rows.zone_start), len(nulls))
    null_bytes = nulls.astype("<u4").tobytes()
    live_rows = np.diff(part.zones.first_row)
    width = rows.filters.shape[1]
    per_batch = max(1, _BATCH_BYTES // width)
    coarse = rows.coarse
    for start in range(0, zones, per_batch):
        stop = min(start + per_batch, zones)
        first = start == 0 and coarse is not None  # this batch carries the coarse share
        empty = [b""] * (stop - start - 1)
        cuts = null_cuts[start : stop + 1]
        filters = np.ascontiguousarray(rows.filters[start:stop]).reshape(-1)
        filter_offsets = np.arange(0, (stop - start + 1) * width, width, dtype=np.int32)
        yield pa.record_batch(
            [
                pa.array(rows.zone_fragment_id[start:stop].astype(np.int64)),
                pa.array(rows.zone_start[start:stop].astype(np.int64)),
                pa.array(rows.zone_length[start:stop].astype(np.int64)),
                pa.array(rows.has_null[start:stop]),
                pa.Array.from_buffers(
                    pa.binary(),
                    stop - start,
                    [None, pa.py_buffer(filter_offsets), pa.py_buffer(filters)],
                ),
                pa.Array.from_buffers(
                    pa.binary(),
                    stop - start,
                    [
                        None,
                        pa.py_buffer(((cuts - cuts[0]) * 4).astype(np.int32)),
                        pa.py_buffer(null_bytes[cuts[0] * 4 : cuts[-1] * 4]),
                    ],
                ),
                pa.array(live_rows[start:stop].astype(np.int64)),
                pa.array(
                    [coarse.hashes.astype("<u8").tobytes(), *empty]
                    if first and coarse
                    else [b""] * (stop - start),
                    pa.binary(),
                ),
                pa.array(
                    [coarse.filter.tobytes(), *empty]
                    if first and coarse
                    else [b""] * (stop - start),
                    pa.binary(),
                ),
                pa.array(
                    [coarse.count if first and coarse else -1] + [-1] * (stop - start - 1),
                    pa.int64(),
                ),
            ],
            schema=ZONE_ROWS_SCHEMA,
        )


def _binary_parts(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets, uint8 data) of a binary column, whichever offset width Spark chose."""
    array = column.cast(pa.large_binary()).combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[
        array.offset : array.offset + len(array) + 1
    ]
    data = np.frombuffer(array.buffers()[2] or b"", dtype=np.uint8)
    return offsets - offsets[0], data[int(offsets[0]) : int(offsets[-1])]


def fragment_rows(
    table: pa.Table, order: list[int], expected_rows: list[int], num_bytes: int
) -> list[FragmentZoneRows]:
    """The collected zone rows as the local build's per-fragment results, in ``order``.

    Raises:
        EngineError: a fragment's rows differ from what the driver planned with (its data
            changed during the build, or a task lost rows).
    """
    position = {fragment_id: i for i, fragment_id in enumerate(order)}
    fragment_id = table.column("fragment_id").to_numpy()
    zone_start = table.column("zone_start").to_numpy()
    sort = np.lexsort((zone_start, np.array([position[f] for f in fragment_id.tolist()])))
    table = table.take(pa.array(sort))
    fragment_id = table.column("fragment_id").to_numpy().astype(np.uint64)
    zone_start = table.column("zone_start").to_numpy().astype(np.uint64)
    zone_length = table.column("zone_length").to_numpy().astype(np.uint64)
    has_null = table.column("has_null").to_numpy(zero_copy_only=False)
    live_rows = table.column("rows").to_numpy()
    filter_offsets, filter_data = _binary_parts(table.column("bloom_filter_data"))
    if (np.diff(filter_offsets) != num_bytes).any():
        raise EngineError(f"Spark returned bloom filters that are not {num_bytes} bytes each")
    filters = filter_data.reshape(-1, num_bytes)
    null_offsets, null_data = _binary_parts(table.column("null_offsets"))
    hash_offsets, hash_data = _binary_parts(table.column("coarse_hashes"))
    coarse_offsets, coarse_data = _binary_parts(table.column("coarse_filter"))
    coarse_count = table.column("coarse_count").to_numpy()
    change = np.flatnonzero(fragment_id[1:] != fragment_id[:-1]) + 1
    bounds = [0, *change.tolist(), len(fragment_id)] if len(fragment_id) else [0]
    built = {}
    for a, b in pairwise(bounds):
        nulls = null_data[null_offsets[a] : null_offsets[b]].view("<u4").astype(np.uint32)
        fragment = int(fragment_id[a])
        coarse = None
        if coarse_count[a] >= 0:  # the fragment's first zone carries its coarse share
            coarse = FragmentCoarse(
                hash_data[hash_offsets[a] : hash_offsets[a + 1]].view("<u8").astype(np.uint64),
                coarse_data[coarse_offsets[a] : coarse_offsets[a + 1]].copy(),
                int(coarse_count[a]),
            )
        built[fragment] = FragmentZoneRows(
            fragment,
            fragment_id[a:b],
            zone_start[a:b],
            zone_length[a:b],
            has_null[a:b],
            filters[a:b],
            nulls if len(nulls) else None,
            int(live_rows[a:b].sum()),
            coarse,
        )
    for fragment, rows in zip(order, expected_rows, strict=True):
        got = built[fragment].rows if fragment in built else 0
        if got != rows:
            raise EngineError(
                f"fragment {fragment}: the Spark task indexed {got:,} rows but the driver "
                f"planned with {rows:,}: the data changed during the build; build again"
            )
    return [built[f] for f in order if f in built]


JOB_RESULT_BYTES = 256 << 20
"""What one Spark job of a build returns at most, by the fragments' rows (:func:`_result_bytes`):
a build runs a job per group of fragments, each collected on its own. One job of the 1,000
fragments of 100M rows returned 1.5 GB (zone filters, and the hashes and filters of the
hierarchy's shares), past Spark's ``spark.driver.maxResultSize`` (1 GiB by default), and
failed."""


def _result_bytes(job: ZoneJob, rows: int) -> int:
    """About what a task returns for a fragment of ``rows`` live rows: its zone filters, and
    with a companion its hashes (8 B a value) and coarse filter."""
    zones = -(-rows // job.items) if rows else 0
    total = zones * (job.num_bytes + 64)
    if job.probability is not None and rows:
        total += 8 * rows + sbbf.optimal_num_bytes(1 << (rows - 1).bit_length(), job.probability)
    return total


def run_job(spark: Any, job: ZoneJob, expected_rows: list[int] | None = None) -> pa.Table:
    """Run ``job`` over one task per fragment; the zone rows it yields, collected: in one
    Spark job per group of fragments whose results come to at most :data:`JOB_RESULT_BYTES`
    (``expected_rows``: each fragment's live rows; None, one job)."""
    groups: list[list[tuple[int, str | storage.ObjectPath]]] = [[]]
    size = 0
    for fragment, rows in zip(
        job.fragments, expected_rows or [0] * len(job.fragments), strict=True
    ):
        grows = _result_bytes(job, rows)
        if groups[-1] and size + grows > JOB_RESULT_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(fragment)
        size += grows
    tables = [_run_one(spark, replace(job, fragments=group)) for group in groups if group]
    return pa.concat_tables(tables) if tables else ZONE_ROWS_SCHEMA.empty_table()


def _run_one(spark: Any, job: ZoneJob) -> pa.Table:
    """Run ``job`` over one task per fragment in one Spark job; the zone rows, collected."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        LongType,
        StructField,
        StructType,
    )

    spark_types = {pa.int64(): LongType(), pa.bool_(): BooleanType(), pa.binary(): BinaryType()}
    schema = StructType(
        [StructField(f.name, spark_types[f.type], nullable=False) for f in ZONE_ROWS_SCHEMA]
    )
    count = len(job.fragments)
    try:
        # spark.range splits evenly: with as many partitions as rows, one fragment per task.
        frame = spark.range(0, count, 1, numPartitions=count).mapInArrow(job, schema)
        return frame.toArrow()
    except Exception as err:
        raise EngineError(f"the Spark index build failed: {_spark_reason(err)}") from err


def _spark_reason(err: BaseException) -> str:
    """One line: the error raised inside the Python task when there is one, else Spark's."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):
        # A worker's traceback ends with "ExceptionType: message".
        name, sep, _ = line.partition(": ")
        if sep and name.replace(".", "").isidentifier() and name.split(".")[-1][0].isupper():
            return line
    return lines[0] if lines else type(err).__name__


def build_zone_index_spark(
    source: object,
    column: str | Key,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    sink: IndexFileWriter | None = None,
    spark: Any = None,
) -> ZoneIndex:
    """Build the zone bloom index of ``column`` (or a compound key's tuples) over a Lance
    dataset (a path or an open dataset) or a directory of Parquet files, one Spark task per
    fragment.

    Gives the index :func:`pruner.index.build_lance_index` / ``build_parquet_index`` give;
    like them it only builds (``sink``: where the zones are written as they are assembled):
    :func:`pruner.index.build_index` with ``engine="spark"`` also stores it. ``spark`` is
    the session to run on (default: :func:`pruner.adapters.spark.session`); ``progress`` is
    called as the collected fragments are assembled.

    Raises:
        InvalidParameterError: the column or a parameter is not valid.
        EngineError: Spark could not start, or the job failed.
    """
    num_bytes = sbbf.optimal_num_bytes(items, probability)
    files, value_type = None, None
    stored: tuple[tuple[int, str], ...] = ()
    local_types = str | os.PathLike | storage.ObjectPath
    if isinstance(source, local_types) and not is_lance_dataset(storage.location(source)):
        root = storage.location(source).resolve()
        metas, files, names = parquet_fragments(root, column)
        fragments = [(f.fragment_id, _task_path(root / f.path)) for f in files]
        expected_rows = [f.rows for f in files]
        version = None
        schema, where = metas[0].schema_arrow, f"Parquet file {root}"
        if isinstance(column, str):
            value_type = parquet_index_value_type(metas[0], names[0])
            stored = tuple(
                (f.fragment_id, name)
                for f, name in zip(files, names, strict=True)
                if name != column
            )
    else:
        ds, planned = lance_fragments(source, column)
        uri = _task_path(storage.dataset_location(ds))
        fragments = [(f.fragment_id, uri) for f in planned]
        expected_rows = [f.count_rows() for f in planned]
        version = ds.version
        schema, where = ds.schema, f"Lance dataset {ds.uri}"
        if isinstance(column, Key):
            files = lance_key_files(ds, planned, column)
    job = ZoneJob(column, items, num_bytes, fragments, version, stored, probability)
    table = (
        run_job(spark or session(), job, expected_rows)
        if fragments
        else ZONE_ROWS_SCHEMA.empty_table()
    )
    order = [fragment_id for fragment_id, _ in fragments]
    parts = fragment_rows(table, order, expected_rows, num_bytes)
    # A compound key's index is named by its columns and types, as the local build names it.
    name = column if isinstance(column, str) else column.describe(column.types(schema, where))
    rows = sum(expected_rows)
    index = assemble(name, items, probability, parts, rows, progress, sink, rows)
    index.files, index.value_type = files, value_type
    if isinstance(column, Key):
        index.value_encoding = KEY_ENCODING
    return index


def _task_path(path: storage.Location) -> str | storage.ObjectPath:
    """Where an executor reads: an absolute local path, or the location on a store with
    the options it is read with."""
    if isinstance(path, storage.ObjectPath):
        return path
    return os.path.abspath(path)


def index_fragments_spark(
    plan: UpdatePlan, fragment_ids: list[int], spark: Any = None
) -> list[FragmentZoneRows]:
    """The zone rows of the fragments an update indexes (:func:`pruner.index.update_index`
    with ``engine="spark"``), one Spark task per fragment as a build's, in that order."""
    num_bytes = sbbf.optimal_num_bytes(plan.items, plan.probability)
    if plan.kind == "parquet":
        assert plan.root is not None
        root = plan.root.resolve()
        by_id = {f.fragment_id: f for f in plan.files or []}
        fragments = [(fid, _task_path(root / by_id[fid].path)) for fid in fragment_ids]
        expected_rows = [by_id[fid].rows for fid in fragment_ids]
        version = None
    else:
        ds = plan.source
        uri = _task_path(storage.dataset_location(ds))
        fragments = [(fid, uri) for fid in fragment_ids]
        expected_rows = [ds.get_fragment(fid).count_rows() for fid in fragment_ids]
        version = ds.version
    if not fragments:
        return []
    stored = tuple((fid, plan.stored[fid]) for fid in fragment_ids if fid in plan.stored)
    job = ZoneJob(plan.target, plan.items, num_bytes, fragments, version, stored, plan.probability)
    table = run_job(spark or session(), job, expected_rows)
    return fragment_rows(table, list(fragment_ids), expected_rows, num_bytes)
