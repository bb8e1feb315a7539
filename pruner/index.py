"""ZoneIndex: build, write and read ``bloomfilter.lance``, commit it into a Lance dataset.

The file is Lance's BLOOMFILTER index file, byte-compatible in content (``../shared/FACTS.md``
section 1): one row per zone with the columns

=====================  =======  ==================================================
``fragment_id``        uint64   fragment (Lance) or file (Parquet) holding the zone
``zone_start``         uint64   physical offset of the zone's first live row
``zone_length``        uint64   span of the zone in physical rows
``has_null``           bool     any null in the zone
``bloom_filter_data``  binary   the zone's SBBF (see :mod:`pruner.sbbf`)
=====================  =======  ==================================================

and the schema metadata ``bloomfilter_item`` / ``bloomfilter_probability`` (and
``null_bitmap``: the index of a global buffer with the exact null row offsets per fragment).

pruner adds ``pruner_zone_checksums``: the index of a global buffer holding, per zone, an
XXH3-64 of its fragment id, start, length, null flag and filter bytes. A flipped bit in a
filter passes every structural check and would drop rows; a zone whose checksum does not
match is treated as damaged and its fragment is read whole. Lance ignores metadata keys and
global buffers it does not know, so it still reads the file; indexes Lance wrote have no
checksums and are trusted as they are.

Where the index lives:

- **Lance dataset**: ``<dataset>/_indices/<uuid>/bloomfilter.lance``, committed with
  ``LanceOperation.CreateIndex`` so Lance's own scanner uses it; indexes Lance built are
  found the same way (:func:`list_bloom_indexes`).
- **Directory of Parquet files**: ``<dir>/_pruner/<column>/bloomfilter.lance`` (a folder
  whose name starts with ``_``, which ``*.parquet`` globs, Spark and pyarrow skip). The files
  it covers (path, size, modification time) are kept in the schema metadata under
  ``pruner_files``; Lance ignores keys it does not know.

Writes are atomic: a file is written beside its destination and renamed over it, and a Lance
index becomes visible only when its manifest commits.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from pyroaring import BitMap

from pruner import sbbf
from pruner.buffers import scratch
from pruner.errors import IndexFormatError, IndexNotFoundError, InvalidParameterError
from pruner.hashing import hash_array, hash_input_width
from pruner.zones import (
    FragmentZones,
    contiguous_zones,
    lance_fragment_zones,
    parquet_file_zones,
)

__all__ = [
    "DEFAULT_ITEMS",
    "DEFAULT_PROBABILITY",
    "ENGINES",
    "INDEX_FILE_NAME",
    "INDEX_SCHEMA",
    "FragmentFile",
    "IndexFileWriter",
    "ProgressCallback",
    "ZoneIndex",
    "build_index",
    "build_lance_index",
    "build_parquet_index",
    "commit_lance_index",
    "format_probability",
    "list_bloom_indexes",
    "load_index",
    "load_lance_index",
    "parquet_footer_hash",
    "parquet_index_path",
    "read_index_file",
    "write_index_file",
    "zone_checksums",
]

INDEX_FILE_NAME = "bloomfilter.lance"
DEFAULT_ITEMS = 8192
DEFAULT_PROBABILITY = 0.00057
PARQUET_INDEX_DIR = "_pruner"
BLOOM_INDEX_DETAILS = "/lance.index.pb.BloomFilterIndexDetails"

META_ITEMS = "bloomfilter_item"
META_PROBABILITY = "bloomfilter_probability"
META_NULL_BITMAP = "null_bitmap"
META_FILES = "pruner_files"
META_COLUMN = "pruner_column"
META_CHECKSUMS = "pruner_zone_checksums"

INDEX_SCHEMA = pa.schema(
    [
        pa.field("fragment_id", pa.uint64(), nullable=False),
        pa.field("zone_start", pa.uint64(), nullable=False),
        pa.field("zone_length", pa.uint64(), nullable=False),
        pa.field("has_null", pa.bool_(), nullable=False),
        pa.field("bloom_filter_data", pa.binary(), nullable=False),
    ]
)
# Filter bytes per written batch: keeps every Binary column chunk far below the 2 GiB
# offset limit (Lance issues #6522, #7753).
_WRITE_BATCH_BYTES = 256 << 20
_LANCE_MAGIC = b"LANC"

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(rows_done, rows_total)`` after each fragment is indexed."""


def format_probability(probability: float) -> str:
    """The probability as Lance writes it (Rust's f64 Display: never an exponent).

    >>> format_probability(1e-7), format_probability(0.00057)
    ('0.0000001', '0.00057')
    """
    return np.format_float_positional(probability, unique=True, trim="-")


@dataclass(frozen=True, slots=True)
class FragmentFile:
    """A Parquet file covered by an index, and what identifies its content."""

    fragment_id: int
    path: str  # relative to the indexed directory, '/'-separated
    size: int
    mtime_ns: int
    rows: int
    footer: int = 0  # XXH3-64 of the Parquet footer; 0 when unknown (an older index)


