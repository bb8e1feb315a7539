"""Bloom indexes committed in a Lance dataset: find their segments, commit one, load one.

An index lives at ``<dataset>/_indices/<uuid>/bloomfilter.lance`` and is committed with
``LanceOperation.CreateIndex``, so Lance's own scanner uses it; indexes Lance built are
found the same way (:func:`list_bloom_indexes`). It becomes visible only when its manifest
commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pruner import storage
from pruner.errors import PrunerError
from pruner.index.fileformat import (
    INDEX_FILE_NAME,
    read_index_file,
    stat_identity,
    write_index_file,
)
from pruner.index.hierarchy import Probe
from pruner.index.model import ZoneIndex

__all__ = [
    "BLOOM_INDEX_DETAILS",
    "BloomIndexInfo",
    "Segments",
    "commit_index_file",
    "commit_lance_index",
    "commit_segment",
    "lance_index_path",
    "list_bloom_indexes",
    "load_lance_index",
    "open_lance",
    "passes_checksums",
]

BLOOM_INDEX_DETAILS = "/lance.index.pb.BloomFilterIndexDetails"


def open_lance(dataset: object, version: int | None = None) -> lance.LanceDataset:  # type: ignore[name-defined] # noqa: F821
    """``dataset`` if it is an open dataset, else the dataset at that path (at ``version``)."""
    import lance

    if isinstance(dataset, lance.LanceDataset):
        return dataset
    options = storage.lance_options(dataset)
    return lance.dataset(str(dataset), version=version, storage_options=options)


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
    path: storage.Location


def list_bloom_indexes(dataset: object) -> list[BloomIndexInfo]:
    """Every segment of every single-column BLOOMFILTER index in a Lance dataset."""
    ds = open_lance(dataset)
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
                    path=storage.dataset_location(ds) / "_indices" / segment.uuid / INDEX_FILE_NAME,
                )
            )
    return found


_CHECKED: dict[tuple[str, tuple[int, ...]], bool] = {}
"""Index files read whole and checked (:func:`passes_checksums`), by path and state: did
every zone pass its checksum?"""


def passes_checksums(path: storage.Location) -> bool:
    """Does the index file at ``path`` carry pruner's zone checksums, and does every zone pass
    them? Read whole the first time, then remembered while the file's inode, size and times
    stay the same. A file Lance wrote (no checksums) or one that cannot be read: no."""
    identity = stat_identity(path)
    if identity is None:
        return False
    key = (str(path), identity)
    if key not in _CHECKED:
        try:
            damaged = read_index_file(path).damaged
        except PrunerError:
            damaged = None
        if len(_CHECKED) >= 1024:
            _CHECKED.clear()
        _CHECKED[key] = damaged is not None and not damaged.any()
    return _CHECKED[key]


def commit_lance_index(dataset: object, index: ZoneIndex, name: str | None = None) -> str:
    """Commit ``index`` into the Lance dataset as a real BLOOMFILTER index; return its uuid.

    Existing bloom index segments on the same column are replaced in the same commit, so
    readers see the old index or the new one, never neither.
    """
    ds = open_lance(dataset)
    index_uuid = str(uuid.uuid4())
    size = write_index_file(index, lance_index_path(ds, index_uuid))
    commit_index_file(ds, index, index_uuid, size, name)
    return index_uuid


def lance_index_path(ds: Any, index_uuid: str) -> storage.Location:
    return storage.dataset_location(ds) / "_indices" / index_uuid / INDEX_FILE_NAME


_COMMIT_ATTEMPTS = 8


def commit_index_file(
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
            ds = open_lance(storage.dataset_location(ds))


def _entry(
    uuid: str,
    name: str,
    field_id: int,
    dataset_version: int,
    fragment_ids: Iterable[int],
    size: int | None = None,
) -> Any:
    """A manifest entry of a segment: with its file's ``size`` to commit it, without to
    remove it (Lance removes by uuid)."""
    from lance.bitmap import Bitmap
    from lance.dataset import Index, IndexFile

    written: dict[str, Any] = {}
    if size is not None:
        written = {
            "files": [IndexFile(path=INDEX_FILE_NAME, size_bytes=size)],
            "index_details": (BLOOM_INDEX_DETAILS, b""),
        }
    return Index(
        uuid=uuid,
        name=name,
        fields=[field_id],
        dataset_version=dataset_version,
        fragment_ids=Bitmap(sorted(fragment_ids)),
        index_version=0,
        **written,
    )


def _listed(info: BloomIndexInfo, fragment_ids: Iterable[int] | None = None) -> Any:
    """The entry of a segment listed in the dataset: as it is (to remove it), or covering
    ``fragment_ids`` instead (to commit it again, its file unchanged)."""
    if fragment_ids is None:
        return _entry(info.uuid, info.name, info.field_id, info.dataset_version, info.fragment_ids)
    size = storage.stat(info.path).size
    return _entry(info.uuid, info.name, info.field_id, info.dataset_version, fragment_ids, size)


def _commit_once(ds: Any, index: ZoneIndex, index_uuid: str, size: int, name: str | None) -> None:
    from lance.dataset import LanceDataset, LanceOperation

    old = [info for info in list_bloom_indexes(ds) if info.column == index.column]
    new = _entry(
        index_uuid,
        name or (old[0].name if old else f"{index.column}_idx"),
        ds.lance_schema.field(index.column).id(),
        ds.version,
        np.unique(index.fragment_id).tolist(),
        size,
    )
    LanceDataset.commit(
        ds.uri,
        LanceOperation.CreateIndex(
            new_indices=[new], removed_indices=[_listed(info) for info in old]
        ),
        read_version=ds.version,
        storage_options=storage.lance_options(storage.dataset_location(ds)),
    )


def commit_segment(
    ds: Any,
    column: str,
    index_uuid: str,
    size: int,
    fragment_ids: Iterable[int],
    replaces: Iterable[str] = (),
) -> bool:
    """Commit the already written ``_indices/<uuid>/bloomfilter.lance`` as a segment of the
    bloom index on ``column`` covering ``fragment_ids``, in place of the segments
    ``replaces`` (uuids); in the same commit, every other segment is narrowed to the
    fragments still in the dataset (Lance keeps listing fragments that compaction removed),
    and one left with none is removed.

    Returns False, committing nothing, when another writer has meanwhile covered some of
    ``fragment_ids`` or replaced a segment of ``replaces`` (a concurrent update).
    """
    from lance.commit import CommitConflictError
    from lance.dataset import LanceDataset, LanceOperation

    wanted = frozenset(int(f) for f in fragment_ids)
    replaced = set(replaces)
    for attempt in range(_COMMIT_ATTEMPTS):
        old = [info for info in list_bloom_indexes(ds) if info.column == column]
        others = [info for info in old if info.uuid not in replaced]
        if len(old) - len(others) != len(replaced) or not old:
            return False
        if any(info.fragment_ids & wanted for info in others):
            return False
        live = {f.fragment_id for f in ds.get_fragments()}
        narrowed = [info for info in others if info.fragment_ids - live]
        renewed = [_listed(i, i.fragment_ids & live) for i in narrowed if i.fragment_ids & live]
        removed = [info for info in old if info.uuid in replaced] + narrowed
        field_id = ds.lance_schema.field(column).id()
        new = _entry(index_uuid, old[0].name, field_id, ds.version, wanted, size)
        try:
            LanceDataset.commit(
                ds.uri,
                LanceOperation.CreateIndex(
                    new_indices=[*renewed, new],
                    removed_indices=[_listed(info) for info in removed],
                ),
                read_version=ds.version,
                storage_options=storage.lance_options(storage.dataset_location(ds)),
            )
            return True
        except CommitConflictError:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise
            ds = open_lance(storage.dataset_location(ds))
    return False


def load_lance_index(
    dataset: object, column: str, *, open_part: Callable[..., ZoneIndex] = read_index_file
) -> ZoneIndex | None:
    """Every segment of the bloom index on ``column`` of a Lance dataset (a path or an open
    dataset) as one index, or None when there is none.

    ``open_part`` opens each segment's file: :func:`read_index_file` (all of it, checked),
    :func:`~pruner.index.hierarchy.open_index` (through its hierarchy companion when it has
    one) or :func:`~pruner.index.fileformat.read_index_zones` (the zones only). An index
    whose segments are not all read whole probes each segment its own way
    (:class:`Segments`) and loads the filters when something needs them.
    """
    segments = [info for info in list_bloom_indexes(dataset) if info.column == column]
    if not segments:
        return None
    parts: list[tuple[ZoneIndex, np.ndarray | None]] = []
    for info in segments:
        part = open_part(info.path, column)
        # Lance's manifest says which fragments a segment covers: zones of others (e.g. of a
        # fragment whose column data Lance rewrote) describe data that is no longer there.
        covered = np.isin(part.fragment_id, np.fromiter(info.fragment_ids, np.uint64))
        parts.append((part, None if covered.all() else np.flatnonzero(covered)))
    if len(parts) == 1 and parts[0][1] is None:
        return parts[0][0]
    if all(part.filter_data is not None for part, _ in parts):
        return ZoneIndex.concat([_picked(part, zones) for part, zones in parts])
    return _stacked(parts)


def _picked(part: ZoneIndex, zones: np.ndarray | None) -> ZoneIndex:
    return part if zones is None else part.subset(zones)


def _stacked(parts: list[tuple[ZoneIndex, np.ndarray | None]]) -> ZoneIndex:
    """One index over segments not read whole: their zones' metadata here, each probed
    its own way, the filters loaded from every segment's file when something needs them."""

    def field(name: str) -> np.ndarray:
        arrays = [getattr(part, name) for part, _ in parts]
        return np.concatenate(
            [a if z is None else a[z] for a, (_, z) in zip(arrays, parts, strict=True)]
        )

    first = parts[0][0]
    notes = {part.hierarchy_note for part, _ in parts if part.hierarchy_note}
    probed = [part for part, _ in parts if part.hierarchy is not None]
    return ZoneIndex(
        column=first.column,
        items=first.items,
        probability=first.probability,
        fragment_id=field("fragment_id"),
        zone_start=field("zone_start"),
        zone_length=field("zone_length"),
        has_null=field("has_null"),
        filter_data=None,
        hierarchy=Segments(parts) if probed else None,
        plain=lambda: ZoneIndex.concat(
            [_picked(part.plain() if part.plain else part, zones) for part, zones in parts]
        ),
        hierarchy_note="; ".join(sorted(notes)) or None,
    )


