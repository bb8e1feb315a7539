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

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.explain import explain
from pruner.index import build_index
from pruner.selection import Selection
from pruner.table import Table, open_table
from tests.support.engine_check import engine_alone

ROWS, PER_FRAGMENT, ITEMS = 3000, 1000, 100
ENGINES = ("duckdb", "datafusion")


def _ids(count: int = ROWS, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).permutation(count).astype(np.int64)


def _data(ids: np.ndarray, tag: str = "old") -> pa.Table:
    return pa.table({"id": ids, "tag": pa.array([tag] * len(ids))})


def _lance(directory: Path) -> Path:
    path = directory / "t.lance"
    lance.write_dataset(_data(_ids()), str(path), max_rows_per_file=PER_FRAGMENT)
    build_index(path, "id", items=ITEMS)
    return path


def _write_parquet(data: pa.Table, file: Path) -> None:
    """Plain, uncompressed int64 pages: the file size depends on the row count alone."""
    pq.write_table(data, file, row_group_size=500, compression="none", use_dictionary=False)


def _parquet(directory: Path) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "t"
    path.mkdir()
    data = _data(_ids())
    for number in range(ROWS // PER_FRAGMENT):
        part = data.slice(number * PER_FRAGMENT, PER_FRAGMENT)
        _write_parquet(part, path / f"part-{number}.parquet")
    build_index(path, "id", items=ITEMS)
    return path


def _answer(path: Path, values: list[int]) -> list[tuple[Any, ...]]:
    """The rows the test wrote that are still there, read plainly (no pruner, no engine)."""
    if (path / "_versions").is_dir():
        table = lance.dataset(str(path)).to_table(columns=["id", "tag"])
    else:
        table = pa.concat_tables(
            pq.read_table(p, columns=["id", "tag"]) for p in sorted(path.glob("*.parquet"))
        )
    rows = zip(table.column("id").to_pylist(), table.column("tag").to_pylist(), strict=True)
    return sorted(row for row in rows if row[0] in values)


def _rows(result: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(result.column(c).to_pylist() for c in ("id", "tag")), strict=True))


def _check(path: Path, values: list[int]) -> Table:
    """On both engines, the engine alone over the raw files (no pruner code) is the answer,
    and the plain read agrees with it; pruned and unpruned must give it. The opened table."""
    sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, values))})"
    plain = _answer(path, values)
    assert plain, "the scenario queries rows that exist"
    for engine in ENGINES:
        expected = _rows(engine_alone(engine, sql, {"t": path}))
        assert expected == plain, (engine, "the engine alone and the plain read")
        for prune in (True, False):
            result = pruner.query(sql, {"t": path}, engine=engine, prune=prune)
            assert _rows(result) == expected, (engine, prune)
    return open_table(path)


def _read_whole(table: Table, values: list[int]) -> set[int]:
    """Fragments the selection of ``id IN values`` reads whole."""
    sql = f"SELECT * FROM t WHERE id IN ({', '.join(map(str, values))})"
    selection = explain(sql, {"t": table}).scans[0].selection
    return {
        f
        for f, rows in table.fragment_rows.items()
        if rows and (selection & Selection.whole({f: rows})).num_rows == rows
    }


