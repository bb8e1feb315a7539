"""xxHash64 of Arrow arrays with Lance's byte encoding, against the xxhash package and the
vectors Lance produced."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from pruner.errors import UnsupportedTypeError
from pruner.hashing import hash_array, hash_input_width

INT_TYPES = [
    (pa.int8(), "<b"),
    (pa.int16(), "<h"),
    (pa.int32(), "<i"),
    (pa.int64(), "<q"),
    (pa.uint8(), "<B"),
    (pa.uint16(), "<H"),
    (pa.uint32(), "<I"),
    (pa.uint64(), "<Q"),
]


@pytest.mark.parametrize(("arrow_type", "fmt"), INT_TYPES, ids=str)
def test_integers_hash_their_little_endian_bytes(arrow_type: pa.DataType, fmt: str) -> None:
    info = np.iinfo(arrow_type.to_pandas_dtype())
    rng = np.random.default_rng(1)
    values = rng.integers(
        info.min, info.max, 2000, dtype=arrow_type.to_pandas_dtype(), endpoint=True
    )
    values[:2] = [info.min, info.max]
    hashes, valid = hash_array(pa.array(values, arrow_type))
    assert valid is None
    expected = [xxhash.xxh64_intdigest(struct.pack(fmt, v)) for v in values.tolist()]
    assert hashes.tolist() == expected


def test_floats_hash_raw_bits_without_canonicalising() -> None:
    values = [0.0, -0.0, float("nan"), float("inf"), -1.5, 1e-310]
    for arrow_type, fmt in ((pa.float32(), "<f"), (pa.float64(), "<d")):
        hashes, _ = hash_array(pa.array(values, arrow_type))
        expected = [xxhash.xxh64_intdigest(struct.pack(fmt, v)) for v in values]
        assert hashes.tolist() == expected, "-0.0 and 0.0 must hash differently, as in Lance"
        assert hashes[0] != hashes[1], arrow_type


@pytest.mark.parametrize(
    "arrow_type", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()], ids=str
)
def test_variable_width_values_of_every_length(arrow_type: pa.DataType) -> None:
    rng = np.random.default_rng(7)
    raw = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in range(0, 130)]
    raw += [bytes(rng.integers(0, 256, rng.integers(0, 70), dtype=np.uint8)) for _ in range(3000)]
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        items: list = [r.hex() for r in raw]
        encoded = [s.encode() for s in items]
    else:
        items = raw
        encoded = raw
    array = pa.array(items, arrow_type)
    hashes, _ = hash_array(array)
    assert hashes.tolist() == [xxhash.xxh64_intdigest(b) for b in encoded]
    sliced, _ = hash_array(array.slice(17, 100))
    assert sliced.tolist() == hashes[17:117].tolist(), "array offsets must be honoured"


def test_chunked_arrays_and_nulls() -> None:
    chunked = pa.chunked_array(
        [pa.array([1, None, 3], pa.int64()), pa.array([None, 5], pa.int64())]
    )
    hashes, valid = hash_array(chunked)
    assert valid is not None and valid.tolist() == [True, False, True, False, True]
    assert hashes[[0, 2, 4]].tolist() == [
        xxhash.xxh64_intdigest(struct.pack("<q", v)) for v in (1, 3, 5)
    ]
    empty, valid = hash_array(pa.chunked_array([], pa.string()))
    assert len(empty) == 0 and valid is None


def test_temporal_types_hash_at_their_physical_width() -> None:
    cases = [
        (pa.date32(), 4),
        (pa.date64(), 8),
        (pa.time32("s"), 4),
        (pa.time32("ms"), 4),
        (pa.time64("us"), 8),
        (pa.time64("ns"), 8),
        (pa.timestamp("s"), 8),
        (pa.timestamp("ns", tz="Asia/Tokyo"), 8),
    ]
    for arrow_type, width in cases:
        assert hash_input_width(arrow_type) == width
        storage = pa.array([0, 86_400, 12345], pa.int32() if width == 4 else pa.int64())
        hashes, _ = hash_array(storage.view(arrow_type))
        fmt = "<i" if width == 4 else "<q"
        assert hashes.tolist() == [
            xxhash.xxh64_intdigest(struct.pack(fmt, v)) for v in storage.to_pylist()
        ]


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.bool_(),
        pa.decimal128(10, 2),
        pa.float16(),
        pa.binary(16),
        pa.list_(pa.int64()),
        pa.dictionary(pa.int32(), pa.string()),
    ],
    ids=str,
)
def test_types_lance_refuses_raise_a_clear_error(arrow_type: pa.DataType) -> None:
    with pytest.raises(UnsupportedTypeError, match="cannot build a bloom filter on Arrow type"):
        hash_input_width(arrow_type)


def _vector_array(entry: dict) -> pa.Array:
    value, type_name = entry["value"], entry["type"]
    if isinstance(value, dict) and "bits_hex" in value:
        width = 4 if type_name == "float32" else 8
        bits = int(value["bits_hex"], 16)
        raw = bits.to_bytes(width, "little")
        return pa.array(np.frombuffer(raw, dtype=np.float32 if width == 4 else np.float64))
    if isinstance(value, dict):
        return pa.array([bytes.fromhex(value["hex"])], pa.type_for_alias(type_name))
    return pa.array([value], pa.type_for_alias(type_name))


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
def test_lance_hash_vectors(vectors: Path, compiled: bool) -> None:
    entries = json.loads((vectors / "hash_vectors.json").read_text())
    assert len(entries) > 100
    for entry in entries:
        hashes, _ = hash_array(_vector_array(entry), compiled=compiled)
        assert int(hashes[0]) == entry["xxh64_seed0"], entry
    empty, _ = hash_array(pa.array([""]), compiled=compiled)
    assert int(empty[0]) == 17241709254077376921, "xxh64 of the empty string"


@pytest.mark.parametrize("length", [0, 1, 4, 7, 8, 20, 32, 36, 71])
def test_same_length_values_take_the_strided_path(length: int) -> None:
    rng = np.random.default_rng(length)
    raw = [bytes(rng.integers(0, 256, length, dtype=np.uint8)) for _ in range(70_000)]
    array = pa.array(raw, pa.binary())
    hashes, _ = hash_array(array.slice(5))
    assert hashes.tolist() == [xxhash.xxh64_intdigest(b) for b in raw[5:]]


@pytest.mark.parametrize(
    "array",
    [
        pa.array(np.random.default_rng(1).integers(-(2**62), 2**62, 20), pa.int64()),
        pa.array(np.random.default_rng(2).integers(-100, 100, 20), pa.int8()),
        pa.array(np.random.default_rng(3).integers(0, 60000, 20), pa.uint16()),
        pa.array(np.random.default_rng(4).random(20), pa.float32()),
        pa.array([f"s{i}" * i for i in range(20)]),
        pa.array([f"s{i}" for i in range(20)], pa.large_string()),
        pa.array([b"x" * i for i in range(20)], pa.binary()),
        pa.array(range(20), pa.timestamp("us")),
        pa.array([None, 1, 2] * 6 + [3, 4], pa.int32()),
    ],
    ids=str,
)
def test_a_few_values_hash_as_many_do(array: pa.Array) -> None:
    """Up to _FEW values are hashed one by one with the xxhash package, more by the
    vectorised kernels: the same hash for every value, at any offset of a slice."""
    every, _ = hash_array(array)
    for start in range(0, len(array), 3):
        part = array.slice(start, 5)
        few, _ = hash_array(part)
        valid = np.asarray(part.is_valid())
        assert np.array_equal(few[valid], every[start : start + 5][valid])


@pytest.mark.parametrize(
    "array",
    [
        pa.array(np.random.default_rng(5).integers(-(2**63), 2**63 - 1, 3000), pa.int64()),
        pa.array(np.random.default_rng(6).integers(-(2**31), 2**31 - 1, 3000), pa.int32()),
        pa.array(np.random.default_rng(7).integers(0, 2**16 - 1, 3000), pa.uint16()),
        pa.array(np.random.default_rng(8).integers(-128, 127, 3000), pa.int8()),
        pa.array(np.random.default_rng(9).random(3000), pa.float64()),
        pa.array(range(3000), pa.date32()),
        pa.array([None if i % 7 == 0 else i for i in range(3000)], pa.uint64()),
        pa.array([b"v" * (i % 90) + bytes([i % 251]) for i in range(3000)], pa.binary()),
        pa.array([f"{i}" * (i % 13) for i in range(3000)], pa.large_string()),
        pa.array([None if i % 5 == 0 else f"k{i}" for i in range(3000)], pa.string()),
        pa.chunked_array([pa.array(["a", "bb"]), pa.array([], pa.string()), pa.array(["c"])]),
        pa.array([f"d{i % 4}" for i in range(3000)]).dictionary_encode(),
    ],
    ids=lambda array: str(array.type),
)
def test_the_compiled_loops_hash_as_xxhash_does(array: pa.Array | pa.ChunkedArray) -> None:
    """A build hashes whole fragments with the compiled loops (pruner.kernels): the hash of
    every value equals the xxhash package's and the NumPy path's, at any slice offset."""
    for part in (array, array.slice(3), array.slice(17, 1000)):
        plain, valid = hash_array(part)
        compiled, compiled_valid = hash_array(part, compiled=True)
        assert (valid is None) == (compiled_valid is None)
        keep = np.ones(len(part), bool) if valid is None else valid
        assert np.array_equal(plain[keep], compiled[keep])
    values = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if pa.types.is_binary(values.type) or pa.types.is_large_string(values.type):
        hashes, _ = hash_array(values, compiled=True)
        expect = [
            xxhash.xxh64_intdigest(
                v.as_py() if isinstance(v.as_py(), bytes) else v.as_py().encode()
            )
            for v in values
        ]
        assert hashes.tolist() == expect
