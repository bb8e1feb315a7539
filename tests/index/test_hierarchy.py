"""The hierarchy companion (dataset -> fragment -> block-major zone filters).

It must select exactly the zones the flat probe of ``bloomfilter.lance`` selects, and when it
is missing, stale or damaged, the index file is used instead: never a narrower selection.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pruner
from pruner import sbbf
from pruner.explain import explain
from pruner.hashing import hash_array
from pruner.index import (
    Hierarchy,
    HierarchyUnusable,
    build_index,
    companion_path,
    list_bloom_indexes,
    open_index,
    parquet_index_path,
    read_index_file,
)
from pruner.index.hierarchy import FragmentCoarse
from pruner.index.hierarchy import read as hierarchy_module
from pruner.index.hierarchy import units as hierarchy_units
from pruner.index.hierarchy import write as hierarchy_write
from pruner.table import open_table
from tests.support.engine_check import engine_alone

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")


def _index_file(path: Path, column: str = "id") -> Path:
    if path.suffix == ".lance":
        (info,) = [i for i in list_bloom_indexes(path) if i.column == column]
        return Path(info.path)
    return parquet_index_path(path, column)


def _write(kind: str, data: pa.Table, directory: Path, per_fragment: int) -> Path:
    if kind == "lance":
        path = directory / "t.lance"
        lance.write_dataset(data, str(path), max_rows_per_file=per_fragment)
        return path
    path = directory / "t"
    path.mkdir()
    for number, start in enumerate(range(0, data.num_rows, per_fragment)):
        part = data.slice(start, per_fragment)
        pq.write_table(part, path / f"part-{number:03}.parquet", row_group_size=300)
    return path


def _hashes(values: list[Any], arrow_type: pa.DataType) -> np.ndarray:
    hashes, valid = hash_array(pa.array(values, arrow_type))
    return hashes if valid is None else hashes[valid]


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["lance", "parquet"]))
    strings = draw(st.booleans())
    rows = draw(st.integers(1, 3000))
    per_fragment = draw(st.integers(50, 1500))
    items = draw(st.sampled_from([16, 64, 256, 1024]))
    probability = draw(st.sampled_from([0.3, 0.05, 0.001]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    keys = rng.integers(-(10**6), 10**6, rows, dtype=np.int64)
    mask = rng.random(rows) < draw(st.sampled_from([0.0, 0.1]))
    values = [str(k) for k in keys] if strings else keys
    arrow_type = pa.string() if strings else pa.int64()
    data = pa.table({"id": pa.array(values, arrow_type, mask=mask), "pos": np.arange(rows)})
    deleted = draw(st.lists(st.integers(0, rows - 1), max_size=20)) if kind == "lance" else []
    present = [v for v in rng.choice(np.asarray(values, dtype=object), 5).tolist()]
    absent_keys = rng.integers(2 * 10**6, 3 * 10**6, 20)
    absent = [str(k) for k in absent_keys] if strings else absent_keys.tolist()
    probes = [present[:1], absent[:1], present + absent, absent]
    return {
        "kind": kind,
        "data": data,
        "per_fragment": per_fragment,
        "items": items,
        "probability": probability,
        "deleted": deleted,
        "probes": probes,
        "arrow_type": arrow_type,
    }


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_cases())
def test_the_hierarchy_selects_the_zones_of_the_flat_probe_or_fewer(
    case: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("h")
    path = _write(case["kind"], case["data"], directory, case["per_fragment"])
    if case["deleted"]:
        ids = ", ".join(map(str, sorted(set(case["deleted"]))))
        lance.dataset(str(path)).delete(f"pos IN ({ids})")
    build_index(path, "id", items=case["items"], probability=case["probability"])
    index_file = _index_file(path)
    flat = read_index_file(index_file, "id")
    tiered = open_index(index_file, "id")
    assert tiered.hierarchy is not None and tiered.filter_data is None
    assert np.array_equal(tiered.fragment_id, flat.fragment_id)
    assert np.array_equal(tiered.zone_start, flat.zone_start)
    assert np.array_equal(tiered.zone_length, flat.zone_length)
    assert np.array_equal(tiered.has_null, flat.has_null)
    rows = _rows_by_fragment(path, flat)
    for values in case["probes"]:
        hashes = _hashes(values, case["arrow_type"])
        flat_mask = flat.zone_mask(hashes)
        got, decided = tiered.zone_mask_explained(hashes)
        truth = _zones_holding(flat, rows, values)
        # Never narrower than the truth; never wider than the flat probe (the coarser
        # filters only drop zones whose filters gave a false positive).
        assert not (truth & ~got).any(), (values, decided)
        assert not (got & ~flat_mask).any(), (values, decided)
        assert tiered.hierarchy is not None, "the companion was never dropped"
    assert tiered.filter_data is None, "probes never loaded the index file"


def _rows_by_fragment(path: Path, index: Any) -> dict[int, dict[int, Any]]:
    """fragment id -> physical row offset -> the value stored there (live rows only)."""
    found: dict[int, dict[int, Any]] = {}
    if path.suffix == ".lance":
        table = lance.dataset(str(path)).to_table(columns=["id"], with_row_address=True)
        addresses = table.column("_rowaddr").to_numpy().astype(np.int64)
        for address, value in zip(addresses.tolist(), table.column("id").to_pylist(), strict=True):
            found.setdefault(address >> 32, {})[address & 0xFFFFFFFF] = value
        return found
    for file in index.files:
        values = pq.read_table(path / file.path, columns=["id"]).column("id").to_pylist()
        found[file.fragment_id] = dict(enumerate(values))
    return found


def _zones_holding(index: Any, rows: dict[int, dict[int, Any]], values: list[Any]) -> np.ndarray:
    wanted = set(values)
    truth = np.zeros(index.num_zones, bool)
    for zone in range(index.num_zones):
        fragment = rows.get(int(index.fragment_id[zone]), {})
        start = int(index.zone_start[zone])
        for offset in range(start, start + int(index.zone_length[zone])):
            if fragment.get(offset) in wanted:
                truth[zone] = True
                break
    return truth


# ------------------------------------------------------------------ levels and bytes


ROWS, PER_FRAGMENT = 40_000, 10_000


@pytest.fixture(params=["lance", "parquet"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    ids = np.random.default_rng(5).permutation(ROWS).astype(np.int64)
    data = pa.table({"id": ids, "pos": np.arange(ROWS)})
    path = _write(request.param, data, tmp_path, PER_FRAGMENT)
    build_index(path, "id", items=1024)
    return path


def _explained(path: Path, sql: str) -> tuple[str, int | None, Any]:
    opened = open_table(path)
    (term,) = explain(sql, {"t": opened}).scans[0].terms
    bound = opened.index("id")
    assert bound is not None
    return term.reason, term.zones_selected, bound.index


def test_explain_says_which_level_decided(table: Path) -> None:
    reason, zones, index = _explained(table, "SELECT pos FROM t WHERE id = -5")
    assert "dataset filter: absent" in reason and zones == 0
    reason, zones, index = _explained(table, "SELECT pos FROM t WHERE id = 7")
    assert "fragment filters: 1 of 4 fragments" in reason, reason
    assert "zone filters: 1 zones" in reason and zones == 1
    # A point lookup reads kilobytes of the companion, never the index file.
    assert index.filter_data is None
    assert index.hierarchy.bytes_read < 64 * 1024, index.hierarchy.bytes_read
    assert index.hierarchy.bytes_read < _index_file(table).stat().st_size / 20


def test_a_long_in_list_probes_each_level_at_once_and_selects_as_value_by_value(
    table: Path,
) -> None:
    """A long IN list is probed level by level for all of its values at once (a 10,000-value
    IN list walked value by value cost ~1 s at 1M rows): the zones selected are exactly the
    union of the one-value probes (which take a path of their own), each value's zones
    those of its own probe, and they hold every value."""
    index = open_index(_index_file(table), "id")
    assert index.hierarchy is not None
    values = [*range(0, ROWS, 97), *range(-400, 0)]  # 413 present, 400 absent
    hashes = _hashes(values, pa.int64())
    at_once = index.hierarchy.probe(hashes)
    positions, zones = index.hierarchy.probe_each(hashes)
    walked = np.zeros(index.num_zones, bool)
    for number, one in enumerate(hashes):
        alone = index.hierarchy.probe(np.array([one], np.uint64))
        assert np.flatnonzero(alone.mask).tolist() == sorted(zones[positions == number].tolist())
        walked |= alone.mask
    assert at_once.mask.tolist() == walked.tolist()
    truth = _zones_holding(index, _rows_by_fragment(table, index), values)
    assert truth.any() and not (truth & ~at_once.mask).any()
    assert at_once.decided.startswith("fragment filters: ")
    assert at_once.decided.endswith(f"; zone filters: {int(at_once.mask.sum())} zones")


def test_answers_with_the_companion_equal_the_engine_alone(table: Path) -> None:
    sql = "SELECT pos FROM t WHERE id IN (3, 17, -1, 39999) ORDER BY pos"
    expected = engine_alone("duckdb", sql, {"t": table}).column("pos").to_pylist()
    assert len(expected) == 3
    for engine in ("duckdb", "datafusion"):
        got = pruner.query(sql, {"t": table}, engine=engine).column("pos").to_pylist()
        assert got == expected, engine


def test_a_probe_reads_and_checks_each_unit_once(table: Path) -> None:
    """The units a probe read and checked stay with the open companion: the same point
    probe, or the same many-value probe, again reads no byte and selects the same zones
    (a batch lookup on an opened table read and checked a 64 MiB dataset filter on every
    call)."""
    index = open_index(_index_file(table), "id")
    hierarchy = index.hierarchy
    assert hierarchy is not None
    many = _hashes([*range(0, ROWS, 97), *range(-400, 0)], pa.int64())
    for hashes in (_hashes([7], pa.int64()), many):
        first = hierarchy.probe(hashes)
        read = hierarchy.bytes_read
        again = hierarchy.probe(hashes)
        assert again.mask.tolist() == first.mask.tolist() and again.decided == first.decided
        assert hierarchy.bytes_read == read
    truth = _zones_holding(index, _rows_by_fragment(table, index), [*range(0, ROWS, 97)])
    assert truth.any() and not (truth & ~hierarchy.probe(many).mask).any()


@pytest.mark.parametrize("small_read", [0, 10**9], ids=["unit-by-unit", "whole"])
def test_a_checked_unit_keeps_the_bytes_it_was_checked_with(
    table: Path, monkeypatch: pytest.MonkeyPatch, small_read: int
) -> None:
    """A unit checked by one probe is never read again by a later one, not even when that
    one reads the section whole: here the dataset chunk of 7's block is zeroed in the file
    after a probe of 7 checked it, and a many-value probe read unit by unit or whole
    (``_SMALL_READ``) still finds 7, where bytes read again would say "absent" (no checksum
    is consulted for a unit already checked)."""
    monkeypatch.setattr(hierarchy_units, "_SMALL_READ", small_read)
    index = open_index(_index_file(table), "id")
    hierarchy = index.hierarchy
    assert hierarchy is not None
    seven = _hashes([7], pa.int64())
    assert hierarchy.probe(seven).mask.any()
    chunk = min(hierarchy.dataset_bytes, hierarchy_module._DATASET_CHUNK)
    block = int(sbbf.block_of(seven, hierarchy.dataset_bytes // 32)[0])
    offset = hierarchy._offsets["dataset"] + block // (chunk // 32) * chunk
    with open(companion_path(_index_file(table)), "r+b") as handle:
        handle.seek(offset)
        handle.write(bytes(chunk))
    values = [7, *range(-400, 0)]
    mask = hierarchy.probe(_hashes(values, pa.int64())).mask
    truth = _zones_holding(index, _rows_by_fragment(table, index), [7])
    assert truth.any() and not (truth & ~mask).any()
    # A new opening of the damaged companion checks that chunk and drops the companion.
    reopened = open_index(_index_file(table), "id")
    got, decided = reopened.zone_mask_explained(seven)
    assert "dropped" in (decided or "") and not (truth & ~got).any(), decided


def test_past_the_budget_a_companion_keeps_nothing(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What open companions keep together is bounded (``_KEEP_BYTES``): past it a companion
    drops its units and reads them again on the next probe, which selects the same zones;
    a companion let go no longer counts."""
    index = open_index(_index_file(table), "id")
    hierarchy = index.hierarchy
    assert hierarchy is not None
    gc.collect()  # earlier tests' companions let go now, not while this one counts
    before = hierarchy_units._kept_bytes
    many = _hashes([*range(0, ROWS, 97), *range(-400, 0)], pa.int64())
    kept = hierarchy.probe(many)
    assert hierarchy_units._kept_bytes > before
    del index, hierarchy
    gc.collect()
    assert hierarchy_units._kept_bytes == before
    monkeypatch.setattr(hierarchy_units, "_KEEP_BYTES", 0)
    index = open_index(_index_file(table), "id")
    hierarchy = index.hierarchy
    assert hierarchy is not None
    first = hierarchy.probe(many)
    read = hierarchy.bytes_read
    assert hierarchy_units._kept_bytes == before
    again = hierarchy.probe(many)
    assert hierarchy.bytes_read > read
    assert again.mask.tolist() == first.mask.tolist() == kept.mask.tolist()


