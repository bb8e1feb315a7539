"""``pruner index update``: after the changes of tests/index/test_stale.py, an update covers
every live row again, reads only the fragments it indexes, and gives the index a full
rebuild gives (zones, filter bytes, metadata and buffers, decoded: Lance writes schema
metadata in no fixed order, so two builds of one table differ in bytes). Answers equal the
engine alone over the raw files (tests/support/changes.py ``check``) and prune again.
"""

from __future__ import annotations

import datetime
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lance.file import LanceFileReader

import pruner
from pruner.cli import main
from pruner.errors import IndexFormatError, IndexNotFoundError, InvalidParameterError
from pruner.hashing import hash_array
from pruner.index import (
    META_CHECKSUMS,
    META_NULL_BITMAP,
    Hierarchy,
    build_index,
    commit_segment,
    list_bloom_indexes,
    load_index,
    parquet_index_path,
    plan_update,
    read_index_file,
    update_index,
)
from pruner.index.hierarchy import Coarse
from pruner.index.native import write_parquet as write_parquet_with_filters
from pruner.table import open_table
from tests.support.changes import (
    ITEMS,
    PARQUET_SCENARIOS,
    PER_FRAGMENT,
    ROWS,
    check,
    data,
    ids,
    lance_table,
    listed,
    old_values,
    parquet_table,
    read_whole,
    write_parquet,
)
from tests.support.engine_check import engine_alone


def _index_file(path: Path, column: str = "id") -> Path:
    if (path / "_versions").is_dir():
        [segment] = [s for s in list_bloom_indexes(path) if s.column == column]
        return segment.path
    return parquet_index_path(path, column)


def _contents(file: Path) -> tuple[pa.Table, dict[bytes, bytes], dict[str, bytes]]:
    """An index file decoded: its rows, its schema metadata and its global buffers."""
    reader = LanceFileReader(str(file))
    table = reader.read_all().to_table()
    metadata = dict(table.schema.metadata or {})
    buffers = {
        name: bytes(reader.read_global_buffer(int(metadata[name.encode()])))
        for name in (META_NULL_BITMAP, META_CHECKSUMS)
        if name.encode() in metadata
    }
    return table.replace_schema_metadata(None), metadata, buffers


def _segments_contents(path: Path) -> tuple[pa.Table, list[dict[bytes, bytes]], dict]:
    """A Lance index of one or more segments as queries load it: the zones of the fragments
    each segment covers, in segment order; each segment's metadata; the null rows by
    fragment. Each segment's stored zone checksums (Lance writes none) must be its zones'."""
    tables, metadata, null_rows = [], [], {}
    for info in [s for s in list_bloom_indexes(path) if s.column == "id"]:
        table, meta, buffers = _contents(info.path)
        whole = read_index_file(info.path)
        assert whole.damaged is None or not whole.damaged.any()
        assert (META_CHECKSUMS in buffers) == (whole.damaged is not None)
        covered = np.isin(table.column("fragment_id").to_numpy(), list(info.fragment_ids))
        tables.append(table.filter(pa.array(covered)))
        metadata.append(
            {
                k: v
                for k, v in meta.items()
                if k not in (META_NULL_BITMAP.encode(), META_CHECKSUMS.encode())
            }
        )
        null_rows.update({k: v.tolist() for k, v in (whole.null_rows or {}).items()})
    return pa.concat_tables(tables), metadata, null_rows


def _assert_equals_a_rebuild(path: Path, tmp_path: Path) -> None:
    """The updated index equals a full rebuild's: zones, filter bytes, metadata, null rows
    and checksums (a Lance index of several segments: their covered zones together)."""
    copy = tmp_path / f"rebuilt-{path.name}"
    shutil.copytree(path, copy, copy_function=shutil.copy2)  # keeps times: same identities
    build_index(copy, "id", items=ITEMS)
    if (path / "_versions").is_dir():
        updated, rebuilt = _segments_contents(path), _segments_contents(copy)
        assert updated[0].equals(rebuilt[0]), "zones and filter bytes"
        assert all(meta == rebuilt[1][0] for meta in updated[1]), "metadata"
        assert updated[2] == rebuilt[2], "null rows"
        return
    updated_file, rebuilt_file = _contents(_index_file(path)), _contents(_index_file(copy))
    assert updated_file[0].equals(rebuilt_file[0]), "zones and filter bytes"
    assert updated_file[1] == rebuilt_file[1], "metadata"
    assert updated_file[2] == rebuilt_file[2], "null bitmap and zone checksums"


