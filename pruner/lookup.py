"""Batch key lookup: for many keys at once, the fragments and row ranges that may hold each.

The seed's ``findByIds`` (``shared/seeds/parquedb_bloom_filter_design.md``): the keys are
coerced to the column's type as a query's literals are (:mod:`pruner.literals`), hashed
together, and probed together (:meth:`pruner.index.ZoneIndex.candidates`): through the
hierarchy companion an absent key costs one block of the dataset filter, a present one the
blocks of its candidate fragments' zones. No loop runs per key but the coercion of keys
that are neither integers on an integer column nor strings on a string column.

A key's ranges are a superset of its rows, as a query's selection is: the zones whose
filters may hold it, and every fragment the index does not cover (appended since the build,
or changed). A key no row can equal (``None``, ``2.5`` on an integer column, ``300`` on an
int8 one) has none; a key pruner cannot reason about (a value it cannot coerce exactly)
has every fragment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pruner.buffers import distinct
from pruner.discover import located
from pruner.errors import IndexNotFoundError, InvalidParameterError
from pruner.hashing import hash_array, plain_type
from pruner.index.keys import Key, hash_tuples
from pruner.index.native import hashable
from pruner.literal_text import literal_from_python
from pruner.literals import coerce_all
from pruner.selection import FRAGMENT_SHIFT, Selection
from pruner.table import Table, TableIndex, TableSource, as_table

__all__ = ["Lookup", "lookup"]

_OFFSETS = (1 << FRAGMENT_SHIFT) - 1


@dataclass(frozen=True)
class Lookup:
    """What :func:`lookup` found: per key, the row ranges that may hold it.

    ``key``, ``fragment``, ``start`` and ``length`` hold one range each (the key's position
    in ``keys``; a fragment id; its first row; its number of rows), keys in order and each
    key's ranges in address order. ``values`` are the column values the keys can equal (of
    the column's type); ``unknown`` the positions of keys pruner cannot tell about (every
    range of the table may hold them).
    """

    keys: list[Any]
    key: np.ndarray
    fragment: np.ndarray
    start: np.ndarray
    length: np.ndarray
    values: pa.Array
    value_key: np.ndarray  # per value, the position of its key
    unknown: np.ndarray

    def ranges(self, position: int) -> list[tuple[int, int, int]]:
        """``[(fragment, start, length)]`` that may hold ``keys[position]``."""
        lo, hi = np.searchsorted(self.key, [position, position + 1])
        return list(
            zip(
                self.fragment[lo:hi].tolist(),
                self.start[lo:hi].tolist(),
                self.length[lo:hi].tolist(),
                strict=True,
            )
        )

    def selection(self) -> Selection:
        """Every range of every key: what reading all the keys' rows must read."""
        starts = (self.fragment << FRAGMENT_SHIFT) + self.start
        return Selection.normalize(starts, starts + self.length)

    def candidate_values(self) -> pa.Array:
        """The values of the keys some range may hold (the others are in no row)."""
        return self.values.filter(pa.array(self.found()[self.value_key]))

    def found(self) -> np.ndarray:
        """Per key, whether some range may hold it (False: no row holds it)."""
        found = np.zeros(len(self.keys), bool)
        found[self.key] = True
        return found

    def to_json(self) -> list[dict[str, Any]]:
        """``[{"key": ..., "ranges": [[fragment, start, length], ...]}, ...]``, in key order
        (keys that JSON cannot hold, such as bytes or dates, as their ``str``)."""
        bounds = np.searchsorted(self.key, np.arange(len(self.keys) + 1)).tolist()
        triples = np.stack([self.fragment, self.start, self.length], axis=1).tolist()
        return [
            {"key": _json_key(k), "ranges": triples[bounds[i] : bounds[i + 1]]}
            for i, k in enumerate(self.keys)
        ]


def _json_key(key: Any) -> Any:
    if isinstance(key, tuple | list):
        return [_json_key(part) for part in key]
    if isinstance(key, np.generic):
        key = key.item()
    if key is None or isinstance(key, bool | int | float | str):
        return key
    return str(key)


