"""explain says what the engine really reads: a Parquet row group bigger than a zone is read
whole, and files the index does not cover are named, with the command that covers them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import pruner
from pruner.explain import engine_reads, explain
from pruner.index import build_index
from pruner.plan import plan
from tests.support.engine_check import duckdb_bound_rows


def _directory(tmp_path: Path) -> Path:
    directory = tmp_path / "pq"
    directory.mkdir()
    for i in range(3):
        ids = pa.array(range(i * 10_000, (i + 1) * 10_000), pa.int64())
        pq.write_table(pa.table({"id": ids}), directory / f"{i}.parquet", row_group_size=5_000)
    build_index(directory, "id", items=1_000)
    return directory


def test_explain_counts_the_row_groups_the_engine_reads(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    sql = "SELECT * FROM t WHERE id = 12345"
    explanation = explain(sql, {"t": directory})
    [scan] = explanation.scans
    assert scan.selection.num_rows == 1_000  # one zone
    reads = engine_reads(scan)
    assert reads == {
        "row_groups_read": 1,
        "row_groups_total": 6,
        "rows_read": 5_000,
        "files_read": 1,
        "files_total": 3,
    }
    assert "the engine reads 1 of 6 row groups (5,000 rows) in 1 of 3 files" in str(explanation)
    # The rows DuckDB scans: the pruned source bound for the query holds exactly those.
    prepared = plan(sql, {"t": directory}, dialect="duckdb")
    assert duckdb_bound_rows(prepared) == reads["rows_read"]


def test_explain_names_files_the_index_does_not_cover(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    pq.write_table(pa.table({"id": pa.array([7], pa.int64())}), directory / "new.parquet")
    text = str(explain("SELECT * FROM t WHERE id = 12345", {"t": directory}))
    assert "1 file (new.parquet) not covered by the index" in text
    assert f"run `pruner index update {directory.absolute()} --column id`" in text
    got = pruner.query("SELECT id FROM t WHERE id IN (7, 12345)", {"t": str(directory)})
    assert sorted(got.column("id").to_pylist()) == [7, 7, 12345]  # 7 is in 0.parquet too
