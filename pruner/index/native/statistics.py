"""Row groups whose min/max statistics rule a lookup's values out, where those are
exact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from pruner import storage
from pruner.discover import ParquetFile
from pruner.index.native.filters import _column_index
from pruner.index.native.value_types import _logical
from pruner.selection import FRAGMENT_SHIFT

STATISTICS_ZONES = 256
"""At most this many zones a probe kept are checked against their row group's min/max
statistics (:func:`ruled_out_by_statistics`, ~10 us each; reading a row group ruled out
costs 0.2-1 ms)."""


def ruled_out_by_statistics(
    files: Mapping[int, ParquetFile],
    column: str,
    arrow_type: pa.DataType,
    starts: np.ndarray,
    ends: np.ndarray,
    values: Sequence[object],
    names: Mapping[int, str | None] | None = None,
) -> np.ndarray:
    """(len(starts),) bool: True for a zone (half-open row addresses ``starts`` to ``ends``)
    that lies in one row group whose min/max statistics of ``column`` hold none of
    ``values``, so that no row of it can equal one of them.

    Only where the statistics are exact in the order Python compares ``values`` in: a
    signed integer column (``arrow_type``) stored as INT32 or INT64 with no unsigned
    logical type, and every value a Python int; and only in a file whose size and
    modification time are still those it had when the table was opened (the statistics
    are read from its footer then). Anything else rules nothing out. ``names``: each
    file's name for the column, None in a file that does not hold it (None: every file
    holds it by its name).
    """
    out = np.zeros(len(starts), bool)
    if not pa.types.is_signed_integer(arrow_type) or not values:
        return out
    if not all(type(v) is int for v in values):
        return out
    wanted = np.sort(np.array(values, dtype=object))
    # Per file: its row groups' end rows and the column's position (None: not usable).
    usable: dict[int, tuple[np.ndarray, int] | None] = {}
    unchanged: dict[int, bool] = {}
    for z, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        fid = start >> FRAGMENT_SHIFT
        file = files.get(fid)
        if file is None or file.metadata is None:
            continue
        if fid not in usable:
            in_file = column if names is None else names[fid]
            found = None if in_file is None else _column_index(file.metadata, in_file)
            usable[fid] = None
            if found is not None and _logical(found[1]).get("isSigned") is not False:
                usable[fid] = (np.cumsum(file.row_group_rows), found[0])
        known = usable[fid]
        if known is None:
            continue
        bounds, position = known
        first, last = start - (fid << FRAGMENT_SHIFT), end - (fid << FRAGMENT_SHIFT)
        group = int(np.searchsorted(bounds, first, side="right"))
        if group >= len(bounds) or last > bounds[group]:
            continue  # not inside one row group
        meta = file.metadata.row_group(group).column(position)
        stats = meta.statistics if meta.is_stats_set else None
        if meta.physical_type not in ("INT32", "INT64") or stats is None or not stats.has_min_max:
            continue
        low, high = stats.min, stats.max
        if type(low) is not int or type(high) is not int:
            continue
        at = int(np.searchsorted(wanted, low))  # the first value >= low
        if at < len(wanted) and wanted[at] <= high:
            continue  # a value lies within
        if fid not in unchanged:
            try:
                unchanged[fid] = file.unchanged(storage.stat(file.path))
            except OSError:
                unchanged[fid] = False
        out[z] = unchanged[fid]
    return out