def _assert_covers_everything(path: Path) -> None:
    status = listed(path)
    assert status["state"] == "current", status
    assert status["rows_indexed"] == status["rows_total"]
    assert status["fragments_indexed"] == status["fragments_total"]
    assert status["update"]["fragments_to_add"] == 0
    assert status["update"]["fragments_to_rebuild"] == 0
    assert status["update"]["fragments_to_drop"] == 0


def _update(path: Path, **options: Any) -> tuple[Any, list[tuple[int, int]]]:
    """Update; return the plan and every progress call (rows indexed, rows to index)."""
    calls: list[tuple[int, int]] = []
    _, plan = update_index(path, "id", progress=lambda d, t: calls.append((d, t)), **options)
    return plan, calls


# ---------------------------------------------------------------------------- Lance


def test_lance_append_indexes_only_the_new_fragment(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    old = load_index(path, "id")
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    plan, calls = _update(path)
    assert (plan.others, plan.add, plan.rebuild, plan.drop) == ([0, 1, 2], [3], [], [])
    assert plan.segment and plan.keep == {}, "a segment of its own"
    assert calls[-1] == (500, 500), "only the new fragment's rows were read"
    new = load_index(path, "id")
    kept = new.fragment_id < 3
    assert np.array_equal(new.filter_data[kept], old.filter_data), "kept zones byte for byte"
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, [*old_values(), ROWS + 7])
    assert read_whole(table, [*old_values(), ROWS + 7]) == set()


def test_lance_deletes_below_the_share_keep_the_zones_and_above_it_rebuild_them(
    tmp_path: Path,
) -> None:
    path = lance_table(tmp_path)
    old = load_index(path, "id")
    dataset = lance.dataset(str(path))
    first = ids()[:PER_FRAGMENT]
    # fragment 0 loses 5% of its rows, fragment 1 loses 40%
    dataset.delete(f"id IN ({', '.join(map(str, first[:50].tolist()))})")
    second = ids()[PER_FRAGMENT : 2 * PER_FRAGMENT]
    lance.dataset(str(path)).delete(f"id IN ({', '.join(map(str, second[:400].tolist()))})")
    assert listed(path)["rows_deleted"] == 450
    plan = plan_update(path, "id")
    assert (sorted(plan.keep), plan.rebuild) == ([0, 2], [1])
    assert plan_update(path, "id", deleted_share=0.5).rebuild == []
    assert plan_update(path, "id", deleted_share=0.4).rebuild == [], "a share must pass it"
    assert plan_update(path, "id", deleted_share=0.0).rebuild == [0, 1]
    _update(path)
    assert listed(path)["rows_deleted"] == 450, "deleted rows stay in fragments 0 and 1"
    new = load_index(path, "id")
    assert np.array_equal(
        new.filter_data[new.fragment_id != 1], old.filter_data[old.fragment_id != 1]
    )
    assert (new.fragment_id == 1).sum() == 6, "600 live rows in zones of 100"
    _assert_covers_everything(path)
    values = [int(second[500]), int(first[60]), int(ids()[2 * PER_FRAGMENT + 3])]
    table = check(path, values)
    assert read_whole(table, values) == set()
    # Fragment 1 was re-indexed after its deletions: nothing more to do even at a share of 0.
    assert plan_update(path, "id", deleted_share=0.0).rebuild == [0]
    _update(path, deleted_share=0.0)
    _assert_equals_a_rebuild(path, tmp_path)


def test_deleting_a_fragments_last_rows_shortens_its_last_zone(tmp_path: Path) -> None:
    """Zones that start where a rebuild's would but span deleted rows are re-indexed."""
    path = lance_table(tmp_path)
    last = ids()[PER_FRAGMENT - 50 : PER_FRAGMENT]  # fragment 0's last 50 rows
    lance.dataset(str(path)).delete(f"id IN ({', '.join(map(str, last.tolist()))})")
    assert plan_update(path, "id", deleted_share=0.0).rebuild == [0]
    _update(path, deleted_share=0.0)
    new = load_index(path, "id")
    assert new.zone_length[new.fragment_id == 0].tolist() == [100] * 9 + [50]
    _assert_equals_a_rebuild(path, tmp_path)