class Segments:
    """The probing of an index of several segments (each update that only adds fragments
    adds one; so does Lance's ``optimize_indices``): every segment probed its own way
    (through its hierarchy companion, or its filters), the masks side by side.

    Attributes mirror :class:`~pruner.index.hierarchy.Hierarchy`'s where they can.
    """

    def __init__(self, parts: list[tuple[ZoneIndex, np.ndarray | None]]) -> None:
        self.parts = parts

    @property
    def bytes_read(self) -> int:
        return sum(
            getattr(part.hierarchy, "bytes_read", 0)
            for part, _ in self.parts
            if part.hierarchy is not None
        )

    @property
    def index_files(self) -> list[storage.Location]:
        return [part.hierarchy.index_file for part, _ in self.parts if part.hierarchy is not None]

    @property
    def zone_bytes(self) -> int:
        part = self.parts[0][0]
        if part.hierarchy is not None:
            return int(part.hierarchy.zone_bytes)
        return len(part.filter_bytes(0)) if part.num_zones else 0

    def probe_each(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per hashed value, the zones that may hold it (see
        :meth:`~pruner.index.hierarchy.Hierarchy.probe_each`), every segment asked."""
        values, zones, offset = [], [], 0
        for part, picked in self.parts:
            found, zone = part.candidates(hashes)
            if picked is not None:  # the segment's zones this index keeps, renumbered
                number = np.full(part.num_zones, -1, np.int64)
                number[picked] = np.arange(len(picked))
                zone = number[zone]
                found, zone = found[zone >= 0], zone[zone >= 0]
            values.append(found)
            zones.append(zone + offset)
            offset += part.num_zones if picked is None else len(picked)
        return np.concatenate(values), np.concatenate(zones)

    def probe(self, hashes: np.ndarray) -> Probe:
        masks, said = [], []
        count = len(self.parts)
        for number, (part, zones) in enumerate(self.parts, 1):
            mask, decided = part.zone_mask_explained(hashes)
            masks.append(mask if zones is None else mask[zones])
            said.append(f"segment {number} of {count}: {decided or 'zone filters'}")
        return Probe(np.concatenate(masks), "; ".join(said))
