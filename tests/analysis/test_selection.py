"""Selection algebra against Python sets of row addresses (hypothesis)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from pruner.selection import Selection

ranges = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 25)), max_size=8)


def rows(triples: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    return {(f, o) for f, start, length in triples for o in range(start, start + length)}


def rows_of(selection: Selection) -> set[tuple[int, int]]:
    return rows(selection.ranges())


@given(ranges, ranges)
def test_union_and_intersection_are_set_union_and_intersection(a: list, b: list) -> None:
    left, right = Selection.from_ranges(a), Selection.from_ranges(b)
    assert rows_of(left | right) == rows(a) | rows(b)
    assert rows_of(left & right) == rows(a) & rows(b)


@given(ranges)
def test_ranges_are_sorted_disjoint_and_merged(a: list) -> None:
    selection = Selection.from_ranges(a)
    triples = selection.ranges()
    assert rows_of(selection) == rows(a)
    assert selection.num_rows == len(rows(a))
    for (f1, s1, l1), (f2, s2, _) in itertools.pairwise(triples):
        assert (f1, s1) < (f2, s2)
        assert f1 != f2 or s1 + l1 < s2, "touching ranges of one fragment are merged"


@given(ranges, st.lists(st.tuples(st.integers(0, 3), st.integers(0, 90)), max_size=30))
def test_contains_agrees_with_the_ranges(a: list, probes: list) -> None:
    selection = Selection.from_ranges(a)
    if not probes:
        return
    fragments, offsets = zip(*probes, strict=True)
    inside = selection.contains(list(fragments), list(offsets)).tolist()
    assert inside == [probe in rows(a) for probe in probes]


def test_whole_skips_empty_fragments_and_ranges_never_cross_fragments() -> None:
    whole = Selection.whole({2: 10, 0: 5, 1: 0})
    assert whole.ranges() == [(0, 0, 5), (2, 0, 10)]
    touching = Selection.from_ranges([(0, 0, 2**32), (1, 0, 4)])
    assert touching.ranges() == [(0, 0, 2**32), (1, 0, 4)], "fragment 0's end touches 1's start"
