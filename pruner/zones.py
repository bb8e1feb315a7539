"""Zone layout: how the rows of a fragment are cut into zones.

Lance's rule (``docs/format.md``, "Zones"), which pruner follows for both sources:

- a zone holds at most ``items`` *live* rows (``bloomfilter_item`` is both the expected
  number of distinct values and the zone size), and never spans fragments;
- ``zone_start`` is the physical offset of the zone's first live row in its fragment;
- ``zone_length`` is ``last_offset - first_offset + 1``: a span that includes deleted rows.

Example: fragment 0 with rows 0-9 and 500-599 deleted and ``items = 300`` gives the zones
``(0, 10, 300), (0, 310, 400), (0, 710, 290)``.

A Parquet file is a fragment with no deletions, cut so that a zone never straddles a row
group: each row group is cut into zones of ``items`` rows on its own. A selected zone then
maps to whole row groups or row ranges inside one row group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FragmentZones", "contiguous_zones", "lance_fragment_zones", "parquet_file_zones"]


@dataclass(frozen=True, slots=True)
class FragmentZones:
    """The zones of one fragment, and which zone each live row belongs to.

    Attributes:
        zone_start: uint64, physical offset of each zone's first live row.
        zone_length: uint64, each zone's span in physical rows.
        first_row: int64, ``num_zones + 1`` bounds: zone ``z`` holds the live rows
            ``first_row[z]:first_row[z + 1]`` (positions among the live rows).
    """

    zone_start: np.ndarray
    zone_length: np.ndarray
    first_row: np.ndarray

    @property
    def num_zones(self) -> int:
        return len(self.zone_start)


def lance_fragment_zones(live_offsets: np.ndarray, items: int) -> FragmentZones:
    """Zones of a Lance fragment whose live rows sit at ``live_offsets`` (ascending).

    >>> z = lance_fragment_zones(np.array([0, 1, 5, 6, 7]), 2)
    >>> z.zone_start.tolist(), z.zone_length.tolist(), z.first_row.tolist()
    ([0, 5, 7], [2, 2, 1], [0, 2, 4, 5])
    """
    offsets = np.asarray(live_offsets, dtype=np.int64)
    count = len(offsets)
    first_row = np.arange(0, count, items, dtype=np.int64)
    last_row = np.minimum(first_row + items, count) - 1
    zone_start = offsets[first_row]
    zone_length = offsets[last_row] - zone_start + 1
    return FragmentZones(
        zone_start.astype(np.uint64),
        zone_length.astype(np.uint64),
        np.append(first_row, count),
    )


def contiguous_zones(count: int, items: int) -> FragmentZones:
    """Zones of a fragment of ``count`` rows with no deletions (``zone_start`` = live index).

    >>> contiguous_zones(5, 2).zone_length.tolist()
    [2, 2, 1]
    """
    first_row = np.arange(0, count, items, dtype=np.int64)
    return FragmentZones(
        first_row.astype(np.uint64),
        (np.minimum(first_row + items, count) - first_row).astype(np.uint64),
        np.append(first_row, count),
    )


def parquet_file_zones(row_group_rows: list[int] | np.ndarray, items: int) -> FragmentZones:
    """Zones of a Parquet file with row groups of ``row_group_rows`` rows each.

    >>> z = parquet_file_zones([5, 3], 2)
    >>> z.zone_start.tolist(), z.zone_length.tolist()
    ([0, 2, 4, 5, 7], [2, 2, 1, 2, 1])
    """
    sizes = np.asarray(row_group_rows, dtype=np.int64)
    group_start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    zones_per_group = -(-sizes // items)
    group_of_zone = np.repeat(np.arange(len(sizes)), zones_per_group)
    zone_in_group = np.arange(len(group_of_zone)) - np.repeat(
        np.cumsum(zones_per_group) - zones_per_group, zones_per_group
    )
    zone_start = group_start[group_of_zone] + zone_in_group * items
    group_end = group_start[group_of_zone] + sizes[group_of_zone]
    zone_length = np.minimum(zone_start + items, group_end) - zone_start
    return FragmentZones(
        zone_start.astype(np.uint64),
        zone_length.astype(np.uint64),
        np.append(zone_start, int(sizes.sum())),
    )