def test_lance_compaction_is_indexed_and_lance_uses_the_index_again(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.dataset(str(path)).delete("id < 300")
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=5000)
    compacted = lance.dataset(str(path))
    values = [v for v in old_values() if v >= 300]
    assert values, "rows still there"
    sql_filter = f"id = {values[0]}"
    assert "ScalarIndexQuery" not in compacted.scanner(filter=sql_filter).explain_plan()
    plan, calls = _update(path)
    assert (plan.keep, plan.add, plan.drop) == ({}, [3], [0, 1, 2])
    assert calls[-1] == (ROWS - 300, ROWS - 300)
    dataset = lance.dataset(str(path))
    assert "ScalarIndexQuery" in dataset.scanner(filter=sql_filter).explain_plan()
    for value in values:
        own = dataset.to_table(filter=f"id = {value}")
        plain = dataset.to_table(filter=f"id = {value}", use_scalar_index=False)
        assert own.equals(plain) and own.num_rows == 1
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, values)
    assert read_whole(table, values) == set()


def test_lance_compaction_of_small_fragments_adds_a_segment(tmp_path: Path) -> None:
    """Small appends compacted into one fragment: the update indexes that one as a segment of
    its own and narrows the old segments to the fragments still there (Lance lists the gone
    ones); queries, Lance's scanner and a rebuild agree."""
    path = lance_table(tmp_path)
    for number in range(4):  # four small fragments, each indexed as a segment
        extra = np.arange(ROWS + 100 * number, ROWS + 100 * (number + 1))
        lance.write_dataset(data(extra, "small"), str(path), mode="append")
        _, plan = update_index(path, "id")
        assert plan.segment and plan.add == [3 + number]
    assert [sorted(s.fragment_ids) for s in list_bloom_indexes(path)] == [[0, 1, 2], [3, 4, 5, 6]]
    lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=PER_FRAGMENT)
    assert {f.fragment_id for f in lance.dataset(str(path)).get_fragments()} == {0, 1, 2, 7}
    plan, calls = _update(path)
    assert (plan.others, plan.add, plan.drop) == ([0, 1, 2], [7], [3, 4, 5, 6])
    assert plan.segment and calls[-1] == (400, 400), "only the compacted rows were read"
    segments = list_bloom_indexes(path)
    assert [sorted(s.fragment_ids) for s in segments] == [[0, 1, 2], [7]], "narrowed"
    dataset = lance.dataset(str(path))
    assert dataset.stats.index_stats("id_idx")["num_unindexed_rows"] == 0
    for value in (ROWS + 5, ROWS + 399, *old_values()):
        own = dataset.to_table(filter=f"id = {value}")
        assert own.equals(dataset.to_table(filter=f"id = {value}", use_scalar_index=False))
        assert own.num_rows == 1
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, [ROWS + 5, ROWS + 399, *old_values()])
    assert read_whole(table, [ROWS + 5, ROWS + 399]) == set()


def test_lance_appends_gather_in_one_small_segment(tmp_path: Path) -> None:
    """Each update after an append rewrites the newest segment while it is small, so Lance
    (which compacts only fragments the same segments cover) can compact the appends."""
    path = lance_table(tmp_path)
    for number in range(3):
        extra = np.arange(ROWS + 100 * number, ROWS + 100 * (number + 1))
        lance.write_dataset(data(extra, "small"), str(path), mode="append")
        newest = list_bloom_indexes(path)[-1].uuid
        _, plan = update_index(path, "id")
        assert plan.segment and plan.add == [3 + number] and plan.others == [0, 1, 2]
        assert plan.replaces == ([] if number == 0 else [newest])
    segments = list_bloom_indexes(path)
    assert [sorted(s.fragment_ids) for s in segments] == [[0, 1, 2], [3, 4, 5]]
    assert plan.keep == {3: 3, 4: 4} and plan.hierarchy == "", "its companion carried over"
    _assert_equals_a_rebuild(path, tmp_path)


