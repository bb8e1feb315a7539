"""Batch key lookup (``pruner.lookup``, ``pruner lookup``) and ``pruner.find``.

``lookup`` must give every key exactly the ranges a query's point lookup selects (pruner's
explain, one query per key), which hold every row of the key (the engine alone says which);
``find`` must return what the engine alone returns for the semi-join.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.cli import main
from pruner.errors import IndexNotFoundError, InvalidParameterError
from pruner.explain import explain
from pruner.index import build_index, update_index
from pruner.selection import Selection
from pruner.table import open_table
from tests.support.engine_check import engine_alone

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

ROWS = 6_000


def _data(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "tag": [f"t{i % 7}" for i in ids]})


@pytest.fixture(scope="module", params=["lance", "parquet"])
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ids 0..ROWS shuffled (and 17 twice), indexed; then rows appended and indexed as a
    segment of their own (Lance), and rows appended the index does not cover."""
    ids = np.random.default_rng(3).permutation(ROWS)
    ids = np.append(ids, 17)
    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "lance":
        path = directory / "t.lance"
        lance.write_dataset(_data(ids), str(path), max_rows_per_file=2_000)
        build_index(path, "id", items=256)
        lance.write_dataset(_data(np.arange(ROWS, ROWS + 500)), str(path), mode="append")
        update_index(path, "id")
        lance.write_dataset(_data(np.arange(ROWS + 500, ROWS + 600)), str(path), mode="append")
        return path
    path = directory / "t"
    path.mkdir()
    for number, start in enumerate(range(0, len(ids), 2_000)):
        pq.write_table(_data(ids[start : start + 2_000]), path / f"p{number}.parquet")
    build_index(path, "id", items=256)
    pq.write_table(_data(np.arange(ROWS, ROWS + 500)), path / "p8.parquet")
    update_index(path, "id")
    pq.write_table(_data(np.arange(ROWS + 500, ROWS + 600)), path / "p9.parquet")
    return path


def _explained(table: Any, key: Any) -> Selection:
    literal = "NULL" if key is None else repr(key)
    sql = f"SELECT * FROM t WHERE id = {literal}"
    selection = explain(sql, {"t": table}).scans[0].selection
    assert selection is not None
    return selection


def _rows(path: Path, keys: list[int]) -> np.ndarray:
    """Row addresses (fragment << 32 | offset) of rows holding ``keys``, read without pruner."""
    if path.suffix == ".lance":
        read = lance.dataset(str(path)).to_table(columns=["id"], with_row_address=True)
        keep = np.isin(read.column("id").to_numpy(), keys)
        return read.column("_rowaddr").to_numpy()[keep].astype(np.int64)
    opened = open_table(path)
    found = []
    for fid, file in (opened.files or {}).items():
        column = pq.read_table(file.path, columns=["id"]).column("id").to_numpy()
        found.extend((fid << 32) | int(i) for i in np.flatnonzero(np.isin(column, keys)))
    return np.array(found, np.int64)


def test_each_key_gets_what_its_point_lookup_selects(table: Path) -> None:
    opened = open_table(table)
    keys: list[Any] = [5, 17, ROWS + 3, ROWS + 550, -1, 10**12, None, 4.0, 2.5]
    found = pruner.lookup(opened, "id", keys)
    for position, key in enumerate(keys):
        got = Selection.from_ranges(found.ranges(position))
        assert got == _explained(opened, key), key
    assert found.found().tolist() == [True, True, True, True, True, True, False, True, False]
    present = [5, 17, ROWS + 3, ROWS + 550]
    rows = _rows(table, present)
    assert len(rows) == 5, "17 is there twice"
    assert found.selection().contains(rows >> 32, rows & 0xFFFFFFFF).all()