# ------------------------------------------------------------------------ damage


def _flip(offset_of: str, nth: int = 0) -> Any:
    def damage(companion: Path) -> None:
        opened = Hierarchy(companion.with_name("bloomfilter.lance"))
        offset = opened._offsets[offset_of] + nth
        del opened
        with open(companion, "r+b") as handle:
            handle.seek(offset)
            byte = handle.read(1)
            handle.seek(offset)
            handle.write(bytes([byte[0] ^ 0x10]))

    return damage


def _truncate(companion: Path) -> None:
    os.truncate(companion, companion.stat().st_size // 2)


def _header(companion: Path) -> None:
    data = bytearray(companion.read_bytes())
    data[20:30] = b"#" * 10
    companion.write_bytes(bytes(data))


def _removed(companion: Path) -> None:
    companion.unlink()


def _zeroed(companion: Path) -> None:
    """The zone rows and their checksums all zero (a region never written, or wiped)."""
    opened = Hierarchy(companion.with_name("bloomfilter.lance"))
    start, end = opened._offsets["zone_rows"], opened._offsets["zone_sums"]
    sums = 8 * len(opened.fragments) * (opened.zone_bytes // 32)
    del opened
    with open(companion, "r+b") as handle:
        handle.seek(start)
        handle.write(bytes(end - start + sums))


def _other_version(companion: Path) -> None:
    """A well-formed companion of another layout version (its header re-checksummed)."""
    data = companion.read_bytes()
    length = int.from_bytes(data[8:12], "little")
    text = data[20 : 20 + length].decode()
    at = text.index('"version": ') + len('"version": ')
    changed = (text[:at] + "4" + text[at + 1 :]).encode()
    checksum = xxhash.xxh64_intdigest(changed).to_bytes(8, "little")
    companion.write_bytes(data[:12] + checksum + changed + data[20 + length :])


DAMAGES = {
    "truncated": _truncate,
    "header": _header,
    "zones": _flip("zones", 3),
    "dataset_block": _flip("dataset"),
    "fragment_row": _flip("fragments"),
    "zone_row": _flip("zone_rows"),
    "checksums": _flip("zone_sums"),
    "removed": _removed,
    "zeroed": _zeroed,
    "other_version": _other_version,
}


def _all_zones_damaged(path: Path) -> None:
    """Flip a bit in every block of every zone row (the present key's block among them)."""
    companion = companion_path(_index_file(path))
    opened = Hierarchy(_index_file(path))
    start, rows = opened._offsets["zone_rows"], opened.zone_bytes // 32
    row_bytes = opened.num_zones * 32
    del opened
    data = bytearray(companion.read_bytes())
    for row in range(rows):
        for zone in range(0, row_bytes, 32):
            data[start + row * row_bytes + zone] ^= 0x01
    companion.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_companion_never_narrows(table: Path, damage: str) -> None:
    DAMAGES[damage](companion_path(_index_file(table)))
    if damage == "zone_row":
        _all_zones_damaged(table)
    values = (7, 123, 39_998, -4)
    flat = read_index_file(_index_file(table), "id")
    expected_mask = flat.zone_mask(_hashes(list(values), pa.int64()))
    index = open_index(_index_file(table), "id")
    got, decided = index.zone_mask_explained(_hashes(list(values), pa.int64()))
    assert np.array_equal(got, expected_mask), decided
    sql = f"SELECT pos FROM t WHERE id IN {values} ORDER BY pos"
    expected = engine_alone("duckdb", sql, {"t": table}).column("pos").to_pylist()
    assert len(expected) == 3
    assert pruner.query(sql, {"t": table}).column("pos").to_pylist() == expected
    reason, _, _ = _explained(table, sql)
    if damage in ("truncated", "header", "zones", "removed", "other_version"):
        assert "zone filters (" in reason and "hierarchy" in reason, reason
    else:  # found when the damaged block is read: dropped, then the index file is used
        assert "dropped" in reason or "fragment filters" in reason, reason


def test_a_stale_companion_is_not_used(table: Path, tmp_path: Path) -> None:
    """A rebuild writes a new index file; an old companion put back beside it is stale."""
    if table.suffix == ".lance":
        pytest.skip("each Lance build writes a new index directory: nothing to put back")
    companion = companion_path(_index_file(table))
    saved = tmp_path / "old.hierarchy"
    shutil.copy(companion, saved)
    ids = np.arange(ROWS, ROWS + 100, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "pos": ids}), table / "part-new.parquet")
    build_index(table, "id", items=1024)
    shutil.copy(saved, companion)
    with pytest.raises(HierarchyUnusable, match="stale"):
        Hierarchy(_index_file(table))
    sql = f"SELECT pos FROM t WHERE id = {ROWS + 5}"
    assert pruner.query(sql, {"t": table}).column("pos").to_pylist() == [ROWS + 5]
    reason, _, index = _explained(table, sql)
    assert "stale" in reason and index.hierarchy is None


