"""The zone index against Lance itself: its vectors, its own build, its own scanner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader
from lance.indices import IndexConfig

from pruner.errors import InvalidParameterError, UnsupportedTypeError
from pruner.index import (
    build_index,
    build_lance_index,
    commit_lance_index,
    list_bloom_indexes,
    load_index,
    read_index_file,
    write_index_file,
)
from pruner.index import reading as index_reading
from tests.support.index_check import assert_same_index
from tests.support.lance_data import INDEXABLE_TYPES, write_random_dataset


def raw_metadata_and_null_buffer(path: Path) -> tuple[dict[bytes, bytes], bytes]:
    """Lance's schema metadata (without the key pruner adds for its zone checksums' buffer,
    which comes after Lance's own) and the null bitmap buffer."""
    reader = LanceFileReader(str(path))
    metadata = dict(reader.read_all().to_table().schema.metadata)
    checksums = metadata.pop(b"pruner_zone_checksums", None)
    assert checksums in (None, b"2"), "pruner's buffer follows Lance's schema and null bitmap"
    return metadata, bytes(reader.read_global_buffer(int(metadata[b"null_bitmap"])))


def test_every_lance_vector_is_reproduced_byte_for_byte(
    vectors: Path, tiny_manifest: dict[str, Any]
) -> None:
    params = tiny_manifest["params"]
    assert len(tiny_manifest["columns"]) == 24
    for column, expected in tiny_manifest["columns"].items():
        mine = build_lance_index(
            vectors / "tiny.lance",
            column,
            items=params["number_of_items"],
            probability=params["probability"],
        )
        theirs = read_index_file(vectors / expected["index_file"], column)
        assert_same_index(mine, theirs, column)
        assert [mine.filter_bytes(z).hex() for z in range(mine.num_zones)] == [
            z["bloom_filter_hex"] for z in expected["zones"]
        ], column
        assert {str(k): v.tolist() for k, v in mine.null_rows.items()} == expected[
            "null_bitmap_decoded"
        ]
        assert mine.filter_data.shape[1] == params["expected_filter_bytes"]


def test_written_file_has_lances_schema_metadata_and_buffers(
    tmp_path: Path, vectors: Path, tiny_manifest: dict[str, Any]
) -> None:
    for column in ("i64", "utf8", "ts_us_utc"):
        expected = tiny_manifest["columns"][column]
        mine = build_lance_index(vectors / "tiny.lance", column, items=32, probability=0.01)
        write_index_file(mine, tmp_path / f"{column}.lance")
        my_meta, my_nulls = raw_metadata_and_null_buffer(tmp_path / f"{column}.lance")
        their_meta, their_nulls = raw_metadata_and_null_buffer(vectors / expected["index_file"])
        assert {k: v for k, v in my_meta.items() if k != b"null_bitmap"} == {
            k: v for k, v in their_meta.items() if k != b"null_bitmap"
        }
        assert my_nulls == their_nulls, "the null bitmap buffer is byte-identical"
        table = LanceFileReader(str(tmp_path / f"{column}.lance")).read_all().to_table()
        theirs = LanceFileReader(str(vectors / expected["index_file"])).read_all().to_table()
        assert table.schema.remove_metadata() == theirs.schema.remove_metadata()
        assert table.equals(theirs.replace_schema_metadata(table.schema.metadata))