@dataclass(eq=False)
class ZoneIndex:
    """The zone bloom index of one column: one row per zone, in file order.

    ``filters`` holds every zone's SBBF as one row of a (zones, bytes) array; an index whose
    zones have filters of different sizes (only older Lance versions wrote those) keeps each
    size in its own group, see :meth:`filter_groups`.
    """

    column: str
    items: int
    probability: float
    fragment_id: np.ndarray
    zone_start: np.ndarray
    zone_length: np.ndarray
    has_null: np.ndarray
    filter_data: list[bytes] | np.ndarray
    null_rows: dict[int, np.ndarray] | None = None
    files: list[FragmentFile] | None = None
    # Per zone, True when its stored checksum does not match its content; None: no checksums.
    damaged: np.ndarray | None = None
    _groups: list[tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    # Probing, per filter group (see _probe_layout): the sliced layout once built, and the
    # (value, zone) pairs probed directly until then.
    _sliced: dict[int, sbbf.SlicedFilters] = field(default_factory=dict, init=False, repr=False)
    _direct_pairs: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    # Direct (value, zone) pairs that take as long as building the sliced layout of one filter
    # byte: the price of the build in pairs is this times the group's filter bytes. Measured
    # with bench/probe_kernels.py (its "build = pairs" column over the index's bytes; build
    # with 2 threads on 2 cores, 0.4-0.5 ns per byte; ``sbbf.check`` 5-18 ns per pair):
    # 0.021-0.037 for 12,000 zones x 32 KiB (8-14 million pairs), 0.02-0.07 for 1,000 x 32 KiB,
    # 12,000 x 4 KiB and 100,000 x 1 KiB, 0.05-0.1 for 400,000 x 32 B. The first build in a
    # fresh process also pays for first touching its memory (up to 4x more on this VM).
    _PAIRS_PER_SLICED_BYTE = 0.04
    # One lock for all indexes (a lock per instance would stop an index from being pickled):
    # builds are rare, and probes take it only to build.
    _build_lock = threading.Lock()

    @property
    def num_zones(self) -> int:
        return len(self.fragment_id)

    @property
    def num_rows(self) -> int:
        """Rows spanned by all zones (deleted rows inside a zone's span included)."""
        return int(self.zone_length.sum())

    def filter_bytes(self, zone: int) -> bytes:
        """The serialized SBBF of zone ``zone`` (file order)."""
        return bytes(self.filter_data[zone])

    def filter_groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(zone numbers, (n, bytes) uint8 filters)]``, one entry per filter size."""
        if self._groups is None:
            data = self.filter_data
            if isinstance(data, np.ndarray):
                self._groups = [(np.arange(self.num_zones), data)]
            else:
                lengths = np.array([len(d) for d in data], dtype=np.int64)
                groups = []
                for size in np.unique(lengths):
                    zones = np.flatnonzero(lengths == size)
                    joined = b"".join(data[z] for z in zones)
                    groups.append((zones, np.frombuffer(joined, np.uint8).reshape(-1, int(size))))
                self._groups = groups
        return self._groups

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        """(K, zones) bool: ``False`` proves value k (by hash) is absent from zone z."""
        result = np.empty((len(hashes), self.num_zones), dtype=bool)
        for group, (zones, filters) in enumerate(self.filter_groups()):
            sliced = self._probe_layout(group, filters, len(hashes))
            if sliced is None:
                result[:, zones] = sbbf.check(filters, hashes)
            else:
                result[:, zones] = sliced.might_contain(hashes)
        return result

    def prepare_probes(self) -> None:
        """Build the sliced probe layout of every filter group now, not when probes pay for it.

        For long-running processes that will probe a lot: it costs about as much memory as the
        filters, and time once (0.13-0.3 s for 12,000 zones of 32 KiB on 2 cores, more when the
        process first touches that much memory).
        """
        for group, (_, filters) in enumerate(self.filter_groups()):
            self._build_sliced(group, filters)

    def _probe_layout(
        self, group: int, filters: np.ndarray, count: int
    ) -> sbbf.SlicedFilters | None:
        """The sliced layout to probe ``count`` values in group ``group`` with, or None: direct.

        Ski rental: probing directly costs per (value, zone) pair; the sliced layout costs a
        build once, then almost nothing. Probe directly until the pairs probed so far, this
        call's included, would cost more than the build, then build: at most about twice the
        cost of the best choice made knowing the future queries.
        """
        sliced = self._sliced.get(group)
        if sliced is not None or count == 0:
            return sliced
        # Unlocked: two threads may lose one count, which only moves the build a little.
        pairs = self._direct_pairs.get(group, 0) + count * len(filters)
        if pairs > self._PAIRS_PER_SLICED_BYTE * filters.nbytes:
            return self._build_sliced(group, filters)
        self._direct_pairs[group] = pairs
        return None

    def _build_sliced(self, group: int, filters: np.ndarray) -> sbbf.SlicedFilters:
        with self._build_lock:
            sliced = self._sliced.get(group)
            if sliced is None:
                sliced = self._sliced[group] = sbbf.SlicedFilters(filters)
        return sliced

    @classmethod
    def concat(cls, parts: list[ZoneIndex]) -> ZoneIndex:
        """One index over the zones of several (e.g. the segments of a Lance index)."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        arrays = [p.filter_data for p in parts if isinstance(p.filter_data, np.ndarray)]
        filters: list[bytes] | np.ndarray
        if len(arrays) == len(parts) and len({a.shape[1] for a in arrays}) == 1:
            filters = np.concatenate(arrays)
        else:
            filters = [p.filter_bytes(z) for p in parts for z in range(p.num_zones)]
        damaged = None
        if any(p.damaged is not None for p in parts):
            damaged = np.concatenate(
                [np.zeros(p.num_zones, bool) if p.damaged is None else p.damaged for p in parts]
            )
        null_rows: dict[int, np.ndarray] | None = None
        if any(p.null_rows is not None for p in parts):
            null_rows = {}
            for p in parts:
                null_rows.update(p.null_rows or {})
        return cls(
            column=first.column,
            items=first.items,
            probability=first.probability,
            fragment_id=np.concatenate([p.fragment_id for p in parts]),
            zone_start=np.concatenate([p.zone_start for p in parts]),
            zone_length=np.concatenate([p.zone_length for p in parts]),
            has_null=np.concatenate([p.has_null for p in parts]),
            filter_data=filters,
            null_rows=null_rows,
            damaged=damaged,
        )

    def subset(self, zones: np.ndarray) -> ZoneIndex:
        """The index of only the zones ``zones`` (indices or a bool mask), in that order."""
        picked = np.arange(self.num_zones)[zones]
        data = self.filter_data
        filters = data[picked] if isinstance(data, np.ndarray) else [data[z] for z in picked]
        return ZoneIndex(
            column=self.column,
            items=self.items,
            probability=self.probability,
            fragment_id=self.fragment_id[picked],
            zone_start=self.zone_start[picked],
            zone_length=self.zone_length[picked],
            has_null=self.has_null[picked],
            filter_data=filters,
            null_rows=self.null_rows,
            files=self.files,
            damaged=None if self.damaged is None else self.damaged[picked],
        )

    def zone_mask(self, hashes: np.ndarray) -> np.ndarray:
        """(zones,) bool: zones that may hold any of the hashed values."""
        mask = np.zeros(self.num_zones, dtype=bool)
        for group, (zones, filters) in enumerate(self.filter_groups()):
            sliced = self._probe_layout(group, filters, len(hashes))
            if sliced is None:
                mask[zones] = sbbf.check(filters, hashes).any(axis=0)
            else:
                mask[zones] = sliced.may_contain_any(hashes)
        return mask