def test_a_stale_companion_of_an_index_file_of_the_same_size_is_not_used(
    tmp_path: Path,
) -> None:
    """A file rewritten with other values and as many rows: the rebuilt index file has the
    old one's size, so only its content tells the old companion is stale."""
    root = tmp_path / "t"
    root.mkdir()
    ids = np.arange(20_000, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "pos": ids}), root / "a.parquet")
    build_index(root, "id", items=1024)
    index_file, companion = _index_file(root), companion_path(_index_file(root))
    size, saved = index_file.stat().st_size, tmp_path / "old.hierarchy"
    shutil.copy(companion, saved)
    for shift in range(20_000, 20_100):  # other values, until the index file's size is equal
        pq.write_table(pa.table({"id": ids + shift, "pos": ids}), root / "a.parquet")
        build_index(root, "id", items=1024)
        if index_file.stat().st_size == size:
            break
    assert index_file.stat().st_size == size, "the case this test is about"
    shutil.copy(saved, companion)
    with pytest.raises(HierarchyUnusable, match="stale"):
        Hierarchy(index_file)
    sql = f"SELECT pos FROM t WHERE id = {shift + 5}"
    assert engine_alone("duckdb", sql, {"t": root}).column("pos").to_pylist() == [5]
    assert pruner.query(sql, {"t": root}).column("pos").to_pylist() == [5]


