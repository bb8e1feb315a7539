"""Whether Lance's own scanner may probe a table's scalar indexes: only an index pruner
proved whole, since Lance trusts an index as it is on disk."""

from __future__ import annotations

import pyarrow as pa

from pruner import storage
from pruner.errors import PrunerError
from pruner.index.lance import BLOOM_INDEX_DETAILS, lance_index_path, passes_checksums
from pruner.table.model import Table

__all__ = ["lance_cannot_filter", "lance_may_probe"]


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
    checksums, a B-tree none either) says no."""
    ds = table.dataset
    if storage.is_remote(storage.dataset_location(ds)):
        return False
    for description in ds.describe_indices():
        names = [part for name in description.field_names for part in (name, *name.split("."))]
        if not any(name in condition for name in names):
            continue
        if description.type_url != BLOOM_INDEX_DETAILS or len(description.field_names) != 1:
            return False
        segments = description.segments
        if any(s.base_id is not None for s in segments):
            return False
        if not all(passes_checksums(lance_index_path(ds, s.uuid)) for s in segments):
            return False
        try:
            bound = table.index(description.field_names[0])
        except PrunerError:
            return False
        if bound is None or bound.damaged_fragments or bound.stale_zones:
            return False
        claimed = {int(f) for s in segments for f in s.fragment_ids}
        if not claimed.isdisjoint(bound.uncovered.fragment_ids()):
            return False
    return True


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