# --------------------------------------------------------------------------- building


@dataclass(frozen=True, slots=True)
class _FragmentColumn:
    fragment_id: int
    values: pa.Array | pa.ChunkedArray  # live rows, physical order
    zones: FragmentZones
    live_offsets: np.ndarray | None  # physical offset of each live row; None: 0, 1, 2, ...


@dataclass(frozen=True, slots=True)
class _FragmentZoneRows:
    """The index rows of one fragment (small: no column data)."""

    fragment_id: int
    zone_fragment_id: np.ndarray  # the fragment id once per zone, as stored
    zone_start: np.ndarray
    zone_length: np.ndarray
    has_null: np.ndarray
    filters: np.ndarray
    null_offsets: np.ndarray | None
    rows: int


def _index_fragment(part: _FragmentColumn, num_bytes: int) -> _FragmentZoneRows:
    zones = part.zones
    hashes, valid = hash_array(part.values, scratch("fragment-hashes", len(part.values), np.uint64))
    null_offsets = None
    if valid is None:
        filters = sbbf.insert(hashes, zones.first_row, num_bytes)
        has_null = np.zeros(zones.num_zones, dtype=bool)
    else:
        # Zone bounds among the non-null values: count the valid rows of each zone.
        valid_per_zone = np.add.reduceat(valid, zones.first_row[:-1], dtype=np.int64)
        valid_bounds = np.concatenate(([0], np.cumsum(valid_per_zone)))
        filters = sbbf.insert(hashes[valid], valid_bounds, num_bytes)
        has_null = valid_per_zone < np.diff(zones.first_row)
        null_rows = np.flatnonzero(~valid)
        if len(null_rows):
            offsets = null_rows if part.live_offsets is None else part.live_offsets[null_rows]
            null_offsets = offsets.astype(np.uint32)
    return _FragmentZoneRows(
        part.fragment_id,
        np.full(zones.num_zones, part.fragment_id, dtype=np.uint64),
        zones.zone_start,
        zones.zone_length,
        has_null,
        filters,
        null_offsets,
        len(part.values),
    )


def _build(
    column: str,
    readers: Sequence[Callable[[], _FragmentColumn]],
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
    num_bytes = sbbf.optimal_num_bytes(items, probability)
    workers = threads or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        built = pool.map(lambda read: _index_fragment(read(), num_bytes), readers)
        return _assemble(column, items, probability, built, total_rows, progress, sink)


def _assemble(
    column: str,
    items: int,
    probability: float,
    fragments: Iterable[_FragmentZoneRows],
    total_rows: int,
    progress: ProgressCallback | None,
    sink: IndexFileWriter | None,
) -> ZoneIndex:
    """The index of the fragments' zones, in the order given (every build's last step).

    Each fragment's zones go to ``sink`` and ``progress`` hears of it as soon as the iterable
    yields it, so a lazy iterable overlaps writing with building.
    """
    num_bytes = sbbf.optimal_num_bytes(items, probability)
    results: list[_FragmentZoneRows] = []
    done = 0
    for rows in fragments:
        done += rows.rows
        if rows.zone_start.size:
            results.append(rows)
            if sink is not None:
                sink.write_zones(
                    rows.zone_fragment_id,
                    rows.zone_start,
                    rows.zone_length,
                    rows.has_null,
                    rows.filters,
                )
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
        filter_data=np.concatenate([r.filters for r in results])
        if results
        else np.zeros((0, num_bytes), dtype=np.uint8),
        null_rows={r.fragment_id: r.null_offsets for r in results if r.null_offsets is not None},
    )


def _column_type(schema: pa.Schema, column: str, where: str) -> pa.DataType:
    if column not in schema.names:
        raise InvalidParameterError(
            f"column {column!r} is not in {where}; its columns are {', '.join(schema.names)}"
        )
    arrow_type = schema.field(column).type
    hash_input_width(arrow_type)  # raises UnsupportedTypeError with advice
    return arrow_type


def _read_lance_fragment(
    dataset: object, fragment_id: int, column: str, items: int, version: int | None = None
) -> _FragmentColumn:
    """The live values of ``column`` in one Lance fragment, and the fragment's zones.

    ``dataset`` is an open dataset, or its URI opened here at ``version``: all a Spark
    executor can be handed, since an open dataset does not pickle.
    """
    fragment = _open_lance(dataset, version).get_fragment(fragment_id)
    if fragment.metadata.deletion_file is None:
        table = fragment.to_table(columns=[column])
        return _FragmentColumn(
            fragment_id, table.column(column), contiguous_zones(table.num_rows, items), None
        )
    table = fragment.to_table(columns=[column], with_row_address=True)
    addresses = table.column("_rowaddr").to_numpy()
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return _FragmentColumn(
        fragment_id, table.column(column), lance_fragment_zones(offsets, items), offsets
    )


