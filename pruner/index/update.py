"""Bring a stored index up to date without rebuilding it: index only what it does not cover.

A fragment's zones describe rows that never change (a Lance fragment is immutable but for
its deletion file; a Parquet file is matched by its identity), so an update keeps the zones
of every fragment still there and unchanged, byte for byte, indexes the fragments the index
does not cover (appended, compacted, changed, added), drops the zones of fragments that are
gone, and writes the result the way a build does, atomically.

A Lance index that only gains fragments gains a segment: the new fragments' zones in a file
of their own, committed beside the old segments (which Lance's manifest then narrows to the
fragments still there), so the update reads and writes nothing of the old zones, as
Lance's own ``optimize_indices`` does. Lance compacts only fragments that the same segments
cover, so the newest segment, while it is small beside the others (``TAIL_SHARE``), is
rewritten with the new fragments into one segment: hourly appends gather in one segment
whose fragments compaction can merge. Otherwise (re-indexed fragments, too many segments,
or mostly dead zones), and always for Parquet, the update writes one index over every
fragment: the kept zones' bytes, checked against their checksums, and the new ones.

Deletions leave a fragment's zones supersets of its live rows, so they stay correct; a
fragment is re-indexed when its deleted share passes ``deleted_share`` (its filters then
hold fewer values and its zones fewer rows), unless its zones already skip those rows.

:func:`plan_update` says what an update would do; :func:`pruner.index.update_index` does
it, the fragments to index built here in threads (:func:`local_fragment_rows`) or by
another engine, and merged with the kept zones in build order (:func:`merged_rows`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import sbbf, storage
from pruner.discover import is_lance_dataset
from pruner.errors import IndexFormatError, IndexNotFoundError
from pruner.index.build import FragmentZoneRows, index_in_threads
from pruner.index.fileformat import read_index_file, read_index_zones
from pruner.index.keys import Key, key_index_path, lance_key_files
from pruner.index.lance import list_bloom_indexes, load_lance_index, open_lance
from pruner.index.model import FragmentFile, ZoneIndex
from pruner.index.reading import (
    lance_fragments,
    parquet_fragments,
    parquet_index_value_type,
    read_lance_fragment,
    read_parquet_fragment,
)
from pruner.index.store import column_index_path
from pruner.zones import lance_fragment_zones

__all__ = [
    "DEFAULT_DELETED_SHARE",
    "MAX_DEAD_SHARE",
    "MAX_SEGMENTS",
    "UpdatePlan",
    "fragment_rows_to_index",
    "kept_rows",
    "key_plan",
    "local_fragment_rows",
    "merged_rows",
    "plan_update",
]

DEFAULT_DELETED_SHARE = 0.1
"""A fragment whose deleted rows pass this share of its rows is re-indexed by an update."""

MAX_SEGMENTS = 8
"""A Lance index with this many segments is rewritten as one by its next update (each
segment is one more file to open and probe)."""

TAIL_SHARE = 0.25
"""The newest segment of a Lance index is rewritten with an update's new fragments while its
live zones are at most this share of the other segments' (else the new fragments get a
segment of their own, and it stays as it is)."""

MAX_DEAD_SHARE = 0.5
"""A Lance index whose segments' zones describe fragments that are gone (compacted away)
more than this share is rewritten as one segment by its next update."""


@dataclass
class UpdatePlan:
    """What an update of one index does, fragment by fragment (ids as the new index
    numbers them; a Parquet file renamed keeps its zones under its new id).

    Attributes:
        keep: fragments whose zones are kept as they are.
        add: fragments the index does not cover (new, compacted, or changed since the build).
        rebuild: covered fragments indexed again (deleted share past the threshold, or
            zones that fail their checksums).
        drop: fragments of the index that are gone (their zones are dropped).
        whole: why every fragment is indexed again ('' when not).
        segment: a Lance update that only adds fragments, committed as a segment of their
            own beside the old ones (planned from the old segments' zones alone, without
            reading their filters); False: the index is rewritten as one segment. The new
            segment holds ``order``: the fragments added and those kept from the segment
            it replaces (``replaces``: the newest one, while it is small, or none).
        others: fragments of segments an update adding a segment leaves as they are.
    """

    column: str
    kind: str
    items: int
    probability: float
    order: list[int] = field(default_factory=list)  # every live fragment, in build order
    keep: dict[int, int] = field(default_factory=dict)  # new fragment id -> old one
    add: list[int] = field(default_factory=list)
    rebuild: list[int] = field(default_factory=list)
    drop: list[int] = field(default_factory=list)
    whole: str = ""
    old: ZoneIndex | None = None
    files: list[FragmentFile] | None = None  # Parquet: the files as the new index records them
    source: Any = None  # the open Lance dataset, or the Parquet files opened by fragment id
    root: storage.Location | None = None  # Parquet: the directory
    hierarchy: str = ""  # after the update: why the index has no hierarchy companion ('')
    segment: bool = False
    replaces: list[str] = field(default_factory=list)  # uuids of segments rewritten
    others: list[int] = field(default_factory=list)
    value_type: pa.DataType | None = None  # Parquet: what the new index hashes (ZoneIndex's)
    key: Key | None = None  # a compound key's index (``column`` is then its index's name)
    location: storage.Location | None = None  # the index file, unless Lance commits it (a column's)
    # On an object store, the index object as the plan read it: the update's PUT replaces
    # exactly that object (compare-and-swap on its ETag), or fails.
    location_stat: storage.Stat | None = None
    # Parquet: each file's (by new fragment id) name for the column, where it differs (a
    # Delta or Iceberg table's: build.parquet_fragments)
    stored: dict[int, str] = field(default_factory=dict)

    def target_in(self, fragment_id: int) -> str | Key:
        """What the update reads of a fragment: :attr:`target`, by the file's name for it."""
        return self.stored.get(fragment_id, self.target)

    @property
    def target(self) -> str | Key:
        """What the update indexes: the column, or the compound key."""
        return self.column if self.key is None else self.key

    @property
    def kept(self) -> list[int]:
        """Every fragment whose zones stay as they are: rewritten from the old index
        (``keep``) or left in a segment the update does not touch (``others``)."""
        return sorted([*self.keep, *self.others])

    @property
    def renamed(self) -> list[int]:
        """Kept fragments under a new id (Parquet files renamed)."""
        return [new for new, old in self.keep.items() if new != old]

    @property
    def current(self) -> bool:
        return not (self.add or self.rebuild or self.drop or self.whole or self.renamed)

    def to_index(self) -> list[int]:
        """The fragments an update indexes, in build order."""
        wanted = set(self.add) | set(self.rebuild)
        return [f for f in self.order if f in wanted]

    def summary(self) -> dict[str, object]:
        return {
            "fragments_to_add": len(self.add),
            "fragments_to_rebuild": len(self.rebuild),
            "fragments_to_drop": len(self.drop),
            "fragments_kept": len(self.kept),
            "fragments_renamed": len(self.renamed),
            "rebuild_all": self.whole,
            "adds_segment": self.segment,
        }


