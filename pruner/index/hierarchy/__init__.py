"""The hierarchy companion of a zone bloom index: cold point probes that read kilobytes.

``bloomfilter.lance`` holds one SBBF per zone, zone after zone: a probe must load all of it
(650 zones x 32 KiB = 20 MiB at 5M rows). Beside it, ``bloomfilter.hierarchy`` holds the same
zones again, arranged for reading by offset, plus two coarser filters (the hierarchy of
``shared/seeds/parquedb_bloom_filter_design.md``):

- a **dataset filter** over every value of the column, sized from the sum of the fragments'
  distinct counts (an upper bound of the dataset's) at the index's probability;
- a **fragment filter** per fragment over its values, all of one size (sized from the
  largest fragment's distinct count), so they are stored block-major like the zones
  (distinct counts are estimated from a filter's fill, :class:`FragmentCoarse`);
- the **zone filters**, block-major: every zone filter has the same size, so a value's block
  number is the same in every zone; block ``b`` of every zone is stored contiguously, a
  fragment's zones next to each other.

A probe goes dataset -> fragments -> zones, reading with ``pread``: one 32-byte block of the
dataset filter (an absent value stops there), one row of fragment blocks, and for each
fragment that may hold the value, its zones' blocks of one row. Every piece read carries a
checksum (:func:`_row_checksums`) that is checked before use; an open companion keeps the
pieces it checked (:data:`_KEEP_BYTES`), and later probes use them as they were checked.

The companion is derived data. It records the size and the xxHash64 of the last bytes of the
index file it was made from, and is used only while they match; anything wrong with it
(missing, stale, truncated, a checksum that fails) raises :class:`HierarchyUnusable`, and the
caller reads ``bloomfilter.lance`` instead. It never changes what a probe selects: the zone
filters are the index's own bytes, and the coarser filters only skip zones whose filters
would say "absent" too (every value of a zone is in its fragment's and the dataset's filter).

Layout (all integers little-endian)::

    b"PRUNERH1" | u32 header length | u64 xxHash64 of the header | header (JSON) | sections
    at the header's offsets

The header is checksummed like every other piece: a digit changed in it (a filter's size
or an offset, still plausible) would make every later read look in the wrong place. It
also records each fragment's distinct count (``fragment_distinct``): an update
(:mod:`pruner.index.update`) sizes the coarse filters from it and carries the kept
fragments' filters over (:meth:`Hierarchy.coarse`); a companion without it is used for
probes but not carried over.

    zones      zstd of: u64 fragment_id[Z] | u64 zone_start[Z] | u64 zone_length[Z] |
               u8 has_null[Z] (the header gives its stored length and checksum; an open
               reads it whole: 6 KB for 12,000 regular zones, 305 KB before version 6)
    dataset    the dataset filter                          checksums: one per KiB
    fragments  row r = block r of every fragment filter    checksums: one per row
    zone rows  row r = block r of every zone filter        checksums: one per (row, fragment)
"""

from pruner import storage
from pruner.index.fileformat import read_index_file
from pruner.index.hierarchy.layout import COMPANION_NAME, companion_path
from pruner.index.hierarchy.read import Hierarchy, HierarchyUnusable, Probe
from pruner.index.hierarchy.store import read_heads_ahead
from pruner.index.hierarchy.write import (
    Coarse,
    DatasetFill,
    FragmentCoarse,
    write_hierarchy,
    write_hierarchy_of,
)
from pruner.index.model import ZoneIndex

__all__ = [
    "COMPANION_NAME",
    "Coarse",
    "DatasetFill",
    "FragmentCoarse",
    "Hierarchy",
    "HierarchyUnusable",
    "Probe",
    "companion_path",
    "open_index",
    "read_heads_ahead",
    "write_hierarchy",
    "write_hierarchy_of",
]


def open_index(index_file: storage.PathLike, column: str = "") -> ZoneIndex:
    """The index in ``index_file`` for probing: through its companion when it has a usable
    one (nothing but the companion's zones read now), else read whole, with the reason in
    ``hierarchy_note``.

    Raises:
        IndexFormatError: no usable companion, and the index file is damaged.
    """
    try:
        opened = Hierarchy(index_file)
    except HierarchyUnusable as err:
        index = read_index_file(index_file, column)
        index.hierarchy_note = str(err)
        return index
    return ZoneIndex(
        column=column or opened.column,
        items=opened.items,
        probability=opened.probability,
        fragment_id=opened.fragment_id,
        zone_start=opened.zone_start,
        zone_length=opened.zone_length,
        has_null=opened.has_null,
        filter_data=None,
        files=opened.files,
        value_type=opened.value_type,
        hierarchy=opened,
        plain=lambda: read_index_file(index_file, column),
    )
