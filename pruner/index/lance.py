"""Bloom indexes committed in a Lance dataset: find their segments, commit one, load one.

An index lives at ``<dataset>/_indices/<uuid>/bloomfilter.lance`` and is committed with
``LanceOperation.CreateIndex``, so Lance's own scanner uses it; indexes Lance built are
found the same way (:func:`list_bloom_indexes`). It becomes visible only when its manifest
commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pruner.index.fileformat import INDEX_FILE_NAME, read_index_file, write_index_file
from pruner.index.hierarchy import open_index
from pruner.index.model import ZoneIndex

__all__ = [
    "BLOOM_INDEX_DETAILS",
    "BloomIndexInfo",
    "commit_index_file",
    "commit_lance_index",
    "lance_index_path",
    "list_bloom_indexes",
    "load_lance_index",
    "open_lance",
]

BLOOM_INDEX_DETAILS = "/lance.index.pb.BloomFilterIndexDetails"


def open_lance(dataset: object, version: int | None = None) -> lance.LanceDataset:  # type: ignore[name-defined] # noqa: F821
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
                    path=Path(ds.uri) / "_indices" / segment.uuid / INDEX_FILE_NAME,
                )
            )
    return found


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


def lance_index_path(ds: Any, index_uuid: str) -> Path:
    return Path(ds.uri) / "_indices" / index_uuid / INDEX_FILE_NAME


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
            ds = open_lance(ds.uri)


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


def load_lance_index(dataset: object, column: str, *, companion: bool = False) -> ZoneIndex | None:
    """Every segment of the bloom index on ``column`` of a Lance dataset (a path or an open
    dataset) as one index, or None when there is none. ``companion``: an index of one segment
    covering all its zones is opened through its hierarchy companion when it has one."""
    segments = [info for info in list_bloom_indexes(dataset) if info.column == column]
    if not segments:
        return None
    parts = []
    for info in segments:
        if companion and len(segments) == 1:
            part = open_index(info.path, column)
        else:
            part = read_index_file(info.path, column)
        # Lance's manifest says which fragments a segment covers: zones of others (e.g. of a
        # fragment whose column data Lance rewrote) describe data that is no longer there.
        covered = np.isin(part.fragment_id, np.fromiter(info.fragment_ids, np.uint64))
        if not covered.all():
            if part.hierarchy is not None:  # a subset is of the index file's own zones
                part = read_index_file(info.path, column)
            part = part.subset(covered)
        parts.append(part)
    return ZoneIndex.concat(parts)