_PATHS = (str, os.PathLike, storage.ObjectPath)
"""What names a table by where it is (else it is an open Lance dataset)."""


def plan_update(
    source: storage.PathLike | Any,
    column: str,
    *,
    deleted_share: float = DEFAULT_DELETED_SHARE,
) -> UpdatePlan:
    """What :func:`pruner.index.update_index` would do to the index of ``column``.

    Raises:
        IndexNotFoundError: there is no index to update: build one.
        InvalidParameterError: the column is not (or no longer) indexable.
    """
    if not isinstance(source, _PATHS) or is_lance_dataset(storage.location(source)):
        return _lance_plan(open_lance(source), column, deleted_share)
    return _parquet_plan(storage.location(source), column)


def _whole_reason(old: ZoneIndex) -> str:
    """Why the zones of ``old`` cannot be kept beside freshly built ones ('' when they can)."""
    if old.value_encoding == "parquet":
        return "it was made from the Parquet files' own filters"
    data = old.filter_data
    width = sbbf.optimal_num_bytes(old.items, old.probability)
    if not isinstance(data, np.ndarray) or (len(data) and data.shape[1] != width):
        return (
            f"its filters are not all {width:,} bytes, the size a build of {old.items:,} items "
            f"at p={old.probability} gives"
        )
    return ""


def _damaged_fragments(old: ZoneIndex) -> set[int]:
    if old.damaged is None or not old.damaged.any():
        return set()
    return set(np.unique(old.fragment_id[old.damaged]).tolist())