def lookup(
    source: TableSource | str | os.PathLike[str],
    column: str | Sequence[str],
    keys: Iterable[Any],
    *,
    storage_options: Mapping[str, str] | None = None,
) -> Lookup:
    """For every key, the fragments and row ranges of ``source`` that may hold a row whose
    ``column`` equals it, from the bloom index of ``column`` (see the module's doc).

    ``column`` a sequence of columns looks up a compound key's tuples (each key a tuple of
    that many values) in its compound index (:mod:`pruner.index.keys`); ``values`` is then a
    struct array of the tuples.

    ``source`` may be an object store URI (``s3://bucket/key``; Lance-style
    ``storage_options`` or the ``AWS_*`` environment variables say how to reach it).

    Raises:
        InvalidParameterError: ``column`` is not a column of the table, or a key is not a
            tuple of the key's width.
        IndexNotFoundError: the column has no index (build one with ``pruner index build``).
        IndexFormatError: its index is damaged beyond what pruner reads around.
    """
    table = as_table(located(source, storage_options))
    if not isinstance(column, str):
        return _lookup_key(table, Key.of(column), list(keys))
    if column not in table.schema.names:
        raise InvalidParameterError(
            f"column {column!r} is not in {table.path}; its columns are "
            f"{', '.join(table.schema.names)}"
        )
    bound = table.index(column)
    if bound is None:
        raise IndexNotFoundError(
            f"no bloom index on column {column!r} of {table.path}; build one with "
            f"`pruner index build {table.path} --column {column}`"
        )
    listed = list(keys)
    # As a query binds its literals: coerced to the column's plain type (a dictionary or
    # view column compares as its values), hashed as the index hashed them.
    arrow_type = plain_type(table.schema.field(column).type)
    coerced, value_key, whole = _coerced(listed, arrow_type)
    values = pa.array(coerced, arrow_type)
    hash_type = table.hash_type(column) or arrow_type
    try:
        hashed = values if hash_type == arrow_type else hashable(values, hash_type)
        hashes, valid = hash_array(hashed)
    except pa.ArrowException:  # not representable as the index hashed: every key anywhere
        whole = np.union1d(whole, value_key).astype(np.int64)
        values, value_key = values.slice(0, 0), value_key[:0]
        hashes, valid = np.zeros(0, np.uint64), None
    owner = value_key
    if valid is not None:
        hashes, owner = hashes[valid], owner[valid]
    found = _ranges(table, bound, hashes, owner, whole)
    return Lookup(listed, *found, values=values, value_key=value_key, unknown=whole)


def _lookup_key(table: Table, key: Key, listed: list[Any]) -> Lookup:
    """:func:`lookup` of tuples in the compound index of ``key``: each column's values are
    coerced as a single column's keys are, and a key's tuples are the cross product of its
    columns' values (one, but for a float 0, which is two)."""
    bound = table.key_index(key)
    if isinstance(bound, str):
        columns = ",".join(key.columns)
        raise IndexNotFoundError(
            f"the compound index {key.shown} of {table.path} cannot be used: {bound}; build "
            f"one with `pruner index build {table.path} --key {columns}`"
        )
    width = len(key.columns)
    if any(not isinstance(k, tuple | list) or len(k) != width for k in listed):
        raise InvalidParameterError(f"each key of {key.shown} is a tuple of {width} values")
    types = [plain_type(table.schema.field(c).type) for c in key.columns]
    # Per key position, the combinations of its columns' coerced values (as indexes).
    owner = np.arange(len(listed), dtype=np.int64)
    picks: list[np.ndarray] = []
    arrays: list[pa.Array] = []
    whole = np.zeros(0, np.int64)
    for i, arrow_type in enumerate(types):
        coerced, value_key, unknown = _coerced([k[i] for k in listed], arrow_type)
        whole = np.union1d(whole, unknown).astype(np.int64)
        arrays.append(pa.array(coerced, arrow_type))
        lo = np.searchsorted(value_key, owner, side="left")
        count = np.searchsorted(value_key, owner, side="right") - lo
        first = np.cumsum(count) - count
        within = np.arange(int(count.sum())) - np.repeat(first, count)
        picks = [p.repeat(count) for p in picks]
        picks.append(np.repeat(lo, count) + within)
        owner = owner.repeat(count)
    keep = ~np.isin(owner, whole)
    owner, picks = owner[keep], [p[keep] for p in picks]
    tuples = [a.take(pa.array(p, pa.int64())) for a, p in zip(arrays, picks, strict=True)]
    hashes = hash_tuples(tuples) if len(owner) else np.zeros(0, np.uint64)
    found = _ranges(table, bound, hashes, owner, whole)
    values = pa.StructArray.from_arrays(tuples, names=list(key.columns))
    return Lookup(listed, *found, values=values, value_key=owner, unknown=whole)


