"""Selection algebra mutants that narrowed answers with no test failing (docs/mutation.md):
``Selection.whole`` dropping one-row fragments (``rows > 1``) and ``fragment_ids`` shifting
the wrong way. Each is checked on a Lance dataset of several fragments against DuckDB alone
over the dataset read whole by pylance."""

from __future__ import annotations

from pathlib import Path

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest

import pruner
from pruner.index import build_index
from pruner.selection import Selection


def test_whole_keeps_one_row_fragments_and_drops_empty_ones() -> None:
    selection = Selection.whole({4: 1, 2: 0, 7: 3})
    assert selection.ranges() == [(4, 0, 1), (7, 0, 3)]
    assert selection.num_rows == 4


def test_fragment_ids_are_the_fragments_selected() -> None:
    selection = Selection.from_ranges([(5, 2, 4), (3, 100, 10), (5, 50, 1)])
    assert selection.fragment_ids() == [3, 5]


@pytest.fixture
def fragments(tmp_path: Path) -> Path:
    """Fragments of 300, 300, 1 and 300 rows; ids 0..900, each once."""
    path = tmp_path / "t.lance"
    ids = np.arange(901, dtype=np.int64)
    sizes = [300, 300, 1, 300]
    start = 0
    for number, size in enumerate(sizes):
        part = pa.table({"id": ids[start : start + size], "v": ids[start : start + size] * 3})
        lance.write_dataset(part, path, mode="create" if number == 0 else "append")
        start += size
    assert [f.count_rows() for f in lance.dataset(str(path)).get_fragments()] == sizes
    build_index(path, "id", items=128)
    return path


@pytest.mark.parametrize(
    "where",
    [
        "id = 600",  # the one-row fragment
        "id IN (600, 7)",
        "id = 450",  # fragment 1, not at its start
        "id IN (899, 301, 10)",  # three fragments
        "id = 600 OR v = 3",  # v unindexed: every fragment, whole
    ],
)
def test_lance_fragments_answer_as_duckdb_alone(fragments: Path, where: str) -> None:
    sql = f"SELECT id, v FROM t WHERE {where}"
    con = duckdb.connect()
    con.register("t", lance.dataset(str(fragments)).to_table())
    alone = sorted(con.execute(sql).fetchall())
    assert alone
    pruned = pruner.query(sql, {"t": str(fragments)})
    got = sorted(zip(pruned.column("id").to_pylist(), pruned.column("v").to_pylist(), strict=True))
    assert got == alone


def test_two_overlapping_ranges_are_merged_and_intersect_whole() -> None:
    """normalize merges two ranges as it merges many: left unmerged, [0, 10) and [5, 8) have
    unsorted ends, and intersecting them with row 9 lost the row."""
    both = Selection.from_ranges([(0, 0, 10), (0, 5, 3)])
    assert both.ranges() == [(0, 0, 10)]
    row_nine = Selection.from_ranges([(0, 9, 1)])
    assert (row_nine & both).ranges() == [(0, 9, 1)]
    assert (both & row_nine).ranges() == [(0, 9, 1)]
    assert both.contains(np.array([0, 0]), np.array([9, 10])).tolist() == [True, False]
    touching = Selection.from_ranges([(1, 0, 4), (1, 4, 4)])
    assert touching.ranges() == [(1, 0, 8)]
