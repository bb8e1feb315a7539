"""Damaged indexes: a damaged file raises IndexFormatError with advice and never crashes the
process; a query over a damaged index reads what the damage touches whole and returns the
right answer."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lance.file import LanceFileWriter

from pruner.errors import IndexFormatError
from pruner.index import INDEX_SCHEMA, companion_path, read_index_file
from pruner.selection import Selection


def _write(
    path: Path, schema: pa.Schema, columns: list[pa.Array], metadata: dict[str, str]
) -> None:
    writer = LanceFileWriter(str(path), schema)
    writer.write_batch(pa.record_batch(columns, schema=schema))
    for key, value in metadata.items():
        writer.add_schema_metadata(key, value)
    writer.close()


def _columns(filter_bytes: bytes = b"\0" * 64) -> list[pa.Array]:
    return [
        pa.array([0], pa.uint64()),
        pa.array([0], pa.uint64()),
        pa.array([10], pa.uint64()),
        pa.array([False]),
        pa.array([filter_bytes], pa.binary()),
    ]


GOOD_META = {"bloomfilter_item": "32", "bloomfilter_probability": "0.01"}


def truncate(at: float) -> Callable[[Path, Path], None]:
    def damage(source: Path, target: Path) -> None:
        data = source.read_bytes()
        target.write_bytes(data[: int(len(data) * at)])

    return damage


def flip_tail(source: Path, target: Path) -> None:
    data = bytearray(source.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))


def empty(source: Path, target: Path) -> None:
    target.write_bytes(b"")


def directory(source: Path, target: Path) -> None:
    target.mkdir()


def wrong_schema(source: Path, target: Path) -> None:
    schema = pa.schema([pa.field("fragment_id", pa.uint32()), pa.field("x", pa.string())])
    _write(target, schema, [pa.array([0], pa.uint32()), pa.array(["a"])], GOOD_META)


def missing_metadata(source: Path, target: Path) -> None:
    _write(target, INDEX_SCHEMA, _columns(), {"bloomfilter_item": "32"})


def bad_metadata(value: dict[str, str]) -> Callable[[Path, Path], None]:
    def damage(source: Path, target: Path) -> None:
        _write(target, INDEX_SCHEMA, _columns(), value)

    return damage


def bad_filter_length(source: Path, target: Path) -> None:
    _write(target, INDEX_SCHEMA, _columns(b"\0" * 40), GOOD_META)


def empty_filter(source: Path, target: Path) -> None:
    _write(target, INDEX_SCHEMA, _columns(b""), GOOD_META)


def bad_null_bitmap(source: Path, target: Path) -> None:
    writer = LanceFileWriter(str(target), INDEX_SCHEMA)
    writer.write_batch(pa.record_batch(_columns(), schema=INDEX_SCHEMA))
    for key, value in GOOD_META.items():
        writer.add_schema_metadata(key, value)
    index = writer.add_global_buffer(b"\x05\x00\x00\x00\x01\x00")
    writer.add_schema_metadata("null_bitmap", str(index))
    writer.close()


def null_bitmap_buffer_missing(source: Path, target: Path) -> None:
    _write(target, INDEX_SCHEMA, _columns(), GOOD_META | {"null_bitmap": "7"})


def not_lance(source: Path, target: Path) -> None:
    target.write_bytes(b"PAR1" + b"\0" * 200 + b"LANC")


DAMAGES = {
    "truncated_to_0.1": truncate(0.1),
    "truncated_to_half": truncate(0.5),
    "truncated_by_one_byte": truncate(0.999),
    "footer_magic_flipped": flip_tail,
    "empty_file": empty,
    "a_directory": directory,
    "wrong_schema": wrong_schema,
    "missing_probability": missing_metadata,
    "items_not_a_number": bad_metadata(
        {"bloomfilter_item": "many", "bloomfilter_probability": "0.01"}
    ),
    "items_zero": bad_metadata({"bloomfilter_item": "0", "bloomfilter_probability": "0.01"}),
    "probability_one": bad_metadata({"bloomfilter_item": "8", "bloomfilter_probability": "1"}),
    "filter_not_multiple_of_32": bad_filter_length,
    "filter_empty": empty_filter,
    "null_bitmap_garbage": bad_null_bitmap,
    "null_bitmap_buffer_missing": null_bitmap_buffer_missing,
    "garbage_with_magic": not_lance,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_index_files_raise_index_format_error(
    damage: str, tmp_path: Path, vectors: Path
) -> None:
    source = tmp_path / "good.lance"
    shutil.copy(vectors / "bloomfilter_i64.lance", source)
    assert read_index_file(source).num_zones == 4, "the undamaged copy reads fine"
    target = tmp_path / "damaged.lance"
    DAMAGES[damage](source, target)
    with pytest.raises(IndexFormatError) as info:
        read_index_file(target)
    assert "rebuild" in str(info.value) or "damaged" in str(info.value), str(info.value)


def test_an_index_with_no_zones_is_valid(tmp_path: Path) -> None:
    schema = INDEX_SCHEMA
    empty_columns = [pa.array([], f.type) for f in schema]
    _write(tmp_path / "e.lance", schema, empty_columns, GOOD_META)
    index = read_index_file(tmp_path / "e.lance")
    assert index.num_zones == 0
    assert index.zone_mask(np.array([1], dtype=np.uint64)).tolist() == []


def test_filters_of_different_sizes_are_read_and_probed(tmp_path: Path) -> None:
    """Older Lance sized filters by formula: a reader must take each size from its bytes."""
    from pruner import sbbf
    from pruner.hashing import hash_array

    hashes, _ = hash_array(pa.array([7, 8, 9], pa.int64()))
    small = sbbf.insert(hashes[:1], np.array([0, 1]), 32)[0].tobytes()
    large = sbbf.insert(hashes[1:], np.array([0, 2]), 96)[0].tobytes()
    columns = [
        pa.array([0, 1], pa.uint64()),
        pa.array([0, 0], pa.uint64()),
        pa.array([1, 2], pa.uint64()),
        pa.array([False, False]),
        pa.array([small, large], pa.binary()),
    ]
    _write(tmp_path / "mixed.lance", INDEX_SCHEMA, columns, GOOD_META)
    index = read_index_file(tmp_path / "mixed.lance")
    assert [len(index.filter_bytes(z)) for z in range(2)] == [32, 96]
    found = index.might_contain(hashes)
    assert found[0, 0] and found[1:, 1].all(), "each value is found in the zone that holds it"


# ----------------------------------------------------------------- damaged, then queried
#
# The catalogue above damages a file; below, a damaged index sits where pruner finds it (a
# Lance dataset's committed index, a Parquet directory's _pruner/ file) and queries run on
# DuckDB. Every damage either makes the index unreadable, and the scan reads the whole table
# with the reason in its explanation, or damages some zones, and exactly their fragments are
# read whole while the other fragments are still pruned. The answer is always the right one.

ROWS, PER_FRAGMENT, ITEMS = 4000, 1000, 100  # 4 fragments of 10 (Lance) or 12 (Parquet) zones
DAMAGED_FRAGMENT = 1


def _ids() -> np.ndarray:
    return np.random.default_rng(7).permutation(ROWS).astype(np.int64)


def _nulls(ids: np.ndarray) -> np.ndarray:
    return ids % 97 == 5


def _table_data() -> pa.Table:
    ids = _ids()
    return pa.table({"id": pa.array(ids, mask=_nulls(ids)), "pos": np.arange(ROWS)})


def _make(layout: str, directory: Path) -> tuple[Path, Path]:
    """A table with an index on ``id``, and where that index's file is."""
    import lance

    from pruner.index import build_index, list_bloom_indexes, parquet_index_path

    data = _table_data()
    if layout == "lance":
        path = directory / "t.lance"
        lance.write_dataset(data, str(path), max_rows_per_file=PER_FRAGMENT)
        build_index(path, "id", items=ITEMS)
        return path, list_bloom_indexes(path)[0].path
    path = directory / "t"
    path.mkdir()
    for number in range(ROWS // PER_FRAGMENT):
        part = data.slice(number * PER_FRAGMENT, PER_FRAGMENT)
        pq.write_table(part, path / f"part-{number}.parquet", row_group_size=250)
    build_index(path, "id", items=ITEMS)
    return path, parquet_index_path(path, "id")


def _probe_values() -> tuple[int, int]:
    """An id stored in fragment 1's fourth zone, and one in fragment 2."""
    ids = _ids()
    first = next(
        int(v) for v in ids[PER_FRAGMENT + 3 * ITEMS : PER_FRAGMENT + 4 * ITEMS] if v % 97 != 5
    )
    second = next(int(v) for v in ids[2 * PER_FRAGMENT :] if v % 97 != 5)
    return first, second


def _rewrite(
    index_file: Path,
    change: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    checksums: str,
) -> None:
    """Rewrite the index file's zones through ``change``; ``checksums``: ``keep`` the old
    checksums (content damaged after writing), ``recompute`` them (a writer that believed in
    its zones) or ``drop`` them (an index as Lance writes it)."""
    from lance.file import LanceFileReader

    from pruner.index import zone_checksums

    # The hierarchy companion is an intact, separately checksummed copy of the zones: with
    # it in place the damage below is never read (tests/index/test_hierarchy.py covers that
    # case). These tests are of the index file's own checks, so it goes.
    companion_path(index_file).unlink(missing_ok=True)
    reader = LanceFileReader(str(index_file))
    table = reader.read_all().to_table()
    metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    nulls = bytes(reader.read_global_buffer(int(metadata.pop("null_bitmap"))))
    old = bytes(reader.read_global_buffer(int(metadata.pop("pruner_zone_checksums"))))
    zones = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.schema.names}
    zones["bloom_filter_data"] = np.stack(
        [np.frombuffer(b, np.uint8) for b in zones["bloom_filter_data"]]
    ).copy()
    zones = change(zones)
    columns = [
        pa.array(zones["fragment_id"], pa.uint64()),
        pa.array(zones["zone_start"], pa.uint64()),
        pa.array(zones["zone_length"], pa.uint64()),
        pa.array(zones["has_null"], pa.bool_()),
        pa.array([bytes(f) for f in zones["bloom_filter_data"]], pa.binary()),
    ]
    index_file.unlink()
    writer = LanceFileWriter(str(index_file), INDEX_SCHEMA)
    writer.write_batch(pa.record_batch(columns, schema=INDEX_SCHEMA))
    for key, value in metadata.items():
        writer.add_schema_metadata(key, value)
    writer.add_schema_metadata("null_bitmap", str(writer.add_global_buffer(nulls)))
    if checksums != "drop":
        fields = [zones[n] for n in ("fragment_id", "zone_start", "zone_length", "has_null")]
        fresh = zone_checksums(*fields, zones["bloom_filter_data"]).astype("<u8").tobytes()
        buffer = writer.add_global_buffer(old if checksums == "keep" else fresh)
        writer.add_schema_metadata("pruner_zone_checksums", str(buffer))
    writer.close()