def _ranges(
    table: Table, bound: TableIndex, hashes: np.ndarray, owner: np.ndarray, whole: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per range (key position, fragment, start, length): the zones whose filters may hold
    ``hashes`` (of the keys ``owner`` says), the fragments the index does not cover for
    every key with a hash, the whole table for the keys in ``whole``."""
    key_parts, starts, ends = [], [], []
    if len(hashes):
        positions, zones = bound.index.candidates(hashes)
        usable = bound.valid[zones]
        key_parts.append(owner[positions[usable]])
        starts.append(bound.zone_starts[zones[usable]])
        ends.append(bound.zone_ends[zones[usable]])
    # Fragments the index does not cover may hold every key that can match; a key pruner
    # cannot tell about may be anywhere. (Zones, uncovered fragments and the whole table
    # are each disjoint ranges, and a key gets zones and uncovered ones, or the whole.)
    for keys_of, selection in ((distinct(owner), bound.uncovered), (whole, table.whole())):
        if len(keys_of) and selection.num_ranges:
            key_parts.append(np.repeat(keys_of, selection.num_ranges))
            starts.append(np.tile(selection.starts, len(keys_of)))
            ends.append(np.tile(selection.ends, len(keys_of)))
    return _assembled(key_parts, starts, ends)


def _coerced(keys: Sequence[Any], arrow_type: pa.DataType) -> tuple[list[Any], Any, Any]:
    """The column values the keys can equal, the key each belongs to (int64), and the keys
    pruner cannot tell about. Integers on an integer column and strings on a string column
    go in one step; other keys one at a time, as a query's literals."""
    try:
        given = pa.array(keys)  # integers, strings: typed in one step
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        given = None
    if given is not None and given.null_count == 0 and len(keys):
        if pa.types.is_integer(arrow_type) and pa.types.is_integer(given.type):
            info = np.iinfo(arrow_type.to_pandas_dtype())
            numbers = given.to_numpy()
            fits = np.flatnonzero((numbers >= info.min) & (numbers <= info.max))
            return numbers[fits].tolist(), fits.astype(np.int64), np.zeros(0, np.int64)
        strings = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
        if strings and pa.types.is_string(given.type):
            return list(keys), np.arange(len(keys), dtype=np.int64), np.zeros(0, np.int64)
    values: list[Any] = []
    owner: list[int] = []
    whole: list[int] = []
    for position, key in enumerate(keys):
        coerced = coerce_all([literal_from_python(key)], arrow_type)
        if coerced.values is not None:
            values.extend(coerced.values)
            owner.extend([position] * len(coerced.values))
        elif not coerced.no_match:
            whole.append(position)
    return values, np.array(owner, np.int64), np.array(whole, np.int64)


def _assembled(
    key_parts: list[np.ndarray], starts: list[np.ndarray], ends: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per range: key, fragment, start, length; keys in order, each key's ranges sorted,
    those that touch merged."""
    key = np.concatenate([np.zeros(0, np.int64), *key_parts]).astype(np.int64)
    start = np.concatenate([np.zeros(0, np.int64), *starts]).astype(np.int64)
    end = np.concatenate([np.zeros(0, np.int64), *ends]).astype(np.int64)
    order = np.lexsort((start, key))
    key, start, end = key[order], start[order], end[order]
    if len(key) > 1:  # a key's ranges are disjoint: merge those that touch
        new = np.ones(len(key), bool)
        new[1:] = (key[1:] != key[:-1]) | (start[1:] != end[:-1])
        first = np.flatnonzero(new)
        last = np.append(first[1:], len(key)) - 1
        key, start, end = key[first], start[first], end[last]
    return key, start >> FRAGMENT_SHIFT, start & _OFFSETS, end - start