def _listed(path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "pruner.cli", "index", "list", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    return dict(row)


def _old_values() -> list[int]:
    ids = _ids()
    return [int(ids[5]), int(ids[PER_FRAGMENT + 5]), int(ids[2 * PER_FRAGMENT + 5])]


# ---------------------------------------------------------------------------- Lance


def test_lance_append_reads_the_new_fragment_whole(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    lance.write_dataset(_data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    table = _check(path, [*_old_values(), ROWS + 7])
    new = max(table.fragment_rows)
    assert _read_whole(table, [ROWS + 7]) == {new}, "old fragments pruned, the new one read"
    listed = _listed(path)
    assert listed["state"] == "stale"
    assert (listed["fragments_indexed"], listed["fragments_total"]) == (3, 4)
    assert (listed["rows_indexed"], listed["rows_total"]) == (ROWS, ROWS + 500)


def test_lance_delete_keeps_the_index(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    values = _old_values()
    lance.dataset(str(path)).delete(f"id = {values[0]} OR id < 100")
    table = _check(path, [*values[1:], values[0], 150])
    assert _read_whole(table, values) == set(), "zones spanning deleted rows still prune"
    assert _listed(path)["state"] == "current"


def test_lance_update_and_merge_insert_of_the_indexed_column(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    values = _old_values()
    dataset = lance.dataset(str(path))
    dataset.update({"id": "id + 100000", "tag": "'updated'"}, where=f"id = {values[0]}")
    source = _data(np.array([values[1], 99_999]), "merged")
    lance.dataset(str(path)).merge_insert(
        "id"
    ).when_matched_update_all().when_not_matched_insert_all().execute(source)
    _check(path, [values[0], values[0] + 100_000, values[1], values[2], 99_999])


def test_lance_added_column_keeps_the_index(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    lance.dataset(str(path)).add_columns({"twice": "id * 2"})
    table = _check(path, _old_values())
    assert _read_whole(table, _old_values()) == set()
    assert _listed(path)["state"] == "current"


def test_lance_compaction_leaves_the_index_covering_nothing(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    values = _old_values()
    lance.dataset(str(path)).delete("id < 300")
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=5000)
    table = _check(path, values)
    assert _read_whole(table, values) == set(table.fragment_rows)
    listed = _listed(path)
    assert listed["state"] == "stale" and listed["fragments_indexed"] == 0
    assert listed["stale_zones"] == ROWS // ITEMS, "every zone is of a fragment now gone"


def test_lance_overwrite_drops_the_index(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    lance.write_dataset(_data(_ids(800, seed=9), "over"), str(path), mode="overwrite")
    table = _check(path, [int(v) for v in _ids(800, seed=9)[:3]])
    assert table.indexed_columns() == []
    scan = explain("SELECT * FROM t WHERE id = 1", {"t": table}).scans[0]
    assert "no bloom index on column id" in scan.terms[0].reason


def test_lance_older_version_uses_its_own_index(tmp_path: Path) -> None:
    path = _lance(tmp_path)
    indexed = lance.dataset(str(path)).version
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=5000)
    old = open_table(path, version=indexed)
    assert _read_whole(old, _old_values()) == set(), "the old version's index still fits it"
    got = pruner.query(f"SELECT id FROM t WHERE id = {_old_values()[0]}", {"t": old})
    assert got.column("id").to_pylist() == [_old_values()[0]]


# -------------------------------------------------------------------------- Parquet


def _rewrite(file: Path, data: pa.Table, keep_identity: bool) -> None:
    """Replace ``file`` with ``data``, atomically; ``keep_identity``: restore its old size
    (it must match) and modification time, as a copy preserving times would."""
    before = file.stat()
    temporary = file.with_name(".replacing.tmp")
    _write_parquet(data, temporary)
    os.replace(temporary, file)
    if keep_identity:
        assert file.stat().st_size == before.st_size, "the scenario needs the same size"
        os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))


def _parquet_scenarios() -> dict[str, Callable[[Path], tuple[list[int], set[str]]]]:
    """name -> change the directory; return (values to query, files that must be read whole)."""

    def added(path: Path) -> tuple[list[int], set[str]]:
        pq.write_table(_data(np.arange(ROWS, ROWS + 200), "new"), path / "part-9.parquet")
        return [*_old_values(), ROWS + 3], {"part-9.parquet"}

    def replaced(path: Path) -> tuple[list[int], set[str]]:
        fresh = _data(np.arange(ROWS, ROWS + PER_FRAGMENT), "new")
        _rewrite(path / "part-1.parquet", fresh, keep_identity=False)
        return [_old_values()[0], ROWS + 11], {"part-1.parquet"}

    def replaced_first(path: Path) -> tuple[list[int], set[str]]:
        # The first file is fragment 0, the id a stale zone's fragment is parked at.
        fresh = _data(np.arange(ROWS, ROWS + PER_FRAGMENT), "new")
        _rewrite(path / "part-0.parquet", fresh, keep_identity=False)
        return [_old_values()[1], ROWS + 11], {"part-0.parquet"}

    def replaced_keeping_size_and_mtime(path: Path) -> tuple[list[int], set[str]]:
        # Other ids of the same count, width and encoding: the same size, and the times are
        # put back; only the footer (statistics) tells the files apart.
        fresh = _data(_ids()[:PER_FRAGMENT] + 50_000, "old")
        _rewrite(path / "part-1.parquet", fresh, keep_identity=True)
        return [_old_values()[0], int(_ids()[7]) + 50_000], {"part-1.parquet"}

    def removed(path: Path) -> tuple[list[int], set[str]]:
        (path / "part-1.parquet").unlink()
        return [_old_values()[0], _old_values()[2]], set()

    def renamed(path: Path) -> tuple[list[int], set[str]]:
        (path / "part-1.parquet").rename(path / "part-7.parquet")
        return _old_values(), {"part-7.parquet"}

    return {
        f.__name__: f
        for f in (
            added,
            replaced,
            replaced_first,
            replaced_keeping_size_and_mtime,
            removed,
            renamed,
        )
    }


PARQUET_SCENARIOS = _parquet_scenarios()


@pytest.mark.parametrize("scenario", list(PARQUET_SCENARIOS))
def test_parquet_changes_read_the_changed_files_whole(scenario: str, tmp_path: Path) -> None:
    path = _parquet(tmp_path)
    values, whole = PARQUET_SCENARIOS[scenario](path)
    table = _check(path, values)
    files = table.files or {}
    assert {files[f].relative for f in _read_whole(table, values)} == whole
    listed = _listed(path)
    assert listed["state"] == "stale"
    assert listed["fragments_total"] == len(files)
    assert listed["fragments_indexed"] == len(files) - len(whole)
    assert listed["stale_zones"] == (0 if scenario == "added" else PER_FRAGMENT // ITEMS)


def test_an_index_of_no_zones_reads_every_file_whole(tmp_path: Path) -> None:
    """An index built over empty files has no zone; files written since are read whole."""
    path = tmp_path / "t"
    path.mkdir()
    _write_parquet(
        _data(np.arange(0, dtype=np.int64)).cast(_data(_ids(1)).schema), path / "part-0.parquet"
    )
    build_index(path, "id", items=ITEMS)
    _write_parquet(_data(np.arange(ROWS, ROWS + 200), "new"), path / "part-1.parquet")
    _write_parquet(_data(np.arange(0, 100), "new"), path / "part-2.parquet")
    table = _check(path, [ROWS + 3, 7])
    assert _read_whole(table, [ROWS + 3, 7]) == {1, 2}


def test_a_rebuild_after_changes_covers_everything_again(tmp_path: Path) -> None:
    path = _parquet(tmp_path)
    PARQUET_SCENARIOS["replaced"](path)
    PARQUET_SCENARIOS["added"](path)
    build_index(path, "id", items=ITEMS)
    listed = _listed(path)
    assert listed["state"] == "current" and listed["stale_zones"] == 0
    assert listed["fragments_indexed"] == listed["fragments_total"] == 4
    shutil.rmtree(path / "_pruner")
    assert open_table(path).indexed_columns() == []


@pytest.mark.slow
def test_spark_reads_stale_tables_right(tmp_path: Path, spark: Any) -> None:
    """The Spark adapter gets the same widened selections: appended Lance fragments, a
    compacted dataset and a replaced Parquet file."""
    lance_path = _lance(tmp_path / "a")
    lance.write_dataset(_data(np.arange(ROWS, ROWS + 500), "new"), str(lance_path), mode="append")
    compacted = _lance(tmp_path / "b")
    lance.dataset(str(compacted)).optimize.compact_files(target_rows_per_fragment=5000)
    parquet_path = _parquet(tmp_path / "c")
    values, _ = PARQUET_SCENARIOS["replaced_keeping_size_and_mtime"](parquet_path)
    for path, wanted in (
        (lance_path, [*_old_values(), ROWS + 7]),
        (compacted, _old_values()),
        (parquet_path, values),
    ):
        sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, wanted))})"
        expected = _rows(engine_alone("spark", sql, {"t": path}, spark=spark))
        assert expected == _answer(path, wanted), path
        for prune in (True, False):
            result = pruner.query(sql, {"t": path}, engine="spark", prune=prune)
            assert _rows(result) == expected, (path, prune)


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
    assert _read_whole(table, [500_005]) == {0}
