"""An index bound to a table (:class:`TableIndex`): a ZoneIndex matched to the table's
current fragments, what it proves and the zones a probe keeps (:mod:`pruner.table.model`
binds it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pruner.discover import ParquetFile
from pruner.index import ZoneIndex
from pruner.index.native import STATISTICS_ZONES, ruled_out_by_statistics
from pruner.selection import FRAGMENT_SHIFT, Selection

__all__ = ["TableIndex"]


@dataclass(eq=False)
class TableIndex:
    """A ZoneIndex matched to the table's current fragments.

    ``zone_starts`` / ``zone_ends`` are row addresses in the table's fragment numbering;
    ``valid`` is False for zones of fragments that are gone or changed; ``uncovered`` holds
    every fragment no valid zone covers, whole.
    """

    index: ZoneIndex
    valid: np.ndarray
    zone_starts: np.ndarray
    zone_ends: np.ndarray
    uncovered: Selection
    stale_zones: int = 0
    damaged_fragments: frozenset[int] = frozenset()
    # A Parquet table's files and the column's Arrow type, for row-group statistics.
    files: dict[int, ParquetFile] | None = None
    arrow_type: pa.DataType | None = None
    # each file's name for the column (None: it holds it by its name: Table.stored_names)
    names: dict[int, str | None] | None = None
    # The files of a Delta or Iceberg table whose column is NULL in every row (written
    # before it was added): only a term matching NULL selects them.
    null_only: Selection = dataclasses.field(default_factory=Selection.empty)

    def coverage(self, fragment_rows: dict[int, int]) -> dict[str, int]:
        """Fragments and rows the index proves something about, of the table's total."""
        covered = set(np.unique(self.zone_starts[self.valid] >> FRAGMENT_SHIFT).tolist())
        covered |= {f for f, rows in fragment_rows.items() if rows == 0}  # nothing to cover
        covered |= set(self.null_only.fragment_ids())  # NULL in every row
        return {
            "fragments_indexed": len(covered),
            "fragments_total": len(fragment_rows),
            "rows_indexed": sum(fragment_rows[f] for f in covered),
            "rows_total": sum(fragment_rows.values()),
            "stale_zones": self.stale_zones,
            "damaged_fragments": len(self.damaged_fragments),
        }

    def ruled_out(self, mask: np.ndarray, values: Sequence[object]) -> np.ndarray:
        """The zones of ``mask`` (at most :data:`STATISTICS_ZONES` of them are checked)
        whose Parquet row group's min/max statistics prove that no row holds one of
        ``values`` (:func:`pruner.index.native.ruled_out_by_statistics`); none for a Lance
        table."""
        out = np.zeros(len(mask), bool)
        if self.files is None or self.arrow_type is None:
            return out
        zones = np.flatnonzero(mask & self.valid)
        if not len(zones) or len(zones) > STATISTICS_ZONES:
            return out
        out[zones] = ruled_out_by_statistics(
            self.files,
            self.index.column,
            self.arrow_type,
            self.zone_starts[zones],
            self.zone_ends[zones],
            values,
            self.names,
        )
        return out

    def zones(self, mask: np.ndarray, nulls: bool = False) -> Selection:
        """The selected zones' rows, plus every uncovered fragment (``nulls``: the term
        matches NULL, and the fragments holding no such column too)."""
        keep = mask & self.valid
        found = Selection.normalize(self.zone_starts[keep], self.zone_ends[keep]) | self.uncovered
        return found | self.null_only if nulls else found