def test_kept_zones_keep_their_null_rows_and_lance_answers_is_null(tmp_path: Path) -> None:
    """A segment an update rewrites keeps the null rows of the fragments whose zones it
    carries over (the index file's null bitmap, with which Lance answers IS NULL exactly):
    Lance's scanner over the updated index finds every NULL row, as without the index."""
    path = tmp_path / "t.lance"

    def with_nulls(values: np.ndarray, tag: str) -> pa.Table:
        return pa.table(
            {"id": pa.array(values, mask=values % 7 == 3), "tag": pa.array([tag] * len(values))}
        )

    lance.write_dataset(with_nulls(ids(), "old"), str(path), max_rows_per_file=PER_FRAGMENT)
    build_index(path, "id", items=ITEMS)
    for number in range(2):
        extra = np.arange(ROWS + 100 * number, ROWS + 100 * (number + 1))
        lance.write_dataset(with_nulls(extra, "small"), str(path), mode="append")
        _, plan = update_index(path, "id")
    assert plan.keep == {3: 3}, "the first append's zones were carried over"
    _assert_equals_a_rebuild(path, tmp_path)
    dataset = lance.dataset(str(path))
    assert "ScalarIndexQuery" in dataset.scanner(filter="id IS NULL").explain_plan()
    indexed = dataset.to_table(filter="id IS NULL", columns=["tag"])
    plain = dataset.to_table(filter="id IS NULL", columns=["tag"], use_scalar_index=False)
    nulls = int((np.arange(ROWS + 200) % 7 == 3).sum())
    assert indexed.num_rows == plain.num_rows == nulls
    sql = "SELECT count(*) AS n FROM t WHERE id IS NULL"
    expected = engine_alone("duckdb", sql, {"t": path})
    assert pruner.query(sql, {"t": path}).equals(expected)


def test_lance_segments_are_rewritten_as_one_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pruner.index.update, "TAIL_SHARE", 0.0)  # every append a segment
    monkeypatch.setattr(pruner.index.update, "MAX_SEGMENTS", 4)
    path = lance_table(tmp_path)
    for number in range(4):
        extra = np.arange(ROWS + 50 * number, ROWS + 50 * (number + 1))
        lance.write_dataset(data(extra, "small"), str(path), mode="append")
        _, plan = update_index(path, "id")
        assert plan.segment == (number < 3), number
        assert len(list_bloom_indexes(path)) == (number + 2 if plan.segment else 1)
    assert plan.hierarchy == "", "the companions of the segments are carried over"
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, [ROWS + 3, ROWS + 199, *old_values()])
    assert read_whole(table, [ROWS + 3]) == {3}, "a fragment of one zone"


def test_a_segment_for_fragments_another_update_covered_is_not_committed(
    tmp_path: Path,
) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    _, plan = update_index(path, "id")
    before = list_bloom_indexes(path)
    dataset = lance.dataset(str(path))
    version = dataset.version
    assert not commit_segment(dataset, "id", "0" * 32, 1, plan.add)
    assert not commit_segment(dataset, "id", "0" * 32, 1, [99], replaces=["gone"])
    assert lance.dataset(str(path)).version == version and list_bloom_indexes(path) == before


