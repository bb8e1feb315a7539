"""Zone bloom indexes: build one for a Lance dataset or Parquet directory, store it, load it.

One job per module:

- :mod:`~pruner.index.model`: :class:`ZoneIndex` in memory and how it is probed;
- :mod:`~pruner.index.fileformat`: the ``bloomfilter.lance`` file, written and read
  (``docs/format.md``);
- :mod:`~pruner.index.reading`: a build's reads of each fragment's values and zones;
- :mod:`~pruner.index.build`: the engine-neutral build from Lance fragments or Parquet files;
- :mod:`~pruner.index.lance`: indexes committed in a Lance dataset;
- :mod:`~pruner.index.store`: where an index is stored, and loading it (Parquet: in
  ``<dir>/_pruner/<column>/``).

This module holds the entry point :func:`build_index` and the registry of build engines,
and names every public name ``pruner.index`` named before it was a package. Writes are
atomic: a file is written beside its destination and renamed over it, and a Lance index
becomes visible only when its manifest commits.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from functools import partial
from typing import Any

from pruner import storage
from pruner.buffers import release_freed
from pruner.discover import is_lance_dataset, located_folder, parquet_footer_hash
from pruner.errors import InvalidParameterError
from pruner.index.build import (
    DEFAULT_ITEMS,
    DEFAULT_PROBABILITY,
    FragmentZoneRows,
    ProgressCallback,
    assemble,
    build_lance_index,
    build_parquet_index,
)
from pruner.index.fileformat import (
    INDEX_FILE_NAME,
    INDEX_SCHEMA,
    META_CHECKSUMS,
    META_COLUMN,
    META_FILES,
    META_ITEMS,
    META_NULL_BITMAP,
    META_PROBABILITY,
    IndexFileWriter,
    format_probability,
    read_index_file,
    read_index_zones,
    write_index_file,
    zone_checksums,
)
from pruner.index.footers import keep_footers
from pruner.index.hierarchy import (
    COMPANION_NAME,
    Coarse,
    Hierarchy,
    HierarchyUnusable,
    companion_path,
    open_index,
    write_hierarchy_of,
)
from pruner.index.keys import KEY_ENCODING, Key, key_index_path, stored_keys
from pruner.index.lance import (
    BLOOM_INDEX_DETAILS,
    BloomIndexInfo,
    commit_index_file,
    commit_lance_index,
    commit_segment,
    lance_index_path,
    list_bloom_indexes,
    load_lance_index,
    open_lance,
)
from pruner.index.model import FragmentFile, ZoneIndex
from pruner.index.native import index_from_filters
from pruner.index.store import (
    PARQUET_INDEX_DIR,
    column_index_path,
    load_index,
    parquet_index_path,
)
from pruner.index.update import (
    DEFAULT_DELETED_SHARE,
    UpdatePlan,
    fragment_rows_to_index,
    key_plan,
    local_fragment_rows,
    merged_rows,
    plan_update,
)

__all__ = [
    "BLOOM_INDEX_DETAILS",
    "BUILD_ENGINES",
    "COMPANION_NAME",
    "DEFAULT_DELETED_SHARE",
    "DEFAULT_ITEMS",
    "DEFAULT_PROBABILITY",
    "ENGINES",
    "INDEX_FILE_NAME",
    "INDEX_SCHEMA",
    "META_CHECKSUMS",
    "META_COLUMN",
    "META_FILES",
    "META_ITEMS",
    "META_NULL_BITMAP",
    "META_PROBABILITY",
    "PARQUET_INDEX_DIR",
    "BloomIndexInfo",
    "FragmentFile",
    "Hierarchy",
    "HierarchyUnusable",
    "IndexFileWriter",
    "Key",
    "ProgressCallback",
    "UpdatePlan",
    "ZoneIndex",
    "apply_update",
    "build_index",
    "build_lance_index",
    "build_parquet_index",
    "commit_lance_index",
    "commit_segment",
    "companion_path",
    "format_probability",
    "key_index_path",
    "list_bloom_indexes",
    "load_index",
    "load_lance_index",
    "open_index",
    "parquet_footer_hash",
    "parquet_index_path",
    "plan_update",
    "read_index_file",
    "stored_keys",
    "update_index",
    "write_hierarchy_of",
    "write_index_file",
    "zone_checksums",
]


ENGINES = ("local", "spark")
"""Where :func:`build_index` runs the per-fragment work: threads here, or a Spark job."""

BUILD_ENGINES = {"spark": "pruner.adapters.spark.build:build_zone_index_spark"}
"""The build of each engine but the local one, by name: ``module:function``, imported only
when that engine builds (the core never imports an engine adapter). The function takes
the arguments of :func:`pruner.index.build.build_lance_index` and ``spark``."""

UPDATE_ENGINES = {"spark": "pruner.adapters.spark.build:index_fragments_spark"}
"""How each engine but the local one indexes the fragments an update names, by name: a
function of ``(plan, fragment_ids, spark)`` that yields their zone rows in that order."""


def _engine_build(engine: str, registry: dict[str, str] = BUILD_ENGINES) -> Callable[..., Any]:
    """The build function of ``engine`` (raises ImportError when the engine is missing)."""
    module, _, function = registry[engine].partition(":")
    build: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return build


def build_index(
    source: storage.PathLike,
    column: str | Sequence[str] | Key,
    *,
    items: int = DEFAULT_ITEMS,
    probability: float = DEFAULT_PROBABILITY,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    spark: Any = None,
    from_parquet_filters: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> ZoneIndex:
    """Build and store the zone bloom index of ``column`` for a Lance dataset or Parquet dir.

    A Lance dataset gets a committed BLOOMFILTER index (Lance's scanner uses it); a Parquet
    directory gets ``_pruner/<column>/bloomfilter.lance``. ``column`` a sequence of two or
    more columns builds a compound key's index, stored in ``_pruner/<a>,<b>/`` for either
    kind of table (:mod:`pruner.index.keys`). ``engine="spark"`` indexes the
    fragments as tasks of a Spark job on ``spark`` (default: the active session, or a local
    one); either engine builds the same index and stores it the same way.

    ``from_parquet_filters``: make a Parquet directory's index from its files' own bloom
    filters, one zone per row group, without reading the data
    (:func:`pruner.index.native.index_from_filters`); ``items`` and ``probability`` are
    then the files'.

    ``source`` may be a URI on an object store (``s3://bucket/key``; Lance-style
    ``storage_options`` or the ``AWS_*`` environment variables say how to reach it): the index
    is written there, as one PUT once complete.

    Raises:
        InvalidParameterError: an unknown engine, column or parameter.
        EngineError: the Spark job failed.
    """
    if engine not in ENGINES:
        raise InvalidParameterError(
            f"unknown index build engine {engine!r}; use one of {', '.join(ENGINES)}"
        )
    if not isinstance(column, str):
        path = located_folder(source, storage_options)
        return _build_key(path, Key.of(column), items, probability, progress, engine, spark)
    path = located_folder(source, storage_options)
    if from_parquet_filters:
        return _build_from_parquet_filters(path, column, engine)
    lance_source = is_lance_dataset(path)
    build: Callable[..., ZoneIndex]
    if engine in BUILD_ENGINES:
        build = partial(_engine_build(engine), spark=spark)
    else:
        build = build_lance_index if lance_source else build_parquet_index
    if lance_source:
        ds = open_lance(path)
        _remove_lance_leftovers(ds)
        index_uuid = str(uuid.uuid4())
        with IndexFileWriter(lance_index_path(ds, index_uuid)) as sink:
            index = build(
                ds, column, items=items, probability=probability, progress=progress, sink=sink
            )
            size = sink.finish(index, wait=False)
        _companion_beside(lance_index_path(ds, index_uuid), index, sink.published)
        commit_index_file(ds, index, index_uuid, size, None)
        return index
    # On a store, one LIST of the folder answers where the index goes (a Delta or Iceberg
    # table's, by the column's identity) and which files the build reads
    found = None
    if isinstance(path, storage.ObjectPath) and storage.current_listing(path) is None:
        found = storage.listing(path)
    with storage.listed(found):
        location = column_index_path(path, column)
        with IndexFileWriter(location) as sink:
            index = build(
                path, column, items=items, probability=probability, progress=progress, sink=sink
            )
            sink.finish(index, wait=False)
    _companion_beside(location, index, sink.published)
    keep_footers(path, index.files)
    return index


def _build_key(
    path: storage.Location,
    key: Key,
    items: int,
    probability: float,
    progress: ProgressCallback | None,
    engine: str,
    spark: Any = None,
) -> ZoneIndex:
    """Build and store the compound index of ``key`` on ``engine``."""
    build: Callable[..., ZoneIndex]
    if engine in BUILD_ENGINES:
        build = partial(_engine_build(engine), spark=spark)
    else:
        build = build_lance_index if is_lance_dataset(path) else build_parquet_index
    location = key_index_path(path, key)
    with IndexFileWriter(location) as sink:
        index = build(path, key, items=items, probability=probability, progress=progress, sink=sink)
        sink.finish(index)
    _write_companion(location, index)
    keep_footers(path, index.files)
    return index


def update_index(
    source: storage.PathLike | Any,
    column: str | Sequence[str] | Key,
    *,
    deleted_share: float = DEFAULT_DELETED_SHARE,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    spark: Any = None,
    threads: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> tuple[ZoneIndex, UpdatePlan]:
    """Bring the stored index of ``column`` up to date with its table; return it and what
    was done (:class:`~pruner.index.update.UpdatePlan`).

    Only fragments the index does not cover (appended, compacted, changed or added files)
    and fragments whose deleted share passed ``deleted_share`` are read and indexed, on
    ``engine`` as :func:`build_index` does; every other fragment keeps its zones byte for
    byte, and zones of fragments that are gone are dropped. The result is stored like a
    build's, atomically: a Lance index that only gains fragments gains a segment for them
    (``plan.segment``; the old segments' files are not read, but for the newest while it is
    small, which the new segment replaces), else it is committed as one segment over every
    fragment. An index that is current is left as it is. An index made from Parquet's own
    filters is made again from them (that reads no data). A compound key's index
    (``column`` a sequence of columns) is updated the same way, its fragments matched to it
    by the files it records for them (:func:`pruner.index.update.key_plan`).

    Raises:
        IndexNotFoundError: there is no index to update; build one.
        InvalidParameterError: an unknown engine or column, or ``deleted_share`` outside 0-1.
    """
    if engine not in ENGINES:
        raise InvalidParameterError(
            f"unknown index build engine {engine!r}; use one of {', '.join(ENGINES)}"
        )
    if not 0 <= deleted_share <= 1:
        raise InvalidParameterError(
            f"deleted_share must be between 0 and 1 (a share of a fragment's rows), "
            f"not {deleted_share}"
        )
    source = located_folder(source, storage_options)
    if isinstance(column, str):
        plan = plan_update(source, column, deleted_share=deleted_share)
    else:
        plan = key_plan(source, Key.of(column), deleted_share=deleted_share)
    return apply_update(plan, progress=progress, engine=engine, spark=spark, threads=threads)


def apply_update(
    plan: UpdatePlan,
    *,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    spark: Any = None,
    threads: int | None = None,
) -> tuple[ZoneIndex, UpdatePlan]:
    """Carry out ``plan`` (:func:`pruner.index.update.plan_update` or
    :func:`~pruner.index.update.key_plan`), as :func:`update_index` does.

    Raises:
        storage.ChangedUnderneath: on an object store, the index changed since ``plan``
            read it (another writer updated it first): plan again.
    """
    assert plan.old is not None
    if plan.current:
        return plan.old, plan
    if plan.old.value_encoding == "parquet":
        assert plan.root is not None
        return _build_from_parquet_filters(plan.root, plan.column, "local"), plan
    wanted = plan.to_index()
    if engine in UPDATE_ENGINES:
        built = _engine_build(engine, UPDATE_ENGINES)(plan, wanted, spark=spark)
    else:
        built = local_fragment_rows(plan, wanted, threads)
    total = fragment_rows_to_index(plan, wanted)
    if plan.segment:
        return _add_segment(plan, built, total, progress), plan
    rows = merged_rows(plan, built)
    previous = _previous_coarse(plan) if plan.keep else None
    if plan.location is None:  # a Lance dataset's column: Lance commits it
        ds = plan.source
        _remove_lance_leftovers(ds)
        index_uuid = str(uuid.uuid4())
        location = lance_index_path(ds, index_uuid)
        with IndexFileWriter(location) as sink:
            index = assemble(plan.column, plan.items, plan.probability, rows, total, progress, sink)
            size = sink.finish(index)
        plan.hierarchy = _write_companion(location, index, previous, plan.keep)
        commit_index_file(ds, index, index_uuid, size, None)
        return index, plan
    with IndexFileWriter(plan.location) as sink:
        sink.expected = plan.location_stat  # on a store: compare-and-swap on what plan read
        index = assemble(plan.column, plan.items, plan.probability, rows, total, progress, sink)
        index.files, index.value_type = plan.files, plan.value_type
        if plan.key is not None:
            index.value_encoding = KEY_ENCODING
        sink.finish(index)
    plan.hierarchy = _write_companion(plan.location, index, previous, plan.keep)
    if plan.root is not None:
        keep_footers(plan.root, index.files)
    return index, plan


def _add_segment(
    plan: UpdatePlan,
    built: Iterable[FragmentZoneRows],
    total: int,
    progress: ProgressCallback | None,
) -> ZoneIndex:
    """Commit the zones of the fragments a Lance update indexed, with those of the segment
    it replaces, as one segment with its own companion; return the whole index as queries
    now load it."""
    ds = plan.source
    _remove_lance_leftovers(ds)
    index_uuid = str(uuid.uuid4())
    location = lance_index_path(ds, index_uuid)
    rows = merged_rows(plan, built) if plan.keep else built
    previous = _previous_coarse(plan) if plan.keep else None
    with IndexFileWriter(location) as sink:
        index = assemble(plan.column, plan.items, plan.probability, rows, total, progress, sink)
        size = sink.finish(index)
    plan.hierarchy = _write_companion(location, index, previous, plan.keep)
    if not commit_segment(ds, plan.column, index_uuid, size, plan.order, plan.replaces):
        storage.remove_tree(location.parent)  # another update got there first
    updated = load_lance_index(
        storage.dataset_location(ds), plan.column, open_part=read_index_zones
    )
    assert updated is not None
    return updated


def _build_from_parquet_filters(path: storage.Location, column: str, engine: str) -> ZoneIndex:
    if is_lance_dataset(path):
        raise InvalidParameterError(
            f"{path} is a Lance dataset: building from Parquet bloom filters needs a directory "
            "of Parquet files that carry them; build the index from the data instead"
        )
    if engine != "local":
        raise InvalidParameterError(
            "an index made from Parquet bloom filters reads no data: build it with the local engine"
        )
    index = index_from_filters(path, column)
    location = column_index_path(path, column)
    storage.make_dirs(location.parent)
    write_index_file(index, location)
    _write_companion(location, index)
    keep_footers(path, index.files)
    return index


def _companion_beside(
    index_file: storage.Location, index: ZoneIndex, published: futures.Future[None]
) -> None:
    """:func:`_write_companion` while ``index_file``'s publish (a Future) is under way: on
    a store the index's PUT overlaps computing the companion, whose own PUT follows it.
    Returns once both are in place; raises what either raised."""
    try:
        _write_companion(index_file, index, after=published)
    finally:
        futures.wait([published])
    published.result()


def _write_companion(
    index_file: storage.Location,
    index: ZoneIndex,
    previous: Coarse | None = None,
    kept: Mapping[int, int] | None = None,
    after: futures.Future[None] | None = None,
) -> str:
    """The hierarchy companion beside ``index_file``, when the build made each fragment's
    share of it (or an update can carry the kept fragments' over from ``previous``); else
    any old one is removed (it would be stale, and unused) and the reason returned.
    ``after``: the index file's publish under way (see :func:`write_hierarchy_of`)."""
    release_freed()  # a build's freed temporaries, before the companion's sections are made
    fresh, index.build_coarse = index.build_coarse, None
    fill, index.build_fill = index.build_fill, None
    written = write_hierarchy_of(index_file, index, fresh or {}, previous, kept, fill, after)
    if isinstance(written, str):
        storage.remove(companion_path(index_file))
        return written
    return ""


def _remove_lance_leftovers(ds: Any) -> None:
    """Temporary files that builds killed mid-write left in the dataset's index folders
    (each build writes in a folder of its own, so its own writer never sees them)."""
    folder = storage.dataset_location(ds) / "_indices"
    if not storage.is_dir(folder):
        return
    for entry in storage.list_dir(folder):
        for name in (INDEX_FILE_NAME, COMPANION_NAME):
            storage.remove_leftovers(folder / entry / name)


def _previous_coarse(plan: UpdatePlan) -> Coarse | None:
    """The coarse filters of the companions of the index an update replaces (of every
    segment of a Lance index), when each has a usable one."""
    kept = set(plan.keep.values())
    if plan.location is None:
        files = [
            (s.path, [f for f in s.fragment_ids if f in kept])
            for s in list_bloom_indexes(plan.source)
            if s.column == plan.column and s.fragment_ids & kept
        ]
    else:
        files = [(plan.location, list(kept))]
    if not files:
        return None
    try:
        return Coarse.merged([Hierarchy(path).coarse(fragments) for path, fragments in files])
    except HierarchyUnusable:
        return None