def test_many_keys_at_once_agree_with_one_at_a_time(table: Path) -> None:
    """350 keys, present and absent, looked up together: each key's ranges are those of
    its own point lookup."""
    rng = np.random.default_rng(8)
    keys = [*rng.integers(0, ROWS + 600, 150).tolist(), *rng.integers(10**6, 10**9, 200).tolist()]
    opened = open_table(table)
    found = pruner.lookup(opened, "id", keys)
    for position in range(0, len(keys), 7):
        got = Selection.from_ranges(found.ranges(position))
        assert got == _explained(opened, keys[position]), keys[position]
    present = sorted({k for k in keys if k < ROWS + 600})
    rows = _rows(table, present)
    assert found.selection().contains(rows >> 32, rows & 0xFFFFFFFF).all()
    bound = opened.index("id")
    assert bound is not None and bound.uncovered.num_rows == 100, "the appended rows"
    wider = [
        p for p in range(150, 350) if Selection.from_ranges(found.ranges(p)) != bound.uncovered
    ]
    assert len(wider) < 10, "absent keys are ruled out of (almost) every zone"


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_find_equals_the_engines_semi_join(table: Path, engine: str, tmp_path: Path) -> None:
    keys = [5, 17, ROWS + 3, ROWS + 550, -1, 10**12, 4, 77]
    got = pruner.find(table, "id", keys, engine=engine)
    folder = tmp_path / "keys"
    folder.mkdir()
    pq.write_table(pa.table({"k": pa.array(keys, pa.int64())}), folder / "k.parquet")
    sql = "SELECT * FROM t WHERE id IN (SELECT k FROM k)"
    alone = engine_alone(engine, sql, {"t": table, "k": folder})

    def rows(result: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(zip(*(c.to_pylist() for c in result.columns), strict=True))

    assert got.schema.names == alone.schema.names == ["id", "tag"]
    assert rows(got) == rows(alone) and got.num_rows == 7


@pytest.mark.slow
def test_find_on_spark(table: Path, tmp_path: Path, spark: Any) -> None:
    keys = [17, ROWS + 3, -1]
    got = pruner.find(table, "id", keys, engine="spark")
    folder = tmp_path / "keys"
    folder.mkdir()
    pq.write_table(pa.table({"k": pa.array(keys, pa.int64())}), folder / "k.parquet")
    sql = "SELECT * FROM t WHERE id IN (SELECT k FROM k)"
    alone = engine_alone("spark", sql, {"t": table, "k": folder}, spark=spark)
    assert sorted(got.column("id").to_pylist()) == sorted(alone.column("id").to_pylist())
    assert sorted(got.column("id").to_pylist()) == [17, 17, ROWS + 3]


def test_lookup_errors_say_what_to_do(table: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="column 'nope' is not in"):
        pruner.lookup(table, "nope", [1])
    with pytest.raises(IndexNotFoundError, match=r"pruner index build .* --column tag"):
        pruner.lookup(table, "tag", ["t1"])
    with pytest.raises(InvalidParameterError, match="cannot be compared exactly"):
        pruner.find(table, "id", ["not a number"])


def test_cli_lookup(table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("17\n-1\n")
    assert main(["lookup", str(table), "--column", "id", "--keys-file", str(keys_file)]) == 0
    out = capsys.readouterr().out
    assert "17: 3 ranges, " in out and "-1: 1 ranges, 100 rows in 1 fragments" in out, out
    assert main(["lookup", str(table), "--column", "id", "17", str(ROWS + 3), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["key"] for row in rows] == [17, ROWS + 3]
    found = pruner.lookup(table, "id", [17, ROWS + 3])
    assert rows == found.to_json()
    assert all(len(r) == 3 for row in rows for r in row["ranges"]) and rows[0]["ranges"]


def test_keys_of_every_kind_get_what_their_point_lookups_select(tmp_path: Path) -> None:
    """String and int8 columns, keys in one Arrow step and one at a time, keys out of the
    column's range, and keys whose zones touch (each keeps its own ranges; a key's touching
    ranges are merged as a selection merges them)."""
    path = tmp_path / "kinds"
    path.mkdir()
    codes = (np.arange(1_000) % 200 - 100).astype(np.int8)
    codes[5], codes[6] = -128, 127  # the type's ends, as keys in the first zone
    names = [f"n{i:04}" for i in range(1_000)]
    names[100] = "n0099"  # in zones 0 and 1: touching ranges of one key
    pq.write_table(
        pa.table({"code": pa.array(codes, pa.int8()), "name": names}), path / "a.parquet"
    )
    build_index(path, "code", items=100)
    build_index(path, "name", items=100)
    opened = open_table(path)
    cases: list[tuple[str, list[Any]]] = [
        ("code", [-100, 99, 5, 127, -128, 128, -129, 10**20]),  # Arrow's int64, then range
        ("code", [5, None, 7.0, "x"]),  # one at a time
        ("name", ["n0099", "n0200", "n0300", "", "zz"]),  # zones 2 and 3 touch
        ("name", ["n0200", None, 5]),
    ]
    compared = 0
    for column, keys in cases:
        found = pruner.lookup(opened, column, keys)
        listed = found.to_json()
        for position, key in enumerate(keys):
            literal = "NULL" if key is None else f"'{key}'" if isinstance(key, str) else key
            sql = f"SELECT * FROM t WHERE {column} = {literal}"
            selection = explain(sql, {"t": opened}).scans[0].selection
            assert selection is not None
            assert found.ranges(position) == selection.ranges(), (column, key)
            assert listed[position]["ranges"] == [list(r) for r in found.ranges(position)]
            compared += 1
    assert compared == 20, compared
    by_name = pruner.lookup(opened, "name", ["n0099", "n0200", "n0300"])
    assert by_name.ranges(0)[0] == (0, 0, 200), "one range over zones 0 and 1"
    assert by_name.ranges(1)[0] == (0, 200, 100) and by_name.ranges(2)[0] == (0, 300, 100)
    # A key's touching ranges merge wherever the key is, and alone (two ranges in all).
    assert pruner.lookup(opened, "name", ["n0200", "n0099"]).ranges(1)[0] == (0, 0, 200)
    assert pruner.lookup(opened, "name", ["n0099"]).ranges(0) == [(0, 0, 200)]
    ends = pruner.lookup(opened, "code", [-128, 127])
    assert ends.ranges(0) and ends.ranges(1), "the ends of int8 are keys like any other"
    assert pruner.lookup(opened, "code", [np.int64(5), 500]).to_json()[0]["key"] == 5
    assert pruner.lookup(opened, "code", [500]).found().tolist() == [False]


def test_keys_are_hashed_as_the_index_hashed_the_column(tmp_path: Path) -> None:
    """Parquet's own filters hash an int16 column as INT32, and a dictionary column compares
    as its strings: each key gets what its point lookup selects, never fewer rows."""
    path = tmp_path / "native"
    path.mkdir()
    data = pa.table(
        {
            "k": pa.array(np.arange(4_000) % 3_000, pa.int16()),
            "s": pa.array([f"v{i}" for i in range(4_000)]).dictionary_encode(),
        }
    )
    pruner.write_parquet(data, path / "a.parquet", ["k", "s"], items=1_000)
    opened = open_table(path)
    for column, keys in (("k", [5, 2_999, 3_500, -7]), ("s", ["v5", "v3999", "none"])):
        found = pruner.lookup(opened, column, keys)
        for position, key in enumerate(keys):
            literal = f"'{key}'" if isinstance(key, str) else key
            sql = f"SELECT * FROM t WHERE {column} = {literal}"
            selection = explain(sql, {"t": opened}).scans[0].selection
            assert selection is not None
            assert found.ranges(position) == selection.ranges(), (column, key)
    assert pruner.lookup(opened, "k", [5]).ranges(0) == [(0, 0, 1_000), (0, 3_000, 1_000)]
    assert pruner.find(opened, "k", [5, 2_999]).num_rows == 3


@pytest.mark.parametrize("dense", [0, 10**9], ids=["units-read-one-by-one", "sections-whole"])
@pytest.mark.parametrize("section", ["dataset", "fragments", "zone_rows"])
def test_many_keys_never_trust_a_damaged_companion(
    section: str, dense: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A companion section zeroed (a zeroed filter says "absent" of every value) is caught
    by its checksums on the many-keys path, whether it reads a level's units one by one or
    the section whole: the lookup falls back to the zone filters and every present key keeps
    its rows."""
    from pruner.index.hierarchy import read as hierarchy
    from pruner.index.hierarchy import units

    monkeypatch.setattr(units, "_SMALL_READ", dense)
    path = tmp_path / "t.lance"
    ids = np.random.default_rng(4).permutation(ROWS)
    lance.write_dataset(_data(ids), str(path), max_rows_per_file=1_500)
    build_index(path, "id", items=256)
    companion = open_table(path).index("id").index.hierarchy  # type: ignore[union-attr]
    assert isinstance(companion, hierarchy.Hierarchy)
    sizes = {
        "dataset": companion.dataset_bytes,
        "fragments": companion.fragment_bytes * len(companion.fragments),
        "zone_rows": companion.zone_bytes * companion.num_zones,
    }
    offset = companion._offsets[section]
    rng = np.random.default_rng(9)
    present = rng.choice(ROWS, 200, replace=False).tolist()
    keys = [*present, *rng.integers(10**6, 10**9, 200).tolist()]
    intact = pruner.lookup(open_table(path), "id", keys)
    with open(companion.path, "r+b") as handle:
        handle.seek(offset)
        handle.write(bytes(sizes[section]))
    opened = open_table(path)
    found = pruner.lookup(opened, "id", keys)
    bound = opened.index("id")
    assert bound is not None and bound.index.hierarchy is None, "the companion was dropped"
    assert "fails its checksum" in (bound.index.hierarchy_note or "")
    rows = _rows(path, present)
    assert len(rows) == len(present)
    assert found.selection().contains(rows >> 32, rows & 0xFFFFFFFF).all()
    for position in range(0, len(keys), 5):
        assert found.ranges(position) == intact.ranges(position), keys[position]