def test_lance_update_and_merge_insert_are_indexed(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    values = old_values()
    lance.dataset(str(path)).update(
        {"id": "id + 100000", "tag": "'updated'"}, where=f"id = {values[0]}"
    )
    source = data(np.array([values[1], 99_999]), "merged")
    lance.dataset(str(path)).merge_insert(
        "id"
    ).when_matched_update_all().when_not_matched_insert_all().execute(source)
    plan, _ = _update(path, deleted_share=0.0)  # a rebuild skips the deleted rows
    assert plan.add and not plan.drop
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    wanted = [values[0] + 100_000, values[1], values[2], 99_999]
    table = check(path, wanted)
    one_zone = {f for f, rows in table.fragment_rows.items() if rows <= ITEMS}
    assert len(one_zone) == 2, "the update's and the merge's new rows"
    assert read_whole(table, wanted) == one_zone, "only fragments of one zone are whole"


def test_lance_current_index_and_added_column_need_nothing(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    before = _index_file(path)
    lance.dataset(str(path)).add_columns({"twice": "id * 2"})
    plan, calls = _update(path)
    assert plan.current and calls == []
    assert _index_file(path) == before, "nothing committed"


def test_lance_overwrite_leaves_nothing_to_update(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(ids(800, seed=9), "over"), str(path), mode="overwrite")
    with pytest.raises(IndexNotFoundError, match="build one with `pruner index build"):
        update_index(path, "id")


# -------------------------------------------------------------------------- Parquet


@pytest.mark.parametrize("scenario", list(PARQUET_SCENARIOS))
def test_parquet_changes_are_covered_by_an_update(scenario: str, tmp_path: Path) -> None:
    path = parquet_table(tmp_path)
    old = load_index(path, "id")
    values, whole = PARQUET_SCENARIOS[scenario](path)
    plan, calls = _update(path)
    files = {f.fragment_id: f.path for f in plan.files or []}
    assert {files[f] for f in plan.add} == (set() if scenario == "renamed" else whole)
    indexed_rows = sum(f.rows for f in plan.files or [] if f.fragment_id in plan.add)
    assert (calls[-1] if calls else (0, 0)) == (indexed_rows, indexed_rows)
    if scenario == "renamed":
        assert plan.keep[max(files)] == 1, "the renamed file keeps its zones under a new id"
    new = load_index(path, "id")
    for fragment, previous in plan.keep.items():
        assert np.array_equal(
            new.filter_data[new.fragment_id == fragment],
            old.filter_data[old.fragment_id == previous],
        )
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, values)
    assert read_whole(table, values) == set()


def test_parquet_index_from_the_files_filters_is_made_again_from_them(tmp_path: Path) -> None:
    path = tmp_path / "native"
    path.mkdir()
    write_parquet_with_filters(data(ids()), path / "a.parquet", columns=["id"], items=500)
    build_index(path, "id", from_parquet_filters=True)
    write_parquet_with_filters(
        data(np.arange(ROWS, ROWS + 200)), path / "b.parquet", columns=["id"], items=500
    )
    plan, _ = _update(path)
    assert plan.whole == "it was made from the Parquet files' own filters"
    _assert_covers_everything(path)
    assert load_index(path, "id").value_encoding == "parquet"
    check(path, [int(ids()[4]), ROWS + 3])


# ---------------------------------------------------------------------- the interface


def test_update_errors_say_what_to_do(tmp_path: Path) -> None:
    directory = tmp_path / "plain"
    directory.mkdir()
    pq.write_table(data(ids(10)), directory / "a.parquet")
    with pytest.raises(IndexNotFoundError, match=r"to update; build one with `pruner index build"):
        update_index(directory, "id")
    path = parquet_table(tmp_path)
    with pytest.raises(InvalidParameterError, match="deleted_share must be between 0 and 1"):
        update_index(path, "id", deleted_share=1.5)
    with pytest.raises(InvalidParameterError, match="unknown index build engine 'dask'"):
        update_index(path, "id", engine="dask")
    with pytest.raises(InvalidParameterError, match=r"column 'nope' is not in .* its columns are"):
        update_index(path, "nope")


def test_cli_update_and_list_say_what_an_update_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = parquet_table(tmp_path)
    PARQUET_SCENARIOS["added"](path)
    PARQUET_SCENARIOS["removed"](path)
    capsys.readouterr()
    assert main(["index", "list", str(path)]) == 0
    out = capsys.readouterr().out
    assert "an update would add 1, drop 1 fragments; keep 2 as they are" in out
    assert f"pruner index update {path} --column id" in out
    assert main(["index", "list", str(path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["update"] == {
        "fragments_to_add": 1,
        "fragments_to_rebuild": 0,
        "fragments_to_drop": 1,
        "fragments_kept": 2,
        "fragments_renamed": 0,
        "rebuild_all": "",
        "adds_segment": False,
        "words": "add 1, drop 1 fragments; keep 2 as they are",
    }
    assert main(["index", "update", str(path), "--column", "id"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("id: added 1, dropped 1 fragments; kept 2 as they were; 22 zones")
    assert main(["index", "update", str(path), "--column", "id"]) == 0
    assert capsys.readouterr().out.startswith("id: already current; 22 zones")
    assert main(["index", "update", str(path), "--column", "id", "--deleted-share", "2"]) == 2
    assert "deleted_share must be between 0 and 1" in capsys.readouterr().err


def _append_both(path: Path) -> None:
    if (path / "_versions").is_dir():
        lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    else:
        PARQUET_SCENARIOS["added"](path)
        PARQUET_SCENARIOS["replaced"](path)


@pytest.mark.slow
@pytest.mark.parametrize("make", [lance_table, parquet_table], ids=["lance", "parquet"])
def test_spark_update_gives_the_local_update(
    make: Callable[[Path], Path], tmp_path: Path, spark: Any
) -> None:
    path = make(tmp_path / "spark")
    _append_both(path)
    copy = tmp_path / "local"
    shutil.copytree(path, copy, copy_function=shutil.copy2)
    _, plan = update_index(path, "id", engine="spark", spark=spark)
    _, local_plan = update_index(copy, "id")
    assert plan.add and plan.kept
    # each Spark task makes its fragment's share of the companion, as the local update does
    assert plan.hierarchy == local_plan.hierarchy == ""
    if plan.kind == "parquet":
        ours, theirs = _coarse(path), _coarse(copy)
        assert ours.counts == theirs.counts
        assert np.array_equal(ours.dataset_filter, theirs.dataset_filter)
    if plan.kind == "lance":
        assert plan.segment
        updated, local = _segments_contents(path), _segments_contents(copy)
        assert updated[0].equals(local[0]) and updated[1:] == local[1:]
    else:
        updated, local = _contents(_index_file(path)), _contents(_index_file(copy))
        assert updated[0].equals(local[0]) and updated[1] == local[1] and updated[2] == local[2]
    assert open_table(path).index("id") is not None


# ------------------------------------------------------------------ the hierarchy companion


def _coarse(path: Path) -> Coarse:
    return Hierarchy(_index_file(path)).coarse()


def test_an_append_within_the_coarse_sizes_gives_a_full_builds_companion(tmp_path: Path) -> None:
    path = parquet_table(tmp_path)
    PARQUET_SCENARIOS["added"](path)  # 200 rows more: the coarse filters keep their sizes
    before = _coarse(path)
    _, plan = update_index(path, "id")
    assert plan.keep and plan.hierarchy == ""
    copy = tmp_path / "rebuilt"
    shutil.copytree(path, copy, copy_function=shutil.copy2)
    build_index(copy, "id", items=ITEMS)
    updated, rebuilt = _coarse(path), _coarse(copy)
    assert len(updated.dataset_filter) == len(before.dataset_filter)
    assert updated.counts == rebuilt.counts
    assert np.array_equal(updated.dataset_filter, rebuilt.dataset_filter)
    assert updated.fragment_filters.keys() == rebuilt.fragment_filters.keys()
    for fragment, bits in updated.fragment_filters.items():
        assert np.array_equal(bits, rebuilt.fragment_filters[fragment]), fragment


@pytest.mark.parametrize("make", [lance_table, parquet_table], ids=["lance", "parquet"])
def test_an_update_that_resizes_the_coarse_filters_keeps_every_value(
    make: Callable[[Path], Path], tmp_path: Path
) -> None:
    path = make(tmp_path)
    before = _coarse(path)
    extra = np.arange(ROWS, ROWS + 2 * PER_FRAGMENT)  # the dataset filter doubles
    if (path / "_versions").is_dir():
        lance.write_dataset(data(extra, "new"), str(path), mode="append")
        gone = ids()[: PER_FRAGMENT // 10]  # from fragment 0, which is re-indexed
        lance.dataset(str(path)).delete(f"id IN ({', '.join(map(str, gone.tolist()))})")
    else:
        pq.write_table(data(extra, "new"), path / "part-9.parquet", row_group_size=500)
        (path / "part-2.parquet").unlink()
    _, plan = update_index(path, "id", deleted_share=0.0)
    assert plan.keep and plan.hierarchy == ""
    assert len(_coarse(path).dataset_filter) > len(before.dataset_filter)
    index = open_table(path).index("id")
    assert index is not None and index.index.hierarchy is not None, "the companion is used"
    plain = read_index_file(_index_file(path), "id")
    values, fragment, offset = _live_ids(path)
    hashes, _ = hash_array(values)
    for i in range(0, len(values), 7):
        one = hashes[i : i + 1]
        probe = index.index.hierarchy.probe(one)
        zone_filters = plain.zone_mask(one)
        home = (
            (plain.fragment_id == fragment[i])
            & (plain.zone_start <= offset[i])
            & (offset[i] < plain.zone_start + plain.zone_length)
        )
        assert home.sum() == 1 and probe.mask[home].all(), "the value's own zone is selected"
        assert not (probe.mask & ~zone_filters).any(), "and nothing its zone filters rule out"


def _live_ids(path: Path) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Every live id, with the fragment id and offset of its row."""
    if (path / "_versions").is_dir():
        table = lance.dataset(str(path)).to_table(columns=["id"], with_row_address=True)
        address = table.column("_rowaddr").to_numpy()
        return table.column("id").combine_chunks(), address >> 32, address & 0xFFFFFFFF
    parts, fragments, offsets = [], [], []
    for entry in load_index(path, "id").files or []:
        column = pq.read_table(path / entry.path, columns=["id"]).column("id")
        parts.append(column.combine_chunks())
        fragments.append(np.full(len(column), entry.fragment_id, np.uint64))
        offsets.append(np.arange(len(column), dtype=np.uint64))
    return pa.concat_arrays(parts), np.concatenate(fragments), np.concatenate(offsets)


def test_lance_operations_after_an_update(tmp_path: Path) -> None:
    """Lance's cleanup, its own index optimisation (a delta segment) and another update."""
    path = lance_table(tmp_path)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    _, plan = update_index(path, "id")
    assert plan.segment and plan.hierarchy == ""
    dataset = lance.dataset(str(path))
    dataset.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True)
    segments = {s.path.parent.name for s in list_bloom_indexes(path)}
    assert {p.name for p in (path / "_indices").iterdir()} == segments and len(segments) == 2
    index = open_table(path).index("id")
    assert index is not None and index.index.hierarchy is not None
    lance.write_dataset(data(np.arange(ROWS + 500, ROWS + 900), "more"), str(path), mode="append")
    lance.dataset(str(path)).optimize.optimize_indices()
    _assert_covers_everything(path)  # Lance indexed the new fragment itself
    _, plan = update_index(path, "id")
    assert plan.current, "nothing to index"
    lance.write_dataset(data(np.arange(ROWS + 900, ROWS + 950), "last"), str(path), mode="append")
    _, plan = update_index(path, "id")
    assert plan.add == [5] and len(plan.kept) == 5
    # Lance's optimize_indices added a delta segment of its own, without a companion: it is
    # probed through its filters, the others through their companions.
    assert plan.segment and plan.hierarchy == ""
    assert len([s for s in list_bloom_indexes(path) if s.column == "id"]) == 3, "segments"
    bound = open_table(path).index("id")
    assert bound is not None
    _, decided = bound.index.zone_mask_explained(hash_array(pa.array([ROWS + 920]))[0])
    assert decided == (
        "segment 1 of 3: dataset filter: absent; segment 2 of 3: zone filters (no hierarchy "
        "companion (pruner index build writes one)); segment 3 of 3: fragment filters: 1 of 1 "
        "fragments; zone filters: 1 zones"
    )
    _, plan = update_index(path, "id", deleted_share=0.0)  # nothing to do: stays as it is
    assert plan.current
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    values = [*old_values(), ROWS + 7, ROWS + 600, ROWS + 920]
    table = check(path, values)
    assert read_whole(table, values) <= {5}, "only the last 50-row fragment, one zone"


def test_an_older_version_keeps_its_own_index_after_an_update(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    before = lance.dataset(str(path)).version
    update_index(path, "id")
    old = open_table(path, version=before)
    assert read_whole(old, [ROWS + 7]) == {3}, "that version's index does not cover fragment 3"
    assert read_whole(open_table(path), [ROWS + 7]) == set()
    for table in (old, open_table(path)):
        got = pruner.query(f"SELECT id FROM t WHERE id = {ROWS + 7}", {"t": table})
        assert got.column("id").to_pylist() == [ROWS + 7]


def test_an_index_of_no_zones_is_updated(tmp_path: Path) -> None:
    """Found by make fuzz: an index built over an empty file has no zones to keep."""
    path = tmp_path / "t"
    path.mkdir()
    empty = data(np.arange(0, dtype=np.int64)).cast(data(ids(1)).schema)
    pq.write_table(empty, path / "part-0.parquet")
    build_index(path, "id", items=ITEMS)
    pq.write_table(data(np.arange(ROWS, ROWS + 200), "new"), path / "part-1.parquet")
    plan, _ = _update(path)
    assert (plan.keep, plan.add) == ({0: 0}, [1]), "an empty file has no zones to keep"
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, [ROWS + 3])
    assert read_whole(table, [ROWS + 3]) == set()


def test_lance_segments_narrowed_when_their_fragments_go(tmp_path: Path) -> None:
    """A fragment whose rows are all deleted leaves the dataset: the next segment-adding
    update narrows the segment that covered it (its file unchanged), and Lance's scanner and
    pruner answer from three segments, one of them narrowed."""
    path = lance_table(tmp_path)
    second = ids()[PER_FRAGMENT : 2 * PER_FRAGMENT]
    lance.dataset(str(path)).delete(f"id IN ({', '.join(map(str, second.tolist()))})")
    assert {f.fragment_id for f in lance.dataset(str(path)).get_fragments()} == {0, 2}
    for number in range(2):  # each as big as a quarter of the rest: a segment of its own
        extra = np.arange(ROWS + 1000 * number, ROWS + 1000 * (number + 1))
        lance.write_dataset(data(extra, "big"), str(path), mode="append")
        _, plan = update_index(path, "id")
        assert plan.segment and plan.replaces == [], number
    segments = list_bloom_indexes(path)
    assert [sorted(s.fragment_ids) for s in segments] == [[0, 2], [3], [4]]
    first = read_index_file(segments[0].path)
    assert 1 in first.fragment_id.tolist(), "the file still holds the gone fragment's zones"
    dataset = lance.dataset(str(path))
    values = [int(ids()[5]), int(ids()[2 * PER_FRAGMENT + 5]), ROWS + 5, ROWS + 1500]
    for value in [*values, int(second[0])]:
        own = dataset.to_table(filter=f"id = {value}")
        assert own.equals(dataset.to_table(filter=f"id = {value}", use_scalar_index=False))
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    table = check(path, values)
    assert read_whole(table, values) == set()
    bound = table.index("id")
    assert bound is not None and type(bound.index.hierarchy).__name__ == "Segments"
    whole = load_index(path, "id")  # every segment read whole, the gone zones left out
    assert bound.index.num_zones == whole.num_zones
    for zone in range(0, whole.num_zones, 3):  # loads every segment's filters in their place
        assert bound.index.filter_bytes(zone) == whole.filter_bytes(zone), zone
    found = pruner.lookup(table, "id", [*values, int(second[0])])
    for position, value in enumerate([*values, int(second[0])]):
        sql = f"SELECT * FROM t WHERE id = {value}"
        selection = pruner.explain(sql, {"t": table}).scans[0].selection
        assert found.ranges(position) == selection.ranges(), value


def test_an_unreadable_segment_stops_an_update_with_a_clear_error(tmp_path: Path) -> None:
    path = lance_table(tmp_path)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    update_index(path, "id")
    damaged = list_bloom_indexes(path)[1].path
    damaged.write_bytes(damaged.read_bytes()[:100])  # truncated
    lance.write_dataset(data(np.arange(ROWS + 500, ROWS + 600), "more"), str(path), mode="append")
    before = [s.uuid for s in list_bloom_indexes(path)]
    with pytest.raises(IndexFormatError, match="rebuild"):
        update_index(path, "id")
    assert [s.uuid for s in list_bloom_indexes(path)] == before, "nothing committed"
    build_index(path, "id", items=ITEMS)
    _assert_covers_everything(path)
    check(path, [ROWS + 5, ROWS + 550, *old_values()])


def test_lance_damaged_zones_and_deletions_are_reindexed_with_an_append(tmp_path: Path) -> None:
    """Zones failing their checksums (fragment 0), deletions past the share (fragment 1) and
    an append in one update: the first two re-indexed, the append added, one segment."""
    from tests.index.test_damaged import _rewrite

    path = lance_table(tmp_path)

    def flip(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        zones["bloom_filter_data"][0, :4] ^= 0xFF  # zone 0 is fragment 0's first
        return zones

    _rewrite(_index_file(path), flip, "keep")
    second = ids()[PER_FRAGMENT : 2 * PER_FRAGMENT]
    lance.dataset(str(path)).delete(f"id IN ({', '.join(map(str, second[:400].tolist()))})")
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    plan = plan_update(path, "id")
    assert (plan.rebuild, plan.add, sorted(plan.keep), plan.segment) == ([0, 1], [3], [2], False)
    update_index(path, "id")
    assert len(list_bloom_indexes(path)) == 1
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    check(path, [int(ids()[3]), int(second[500]), ROWS + 5])


def test_parquet_damaged_zones_are_reindexed_by_an_update(tmp_path: Path) -> None:
    """A Parquet index whose zone of file 0 fails its checksum (its filter zeroed: trusted,
    it would rule every value out), and a new file: the update re-indexes file 0 instead of
    carrying its zones over (carried, they would be written with fresh checksums and the
    damage trusted from then on), adds the new file, and every row is found. Mutation
    testing found the Parquet plan's damage branch without a test."""
    from tests.index.test_damaged import _rewrite

    path = parquet_table(tmp_path)

    def zero(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        zones["bloom_filter_data"][0, :] = 0  # zone 0 is file 0's first
        return zones

    _rewrite(_index_file(path), zero, "keep")
    write_parquet(data(np.arange(ROWS, ROWS + 500), "new"), path / "part-9.parquet")
    plan = plan_update(path, "id")
    new_file = max(f.fragment_id for f in plan.files or [])
    assert (plan.rebuild, plan.add) == ([0], [new_file])
    assert sorted(plan.keep) == [f for f in range(new_file) if f != 0]
    update_index(path, "id")
    _assert_covers_everything(path)
    _assert_equals_a_rebuild(path, tmp_path)
    first_zone = [int(v) for v in ids()[:3]]
    check(path, [*first_zone, ROWS + 5])
