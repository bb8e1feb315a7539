"""Selection: the rows a scan must read, as per-fragment sorted disjoint half-open ranges.

A Selection is *AtMost*: it holds every row that can satisfy the predicate and possibly more
(zones are coarse, bloom filters have false positives); the engine re-applies the WHERE
clause to what it reads. Ranges are stored as row addresses, ``fragment_id << 32 | offset``
(Lance's own row-address layout), in two int64 arrays, so union and intersection are a few
NumPy calls whatever the number of fragments. A range never crosses a fragment boundary.

>>> a = Selection.from_ranges([(0, 0, 100), (1, 50, 10)])
>>> b = Selection.from_ranges([(0, 90, 20), (1, 0, 1000)])
>>> (a | b).ranges()
[(0, 0, 110), (1, 0, 1000)]
>>> (a & b).ranges()
[(0, 90, 10), (1, 50, 10)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["FRAGMENT_SHIFT", "Selection"]

FRAGMENT_SHIFT = 32
_OFFSET_MASK = (1 << FRAGMENT_SHIFT) - 1


class Selection:
    """Sorted, disjoint, non-adjacent (within a fragment) half-open address ranges."""

    __slots__ = ("_rows", "ends", "starts")

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.starts = starts
        self.ends = ends
        self._rows: int | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def empty(cls) -> Selection:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64))

    @classmethod
    def whole(cls, fragment_rows: Mapping[int, int]) -> Selection:
        """Every row of the given fragments (``{fragment_id: physical rows}``)."""
        ids = np.fromiter(fragment_rows.keys(), np.int64, len(fragment_rows))
        rows = np.fromiter(fragment_rows.values(), np.int64, len(fragment_rows))
        keep = rows > 0
        ids, rows = ids[keep], rows[keep]
        order = np.argsort(ids)
        starts = ids[order] << FRAGMENT_SHIFT
        return cls(starts, starts + rows[order])

    @classmethod
    def from_ranges(cls, ranges: Iterable[tuple[int, int, int]]) -> Selection:
        """From ``(fragment_id, row_start, row_length)`` triples in any order."""
        triples = np.array(list(ranges), dtype=np.int64).reshape(-1, 3)
        starts = (triples[:, 0] << FRAGMENT_SHIFT) + triples[:, 1]
        return cls.normalize(starts, starts + triples[:, 2])

    @classmethod
    def normalize(cls, starts: np.ndarray, ends: np.ndarray) -> Selection:
        """Sort, drop empty ranges, and merge overlapping or touching ones."""
        keep = ends > starts
        if not keep.all():
            starts, ends = starts[keep], ends[keep]
        if len(starts) > 1 and not (starts[1:] >= starts[:-1]).all():
            order = np.argsort(starts, kind="stable")
            starts, ends = starts[order], ends[order]
        if len(starts) <= 1:
            return cls(starts.astype(np.int64), ends.astype(np.int64))
        reach = np.maximum.accumulate(ends)
        same_fragment = (starts[1:] >> FRAGMENT_SHIFT) == (starts[:-1] >> FRAGMENT_SHIFT)
        new_run = np.empty(len(starts), dtype=bool)
        new_run[0] = True
        new_run[1:] = (starts[1:] > reach[:-1]) | ~same_fragment
        if new_run.all():
            return cls(starts, ends)
        first = np.flatnonzero(new_run)
        last = np.empty_like(first)
        last[:-1] = first[1:] - 1
        last[-1] = len(starts) - 1
        return cls(starts[first], reach[last])

    # ------------------------------------------------------------------ algebra

    def __or__(self, other: Selection) -> Selection:
        if not len(other.starts):
            return self
        if not len(self.starts):
            return other
        return Selection.normalize(
            np.concatenate([self.starts, other.starts]), np.concatenate([self.ends, other.ends])
        )

    def __and__(self, other: Selection) -> Selection:
        if not len(self.starts) or not len(other.starts):
            return Selection.empty()
        # For each range of self, the ranges of other that overlap it are a contiguous run.
        first = np.searchsorted(other.ends, self.starts, side="right")
        stop = np.searchsorted(other.starts, self.ends, side="left")
        counts = np.maximum(stop - first, 0)
        if not counts.any():
            return Selection.empty()
        mine = np.repeat(np.arange(len(self.starts)), counts)
        theirs = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        theirs += np.repeat(first, counts)
        starts = np.maximum(self.starts[mine], other.starts[theirs])
        ends = np.minimum(self.ends[mine], other.ends[theirs])
        return Selection.normalize(starts, ends)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return np.array_equal(self.starts, other.starts) and np.array_equal(self.ends, other.ends)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Selection({self.ranges()[:8]}{' ...' if len(self.starts) > 8 else ''})"

    # ------------------------------------------------------------------ reading

    @property
    def num_rows(self) -> int:
        """Rows (row addresses) selected, deleted rows inside ranges included (counted once:
        a Selection is never changed; a plan asks several times a query)."""
        if self._rows is None:
            self._rows = int((self.ends - self.starts).sum())
        return self._rows

    @property
    def num_ranges(self) -> int:
        return len(self.starts)

    def fragment_ids(self) -> list[int]:
        """Fragments with at least one selected row, ascending."""
        return np.unique(self.starts >> FRAGMENT_SHIFT).tolist()

    def ranges(self) -> list[tuple[int, int, int]]:
        """``[(fragment_id, row_start, row_length)]`` in address order."""
        fragments = (self.starts >> FRAGMENT_SHIFT).tolist()
        offsets = (self.starts & _OFFSET_MASK).tolist()
        lengths = (self.ends - self.starts).tolist()
        return list(zip(fragments, offsets, lengths, strict=True))

    def by_fragment(self) -> dict[int, list[tuple[int, int]]]:
        """``{fragment_id: [(row_start, row_end), ...]}`` half-open, ascending."""
        result: dict[int, list[tuple[int, int]]] = {}
        for fragment, start, length in self.ranges():
            result.setdefault(fragment, []).append((start, start + length))
        return result

    def contains(self, fragment_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Bool per row: is row ``offsets[i]`` of fragment ``fragment_ids[i]`` selected?"""
        addresses = (np.asarray(fragment_ids, np.int64) << FRAGMENT_SHIFT) + np.asarray(
            offsets, np.int64
        )
        slot = np.searchsorted(self.starts, addresses, side="right") - 1
        inside = slot >= 0
        inside[inside] = addresses[inside] < self.ends[slot[inside]]
        return inside