def test_a_spark_style_build_without_hashes_removes_the_companion(table: Path) -> None:
    """A build that kept no distinct hashes leaves no companion behind (an old one would be
    stale): the index file is used."""
    from pruner.index import build as local_build

    original = local_build.index_fragment

    def without_coarse(part: Any, num_bytes: int, probability: float) -> Any:
        return original(part, num_bytes)

    local_build.index_fragment = without_coarse
    try:
        build_index(table, "id", items=1024)
    finally:
        local_build.index_fragment = original
    assert not companion_path(_index_file(table)).exists()
    reason, zones, index = _explained(table, "SELECT pos FROM t WHERE id = 7")
    assert index.hierarchy is None and zones == 1
    assert "no hierarchy companion" in reason


# ----------------------------------------------------------------- Lance itself


def test_lance_uses_the_index_with_the_companion_present(tmp_path: Path) -> None:
    ids = np.random.default_rng(2).permutation(30_000).astype(np.int64)
    path = tmp_path / "t.lance"
    lance.write_dataset(
        pa.table({"id": ids, "pos": np.arange(30_000)}), str(path), max_rows_per_file=10_000
    )
    build_index(path, "id", items=1024)
    assert companion_path(_index_file(path)).exists()
    dataset = lance.dataset(str(path))
    plan = dataset.scanner(filter="id IN (5, 77)").explain_plan()
    assert "ScalarIndexQuery" in plan, plan
    with_index = dataset.to_table(filter="id IN (5, 77)").sort_by("pos")
    without = dataset.to_table(filter="id IN (5, 77)", use_scalar_index=False).sort_by("pos")
    assert with_index == without and with_index.num_rows == 2


