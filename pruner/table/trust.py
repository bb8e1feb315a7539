"""Whether Lance's own scanner may probe a table's scalar indexes: only an index pruner
proved whole, since Lance trusts an index as it is on disk."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pruner import storage
from pruner.errors import PrunerError
from pruner.index.lance import BLOOM_INDEX_DETAILS, lance_index_path, passes_checksums
from pruner.table.model import Table

__all__ = [
    "lance_cannot_filter",
    "lance_lookup",
    "lance_may_probe",
]


def lance_may_probe(table: Table, condition: str) -> bool:
    """May Lance's scanner probe ``table``'s scalar indexes for a filter whose text is
    ``condition``, in a scan pruner hands an engine? Lance trusts an index as it is on disk
    (a filter with a bit cleared drops the rows of the value it hid; a zone that lost rows
    hides them), so only when every index on a field whose name (or a part of a dotted
    name) occurs in ``condition`` is a BLOOMFILTER index of one field on this file system
    that pruner proves whole: every segment's file passes pruner's zone checksums
    (:func:`pruner.index.lance.passes_checksums`), and the index bound to the table has no
    damaged fragment, no zone of a fragment it does not know, and a zone for every fragment
    Lance's segments say they cover. Any other index (Lance's own build carries no
    checksums, a B-tree none either) says no.

    What the opened table says of its indexes is kept with it (:class:`_Indexes`); the
    files' checksums are checked again whenever a file changed."""
    indexes = _indexes(table)
    if indexes is None:
        return False
    for index in indexes.described:
        if not any(name in condition for name in index.names):
            continue
        if not indexes.sound(table, index):
            return False
        if not all(passes_checksums(path) for path in index.paths):
            return False
    return True


def lance_lookup(table: Table, column: str, count: bool = True) -> tuple[int, int]:
    """Count (with ``count``) a point lookup on ``column`` of ``table`` (held open) that
    Lance's scanner could serve: the lookups counted so far on it, this one included, and the
    bytes of the files of that column's bloom index (0: none Lance's scanner may probe,
    :func:`lance_may_probe`'s first checks)."""
    indexes = _indexes(table)
    if indexes is None:
        return 0, 0
    with indexes.lock:
        lookups = indexes.lookups[column] = indexes.lookups.get(column, 0) + int(count)
    named = [index for index in indexes.described if column in index.names]
    return lookups, sum(index.size for index in named)


@dataclass(frozen=True)
class _Described:
    """One of Lance's index descriptions, as :func:`lance_may_probe` weighs it: the names a
    filter may call its fields by, whether it is a pruner-readable bloom index of one field
    (``column``, else None) in segments stored here, its segments' files and the fragments
    they claim."""

    names: tuple[str, ...]
    column: str | None
    paths: tuple[storage.Location, ...]
    claimed: frozenset[int]
    size: int


class _Indexes:
    """What an opened Lance table's manifest says of its scalar indexes (fixed for the
    table: a table whose version changes is opened anew), with the verdicts on the indexes
    bound to it and the point lookups counted per column (:func:`lance_lookup`)."""

    def __init__(self, described: list[_Described]) -> None:
        self.described = described
        self.verdicts: dict[str, bool] = {}
        self.lookups: dict[str, int] = {}
        self.lock = threading.Lock()

    def sound(self, table: Table, index: _Described) -> bool:
        """All but the files' checksums: a bloom index of one field stored here, bound to
        the table undamaged, fresh, with a zone for every fragment its segments claim."""
        if index.column is None:
            return False
        if index.column not in self.verdicts:
            self.verdicts[index.column] = _bound_whole(table, index)
        return self.verdicts[index.column]


def _bound_whole(table: Table, index: _Described) -> bool:
    assert index.column is not None
    try:
        bound = table.index(index.column)
    except PrunerError:
        return False
    if bound is None or bound.damaged_fragments or bound.stale_zones:
        return False
    return index.claimed.isdisjoint(bound.uncovered.fragment_ids())


_INDEXES: weakref.WeakKeyDictionary[Table, _Indexes | None] = weakref.WeakKeyDictionary()
""":class:`_Indexes` per opened table, None for a table on an object store (Lance's
``describe_indices`` and the fragments claimed cost ~0.2 ms a call at 200 fragments, twice a
query, before)."""

_INDEXES_LOCK = threading.Lock()


def _indexes(table: Table) -> _Indexes | None:
    with _INDEXES_LOCK:
        if table in _INDEXES:
            return _INDEXES[table]
    ds = table.dataset
    found: _Indexes | None = None
    if not storage.is_remote(storage.dataset_location(ds)):
        found = _Indexes([_describe(ds, d) for d in ds.describe_indices()])
    with _INDEXES_LOCK:
        return _INDEXES.setdefault(table, found)


def _describe(ds: Any, description: Any) -> _Described:
    fields = description.field_names
    segments = description.segments
    readable = (
        description.type_url == BLOOM_INDEX_DETAILS
        and len(fields) == 1
        and all(s.base_id is None for s in segments)
    )
    paths = tuple(lance_index_path(ds, s.uuid) for s in segments) if readable else ()
    return _Described(
        names=tuple(part for name in fields for part in (name, *name.split("."))),
        column=fields[0] if readable else None,
        paths=paths,
        claimed=frozenset(int(f) for s in segments for f in s.fragment_ids),
        size=sum(_size(path) for path in paths),
    )


def _size(path: storage.Location) -> int:
    try:
        return storage.stat(path).size
    except OSError:
        return 0


def lance_cannot_filter(arrow_type: pa.DataType) -> bool:
    """Types Lance 14's scanner cannot filter on: it turns a pushed filter into Substrait and
    refuses one that names a column of these types (measured: unsigned integers, large
    strings and binaries, date64, times, durations), when the scan is built or starts."""
    return (
        pa.types.is_unsigned_integer(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_date64(arrow_type)
        or pa.types.is_time(arrow_type)
        or pa.types.is_duration(arrow_type)
    )
