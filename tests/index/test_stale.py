"""Stale indexes: the data changed after the index was built, and every answer stays right.

Lance: appends, deletes, updates, merge-inserts, added columns, compaction, overwrite, and
reading an older version. Parquet: a file added, replaced (new content; new content keeping
the old size and modification time), removed or renamed. In each case the query runs pruned
and unpruned on DuckDB and DataFusion and must equal the engine's own answer over the raw
files (tests/support/engine_check.py, no pruner code), itself checked against the rows read
plainly; the selection must read exactly what the index cannot vouch for whole (fragments it
does not cover, or whose identity changed), keep pruning the rest, and ``pruner index list``
must report the coverage and the staleness.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import pruner
from pruner import discover, storage
from pruner.explain import explain
from pruner.index import build_index
from pruner.table import open_table
from tests.support.changes import (
    ENGINES,
    ITEMS,
    PARQUET_SCENARIOS,
    PER_FRAGMENT,
    ROWS,
    answer,
    check,
    data,
    ids,
    lance_table,
    listed,
    old_values,
    parquet_table,
    read_whole,
    rows,
    write_parquet,
)
from tests.support.engine_check import engine_alone

# ---------------------------------------------------------------------------- Lance


def test_lance_append_reads_the_new_fragment_whole(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    table = check(path, [*old_values(), ROWS + 7])
    new = max(table.fragment_rows)
    assert read_whole(table, [ROWS + 7]) == {new}, "old fragments pruned, the new one read"
    status = listed(path)
    assert status["state"] == "stale"
    assert (status["fragments_indexed"], status["fragments_total"]) == (3, 4)
    assert (status["rows_indexed"], status["rows_total"]) == (ROWS, ROWS + 500)


def test_lance_delete_keeps_the_index(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    values = old_values()
    lance.dataset(str(path)).delete(f"id = {values[0]} OR id < 100")
    table = check(path, [*values[1:], values[0], 150])
    assert read_whole(table, values) == set(), "zones spanning deleted rows still prune"
    assert listed(path)["state"] == "current"


def test_lance_update_and_merge_insert_of_the_indexed_column(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    values = old_values()
    dataset = lance.dataset(str(path))
    dataset.update({"id": "id + 100000", "tag": "'updated'"}, where=f"id = {values[0]}")
    source = data(np.array([values[1], 99_999]), "merged")
    lance.dataset(str(path)).merge_insert(
        "id"
    ).when_matched_update_all().when_not_matched_insert_all().execute(source)
    check(path, [values[0], values[0] + 100_000, values[1], values[2], 99_999])


def test_lance_added_column_keeps_the_index(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.dataset(str(path)).add_columns({"twice": "id * 2"})
    table = check(path, old_values())
    assert read_whole(table, old_values()) == set()
    assert listed(path)["state"] == "current"


def test_lance_compaction_leaves_the_index_covering_nothing(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    values = old_values()
    lance.dataset(str(path)).delete("id < 300")
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=5000)
    table = check(path, values)
    assert read_whole(table, values) == set(table.fragment_rows)
    status = listed(path)
    assert status["state"] == "stale" and status["fragments_indexed"] == 0
    assert status["stale_zones"] == ROWS // ITEMS, "every zone is of a fragment now gone"


def test_lance_overwrite_drops_the_index(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(ids(800, seed=9), "over"), str(path), mode="overwrite")
    table = check(path, [int(v) for v in ids(800, seed=9)[:3]])
    assert table.indexed_columns() == []
    scan = explain("SELECT * FROM t WHERE id = 1", {"t": table}).scans[0]
    assert "no bloom index on column id" in scan.terms[0].reason


def test_lance_older_version_uses_its_own_index(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    indexed = lance.dataset(str(path)).version
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=5000)
    old = open_table(path, version=indexed)
    assert read_whole(old, old_values()) == set(), "the old version's index still fits it"
    got = pruner.query(f"SELECT id FROM t WHERE id = {old_values()[0]}", {"t": old})
    assert got.column("id").to_pylist() == [old_values()[0]]


# -------------------------------------------------------------------------- Parquet


@pytest.mark.parametrize("scenario", list(PARQUET_SCENARIOS))
def test_parquet_changes_read_the_changed_files_whole(scenario: str, tmp_path: Path) -> None:
    path = parquet_table(tmp_path)
    values, whole = PARQUET_SCENARIOS[scenario](path)
    table = check(path, values)
    files = table.files or {}
    assert {files[f].relative for f in read_whole(table, values)} == whole
    status = listed(path)
    assert status["state"] == "stale"
    assert status["fragments_total"] == len(files)
    assert status["fragments_indexed"] == len(files) - len(whole)
    assert status["stale_zones"] == (0 if scenario == "added" else PER_FRAGMENT // ITEMS)


@pytest.mark.parametrize("scenario", list(PARQUET_SCENARIOS))
def test_a_table_held_open_answers_for_its_files_as_they_are_now(
    scenario: str, tmp_path: Path
) -> None:
    """A Table opened before the files changed (added, replaced, removed, renamed) answers
    as the engine alone over the files as they are now: the engine alone reads them at
    query time, so pruner opens the table again rather than read the new files by the old
    footers' row groups, or leave a new file out."""
    path = parquet_table(tmp_path)
    held = open_table(path)
    assert held.index("id") is not None
    values, _ = PARQUET_SCENARIOS[scenario](path)
    assert not held.files_unchanged()
    sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, values))})"
    for engine in ENGINES:
        expected = rows(engine_alone(engine, sql, {"t": path}))
        assert rows(pruner.query(sql, {"t": held}, engine=engine)) == expected, engine
    (scan,) = explain(sql, {"t": held}).scans
    # Opened again: the table explained holds the files as they are now (files_unchanged
    # itself does not vouch for files this young, see the test below).
    assert scan.table is not None and scan.table is not held
    files = list((scan.table.files or {}).values())
    assert [f.relative for f in files] == discover.parquet_names(path)
    for f in files:
        now = storage.stat(f.path)
        assert f.unchanged(now) and now.inode == f.inode