def test_lance_maintenance_neither_breaks_nor_reuses_a_stale_companion(tmp_path: Path) -> None:
    import datetime

    ids = np.random.default_rng(3).permutation(30_000).astype(np.int64)
    path = tmp_path / "t.lance"
    lance.write_dataset(
        pa.table({"id": ids, "pos": np.arange(30_000)}), str(path), max_rows_per_file=5_000
    )
    build_index(path, "id", items=1024)
    dataset = lance.dataset(str(path))
    dataset.delete("pos < 100")
    dataset.optimize.compact_files(target_rows_per_fragment=15_000)
    dataset = lance.dataset(str(path))
    dataset.optimize.optimize_indices()
    dataset = lance.dataset(str(path))
    dataset.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True)
    sql = "SELECT pos FROM t WHERE id IN (5, 77, 29999) ORDER BY pos"
    expected = engine_alone("duckdb", sql, {"t": path}).column("pos").to_pylist()
    assert pruner.query(sql, {"t": path}).column("pos").to_pylist() == expected
    opened = open_table(path)
    bound = opened.index("id")
    if bound is not None and bound.index.hierarchy is not None:
        # A companion still in use must describe the index Lance lists now.
        listed = {Path(info.path) for info in list_bloom_indexes(path)}
        assert set(bound.index.hierarchy.index_files) <= listed


def test_segments_each_probe_their_own_way(tmp_path: Path) -> None:
    """An index of two segments (pruner's, with a companion, and the delta Lance's
    optimize_indices adds for appended rows, without one) probes the first through its
    companion and the second through its filters, and selects what reading both whole does."""
    path = tmp_path / "t.lance"
    ids = np.random.default_rng(5).permutation(20_000).astype(np.int64)
    lance.write_dataset(pa.table({"id": ids}), str(path), max_rows_per_file=5_000)
    build_index(path, "id", items=1024)
    extra = np.arange(20_000, 23_000, dtype=np.int64)
    lance.write_dataset(pa.table({"id": extra}), str(path), mode="append")
    lance.dataset(str(path)).optimize.optimize_indices(num_indices_to_merge=0)
    assert len(list_bloom_indexes(path)) == 2
    opened = open_table(path)
    bound = opened.index("id")
    assert bound is not None and type(bound.index.hierarchy).__name__ == "Segments"
    plain = pruner.index.load_lance_index(path, "id")
    assert plain is not None and plain.num_zones == bound.index.num_zones
    for value in (7, 19_999, 21_234, -3):
        hashes = _hashes([value], pa.int64())
        mask, decided = bound.index.zone_mask_explained(hashes)
        assert np.array_equal(mask, plain.zone_mask(hashes)), value
        assert decided is not None and "segment 2 of 2: zone filters" in decided, decided
    assert bound.index.filter_data is None, "no probe loaded the companion's segment whole"
    assert 0 < bound.index.hierarchy.bytes_read < 64 * 1024
    reason, zones, _ = _explained(path, "SELECT id FROM t WHERE id = 21234")
    assert "segment 1 of 2: dataset filter: absent" in reason and zones == 1, reason
    sql = "SELECT id FROM t WHERE id IN (7, 21234, -3) ORDER BY id"
    expected = engine_alone("duckdb", sql, {"t": path}).column("id").to_pylist()
    assert pruner.query(sql, {"t": path}).column("id").to_pylist() == expected == [7, 21234]