def _lance_fragments(dataset: object, column: str) -> tuple[Any, list[Any]]:
    """The open dataset and its fragments, once ``column`` is known to be indexable."""
    ds = _open_lance(dataset)
    _column_type(ds.schema, column, f"Lance dataset {ds.uri}")
    return ds, ds.get_fragments()


def build_lance_index(
    dataset: object,
    column: str,
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
    ds, fragments = _lance_fragments(dataset, column)
    sbbf.optimal_num_bytes(items, probability)
    total = sum(f.count_rows() for f in fragments)
    readers = [partial(_read_lance_fragment, ds, f.fragment_id, column, items) for f in fragments]
    return _build(column, readers, items, probability, total, progress, threads, sink)


def _parquet_files(directory: Path) -> list[Path]:
    """Every ``*.parquet`` under ``directory``, skipping ``_`` and ``.`` folders and files."""
    found = []
    for path in directory.rglob("*.parquet"):
        parts = path.relative_to(directory).parts
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        if path.is_file():
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(directory).as_posix())


def _assign_fragment_ids(relative_paths: list[str], previous: list[FragmentFile]) -> list[int]:
    """Keep the id a file had in the previous index; new files get ids above every old one."""
    known = {f.path: f.fragment_id for f in previous}
    next_id = max(known.values(), default=-1) + 1
    ids = []
    for path in relative_paths:
        if path in known:
            ids.append(known[path])
        else:
            ids.append(next_id)
            next_id += 1
    return ids


def _read_parquet_fragment(
    file: str | os.PathLike[str] | pq.ParquetFile, fragment_id: int, column: str, items: int
) -> _FragmentColumn:
    """The values of ``column`` in one Parquet file (an open one, or a path), and its zones."""
    meta = file if isinstance(file, pq.ParquetFile) else pq.ParquetFile(file)
    group_rows = [meta.metadata.row_group(i).num_rows for i in range(meta.num_row_groups)]
    values = meta.read(columns=[column]).column(column)
    return _FragmentColumn(fragment_id, values, parquet_file_zones(group_rows, items), None)


def _parquet_fragments(
    directory: str | os.PathLike[str], column: str
) -> tuple[list[pq.ParquetFile], list[FragmentFile]]:
    """The Parquet files under ``directory``, open and as the index records them (paths
    relative to ``directory``), once ``column`` is known to be indexable and stored with one
    type in all of them."""
    root = Path(directory)
    if not root.is_dir():
        raise InvalidParameterError(
            f"{root} is not a directory; pass a directory of Parquet files or a Lance dataset"
        )
    paths = _parquet_files(root)
    if not paths:
        raise InvalidParameterError(f"no *.parquet files under {root}")
    # Identity first, content second: a file replaced in between then fails to match the
    # identity the index records, and is read whole instead of probed with stale zones.
    identities = [(p.stat(), parquet_footer_hash(p)) for p in paths]
    metas = [pq.ParquetFile(p) for p in paths]
    arrow_type = _column_type(metas[0].schema_arrow, column, f"Parquet file {paths[0]}")
    for path, meta in zip(paths[1:], metas[1:], strict=True):
        other = _column_type(meta.schema_arrow, column, f"Parquet file {path}")
        if other != arrow_type:
            # Values are hashed at their column's width: a probe at one width would miss
            # every zone of a file stored at another, a wrong answer.
            raise InvalidParameterError(
                f"column {column!r} is {other} in {path} but {arrow_type} in {paths[0]}; "
                "every file must store the column with one type: rewrite the odd files, "
                "or keep them in a directory of their own"
            )
    relative = [p.relative_to(root).as_posix() for p in paths]
    try:
        previous = load_index(root, column).files or []
    except (IndexNotFoundError, IndexFormatError):
        previous = []
    ids = _assign_fragment_ids(relative, previous)
    files: list[FragmentFile] = []
    for (stat, footer), rel, fid, meta in zip(identities, relative, ids, metas, strict=True):
        rows = meta.metadata.num_rows
        files.append(FragmentFile(fid, rel, stat.st_size, stat.st_mtime_ns, rows, footer))
    return metas, files


def build_parquet_index(
    directory: str | os.PathLike[str],
    column: str,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    threads: int | None = None,
    sink: IndexFileWriter | None = None,
) -> ZoneIndex:
    """Build the zone bloom index of ``column`` over a directory of Parquet files.

    Each file is a fragment; zones never straddle a row group. Fragment ids stay stable
    across rebuilds (a file keeps the id the previous index gave it).
    """
    metas, files = _parquet_fragments(directory, column)
    sbbf.optimal_num_bytes(items, probability)
    total = sum(f.rows for f in files)
    readers = [
        partial(_read_parquet_fragment, meta, file.fragment_id, column, items)
        for meta, file in zip(metas, files, strict=True)
    ]
    index = _build(column, readers, items, probability, total, progress, threads, sink)
    index.files = files
    return index


# --------------------------------------------------------------------- file write / read


def _encode_null_bitmap(null_rows: dict[int, np.ndarray]) -> bytes:
    """u32 count, then per fragment ascending: u32 id, u32 byte length, portable Roaring."""
    parts = [struct.pack("<I", len(null_rows))]
    for fragment_id in sorted(null_rows):
        # Lance (roaring-rs) writes array and bitmap containers only, never run containers.
        serialized = BitMap(null_rows[fragment_id], optimize=False).serialize()
        parts.append(struct.pack("<II", fragment_id, len(serialized)))
        parts.append(serialized)
    return b"".join(parts)