@pytest.mark.parametrize("scenario", ["added", "added in a subfolder", "removed", "renamed"])
def test_a_held_table_sees_its_folder_change_once_it_trusts_the_folders_time(
    scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held table of a flat folder stops walking it once the folder's times are older
    than RACY_SECONDS (made 0 here, so the test does not wait): a file added, removed or
    renamed changes the folder's times, and the table is opened again."""
    monkeypatch.setattr(discover, "RACY_SECONDS", 0.0)
    path = parquet_table(tmp_path)
    (path / "later").mkdir()  # empty: a file added there changes only its times
    held = open_table(path)
    assert held.files_unchanged() and held.files_unchanged(), "the folder's times are trusted"
    if scenario == "added in a subfolder":
        write_parquet(data(ids()[:10] + 90_000, "new"), path / "later" / "x.parquet")
        values = [*old_values(), int(ids()[3]) + 90_000]
    else:
        values, _ = PARQUET_SCENARIOS[scenario](path)
    assert not held.files_unchanged()
    sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, values))})"
    # DataFusion alone's register_parquet ignores a folder's subfolders (its
    # listing_table_ignore_subdirectory), pruner's table and DuckDB's ** glob do not
    engines = ["duckdb"] if "subfolder" in scenario else ENGINES
    for engine in engines:
        expected = rows(engine_alone(engine, sql, {"t": path}))
        assert rows(pruner.query(sql, {"t": held}, engine=engine)) == expected, engine


