"""Damaged index files raise IndexFormatError with advice, and never crash the process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter

from pruner.errors import IndexFormatError
from pruner.index import INDEX_SCHEMA, read_index_file


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