def _decode_null_bitmap(data: bytes, where: str) -> dict[int, np.ndarray]:
    try:
        (count,) = struct.unpack_from("<I", data, 0)
        position = 4
        result: dict[int, np.ndarray] = {}
        for _ in range(count):
            fragment_id, length = struct.unpack_from("<II", data, position)
            position += 8
            if position + length > len(data):
                raise ValueError("bitmap runs past the end of the buffer")
            chunk = data[position : position + length]
            position += length
            result[fragment_id] = (
                np.array(BitMap.deserialize(chunk), dtype=np.uint32)
                if length
                else np.zeros(0, dtype=np.uint32)
            )
        return result
    except (struct.error, ValueError, OverflowError) as err:
        raise IndexFormatError(f"{where}: the null_bitmap buffer is damaged ({err})") from err


_ZONE_HEADER = np.dtype([("f", "<u8"), ("s", "<u8"), ("l", "<u8"), ("n", "u1")])


def zone_checksums(
    fragment_id: np.ndarray,
    zone_start: np.ndarray,
    zone_length: np.ndarray,
    has_null: np.ndarray,
    filters: np.ndarray | Sequence[bytes],
) -> np.ndarray:
    """Per zone, XXH3-64 of its filter bytes seeded with XXH3-64 of its other four fields.

    A flipped bit anywhere in a zone's row changes its checksum (xxhash, because a bit flip
    in a bloom filter is invisible to every structural check and would drop rows).
    """
    headers = np.empty(len(fragment_id), dtype=_ZONE_HEADER)
    headers["f"], headers["s"], headers["l"] = fragment_id, zone_start, zone_length
    headers["n"] = has_null
    raw = headers.view(np.uint8).reshape(len(headers), _ZONE_HEADER.itemsize)
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter(
        (digest(filters[z], seed=digest(raw[z])) for z in range(len(headers))),
        dtype=np.uint64,
        count=len(headers),
    )