SHAPES = {
    # rows, rows per fragment, null fraction, deleted fraction, items
    "deletions_and_nulls": (600, 150, 0.1, 0.15, 16),
    "mostly_null": (300, 100, 0.9, 0.3, 7),
    "no_nulls": (250, 60, 0.0, 0.0, 64),
    "dense_null_bitmaps": (12_000, 6000, 0.7, 0.02, 1000),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_equals_lances_own_build_for_every_type(tmp_path: Path, shape: str) -> None:
    rows, per_fragment, null_fraction, delete_fraction, items = SHAPES[shape]
    path = tmp_path / "data.lance"
    write_random_dataset(path, rows, per_fragment, len(shape), null_fraction, delete_fraction)
    ds = lance.dataset(str(path))
    config = IndexConfig(
        index_type="bloomfilter", parameters={"number_of_items": items, "probability": 0.01}
    )
    for column in INDEXABLE_TYPES:
        ds.create_scalar_index(column, index_type=config)
    ds = lance.dataset(str(path))
    assert len(ds.get_fragments()) >= 2
    lance_built = {info.column: info.path for info in list_bloom_indexes(ds)}
    for column in INDEXABLE_TYPES:
        mine = build_lance_index(ds, column, items=items, probability=0.01)
        assert_same_index(mine, read_index_file(lance_built[column], column), column)
        write_index_file(mine, tmp_path / "mine.lance")
        assert raw_metadata_and_null_buffer(tmp_path / "mine.lance") == (
            raw_metadata_and_null_buffer(lance_built[column])
        ) or _same_ignoring_order(tmp_path / "mine.lance", lance_built[column]), column


def _same_ignoring_order(a: Path, b: Path) -> bool:
    meta_a, nulls_a = raw_metadata_and_null_buffer(a)
    meta_b, nulls_b = raw_metadata_and_null_buffer(b)
    drop = b"null_bitmap"
    return nulls_a == nulls_b and {k: v for k, v in meta_a.items() if k != drop} == {
        k: v for k, v in meta_b.items() if k != drop
    }


def test_zones_follow_lances_rule_with_deletions(tmp_path: Path) -> None:
    """FACTS.md: rows 0-9 and 500-599 deleted, zone size 300 -> (10,300) (310,400) (710,290)."""
    path = tmp_path / "d.lance"
    ds = lance.write_dataset(pa.table({"id": pa.array(np.arange(1000), pa.int64())}), str(path))
    ds.delete("id < 10 OR (id >= 500 AND id < 600)")
    index = build_lance_index(path, "id", items=300, probability=0.01)
    zones = list(zip(index.zone_start.tolist(), index.zone_length.tolist(), strict=True))
    assert zones == [(10, 300), (310, 400), (710, 290)]


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("commit") / "events.lance"
    rng = np.random.default_rng(5)
    rows = 20_000
    ids = rng.permutation(rows).astype(np.int64)
    names = np.array([f"user-{i}" for i in rng.permutation(rows)], dtype=object)
    names[rng.random(rows) < 0.01] = None
    table = pa.table({"id": ids, "name": pa.array(names, pa.string())})
    lance.write_dataset(table, str(path), max_rows_per_file=4000)
    ds = lance.dataset(str(path))
    ds.delete("id % 97 = 0")
    for column in ("id", "name"):
        build_index(path, column, items=512, probability=0.001)
    return path


def test_lances_scanner_uses_the_committed_index(committed: Path) -> None:
    ds = lance.dataset(str(committed))
    for column in ("id", "name"):
        assert any(info.column == column for info in list_bloom_indexes(ds))
    plan = ds.scanner(filter="id = 1234").explain_plan()
    assert "BloomFilter" in plan, plan
    plan = ds.scanner(filter="name = 'user-7'").explain_plan()
    assert "BloomFilter" in plan, plan


@pytest.mark.parametrize(
    "predicate",
    [
        "id = 1234",
        "id = 97",  # deleted
        "id = 99999999",  # never present
        "id IN (1, 2, 3, 500, 19999)",
        "name = 'user-42'",
        "name IN ('user-1', 'user-2', 'nobody')",
        "name IS NULL",
        "id IS NULL",
    ],
)
def test_lance_answers_with_pruners_index_equal_unindexed(committed: Path, predicate: str) -> None:
    ds = lance.dataset(str(committed))
    indexed = ds.to_table(filter=predicate).sort_by("id")
    unindexed = ds.scanner(filter=predicate, use_scalar_index=False).to_table().sort_by("id")
    assert indexed.equals(unindexed), predicate


def test_rebuild_replaces_the_index_in_one_commit(committed: Path) -> None:
    before = {i.column: i.uuid for i in list_bloom_indexes(committed)}
    index = build_lance_index(committed, "id", items=512, probability=0.001)
    new_uuid = commit_lance_index(committed, index)
    after = [i for i in list_bloom_indexes(committed) if i.column == "id"]
    assert [i.uuid for i in after] == [new_uuid] and new_uuid != before["id"]
    assert load_index(committed, "id").zone_start.tolist() == index.zone_start.tolist()


def test_loads_an_index_lance_built(tmp_path: Path) -> None:
    path = tmp_path / "l.lance"
    ds = lance.write_dataset(pa.table({"k": pa.array(["a", "b", None] * 100)}), str(path))
    ds.create_scalar_index("k", index_type="BLOOMFILTER")
    loaded = load_index(path, "k")
    assert loaded.items == 8192 and loaded.probability == 0.00057
    assert loaded.has_null.tolist() == [True]
    assert loaded.filter_data.shape == (1, 32768)


def test_bad_column_and_type_are_clear_errors(committed: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="column 'nope' is not in"):
        build_lance_index(committed, "nope")
    path = tmp_path / "b.lance"
    lance.write_dataset(pa.table({"flag": [True, False]}), str(path))
    with pytest.raises(UnsupportedTypeError, match="Arrow type bool"):
        build_lance_index(path, "flag")
    with pytest.raises(InvalidParameterError, match="false-positive probability"):
        build_lance_index(committed, "id", probability=1.0)


def test_segments_added_by_lance_after_an_append_are_all_loaded(tmp_path: Path) -> None:
    path = tmp_path / "grow.lance"
    lance.write_dataset(pa.table({"id": pa.array(np.arange(1000), pa.int64())}), str(path))
    build_index(path, "id", items=256, probability=0.01)
    lance.write_dataset(
        pa.table({"id": pa.array(np.arange(1000, 1600), pa.int64())}), str(path), mode="append"
    )
    lance.dataset(str(path)).optimize.optimize_indices()
    segments = list_bloom_indexes(path)
    loaded = load_index(path, "id")
    covered = set(loaded.fragment_id.tolist())
    assert covered == {0, 1}, f"both fragments covered by {len(segments)} segment(s)"
    assert loaded.num_rows == 1600
    fresh = build_lance_index(path, "id", items=256, probability=0.01)
    order = np.lexsort((loaded.zone_start, loaded.fragment_id))
    assert loaded.zone_start[order].tolist() == fresh.zone_start.tolist()
    assert [loaded.filter_bytes(int(z)) for z in order] == [
        fresh.filter_bytes(z) for z in range(fresh.num_zones)
    ], "Lance's delta segment equals what pruner builds for the new fragment"


def _addresses(pieces: list[tuple[int, list[int]]]) -> np.ndarray:
    return np.array([(f << 32) | r for f, rows in pieces for r in rows], np.uint64)


def test_a_group_is_cut_only_where_its_row_addresses_say() -> None:
    """A group's scan is cut at its fragments' row counts only when its row addresses are
    rows 0 to n - 1 of each fragment in turn; any other order, gap or repeat is refused
    (each fragment is then read on its own)."""
    ids, rows = [7, 3, 9, 4], [3, 0, 2, 1]
    good = _addresses([(7, [0, 1, 2]), (9, [0, 1]), (4, [0])])
    assert index_reading._in_place(good, ids, rows)
    wrong = {
        "fragments swapped": [(9, [0, 1]), (7, [0, 1, 2]), (4, [0])],
        "rows out of order": [(7, [0, 2, 1]), (9, [0, 1]), (4, [0])],
        "a row missing, one more elsewhere": [(7, [0, 1]), (9, [0, 1, 2]), (4, [0])],
        "a row twice": [(7, [0, 1, 1]), (9, [0, 1]), (4, [0])],
        "not from row 0": [(7, [1, 2, 3]), (9, [0, 1]), (4, [0])],
        "another fragment": [(7, [0, 1, 2]), (8, [0, 1]), (4, [0])],
        "the empty one's id": [(7, [0, 1, 2]), (3, [0, 1]), (4, [0])],
    }
    for name, pieces in wrong.items():
        assert not index_reading._in_place(_addresses(pieces), ids, rows), name
    assert not index_reading._in_place(good[:-1], ids, rows), "a row short"
    assert index_reading._in_place(np.zeros(0, np.uint64), [1], [0]), "one empty fragment"


@pytest.mark.parametrize("group_rows", [1, 2_500, 1 << 20])
def test_fragments_read_in_groups_give_lances_own_index(
    tmp_path: Path, group_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neighbouring fragments without deleted rows are read in one scan and cut at their
    row counts; one with deleted rows between them is read on its own: every grouping gives
    the index Lance builds, zone for zone."""
    monkeypatch.setattr(index_reading, "GROUP_ROWS", group_rows)
    path = tmp_path / "g.lance"
    rng = np.random.default_rng(group_rows)
    values = rng.permutation(10_000).astype(np.int64)
    mask = rng.random(10_000) < 0.05
    table = pa.table({"id": pa.array(values, mask=mask), "pos": np.arange(10_000)})
    lance.write_dataset(table, str(path), max_rows_per_file=1_000)
    ds = lance.dataset(str(path))
    ds.delete("pos >= 4100 AND pos < 4300")
    config = IndexConfig(
        index_type="bloomfilter", parameters={"number_of_items": 300, "probability": 0.01}
    )
    ds.create_scalar_index("id", index_type=config)
    (info,) = list_bloom_indexes(lance.dataset(str(path)))
    mine = build_lance_index(path, "id", items=300, probability=0.01)
    assert_same_index(mine, read_index_file(info.path, "id"), "id")