def _listed(table: Path) -> dict[str, Any]:
    """The one row of ``pruner index list TABLE --json``, run as a user runs it."""
    command = [sys.executable, "-m", "pruner.cli", "index", "list", str(table), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    return dict(row)


def test_index_list_shows_the_companion(table: Path) -> None:
    assert _listed(table)["hierarchy"] == "in use"
    _truncate(companion_path(_index_file(table)))
    row = _listed(table)
    assert "truncated" in row["hierarchy"] and row["state"] == "current", row


def test_a_damaged_index_file_under_an_intact_companion(table: Path) -> None:
    """Bit rot inside bloomfilter.lance (size and footer unchanged): queries answer from the
    companion, an intact and separately checksummed copy, and `index list` says the file is
    damaged (Lance's own scanner reads it) and to rebuild."""
    index_file = _index_file(table)
    flat = read_index_file(index_file, "id")
    assert flat.damaged is not None and not flat.damaged.any()
    data = bytearray(index_file.read_bytes())
    middle = len(data) // 2  # inside the filters, far from Lance's footer
    data[middle] ^= 0xFF
    index_file.write_bytes(bytes(data))
    damaged = read_index_file(index_file, "id").damaged
    assert damaged is not None and damaged.any(), "the index file's own checksums see it"
    sql = "SELECT pos FROM t WHERE id IN (7, 123, 39998) ORDER BY pos"
    expected = engine_alone("duckdb", sql, {"t": table}).column("pos").to_pylist()
    assert pruner.query(sql, {"t": table}).column("pos").to_pylist() == expected
    row = _listed(table)
    assert row["state"] == "damaged" and "fail their checksums" in row["why"], row
    assert row["hierarchy"] == "in use"


def _rewrite_header(companion: Path, field: str) -> None:
    """A header value changed into another plausible one of the same width (the header is
    JSON: a flipped digit keeps it valid and every offset where it was)."""
    data = companion.read_bytes()
    length = int.from_bytes(data[8:12], "little")
    text = data[20 : 20 + length].decode()  # after the magic, length and checksum
    header = json.loads(text)
    path = field.split(".")
    old = header[path[0]] if len(path) == 1 else header[path[0]][path[1]]
    if isinstance(old, list):
        old = old[-1]
    new = old * 2 if len(str(old * 2)) == len(str(old)) else old // 2
    if field == "fragment_first_zone":
        new = old + 1
    if field.startswith("offsets."):
        new = old + 32 if len(str(old + 32)) == len(str(old)) else old - 32
    before = f'"{path[-1]}": '
    start = text.index('"offsets": {') if len(path) > 1 else 0
    at = text.index(before, start) + len(before)
    if field == "fragment_first_zone":  # its last entry
        at = text.index("]", at) - len(str(old))
    assert text[at : at + len(str(old))] == str(old), (field, text[at : at + 20])
    assert len(str(new)) == len(str(old)) and new != old, (field, old, new)
    changed = text[:at] + str(new) + text[at + len(str(old)) :]
    companion.write_bytes(data[:20] + changed.encode() + data[20 + length :])


HEADER_FIELDS = [
    "zone_bytes",
    "fragment_bytes",
    "dataset_bytes",
    "fragment_first_zone",
    "offsets.dataset",
    "offsets.fragments",
    "offsets.zone_rows",
    "offsets.zone_sums",
]


@pytest.mark.parametrize("field", HEADER_FIELDS)
def test_a_header_value_changed_never_narrows(table: Path, field: str) -> None:
    """The header is checksummed: a value changed into another plausible one (a filter size
    that is still a multiple of 32, an offset moved by a block) makes the companion unusable,
    so the index file answers."""
    _rewrite_header(companion_path(_index_file(table)), field)
    values = [*range(0, 40_000, 37), -4]
    flat = read_index_file(_index_file(table), "id")
    hashes = _hashes(values, pa.int64())
    index = open_index(_index_file(table), "id")
    got = np.array([index.zone_mask(hashes[i : i + 1]) for i in range(len(values))])
    want = np.array([flat.zone_mask(hashes[i : i + 1]) for i in range(len(values))])
    assert not (want & ~got).any(), (field, int((want & ~got).sum()), index.hierarchy_note)
    assert np.array_equal(got, want), field
    assert index.hierarchy is None and "checksum" in (index.hierarchy_note or ""), field


def test_other_kinds_of_index_beside_a_bloom_index(tmp_path: Path) -> None:
    """Lance's own BTREE indexes, on another column and on the same one, created before and
    after the bloom index: only the bloom index is listed, loaded and probed."""
    path = tmp_path / "t.lance"
    ids = np.random.default_rng(2).permutation(20_000).astype(np.int64)
    table = pa.table({"id": ids, "pos": np.arange(20_000)})
    lance.write_dataset(table, str(path), max_rows_per_file=5_000)
    lance.dataset(str(path)).create_scalar_index("pos", index_type="BTREE")
    build_index(path, "id", items=1024)
    lance.dataset(str(path)).create_scalar_index("id", index_type="BTREE", name="id_btree")
    listed = list_bloom_indexes(path)
    assert [(info.column, info.name) for info in listed] == [("id", "id_idx")]
    bound = open_table(path).index("id")
    assert bound is not None and bound.index.hierarchy is not None
    sql = "SELECT pos FROM t WHERE id IN (5, 77) ORDER BY pos"
    expected = engine_alone("duckdb", sql, {"t": path}).column("pos").to_pylist()
    assert pruner.query(sql, {"t": path}).column("pos").to_pylist() == expected
    reason, zones, _ = _explained(path, "SELECT pos FROM t WHERE id = 5")
    assert zones == 1, reason


@pytest.mark.parametrize(
    ("pairs", "dense"),
    [(8, 0), (8, 10**9), (1 << 20, 0)],
    ids=["chunks-pieces", "chunks-whole", "pieces"],
)
def test_the_probe_by_chunks_and_pieces_selects_as_value_by_value(
    table: Path, monkeypatch: pytest.MonkeyPatch, pairs: int, dense: int
) -> None:
    """The probe's fragment level a chunk of values at a time (``_BULK_PAIRS`` pairs:
    10,000 values over 200 fragments take 50 chunks) and its zone level read piece by piece
    or whole (``_SMALL_READ``) select exactly the zones, and give exactly the (value, zone)
    pairs, of one-value probes of a companion read whole, in one chunk; a list of absent
    values only is "dataset filter: absent" as each of its values is. Mutation testing
    found a chunk loop that skipped its first chunk and piece numbers naming the wrong
    fragment surviving the other tests: both narrow (their zones' blocks are left unread,
    all zero)."""
    cases = ([*range(0, ROWS, 131), *range(-300, 0)], list(range(-5_000, -4_000)))
    hashed = [np.unique(_hashes(values, pa.int64())) for values in cases]
    with monkeypatch.context() as reference:
        reference.setattr(hierarchy_units, "_SMALL_READ", 10**9)
        alone = open_index(_index_file(table), "id").hierarchy
        assert alone is not None
        one_by_one = []
        for hashes in hashed:
            probes = [alone.probe(hashes[i : i + 1]) for i in range(len(hashes))]
            pairs_of = [alone.probe_each(hashes[i : i + 1])[1] for i in range(len(hashes))]
            one_by_one.append((probes, pairs_of))
    monkeypatch.setattr(hierarchy_module, "_BULK_PAIRS", pairs)
    monkeypatch.setattr(hierarchy_units, "_SMALL_READ", dense)
    index = open_index(_index_file(table), "id")
    hierarchy = index.hierarchy
    assert hierarchy is not None and len(hierarchy.fragments) == ROWS // PER_FRAGMENT
    for values, hashes, (probes, pairs_of) in zip(cases, hashed, one_by_one, strict=True):
        at_once = hierarchy.probe(hashes)
        walked = np.zeros(index.num_zones, bool)
        for probed in probes:
            walked |= probed.mask
        decided = {probed.decided.split(";")[0].startswith("dataset") for probed in probes}
        assert at_once.mask.tolist() == walked.tolist()
        each = sorted(zip(*hierarchy.probe_each(hashes), strict=True))
        assert each == sorted((i, z) for i, zones in enumerate(pairs_of) for z in zones)
        if values[0] >= 0:
            truth = _zones_holding(index, _rows_by_fragment(table, index), values)
            assert truth.any() and not (truth & ~at_once.mask).any()
        elif decided == {True}:
            assert at_once.decided == "dataset filter: absent" and not at_once.mask.any()


@pytest.mark.parametrize("count", [0, 1, 7, 10_000, 300_000])
def test_a_fragments_coarse_share(count: int) -> None:
    """What the coarse filters are built and sized from: every hash, in the order of its top
    bits; a filter holding each; a distinct count within 1% of the true one (repeats
    included in the input); and that filter folded to the size of the count is the filter
    built at that size."""
    rng = np.random.default_rng(count)
    distinct = rng.integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True)
    hashes = np.concatenate([distinct, distinct[: count // 3], rng.choice(distinct, count // 5)])
    share = FragmentCoarse.of(hashes, 0.00057)
    assert np.array_equal(np.sort(share.hashes), np.sort(hashes))
    top = share.hashes >> np.uint64(64 - hierarchy_write._ORDER_BITS)
    assert (top[1:] >= top[:-1]).all()
    true = len(np.unique(distinct))
    assert abs(share.count - true) <= max(1, true // 100), (share.count, true)
    if count:
        assert sbbf.check(share.filter[None, :], hashes).all()
    size = sbbf.optimal_num_bytes(max(share.count, 1), 0.00057)
    direct = sbbf.insert(hashes, np.array([0, len(hashes)]), size)
    assert np.array_equal(sbbf.resize(share.filter[None, :], size), direct)


@pytest.mark.parametrize("region_bytes", [1 << 20, 4096, 32])
def test_the_dataset_filter_filled_by_regions_is_the_filter_of_every_value(
    region_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filled a region at a time from runs ordered by their top bits, in two threads, the
    dataset filter is bit for bit the filter built from all the values at once (one region,
    many, one block each; an empty run among them)."""
    monkeypatch.setattr(hierarchy_write, "_REGION_BYTES", region_bytes)
    rng = np.random.default_rng(region_bytes)
    runs = [
        FragmentCoarse.of(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True), 0.01)
        for n in (3_000, 0, 1, 7_777, 20_000)
    ]
    size = 1 << 16
    got = hierarchy_write._dataset_filter([r.hashes for r in runs], size)
    everything = np.concatenate([r.hashes for r in runs])
    assert np.array_equal(got, sbbf.insert(everything, np.array([0, len(everything)]), size)[0])


def test_the_zones_table_is_read_compressed(tmp_path: Path) -> None:
    """Every cold open reads the zones' table (25 B a zone before version 6: 305 KB at 100M
    rows). It is stored compressed, so an open of 2,000 regular zones reads a few KB, and
    the zones it gives are the index file's, zone for zone."""
    rows = 2000 * 64
    data = pa.table({"id": np.random.default_rng(5).permutation(rows), "pos": np.arange(rows)})
    path = _write("lance", data, tmp_path, rows // 40)
    build_index(path, "id", items=64)
    opened = Hierarchy(_index_file(path))
    flat = read_index_file(_index_file(path))
    assert opened.num_zones == flat.num_zones == 2000
    assert opened.bytes_read < 25 * opened.num_zones // 4, opened.bytes_read
    for name in ("fragment_id", "zone_start", "zone_length", "has_null"):
        assert np.array_equal(getattr(opened, name), getattr(flat, name)), name


@pytest.mark.parametrize("filled_at", [None, 1, 4, 1 / 2])
@pytest.mark.parametrize("size", [1 << 10, 1 << 16, 1 << 20])
def test_the_dataset_filter_filled_as_fragments_come_is_the_filter_of_every_value(
    size: int, filled_at: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build fills the dataset filter whenever enough hashes wait, at the largest size or
    at one its rows bound (``filled_at`` times ``size``), and folds it to its size at the
    end: bit for bit the filter of all the values at once. Filled at a smaller size, it is
    that filter doubled: every value still in it."""
    monkeypatch.setattr(hierarchy_write, "_FLUSH_VALUES", 5_000)
    rng = np.random.default_rng(size)
    runs = [
        FragmentCoarse.of(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True), 0.01)
        for n in (3_000, 0, 1, 7_777, 20_000, 4_000)
    ]
    filled = None if filled_at is None else int(size * filled_at)
    fill = hierarchy_write.DatasetFill() if filled is None else hierarchy_write.DatasetFill(filled)
    for run in runs:
        fill.add(run.hashes)
    everything = np.concatenate([r.hashes for r in runs])
    got = fill.result(size)
    if filled is None or filled >= size:
        direct = sbbf.insert(everything, np.array([0, len(everything)]), size)[0]
        assert np.array_equal(got, direct)
        return
    smaller = sbbf.insert(everything, np.array([0, len(everything)]), filled)
    assert np.array_equal(got, sbbf.resize(smaller, size)[0])
    assert sbbf.check(got[None, :], everything).all()


def test_a_build_that_fills_its_dataset_filter_as_it_goes_writes_the_same_companion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filled at the end or flushed along the way, the companion's bytes are the same."""
    rows = 30_000
    data = pa.table({"id": np.random.default_rng(9).permutation(rows), "pos": np.arange(rows)})
    path = _write("parquet", data, tmp_path, 3_000)
    build_index(path, "id", items=256)
    once = companion_path(_index_file(path)).read_bytes()
    monkeypatch.setattr(hierarchy_write, "_FLUSH_VALUES", 4_000)
    build_index(path, "id", items=256)
    flushed = companion_path(_index_file(path)).read_bytes()
    size = int.from_bytes(once[8:12], "little")
    headers = [json.loads(data[20 : 20 + size]) for data in (once, flushed)]
    for header in headers:  # the index file's own bytes differ from write to write
        header.pop("index_file_tail")
    assert headers[0] == headers[1]
    assert once[20 + size :] == flushed[20 + size :]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(0, 5),
    parts=st.lists(st.integers(0, 9), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_compiled_part_checksums_are_the_row_checksums_of_each_part(
    rows: int, parts: list[int], seed: int
) -> None:
    """A build's checksum of each (row, part), compiled, is the checksum a probe checks the
    part's bytes with (:func:`_row_checksums`, NumPy), empty parts included."""
    from pruner.index.hierarchy.layout import _part_checksums, _row_checksums

    edges = [0, *np.cumsum(parts).tolist()]
    edges = [8 * e for e in edges]
    data = np.random.default_rng(seed).integers(0, 256, (rows, edges[-1]), np.uint8)
    got = _part_checksums(data, edges)
    assert got.shape == (rows, len(parts))
    for p in range(len(parts)):
        assert np.array_equal(got[:, p], _row_checksums(data[:, edges[p] : edges[p + 1]]))


@pytest.mark.parametrize("shape", [(0, 64), (3, 0), (1, 32), (5, 96), (40, 4096)])
def test_filters_laid_out_block_major_hold_block_b_of_every_filter_in_row_b(
    shape: tuple[int, int],
) -> None:
    """A companion's block-major section: row ``b`` is block ``b`` of each filter in turn,
    whole or from a first row on (the pieces a build writes), from an array of filters or
    a list of them."""
    from pruner.index.hierarchy.layout import _block_major

    count, num_bytes = shape
    filters = np.random.default_rng(count).integers(0, 256, shape, dtype=np.uint8)
    blocks = num_bytes // sbbf.BLOCK_BYTES
    expected = [b"".join(bytes(f[b * 32 : (b + 1) * 32]) for f in filters) for b in range(blocks)]
    for laid in (filters, list(filters)):
        if isinstance(laid, list) and not laid:
            continue
        whole = _block_major(laid)
        assert whole.shape == (blocks, count * 32)
        assert [bytes(row) for row in whole] == expected
        for first in range(blocks):
            part = _block_major(laid, first, min(blocks, first + 2))
            assert [bytes(row) for row in part] == expected[first : first + 2]