def parquet_footer_hash(path: str | os.PathLike[str]) -> int:
    """XXH3-64 of a Parquet file's footer (metadata and its length): an identity of the
    file's content that survives a copy keeping size and modification time. 0 when the
    file is too short to have one."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size < 12:
            return 0
        handle.seek(size - 8)
        (length,) = struct.unpack("<I", handle.read(4))
        if length + 12 > size:
            return 0
        handle.seek(size - 8 - length)
        return int(xxhash.xxh3_64_intdigest(handle.read(length + 8)))


def _binary_array(filters: np.ndarray) -> pa.Array:
    """A zero-copy Binary array over the rows of a (zones, bytes) uint8 array."""
    count, width = filters.shape
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    data = np.ascontiguousarray(filters).reshape(-1)
    return pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


class IndexFileWriter:
    """Streams zone rows into a ``bloomfilter.lance``, renamed into place by :meth:`finish`.

    A build hands each fragment's zones over as soon as they are ready, so writing overlaps
    building. Until ``finish`` the file exists only under a temporary name beside the
    target, so readers see the old index or the new one, never a partial file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from lance.file import LanceFileWriter

        self.target = Path(path)
        self._created_parent = not self.target.parent.exists()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self._temporary = self.target.with_name(f".{self.target.name}.{uuid.uuid4().hex}.tmp")
        self._writer: Any = LanceFileWriter(str(self._temporary), INDEX_SCHEMA)
        self._checksums: list[np.ndarray] = []

    def write_zones(
        self,
        fragment_id: np.ndarray,
        zone_start: np.ndarray,
        zone_length: np.ndarray,
        has_null: np.ndarray,
        filters: np.ndarray,
    ) -> None:
        """Append zones; ``filters`` is (zones, bytes) uint8."""
        self._checksums.append(
            zone_checksums(fragment_id, zone_start, zone_length, has_null, filters)
        )
        per_batch = max(1, _WRITE_BATCH_BYTES // max(1, filters.shape[1]))
        for start in range(0, len(filters), per_batch):
            rows = slice(start, start + per_batch)
            batch = pa.record_batch(
                [
                    pa.array(fragment_id[rows], pa.uint64()),
                    pa.array(zone_start[rows], pa.uint64()),
                    pa.array(zone_length[rows], pa.uint64()),
                    pa.array(has_null[rows], pa.bool_()),
                    _binary_array(filters[rows]),
                ],
                schema=INDEX_SCHEMA,
            )
            self._writer.write_batch(batch)

    def finish(self, index: ZoneIndex) -> int:
        """Write the metadata of ``index``, close, move into place; return the file size."""
        writer = self._writer
        if writer is None:
            raise RuntimeError("IndexFileWriter.finish called after abort")
        try:
            writer.add_schema_metadata(META_ITEMS, str(index.items))
            writer.add_schema_metadata(META_PROBABILITY, format_probability(index.probability))
            if index.null_rows is not None:
                # Lance writes the buffer even when no row is null.
                buffer_index = writer.add_global_buffer(_encode_null_bitmap(index.null_rows))
                writer.add_schema_metadata(META_NULL_BITMAP, str(buffer_index))
            checksums = np.concatenate(self._checksums or [np.zeros(0, np.uint64)])
            buffer_index = writer.add_global_buffer(checksums.astype("<u8").tobytes())
            writer.add_schema_metadata(META_CHECKSUMS, str(buffer_index))
            if index.files is not None:
                writer.add_schema_metadata(META_COLUMN, index.column)
                files = [
                    [f.fragment_id, f.path, f.size, f.mtime_ns, f.rows, f.footer]
                    for f in index.files
                ]
                writer.add_schema_metadata(META_FILES, json.dumps(files))
            writer.close()
            os.replace(self._temporary, self.target)
        finally:
            self.abort()
        return self.target.stat().st_size

    def __enter__(self) -> IndexFileWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Leaving the block without :meth:`finish` (e.g. on an error) aborts the write."""
        self.abort()

    def abort(self) -> None:
        """Forget a write that will not finish (the target is untouched)."""
        # Dropping pylance's writer removes the staging file it keeps beside the target.
        self._writer = None
        self._temporary.unlink(missing_ok=True)
        if self._created_parent and not self.target.exists():
            with contextlib.suppress(OSError):
                self.target.parent.rmdir()


def write_index_file(index: ZoneIndex, path: str | os.PathLike[str]) -> int:
    """Write ``index`` as a Lance BLOOMFILTER index file, atomically; return its size."""
    with IndexFileWriter(path) as writer:
        for zones, filters in index.filter_groups():
            writer.write_zones(
                index.fragment_id[zones],
                index.zone_start[zones],
                index.zone_length[zones],
                index.has_null[zones],
                filters,
            )
        return writer.finish(index)


def _is_lance_failure(err: BaseException) -> bool:
    """True for errors pylance raises on a bad file, including Rust panics.

    A panic inside pylance surfaces as ``pyo3_runtime.PanicException``, which derives from
    BaseException and cannot be imported by name.
    """
    if isinstance(err, KeyboardInterrupt | SystemExit | GeneratorExit):
        return False
    return isinstance(err, Exception) or type(err).__name__ == "PanicException"


def _parse_metadata(metadata: dict[bytes, bytes], where: str) -> tuple[int, float]:
    def get(key: str) -> str:
        raw = metadata.get(key.encode())
        if raw is None:
            raise IndexFormatError(
                f"{where} has no {key!r} schema metadata: it is not a Lance BLOOMFILTER "
                "index file (or it is damaged); rebuild it with `pruner index build`"
            )
        return raw.decode("utf-8", errors="replace")

    items_text, probability_text = get(META_ITEMS), get(META_PROBABILITY)
    try:
        items = int(items_text)
        probability = float(probability_text)
    except ValueError as err:
        raise IndexFormatError(
            f"{where}: schema metadata {META_ITEMS}={items_text!r}, "
            f"{META_PROBABILITY}={probability_text!r} are not numbers; rebuild the index"
        ) from err
    if items < 1 or not 0.0 <= probability < 1.0:
        raise IndexFormatError(
            f"{where}: {META_ITEMS}={items} must be >= 1 and {META_PROBABILITY}={probability} "
            "in [0, 1); rebuild the index"
        )
    return items, probability


def _filters_from_column(column: pa.ChunkedArray, where: str) -> list[bytes] | np.ndarray:
    """The filters as one (zones, bytes) array straight from the Arrow buffers when they all
    have one size (always, for files Lance or pruner write); else one ``bytes`` per zone."""
    parts, lengths = [], []
    for chunk in column.chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        data = np.frombuffer(chunk.buffers()[2] or b"", dtype=np.uint8)
        parts.append(data[int(offsets[0]) : int(offsets[-1])])
        lengths.append(np.diff(offsets))
    sizes = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    bad = np.flatnonzero((sizes <= 0) | (sizes % sbbf.BLOCK_BYTES != 0))
    if len(bad):
        zone = int(bad[0])
        sbbf.validate_filter_length(int(sizes[zone]), f"{where}: zone {zone}'s bloom filter")
    if len(sizes) == 0 or (sizes == sizes[0]).all():
        width = int(sizes[0]) if len(sizes) else sbbf.BLOCK_BYTES
        joined = parts[0] if len(parts) == 1 else np.concatenate(parts or [np.zeros(0, np.uint8)])
        return joined.reshape(-1, width)
    return column.to_pylist()


_READ_ATTEMPTS = 5


def _file_identity(path: Path) -> tuple[int, ...] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_dev, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def read_index_file(path: str | os.PathLike[str], column: str = "") -> ZoneIndex:
    """Read a Lance BLOOMFILTER index file, whoever wrote it, validating it fully.

    Lance's reader opens the file by name more than once, so a rebuild renaming a new file
    over it mid-read could hand it pieces of both: a read is kept only when the name
    pointed at the same file before and after it, and is retried otherwise.

    Raises:
        IndexFormatError: the file is missing pieces, damaged, or not such an index.
    """
    target = Path(path)
    for _ in range(_READ_ATTEMPTS):
        before = _file_identity(target)
        try:
            index, error = _read_index_file_once(target, column), None
        except IndexFormatError as err:
            index, error = None, err
        if _file_identity(target) == before:
            if error is not None:
                raise error
            assert index is not None
            return index
    raise IndexFormatError(
        f"bloom index file {path} was replaced during each of {_READ_ATTEMPTS} reads "
        "(is a build rewriting it in a loop?); try again when the builds are done"
    )


def _read_index_file_once(target: Path, column: str) -> ZoneIndex:
    from lance.file import LanceFileReader

    where = f"bloom index file {target}"
    if not target.is_file():
        kind = "a directory" if target.is_dir() else "missing"
        raise IndexFormatError(f"{where} is {kind}; rebuild the index with `pruner index build`")
    size = target.stat().st_size
    with target.open("rb") as handle:
        if size >= len(_LANCE_MAGIC):
            handle.seek(size - len(_LANCE_MAGIC))
        tail = handle.read(len(_LANCE_MAGIC))
    if size < 64 or tail != _LANCE_MAGIC:
        raise IndexFormatError(
            f"{where} is not a complete Lance file ({size} bytes, no trailing magic): it was "
            "truncated or overwritten; rebuild the index with `pruner index build`"
        )
    try:
        reader = LanceFileReader(str(target))
        table = reader.read_all().to_table()
        metadata = dict(table.schema.metadata or {})
        null_buffer_text = metadata.get(META_NULL_BITMAP.encode())
        null_buffer = (
            bytes(reader.read_global_buffer(int(null_buffer_text)))
            if null_buffer_text is not None
            else None
        )
        checksum_text = metadata.get(META_CHECKSUMS.encode())
        checksum_buffer = (
            bytes(reader.read_global_buffer(int(checksum_text)))
            if checksum_text is not None
            else None
        )
    except BaseException as err:
        if not _is_lance_failure(err):
            raise
        raise IndexFormatError(
            f"{where} cannot be read by Lance ({type(err).__name__}: {err}); rebuild the index"
        ) from err
    got = table.schema.remove_metadata()
    expected_columns = [(f.name, f.type) for f in INDEX_SCHEMA]
    if [(f.name, f.type) for f in got] != expected_columns:
        raise IndexFormatError(
            f"{where} has columns {got.to_string(show_schema_metadata=False)!r} but a bloom "
            f"filter index has {', '.join(f'{n}: {t}' for n, t in expected_columns)}"
        )
    if table.num_rows and any(table.column(i).null_count for i in range(table.num_columns)):
        raise IndexFormatError(f"{where} has nulls in a non-nullable column; rebuild the index")
    items, probability = _parse_metadata(metadata, where)
    filters = _filters_from_column(table.column("bloom_filter_data"), where)
    zone_length = table.column("zone_length").to_numpy()
    if (zone_length == 0).any():
        raise IndexFormatError(f"{where} has a zone of length 0; rebuild the index")
    fragment_id = table.column("fragment_id").to_numpy()
    zone_start = table.column("zone_start").to_numpy()
    has_null = table.column("has_null").to_numpy(zero_copy_only=False)
    damaged = None
    if checksum_buffer is not None:
        if len(checksum_buffer) != 8 * table.num_rows:
            raise IndexFormatError(
                f"{where}: {META_CHECKSUMS} holds {len(checksum_buffer)} bytes for "
                f"{table.num_rows} zones (zones are missing or added); rebuild the index"
            )
        stored = np.frombuffer(checksum_buffer, dtype="<u8")
        damaged = stored != zone_checksums(fragment_id, zone_start, zone_length, has_null, filters)
    files = None
    files_text = metadata.get(META_FILES.encode())
    if files_text is not None:
        try:
            files = [
                FragmentFile(int(a), str(b), int(c), int(d), int(e), int(rest[0]) if rest else 0)
                for a, b, c, d, e, *rest in json.loads(files_text)
            ]
        except (ValueError, TypeError, RecursionError) as err:
            raise IndexFormatError(f"{where}: {META_FILES} metadata is damaged ({err})") from err
        column = column or metadata.get(META_COLUMN.encode(), b"").decode()
    return ZoneIndex(
        column=column,
        items=items,
        probability=probability,
        fragment_id=fragment_id,
        zone_start=zone_start,
        zone_length=zone_length,
        has_null=has_null,
        filter_data=filters,
        null_rows=_decode_null_bitmap(null_buffer, where) if null_buffer is not None else None,
        files=files,
        damaged=damaged,
    )


# ------------------------------------------------------------------ Lance integration


def _open_lance(dataset: object, version: int | None = None) -> lance.LanceDataset:  # type: ignore[name-defined] # noqa: F821
    """``dataset`` if it is an open dataset, else the dataset at that path (at ``version``)."""
    import lance

    if isinstance(dataset, lance.LanceDataset):
        return dataset
    return lance.dataset(str(dataset), version=version)


@dataclass(frozen=True, slots=True)
class BloomIndexInfo:
    """One segment of a BLOOMFILTER index committed in a Lance dataset.

    An index may have several segments (``optimize_indices`` after an append adds one for
    the new fragments); each has its own ``bloomfilter.lance``.
    """

    name: str
    uuid: str
    column: str
    field_id: int
    fragment_ids: frozenset[int]
    dataset_version: int
    path: Path


def list_bloom_indexes(dataset: object) -> list[BloomIndexInfo]:
    """Every segment of every single-column BLOOMFILTER index in a Lance dataset."""
    ds = _open_lance(dataset)
    found = []
    for description in ds.describe_indices():
        if description.type_url != BLOOM_INDEX_DETAILS or len(description.field_names) != 1:
            continue
        for segment in description.segments:
            if segment.base_id is not None:
                continue  # stored under another base path: not readable here
            found.append(
                BloomIndexInfo(
                    name=description.name,
                    uuid=segment.uuid,
                    column=description.field_names[0],
                    field_id=int(description.fields[0]),
                    fragment_ids=frozenset(int(f) for f in segment.fragment_ids),
                    dataset_version=int(segment.dataset_version_at_last_update),
                    path=Path(ds.uri) / "_indices" / segment.uuid / INDEX_FILE_NAME,
                )
            )
    return found


def commit_lance_index(dataset: object, index: ZoneIndex, name: str | None = None) -> str:
    """Commit ``index`` into the Lance dataset as a real BLOOMFILTER index; return its uuid.

    Existing bloom index segments on the same column are replaced in the same commit, so
    readers see the old index or the new one, never neither.
    """
    ds = _open_lance(dataset)
    index_uuid = str(uuid.uuid4())
    size = write_index_file(index, _lance_index_path(ds, index_uuid))
    _commit_index_file(ds, index, index_uuid, size, name)
    return index_uuid


def _lance_index_path(ds: Any, index_uuid: str) -> Path:
    return Path(ds.uri) / "_indices" / index_uuid / INDEX_FILE_NAME


_COMMIT_ATTEMPTS = 8


def _commit_index_file(
    ds: Any, index: ZoneIndex, index_uuid: str, size: int, name: str | None
) -> None:
    """Commit the already written ``_indices/<uuid>/bloomfilter.lance`` of ``index``.

    When another writer commits first (another build of this index, an append), Lance
    refuses with a retryable conflict; the commit is then retried on the newest version,
    replacing whatever bloom index on the column that version has. Two builds at once so
    leave one whole index, the last to commit: zones describe fragments, which appends and
    deletes do not change.
    """
    from lance.commit import CommitConflictError

    for attempt in range(_COMMIT_ATTEMPTS):
        try:
            _commit_once(ds, index, index_uuid, size, name)
            return
        except CommitConflictError:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise
            ds = _open_lance(ds.uri)


def _commit_once(ds: Any, index: ZoneIndex, index_uuid: str, size: int, name: str | None) -> None:
    from lance.bitmap import Bitmap
    from lance.dataset import Index, IndexFile, LanceDataset, LanceOperation

    field_id = ds.lance_schema.field(index.column).id()
    old = [info for info in list_bloom_indexes(ds) if info.column == index.column]
    removed = [
        Index(
            uuid=info.uuid,
            name=info.name,
            fields=[info.field_id],
            dataset_version=info.dataset_version,
            fragment_ids=Bitmap(sorted(info.fragment_ids)),
            index_version=0,
        )
        for info in old
    ]
    new = Index(
        uuid=index_uuid,
        name=name or (old[0].name if old else f"{index.column}_idx"),
        fields=[field_id],
        dataset_version=ds.version,
        fragment_ids=Bitmap(np.unique(index.fragment_id).tolist()),
        index_version=0,
        files=[IndexFile(path=INDEX_FILE_NAME, size_bytes=size)],
        index_details=(BLOOM_INDEX_DETAILS, b""),
    )
    LanceDataset.commit(
        ds.uri,
        LanceOperation.CreateIndex(new_indices=[new], removed_indices=removed),
        read_version=ds.version,
    )


# ------------------------------------------------------------------------ entry points


def _is_lance_dataset(path: Path) -> bool:
    return path.is_dir() and (path / "_versions").is_dir()


def parquet_index_path(directory: str | os.PathLike[str], column: str) -> Path:
    """Where the index of ``column`` over a Parquet directory lives."""
    return Path(directory) / PARQUET_INDEX_DIR / quote(column, safe="") / INDEX_FILE_NAME


ENGINES = ("local", "spark")
"""Where :func:`build_index` runs the per-fragment work: threads here, or a Spark job."""


def build_index(
    source: str | os.PathLike[str],
    column: str,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    spark: Any = None,
) -> ZoneIndex:
    """Build and store the zone bloom index of ``column`` for a Lance dataset or Parquet dir.

    A Lance dataset gets a committed BLOOMFILTER index (Lance's scanner uses it); a Parquet
    directory gets ``_pruner/<column>/bloomfilter.lance``. ``engine="spark"`` indexes the
    fragments as tasks of a Spark job on ``spark`` (default: the active session, or a local
    one); either engine builds the same index and stores it the same way.

    Raises:
        InvalidParameterError: an unknown engine, column or parameter.
        EngineError: the Spark job failed.
    """
    if engine not in ENGINES:
        raise InvalidParameterError(
            f"unknown index build engine {engine!r}; use one of {', '.join(ENGINES)}"
        )
    path = Path(source)
    lance_source = _is_lance_dataset(path)
    build: Callable[..., ZoneIndex]
    if engine == "spark":
        from pruner.spark_build import build_zone_index_spark

        build = partial(build_zone_index_spark, spark=spark)
    else:
        build = build_lance_index if lance_source else build_parquet_index
    if lance_source:
        ds = _open_lance(path)
        index_uuid = str(uuid.uuid4())
        with IndexFileWriter(_lance_index_path(ds, index_uuid)) as sink:
            index = build(
                ds, column, items=items, probability=probability, progress=progress, sink=sink
            )
            size = sink.finish(index)
        _commit_index_file(ds, index, index_uuid, size, None)
        return index
    with IndexFileWriter(parquet_index_path(path, column)) as sink:
        index = build(
            path, column, items=items, probability=probability, progress=progress, sink=sink
        )
        sink.finish(index)
    return index


def load_lance_index(dataset: object, column: str) -> ZoneIndex | None:
    """Every segment of the bloom index on ``column`` of a Lance dataset (a path or an open
    dataset) as one index, or None when there is none."""
    segments = [info for info in list_bloom_indexes(dataset) if info.column == column]
    if not segments:
        return None
    parts = []
    for info in segments:
        part = read_index_file(info.path, column)
        # Lance's manifest says which fragments a segment covers: zones of others (e.g. of a
        # fragment whose column data Lance rewrote) describe data that is no longer there.
        covered = np.isin(part.fragment_id, np.fromiter(info.fragment_ids, np.uint64))
        parts.append(part if covered.all() else part.subset(covered))
    return ZoneIndex.concat(parts)


def load_index(source: str | os.PathLike[str], column: str) -> ZoneIndex:
    """Load the bloom index of ``column`` stored with a Lance dataset or Parquet directory.

    Raises:
        IndexNotFoundError: there is none; build one with ``pruner index build``.
        IndexFormatError: there is one, but it is damaged.
    """
    path = Path(source)
    if _is_lance_dataset(path):
        index = load_lance_index(path, column)
        if index is not None:
            return index
        location = f"Lance dataset {path}"
    else:
        index_path = parquet_index_path(path, column)
        if index_path.exists():
            return read_index_file(index_path, column)
        location = f"Parquet directory {path}"
    raise IndexNotFoundError(
        f"no bloom index on column {column!r} in {location}; "
        f"build one with `pruner index build {path} --column {column}`"
    )