def _zone(zones: dict[str, np.ndarray], fragment: int, number: int) -> int:
    return int(np.flatnonzero(zones["fragment_id"] == fragment)[number])


def _flip_bits_hiding(value: int) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Clear one bit of the filter of the zone holding ``value``, a bit its probe needs: the
    filter then proves ``value`` absent, a false negative no structural check can see."""

    def change(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from pruner import sbbf
        from pruner.hashing import hash_array

        hashes, _ = hash_array(pa.array([value], pa.int64()))
        row = zones["bloom_filter_data"][_zone(zones, DAMAGED_FRAGMENT, 3)]
        assert sbbf.check(row[None, :], hashes)[0, 0], "the undamaged zone holds the value"
        for byte in np.flatnonzero(row):
            for bit in range(8):
                if row[byte] >> bit & 1:
                    row[byte] ^= 1 << bit
                    if not sbbf.check(row[None, :], hashes)[0, 0]:
                        return zones
                    row[byte] ^= 1 << bit
        raise AssertionError("no single bit hides the value")

    return change


def _edit(
    field: str, fragment: int, number: int, value: Callable[[Any], Any]
) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def change(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        zone = _zone(zones, fragment, number)
        zones[field] = zones[field].copy()
        zones[field][zone] = value(zones[field][zone])
        return zones

    return change


def _drop_zone(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = np.ones(len(zones["fragment_id"]), bool)
    keep[_zone(zones, DAMAGED_FRAGMENT, 3)] = False
    return {name: array[keep] for name, array in zones.items()}


def _overlap(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    zone = _zone(zones, DAMAGED_FRAGMENT, 3)
    zones["zone_start"] = zones["zone_start"].copy()
    zones["zone_length"] = zones["zone_length"].copy()
    zones["zone_start"][zone] -= 50
    zones["zone_length"][zone] += 50
    return zones


def _reverse(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: array[::-1].copy() for name, array in zones.items()}


def _fragment_renamed(new_id: int) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def change(zones: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ids = zones["fragment_id"].astype(np.uint64)
        ids[ids == DAMAGED_FRAGMENT] = np.uint64(new_id)
        zones["fragment_id"] = ids
        return zones

    return change


# name -> (change to the zones, checksums, fragments read whole); None: the index is unusable
ZONE_DAMAGES: dict[str, tuple[Any, str, set[int] | None]] = {
    "zones_reversed": (_reverse, "recompute", set()),
    "filter_bit_flipped": (_flip_bits_hiding(_probe_values()[0]), "keep", {DAMAGED_FRAGMENT}),
    "has_null_flipped": (
        _edit("has_null", DAMAGED_FRAGMENT, 0, lambda v: not v),
        "keep",
        {DAMAGED_FRAGMENT},
    ),
    "zone_start_shifted": (
        _edit("zone_start", DAMAGED_FRAGMENT, 3, lambda v: v + 1),
        "keep",
        {DAMAGED_FRAGMENT},
    ),
    # Zone 3 also claims the second half of zone 2's rows: two zones claim one row, so at
    # least one describes rows it never hashed; neither is trusted.
    "zones_overlapping": (_overlap, "recompute", {DAMAGED_FRAGMENT}),
    "zone_beyond_fragment": (
        _edit("zone_length", DAMAGED_FRAGMENT, -1, lambda v: v + 1),
        "recompute",
        {DAMAGED_FRAGMENT},
    ),
    "zone_start_past_2_32": (
        _edit("zone_start", DAMAGED_FRAGMENT, -1, lambda v: v + (1 << 33)),
        "recompute",
        {DAMAGED_FRAGMENT},
    ),
    "zone_length_wraps_uint64": (
        _edit("zone_length", DAMAGED_FRAGMENT, -1, lambda v: (1 << 64) - 1),
        "recompute",
        {DAMAGED_FRAGMENT},
    ),
    "zone_missing_lance_style": (_drop_zone, "drop", {DAMAGED_FRAGMENT}),
    "zone_missing_with_checksums": (_drop_zone, "keep", None),
    "unknown_fragment_id": (_fragment_renamed(77), "recompute", {DAMAGED_FRAGMENT}),
    "fragment_id_max_uint64": (_fragment_renamed((1 << 64) - 1), "recompute", {DAMAGED_FRAGMENT}),
}


def _duckdb_rows(sql: str, path: Path, prune: bool) -> list[Any]:
    import pruner

    result = pruner.query(sql, {"t": path}, engine="duckdb", prune=prune)
    return sorted(result.column("pos").to_pylist())


def _expected_positions(values: tuple[int, ...]) -> list[int]:
    """The rows the test wrote that match (``id`` in ``values`` or null), by position."""
    ids = _ids()
    return sorted(np.flatnonzero(np.isin(ids, values) | _nulls(ids)).tolist())


def _checked_scan(path: Path) -> tuple[Any, Any]:
    """Query the damaged table: DuckDB alone over the raw files (no pruner code) gives the
    positions the test wrote, and pruner pruned and unpruned give the same; then the opened
    table and the explained scan of the query."""
    from pruner.explain import explain
    from pruner.table import open_table
    from tests.support.engine_check import engine_alone

    values = _probe_values()
    sql = f"SELECT pos FROM t WHERE id IN {values} OR id IS NULL"
    expected = _expected_positions(values)
    alone = engine_alone("duckdb", sql, {"t": path}).column("pos").to_pylist()
    assert sorted(alone) == expected, "DuckDB alone over the raw files"
    for prune in (True, False):
        assert _duckdb_rows(sql, path, prune=prune) == expected, prune
    table = open_table(path)
    return table, explain(sql, {"t": table}).scans[0]


@pytest.mark.parametrize("layout", ["lance", "parquet"])
@pytest.mark.parametrize("damage", list(ZONE_DAMAGES))
def test_damaged_zones_are_read_whole_and_no_row_is_lost(
    damage: str, layout: str, tmp_path: Path
) -> None:
    from pruner.selection import FRAGMENT_SHIFT

    path, index_file = _make(layout, tmp_path)
    change, checksums, whole = ZONE_DAMAGES[damage]
    _rewrite(index_file, change, checksums)
    table, scan = _checked_scan(path)
    read_whole = {
        f
        for f, rows in table.fragment_rows.items()
        if (scan.selection & Selection.whole({f: rows})).num_rows == rows
    }
    if whole is None:
        assert read_whole == set(table.fragment_rows)
        assert any("unreadable" in t.reason for t in scan.terms), scan.terms
        return
    # Damaged fragments are read whole; intact ones are still pruned to a few zones.
    fragment_of = {DAMAGED_FRAGMENT: DAMAGED_FRAGMENT}
    if layout == "parquet":  # file ids are path order, the same numbering here
        fragment_of = {f: f for f in table.fragment_rows}
    assert read_whole == {fragment_of[f] for f in whole}
    intact = 3  # holds neither value: at most its null zones are read
    selected = scan.selection & Selection.whole({intact: table.fragment_rows[intact]})
    assert 0 < selected.num_rows < table.fragment_rows[intact]
    bound = table.index("id")
    assert bound is not None and bound.damaged_fragments | {
        int(f) for f in np.unique(bound.uncovered.starts >> FRAGMENT_SHIFT)
    } >= {fragment_of[f] for f in whole}


def test_a_damaged_zone_beside_a_changed_first_file(tmp_path: Path) -> None:
    """A damaged zone in fragment 1 and a changed file 0 (the fragment id its now stale zones
    are parked at): the changed file is read whole, its new rows found."""
    from tests.support.engine_check import engine_alone

    path, index_file = _make("parquet", tmp_path)
    _rewrite(index_file, _overlap, "recompute")
    fresh = np.arange(ROWS, ROWS + PER_FRAGMENT, dtype=np.int64)
    pq.write_table(
        pa.table({"id": fresh, "pos": fresh + 10_000}), path / "part-0.parquet", row_group_size=250
    )
    sql = f"SELECT pos FROM t WHERE id IN ({ROWS + 5}, {_probe_values()[0]})"
    alone = sorted(engine_alone("duckdb", sql, {"t": path}).column("pos").to_pylist())
    assert ROWS + 5 + 10_000 in alone and len(alone) == 2
    for prune in (True, False):
        assert _duckdb_rows(sql, path, prune=prune) == alone, prune


def _file_damaged_in_place(name: str) -> Callable[[Path], None]:
    def damage(index_file: Path) -> None:
        good = index_file.with_name("good.copy")
        shutil.move(index_file, good)
        DAMAGES[name](good, index_file)

    return damage


@pytest.mark.parametrize("layout", ["lance", "parquet"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_an_unreadable_index_reads_the_table_whole(
    damage: str, layout: str, tmp_path: Path
) -> None:
    path, index_file = _make(layout, tmp_path)
    _file_damaged_in_place(damage)(index_file)
    table, scan = _checked_scan(path)
    assert scan.selection == table.whole()
    assert any("unreadable" in t.reason and "id" in t.reason for t in scan.terms), scan.terms


@pytest.mark.parametrize("layout", ["lance", "parquet"])
def test_index_list_reports_damage(layout: str, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    def listed(path: Path) -> dict[str, Any]:
        command = [sys.executable, "-m", "pruner.cli", "index", "list", str(path), "--json"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        (row,) = json.loads(result.stdout)
        return dict(row)

    path, index_file = _make(layout, tmp_path)
    assert listed(path)["state"] == "current"
    change, checksums, _ = ZONE_DAMAGES["filter_bit_flipped"]
    _rewrite(index_file, change, checksums)
    row = listed(path)
    assert (row["state"], row["damaged_fragments"]) == ("damaged", 1)
    assert row["fragments_indexed"] == row["fragments_total"] - 1
    _file_damaged_in_place("truncated_to_half")(index_file)
    row = listed(path)
    assert row["state"] == "unreadable" and "rebuild" in row["error"]


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_lance_never_reads_a_damaged_index_for_pruner(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index file pruner committed is Lance's own: given a filter, Lance's scanner probes
    it too. With a bit cleared that hides a value, Lance alone drops that value's row (shown
    here); pruner reads the damaged fragment whole, and its scans of the dataset (no rows
    read ahead) must not let Lance probe the damaged filter."""
    import lance

    import pruner
    from pruner import reads

    path, index_file = _make("lance", tmp_path)
    first, _ = _probe_values()
    _rewrite(index_file, _flip_bits_hiding(first), "keep")
    expected = np.flatnonzero(_ids() == first).tolist()
    assert len(expected) == 1
    hidden = lance.dataset(str(path)).to_table(filter=f"id = {first}")
    assert hidden.num_rows == 0, "Lance alone probes the damaged filter"
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    for sql in (
        f"SELECT pos FROM t WHERE id = {first}",
        f"SELECT pos FROM t WHERE id IN ({first}, -5)",
        f"SELECT pos FROM t WHERE id = {first} OR pos < 0",
    ):
        answer = pruner.query(sql, {"t": path}, engine=engine)
        assert sorted(answer.column("pos").to_pylist()) == expected, sql


