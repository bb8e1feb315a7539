"""Comparing two zone indexes field by field, with the field that differs in the message."""

from __future__ import annotations

from pruner.index import ZoneIndex


def assert_same_index(mine: ZoneIndex, theirs: ZoneIndex, what: str) -> None:
    assert mine.fragment_id.tolist() == theirs.fragment_id.tolist(), f"{what}: fragments"
    assert mine.zone_start.tolist() == theirs.zone_start.tolist(), f"{what}: zone_start"
    assert mine.zone_length.tolist() == theirs.zone_length.tolist(), f"{what}: zone_length"
    assert mine.has_null.tolist() == theirs.has_null.tolist(), f"{what}: has_null"
    for zone in range(mine.num_zones):
        assert mine.filter_bytes(zone) == theirs.filter_bytes(zone), f"{what}: filter {zone}"
    assert (mine.items, mine.probability) == (theirs.items, theirs.probability), what
    mine_nulls = {k: v.tolist() for k, v in (mine.null_rows or {}).items()}
    theirs_nulls = {k: v.tolist() for k, v in (theirs.null_rows or {}).items()}
    assert mine_nulls == theirs_nulls, f"{what}: null bitmap"
