"""ZoneIndex: the zone bloom index of one column in memory, and how it is probed.

One row per zone, in file order: the fragment (Lance) or file (Parquet) holding the zone,
the zone's physical start and length, whether it has a null, and its SBBF (see
:mod:`pruner.sbbf`). :class:`FragmentFile` is the index's record of a Parquet file it
covers. Reading and writing the file is :mod:`pruner.index.fileformat`'s job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import sbbf
from pruner.discover import FileIdentity
from pruner.errors import IndexFormatError, PrunerError

__all__ = ["FragmentFile", "ZoneIndex"]


@dataclass(frozen=True, slots=True)
class FragmentFile:
    """A Parquet file covered by an index, and what identifies its content."""

    fragment_id: int
    path: str  # relative to the indexed directory, '/'-separated
    identity: FileIdentity
    rows: int


@dataclass(eq=False)
class ZoneIndex:
    """The zone bloom index of one column: one row per zone, in file order.

    ``filters`` holds every zone's SBBF as one row of a (zones, bytes) array; an index whose
    zones have filters of different sizes (only older Lance versions wrote those) keeps each
    size in its own group, see :meth:`filter_groups`.

    An index opened through its hierarchy companion (:mod:`pruner.index.hierarchy`) has no
    filters in memory (``filter_data`` None): probes read the companion by offset, and
    anything else that needs the filters, or a probe the companion fails, loads them from the
    index file (``plain``) first. ``hierarchy_note`` says why an index that could have had a
    companion was read without one.
    """

    column: str
    items: int
    probability: float
    fragment_id: np.ndarray
    zone_start: np.ndarray
    zone_length: np.ndarray
    has_null: np.ndarray
    filter_data: list[bytes] | np.ndarray | None
    null_rows: dict[int, np.ndarray] | None = None
    files: list[FragmentFile] | None = None
    # Per zone, True when its stored checksum does not match its content; None: no checksums.
    damaged: np.ndarray | None = None
    # Probes by offset, without the filters in memory: a pruner.index.hierarchy.Hierarchy
    # (the companion) or a pruner.index.native.NativeFilters (a Parquet file's own filters).
    hierarchy: Any = None
    plain: Callable[[], ZoneIndex] | None = field(default=None, repr=False)
    hierarchy_note: str | None = None
    # Set by a build that hashed the values here: per fragment id, its share of the hierarchy
    # companion's coarse filters (a pruner.index.hierarchy.FragmentCoarse); never stored.
    build_coarse: dict[int, Any] | None = field(default=None, repr=False)
    # and the dataset filter of their values as it filled it (a
    # pruner.index.hierarchy.DatasetFill: the shares no longer hold their hashes)
    build_fill: Any = field(default=None, repr=False)
    # (size, tail hash) of the index file as this build wrote it (before it was published):
    # what its companion names, so that a companion never names another writer's file.
    written_fingerprint: tuple[int, str] | None = field(default=None, repr=False)
    # The Arrow type whose bytes the filters hashed, when it is not the column's own
    # (Parquet's plain encoding: an int16 hashed as int32, :mod:`pruner.index.native`).
    value_type: pa.DataType | None = None
    # "parquet" when the filters are Parquet files' own (their values' plain encoding)
    value_encoding: str | None = None
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
        return bytes(self._filters()[zone])

    def _filters(self) -> list[bytes] | np.ndarray:
        """The zones' filters, loaded from the index file when only the companion was open.

        Raises:
            IndexFormatError: the index file is damaged, or holds other zones than the
                companion.
        """
        if self.filter_data is None:
            assert self.plain is not None, "an index without filters has a loader"
            with self._build_lock:
                if self.filter_data is None:
                    plain = self.plain()
                    same = (
                        np.array_equal(plain.fragment_id, self.fragment_id)
                        and np.array_equal(plain.zone_start, self.zone_start)
                        and np.array_equal(plain.zone_length, self.zone_length)
                    )
                    if not same or (plain.damaged is not None and plain.damaged.any()):
                        raise IndexFormatError(
                            f"the index file of {self.column!r} holds other or damaged zones "
                            "than its hierarchy companion; rebuild the index"
                        )
                    self.null_rows = plain.null_rows
                    self.filter_data = plain.filter_data
        data = self.filter_data
        assert data is not None
        return data

    def filter_groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(zone numbers, (n, bytes) uint8 filters)]``, one entry per filter size."""
        if self._groups is None:
            data = self._filters()
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

    def sliced_groups(self) -> set[int]:
        """The filter groups whose sliced probe layout is built (by probes that paid for it,
        or :meth:`prepare_probes`)."""
        return set(self._sliced)

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
        for p in parts:
            p._filters()
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
        data = self._filters()
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
        return self.zone_mask_explained(hashes)[0]

    def zone_mask_explained(
        self, hashes: np.ndarray, values: Sequence[object] | None = None
    ) -> tuple[np.ndarray, str | None]:
        """:meth:`zone_mask`, and which level of the hierarchy decided it (None: the zone
        filters in memory, with no companion expected).

        A companion that fails (a block truncated or failing its checksum) is dropped and
        the index file's filters are probed instead; if they cannot be read either, every
        zone is selected. ``values`` (the coerced values ``hashes`` hash) reach a hierarchy
        that probes some zones in another encoding (:class:`pruner.index.native.IntegerWidths`).
        """
        if self.hierarchy is not None:
            try:
                by_values = getattr(self.hierarchy, "probe_values", None)
                if by_values is not None and values is not None:
                    probe = by_values(hashes, values)
                else:
                    probe = self.hierarchy.probe(hashes)
                return probe.mask, probe.decided
            except PrunerError as err:
                self.hierarchy = None
                self.hierarchy_note = f"hierarchy companion dropped ({err})"
        note = self.hierarchy_note
        if self.filter_data is None:
            try:
                self._filters()
            except PrunerError as err:
                return np.ones(self.num_zones, bool), f"{note}; index file unreadable ({err})"
        return self._zone_mask(hashes), None if note is None else f"zone filters ({note})"

    _PAIRS_CHUNK = 1 << 22
    """(value, zone) pairs checked at once by :meth:`candidates` on filters in memory."""

    def candidates(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per hashed value, the zones that may hold it: ``(positions, zones)``, the int64
        (position in ``hashes``, zone) pairs, for every value at once.

        Through the hierarchy when it can say per value (an absent value then costs a block
        of the dataset filter), else with the filters in memory, a chunk of values at a
        time; Parquet's own filters say per value only one value at a time. A hierarchy
        that fails is dropped as in :meth:`zone_mask_explained`; filters that cannot be read
        give every zone to every value.
        """
        hashes = np.asarray(hashes, np.uint64)
        if self.hierarchy is not None:
            each = getattr(self.hierarchy, "probe_each", None)
            try:
                if each is not None:
                    return each(hashes)
                return _one_at_a_time(self.hierarchy, hashes)
            except PrunerError as err:
                self.hierarchy = None
                self.hierarchy_note = f"hierarchy companion dropped ({err})"
        try:
            self._filters()
        except PrunerError:
            positions = np.repeat(np.arange(len(hashes)), self.num_zones)
            return positions, np.tile(np.arange(self.num_zones), len(hashes))
        step = max(1, self._PAIRS_CHUNK // max(self.num_zones, 1))
        values, zones = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for first in range(0, len(hashes), step):
            rows, columns = np.nonzero(self.might_contain(hashes[first : first + step]))
            values.append(rows + first)
            zones.append(columns)
        return np.concatenate(values).astype(np.int64), np.concatenate(zones).astype(np.int64)

    def _zone_mask(self, hashes: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.num_zones, dtype=bool)
        for group, (zones, filters) in enumerate(self.filter_groups()):
            sliced = self._probe_layout(group, filters, len(hashes))
            if sliced is None:
                mask[zones] = sbbf.check(filters, hashes).any(axis=0)
            else:
                mask[zones] = sliced.may_contain_any(hashes)
        return mask


def _one_at_a_time(hierarchy: Any, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ZoneIndex.candidates` through a hierarchy that only says which zones may hold
    any of several values (Parquet's own filters): one probe per distinct value."""
    distinct, back = np.unique(hashes, return_inverse=True)
    masks = np.array([hierarchy.probe(distinct[i : i + 1]).mask for i in range(len(distinct))])
    rows, zones = np.nonzero(masks.reshape(len(distinct), -1)[back])
    return rows.astype(np.int64), zones.astype(np.int64)