def test_a_whole_read_lets_lance_probe_only_an_index_pruner_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of the whole table (a query pruner cannot analyse, or the cost model's) lets
    Lance probe its index on the filter's column, as Lance does for DuckDB alone, only when
    every zone of that index passed pruner's checksum: not once a filter is damaged, nor
    for an index Lance built (no checksums); and never for an unpruned read."""
    import lance
    import pyarrow.compute as pc

    import pruner
    from pruner import reads
    from pruner.adapters import sources

    def probes(path: Path, selection: str = "whole") -> bool:
        table = pruner.open_table(path)
        chosen = table.whole() if selection == "whole" else None
        source = sources.lance_source(table, chosen)
        assert not isinstance(source, pa.Table)
        plan = source.scanner(filter=pc.field("id") == 5).explain_plan()
        return "ScalarIndexQuery" in plan

    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    path, index_file = _make("lance", tmp_path)
    first, _ = _probe_values()
    assert probes(path)
    assert not probes(path, "unpruned")
    _rewrite(index_file, _flip_bits_hiding(first), "keep")
    # a query pruner cannot analyse, over the damaged index: no row lost
    sql = f"SELECT pos FROM (SELECT * REPLACE (id + 0 AS pos) FROM t) WHERE id = {first}"
    expected = np.flatnonzero(_ids() == first).tolist()
    assert pruner.query(sql, {"t": path}).column("pos").to_pylist() == [first] * len(expected)
    assert not probes(path)
    own = tmp_path / "own.lance"
    shutil.copytree(path, own)
    ds = lance.dataset(str(own))
    for info in ds.describe_indices():
        ds.drop_index(info.name)
        ds = lance.dataset(str(own))
    ds.create_scalar_index("id", index_type="BLOOMFILTER")
    assert not probes(own)


@pytest.mark.parametrize("damage", [d for d, (_, _, read) in ZONE_DAMAGES.items() if read != set()])
def test_a_whole_read_never_lets_lance_probe_a_damaged_index(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every damage pruner reads a fragment whole for (bits, zones moved, overlapping or
    missing, unknown fragments; checksums kept, recomputed or dropped) keeps Lance from
    probing the index in a whole read, and an unanalysable query loses no row."""
    import pyarrow.compute as pc

    import pruner
    from pruner import reads
    from pruner.adapters import sources

    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    path, index_file = _make("lance", tmp_path)
    change, checksums, _ = ZONE_DAMAGES[damage]
    _rewrite(index_file, change, checksums)
    table = pruner.open_table(path)
    source = sources.lance_source(table, table.whole())
    assert not isinstance(source, pa.Table)
    plan = source.scanner(filter=pc.field("id") == 5).explain_plan()
    assert "ScalarIndexQuery" not in plan, damage
    first, second = _probe_values()
    for key in (first, second):
        sql = f"SELECT pos FROM (SELECT * REPLACE (id + 0 AS pos) FROM t) WHERE id = {key}"
        expected = int((_ids() == key).sum())
        assert pruner.query(sql, {"t": path}).column("pos").to_pylist() == [key] * expected


def test_lookups_left_to_lance_come_back_once_the_index_is_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held table looked up often leaves its point lookups to Lance's scanner, which probes
    the index pruner checked (:func:`pruner.costs.lance_probes_reason`). Its index damaged in
    place afterwards (a bit cleared that hides a value: Lance alone then drops that value's
    row), the next lookup of the same held table is pruner's own again and loses no row."""
    import lance

    import pruner
    from pruner import costs, reads
    from pruner.adapters import duckdb as duck_adapter
    from pruner.plan import plan

    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS", 0.0)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS_PER_MIB", 0.0)
    path, index_file = _make("lance", tmp_path)
    held = pruner.open_table(path)
    first, _ = _probe_values()
    sql = f"SELECT pos FROM t WHERE id = {first}"
    expected = np.flatnonzero(_ids() == first).tolist()

    def lookup() -> tuple[bool, list[int]]:
        prepared = plan(sql, {"t": held}, dialect="duckdb")
        got = duck_adapter.query(sql, {"t": held}, prepared=prepared)
        return prepared.reads_whole("t"), sorted(got.column("pos").to_pylist())

    assert lookup() == (True, expected)
    _rewrite(index_file, _flip_bits_hiding(first), "keep")
    assert lance.dataset(str(path)).to_table(filter=f"id = {first}").num_rows == 0
    assert lookup() == (False, expected)