def test_a_held_table_whose_file_was_rewritten_in_place_within_its_time_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file rewritten in place (same inode) to the same size, with its old modification
    time: what a rewrite within the file system's timestamp granularity looks like. Like a
    path's signature, a held Table does not vouch for a file modified in the last
    RACY_SECONDS (made long here, so the test does not depend on the clock): it is opened
    again, and answers as the engine alone over the new contents."""
    monkeypatch.setattr(discover, "RACY_SECONDS", 3600.0)
    path = parquet_table(tmp_path)
    held = open_table(path)
    assert held.index("id") is not None
    file = path / "part-1.parquet"
    before = file.stat()
    scratch = tmp_path / "fresh.parquet"
    write_parquet(data(ids()[:PER_FRAGMENT] + 50_000, "old"), scratch)
    assert scratch.stat().st_size == before.st_size, "the test needs the same size"
    with open(file, "r+b") as out:  # in place: the same inode
        out.write(scratch.read_bytes())
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file.stat().st_ino == before.st_ino
    values = [old_values()[0], int(ids()[7]) + 50_000]
    sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, values))})"
    for engine in ENGINES:
        expected = rows(engine_alone(engine, sql, {"t": path}))
        assert len(expected) == 2
        assert rows(pruner.query(sql, {"t": held}, engine=engine)) == expected, engine


def test_an_index_of_no_zones_reads_every_file_whole(tmp_path: Path) -> None:
    """An index built over empty files has no zone; files written since are read whole."""
    path = tmp_path / "t"
    path.mkdir()
    write_parquet(
        data(np.arange(0, dtype=np.int64)).cast(data(ids(1)).schema), path / "part-0.parquet"
    )
    build_index(path, "id", items=ITEMS)
    write_parquet(data(np.arange(ROWS, ROWS + 200), "new"), path / "part-1.parquet")
    write_parquet(data(np.arange(0, 100), "new"), path / "part-2.parquet")
    table = check(path, [ROWS + 3, 7])
    assert read_whole(table, [ROWS + 3, 7]) == {1, 2}


def test_a_rebuild_after_changes_covers_everything_again(tmp_path: Path) -> None:
    path = parquet_table(tmp_path)
    PARQUET_SCENARIOS["replaced"](path)
    PARQUET_SCENARIOS["added"](path)
    build_index(path, "id", items=ITEMS)
    status = listed(path)
    assert status["state"] == "current" and status["stale_zones"] == 0
    assert status["fragments_indexed"] == status["fragments_total"] == 4
    shutil.rmtree(path / "_pruner")
    assert open_table(path).indexed_columns() == []


@pytest.mark.slow
def test_spark_reads_stale_tables_right(tmp_path: Path, spark: Any) -> None:
    """The Spark adapter gets the same widened selections: appended Lance fragments, a
    compacted dataset and a replaced Parquet file."""
    lance_path = lance_table(tmp_path / "a")
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(lance_path), mode="append")
    compacted = lance_table(tmp_path / "b")
    lance.dataset(str(compacted)).optimize.compact_files(target_rows_per_fragment=5000)
    parquet_path = parquet_table(tmp_path / "c")
    values, _ = PARQUET_SCENARIOS["replaced_keeping_size_and_mtime"](parquet_path)
    for path, wanted in (
        (lance_path, [*old_values(), ROWS + 7]),
        (compacted, old_values()),
        (parquet_path, values),
    ):
        sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, wanted))})"
        expected = rows(engine_alone("spark", sql, {"t": path}, spark=spark))
        assert expected == answer(path, wanted), path
        for prune in (True, False):
            result = pruner.query(sql, {"t": path}, engine="spark", prune=prune)
            assert rows(result) == expected, (path, prune)


def test_lance_data_replacement_of_the_indexed_column(tmp_path: Path) -> None:
    """Lance's DataReplacement swaps a fragment's file for one column in place: the fragment
    keeps its id, and Lance takes it out of the index's fragment bitmap. pruner follows the
    bitmap, so the old zones of fragment 0 (which would miss every new value) go unused."""
    from lance import LanceOperation
    from lance.file import LanceFileWriter
    from lance.fragment import DataFile

    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"k": np.arange(2000)}), str(path), max_rows_per_file=1000)
    lance.dataset(str(path)).add_columns({"id": "k * 2"})
    build_index(path, "id", items=ITEMS)
    dataset = lance.dataset(str(path))
    field = dataset.lance_schema.field("id").id()
    writer = LanceFileWriter(str(path / "data" / "replaced.lance"), pa.schema([("id", pa.int64())]))
    writer.write_batch(pa.table({"id": np.arange(1000) + 500_000}))
    writer.close()
    replacement = DataFile("replaced.lance", [field], [0], 2, 0)
    operation = LanceOperation.DataReplacement(
        [LanceOperation.DataReplacementGroup(0, replacement)]
    )
    lance.LanceDataset.commit(str(path), operation, read_version=dataset.version)
    sql = "SELECT k, id FROM t WHERE id IN (500005, 1002, 2002)"
    written = [(5, 500_005), (1001, 2002)]  # k = position; id replaced in fragment 0
    for engine in ENGINES:
        alone = engine_alone(engine, sql, {"t": path}).to_pylist()
        assert sorted((r["k"], r["id"]) for r in alone) == written, engine
        for prune in (True, False):
            got = pruner.query(sql, {"t": path}, engine=engine, prune=prune).to_pylist()
            assert sorted((r["k"], r["id"]) for r in got) == written, (engine, prune)
    table = open_table(path)
    assert read_whole(table, [500_005]) == {0}