def _lance_plan(ds: Any, column: str, deleted_share: float) -> UpdatePlan:
    ds, fragments = lance_fragments(ds, column)
    segments = [info for info in list_bloom_indexes(ds) if info.column == column]
    if not segments:
        raise IndexNotFoundError(
            f"no bloom index on column {column!r} in Lance dataset {ds.uri} to update; "
            f"build one with `pruner index build {ds.uri} --column {column}`"
        )
    plan = None
    if len(segments) < MAX_SEGMENTS:
        try:
            zones = load_lance_index(ds, column, open_part=read_index_zones)
        except IndexFormatError:
            zones = None  # a damaged segment: the whole read below says which zones
        if zones is not None:
            plan = _plan_fragments(ds, fragments, zones, deleted_share, set())
            dead = np.isin(zones.fragment_id, np.array(plan.drop, np.uint64)).sum()
            if plan.add and not plan.rebuild and dead <= MAX_DEAD_SHARE * zones.num_zones:
                return _segment_plan(plan, zones, segments)
    old = load_lance_index(ds, column)
    assert old is not None
    damaged = _damaged_fragments(old)
    if plan is None:
        plan = _plan_fragments(ds, fragments, old, deleted_share, damaged)
    else:  # the same zones, now with their filters: only damage can change the plan
        plan.old = old
        moved = damaged & set(plan.keep)
        for fid in moved:
            del plan.keep[fid]
        rebuilt = moved | set(plan.rebuild)
        plan.rebuild = [f for f in plan.order if f in rebuilt]
    return _whole_if_changed(plan)


def _segment_plan(plan: UpdatePlan, zones: ZoneIndex, segments: list[Any]) -> UpdatePlan:
    """The plan of an update that adds a segment: the newest segment joins it while small
    (its zones read whole, checksums checked: a damaged fragment's are built again)."""
    plan.segment = True
    newest = max(segments, key=lambda info: info.dataset_version)
    live = set(plan.order)
    mine = np.isin(zones.fragment_id, np.fromiter(newest.fragment_ids & live, np.uint64))
    live_zones = np.isin(zones.fragment_id, np.fromiter(live, np.uint64))
    tail, rest = int(mine.sum()), int((live_zones & ~mine).sum())
    joined: set[int] = set()
    if len(segments) > 1 and tail <= TAIL_SHARE * rest:
        old = read_index_file(newest.path, plan.column)
        if not _whole_reason(old):
            plan.old = old
            plan.replaces = [newest.uuid]
            damaged = _damaged_fragments(old)
            for fid in sorted(newest.fragment_ids & live):
                if fid in damaged:
                    plan.rebuild.append(fid)
                elif fid in plan.keep:
                    joined.add(fid)
    plan.others = [f for f in plan.order if f in plan.keep and f not in joined]
    plan.keep = {f: f for f in joined}
    wanted = joined | set(plan.add) | set(plan.rebuild)
    plan.order = [f for f in plan.order if f in wanted]
    return plan


def _plan_fragments(
    ds: Any, fragments: Sequence[Any], old: ZoneIndex, deleted_share: float, damaged: set[int]
) -> UpdatePlan:
    plan = UpdatePlan(old.column, "lance", old.items, old.probability, old=old, source=ds)
    indexed = set(np.unique(old.fragment_id).tolist())
    live = set()
    for fragment in fragments:
        fid = fragment.fragment_id
        live.add(fid)
        plan.order.append(fid)
        if fid not in indexed:
            plan.add.append(fid)
        elif fid in damaged or _deletions_to_drop(fragment, old, plan.items, deleted_share):
            plan.rebuild.append(fid)
        else:
            plan.keep[fid] = fid
    plan.drop = sorted(indexed - live)
    return plan


def _deletions_to_drop(fragment: Any, old: ZoneIndex, items: int, deleted_share: float) -> bool:
    """Whether a covered fragment has more deleted rows than ``deleted_share`` that its
    zones still span (zones built after the deletions skip them: nothing to gain)."""
    deletion = fragment.metadata.deletion_file
    if deletion is None:
        return False
    physical = fragment.metadata.physical_rows
    deleted = deletion.num_deleted_rows
    if not physical or deleted is None or deleted / physical <= deleted_share:
        return False
    rows = fragment.to_table(columns=[], with_row_address=True)
    offsets = (rows.column("_rowaddr").to_numpy() & np.uint64(0xFFFFFFFF)).astype(np.int64)
    fresh = lance_fragment_zones(offsets, items)
    mine = old.fragment_id == np.uint64(fragment.fragment_id)
    return not (
        np.array_equal(old.zone_start[mine], fresh.zone_start)
        and np.array_equal(old.zone_length[mine], fresh.zone_length)
    )


def _parquet_plan(root: storage.Location, column: str) -> UpdatePlan:
    # on a store, one LIST answers which files there are and where the index is
    found = None
    if isinstance(root, storage.ObjectPath) and storage.current_listing(root) is None:
        found = storage.listing(root)
    with storage.listed(found):
        metas, files, names = parquet_fragments(root, column)
        location = column_index_path(root, column)
    if not storage.exists(location):
        raise IndexNotFoundError(
            f"no bloom index on column {column!r} in Parquet directory {root} to update; "
            f"build one with `pruner index build {root} --column {column}`"
        )
    stat = storage.stat(location) if storage.is_remote(location) else None
    old = read_index_file(location, column)
    plan = UpdatePlan(
        column,
        "parquet",
        old.items,
        old.probability,
        old=old,
        files=files,
        root=root,
        location=location,
        location_stat=stat,
    )
    plan.value_type = parquet_index_value_type(metas[0], names[0]) if metas else None
    plan.source = dict(zip([f.fragment_id for f in files], metas, strict=True))
    plan.stored = {
        f.fragment_id: name for f, name in zip(files, names, strict=True) if name != column
    }
    _match_files(plan, files, old)
    return _whole_if_changed(plan)


def key_plan(
    source: storage.PathLike | Any,
    key: Key,
    *,
    deleted_share: float = DEFAULT_DELETED_SHARE,
) -> UpdatePlan:
    """What :func:`pruner.index.update_index` would do to the compound index of ``key``:
    fragments are matched to the index by the files it records for them (Parquet files; for
    a Lance fragment the data files holding the key's fields), as a Parquet column's index.

    Raises:
        IndexNotFoundError: there is no readable index of the key to update: build one.
        InvalidParameterError: a column of the key is not (or no longer) indexable.
    """
    fragments: list[Any] = []
    if isinstance(source, _PATHS) and not is_lance_dataset(storage.location(source)):
        root = storage.location(source)
        metas, files, _ = parquet_fragments(root, key)
        types = key.types(metas[0].schema_arrow, f"Parquet file {root}")
        kind: str = "parquet"
        opened: Any = dict(zip([f.fragment_id for f in files], metas, strict=True))
    else:
        opened, fragments = lance_fragments(source, key)
        root = storage.dataset_location(opened)
        files = lance_key_files(opened, fragments, key)
        types = key.types(opened.schema, f"Lance dataset {opened.uri}")
        kind = "lance"
    location = key_index_path(root, key)
    try:
        old = read_index_file(location)
    except (IndexFormatError, OSError) as err:
        raise IndexNotFoundError(
            f"no readable compound index {key.shown} in {root} ({err}); build one with "
            f"`pruner index build {root} --key {','.join(key.columns)}`"
        ) from err
    name = key.describe(types)
    plan = UpdatePlan(
        name, kind, old.items, old.probability, old=old, files=files, root=root, key=key
    )
    plan.location, plan.source = location, opened
    _match_files(plan, files, old)
    # Lance: deletions past the share make a fragment's zones anew.
    dropping = {
        f.fragment_id
        for f in fragments
        if f.fragment_id in plan.keep and _deletions_to_drop(f, old, plan.items, deleted_share)
    }
    for fid in dropping:
        del plan.keep[fid]
    plan.rebuild = [f for f in plan.order if f in dropping or f in plan.rebuild]
    return _whole_if_changed(plan)


def _match_files(plan: UpdatePlan, files: list[FragmentFile], old: ZoneIndex) -> None:
    """Plan each of ``files`` (the table's fragments now, as an index records them) from
    the entries ``old`` records: kept when its entry matches (a Parquet file renamed keeps
    its zones), rebuilt when its zones are damaged, added otherwise; entries of gone files
    are dropped."""
    recorded = {entry.path: entry for entry in old.files or []}
    present = {f.path for f in files}
    indexed = set(np.unique(old.fragment_id).tolist())
    damaged = _damaged_fragments(old)
    # A file renamed (same size, time, rows and footer under a new path) keeps its zones.
    moved = {
        (e.identity.size, e.identity.mtime_ns, e.identity.footer, e.rows): e
        for e in recorded.values()
        if e.path not in present and e.identity.footer != 0
    }
    kept_old: set[int] = set()
    for file in files:
        plan.order.append(file.fragment_id)
        entry = recorded.get(file.path)
        if entry is None or not _same_file(file, entry):
            entry = moved.pop(
                (file.identity.size, file.identity.mtime_ns, file.identity.footer, file.rows),
                None,
            )
        usable = (
            entry is not None
            and (entry.fragment_id in indexed or file.rows == 0)  # an empty file has no zones
            and entry.fragment_id not in damaged
        )
        if usable and entry is not None:
            plan.keep[file.fragment_id] = entry.fragment_id
            kept_old.add(entry.fragment_id)
        elif entry is not None and entry.fragment_id in damaged:
            plan.rebuild.append(file.fragment_id)
        else:
            plan.add.append(file.fragment_id)
    plan.drop = sorted(indexed - kept_old - {f.fragment_id for f in files if f.path in recorded})


def _whole_if_changed(plan: UpdatePlan) -> UpdatePlan:
    """When the index must change and its zones cannot be kept beside new ones, the plan
    indexes every fragment again."""
    assert plan.old is not None
    if plan.current:
        return plan
    plan.whole = _whole_reason(plan.old)
    if plan.whole:
        plan.add, plan.rebuild, plan.keep = list(plan.order), [], {}
    return plan


def _same_file(file: FragmentFile, entry: FragmentFile) -> bool:
    return file.rows == entry.rows and file.identity.matches(entry.identity)


def kept_rows(plan: UpdatePlan) -> dict[int, FragmentZoneRows]:
    """The zone rows of every kept fragment, from the old index, under their new ids."""
    old = plan.old
    assert old is not None
    data = old.filter_data
    assert isinstance(data, np.ndarray)
    order = np.argsort(old.fragment_id, kind="stable")
    ids, first = np.unique(old.fragment_id[order], return_index=True)
    ends = [*first[1:].tolist(), len(order)] if len(first) else []
    bounds = {
        fid: (start, end)
        for fid, start, end in zip(ids.tolist(), first.tolist(), ends, strict=True)
    }
    found = {}
    for new, previous in plan.keep.items():
        start, end = bounds.get(previous, (0, 0))
        zones = order[start:end]
        nulls = (old.null_rows or {}).get(previous)
        found[new] = FragmentZoneRows(
            new,
            np.full(len(zones), new, dtype=np.uint64),
            old.zone_start[zones],
            old.zone_length[zones],
            old.has_null[zones],
            data[zones],
            nulls,
            0,
        )
    return found


def merged_rows(plan: UpdatePlan, built: Iterable[FragmentZoneRows]) -> Iterable[FragmentZoneRows]:
    """Every live fragment's zone rows in build order: kept ones from the old index, the
    others from ``built`` (in :meth:`UpdatePlan.to_index` order)."""
    kept = kept_rows(plan)
    fresh = iter(built)
    pending = next(fresh, None)
    for fid in plan.order:
        if fid in kept:
            yield kept[fid]
        elif pending is not None and pending.fragment_id == fid:
            yield pending  # a fragment with no live rows has no zones, and may not come
            pending = next(fresh, None)
    if pending is not None:
        raise IndexFormatError(
            f"the update built fragment {pending.fragment_id}, which it did not plan to index"
        )


def local_fragment_rows(
    plan: UpdatePlan, fragment_ids: Sequence[int], threads: int | None = None
) -> Iterator[FragmentZoneRows]:
    """The zone rows of ``fragment_ids`` of the plan's source, built in threads here."""
    if plan.kind == "lance":
        readers = [
            partial(read_lance_fragment, plan.source, fid, plan.target, plan.items)
            for fid in fragment_ids
        ]
    else:
        readers = [
            partial(read_parquet_fragment, plan.source[fid], fid, plan.target_in(fid), plan.items)
            for fid in fragment_ids
        ]
    return index_in_threads(readers, plan.items, plan.probability, threads)


def fragment_rows_to_index(plan: UpdatePlan, fragment_ids: Sequence[int]) -> int:
    """The rows an update reads (what its progress counts up to)."""
    if plan.kind == "lance":
        return sum(plan.source.get_fragment(fid).count_rows() for fid in fragment_ids)
    rows = {f.fragment_id: f.rows for f in plan.files or []}
    return sum(rows[fid] for fid in fragment_ids)
