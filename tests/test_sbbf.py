"""The SBBF core: Lance's sizing, bit layout, batch insert and check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pruner import sbbf
from pruner.errors import IndexFormatError, InvalidParameterError
from pruner.hashing import hash_array


def test_sizing_matches_lance(vectors: Path) -> None:
    data = json.loads((vectors / "sizing_vectors.json").read_text())
    for fpp, ndv, log2 in data["rust_unit_test_vectors_(fpp,ndv,log2)"]:
        assert sbbf.min_log2_bytes(ndv, fpp) == log2, (fpp, ndv)
    assert len(data["table"]) > 50
    for row in data["table"]:
        assert sbbf.min_log2_bytes(row["ndv"], row["fpp"]) == row["min_log2_bytes"], row
        assert sbbf.optimal_num_bytes(row["ndv"], row["fpp"]) == row["num_bytes_clamped"], row
        assert sbbf.fpp_at(row["ndv"], 2.0 ** row["min_log2_bytes"]) == pytest.approx(
            row["fpp_at_log2"], rel=1e-9, abs=1e-300
        )


def test_default_sizing_is_32_kib() -> None:
    assert sbbf.optimal_num_bytes(8192, 0.00057) == 32768, "Lance's defaults give 32 KiB"
    assert sbbf.optimal_num_bytes(10**9, 1e-9) == sbbf.MAX_BYTES, "clamped to 128 MiB"
    assert sbbf.fpp_at(0, 32) == 0.0
    assert sbbf.fpp_at(1000, 32) == 1.0, "more than 2 values per bit: hopeless"


@pytest.mark.parametrize("fpp", [-0.1, 1.0, 1.5, float("nan")])
def test_probability_outside_unit_interval_is_refused(fpp: float) -> None:
    with pytest.raises(InvalidParameterError, match="false-positive probability"):
        sbbf.optimal_num_bytes(8192, fpp)


@pytest.mark.parametrize("items", [0, -5, 2.5, True])
def test_items_below_one_is_refused(items: object) -> None:
    with pytest.raises(InvalidParameterError, match="number of items"):
        sbbf.optimal_num_bytes(items, 0.01)  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [0, 31, 33, 100])
def test_filter_length_must_be_a_positive_multiple_of_32(length: int) -> None:
    with pytest.raises(IndexFormatError, match="multiple of 32"):
        sbbf.check(np.zeros((1, length), dtype=np.uint8), np.zeros(1, dtype=np.uint64))


def test_masks_and_blocks_match_lance_vectors(vectors: Path) -> None:
    for entry in json.loads((vectors / "hash_vectors.json").read_text()):
        hashes = np.array([entry["xxh64_seed0"]], dtype=np.uint64)
        assert int(sbbf.block_of(hashes, entry["num_blocks"])[0]) == entry["block_index"]
        assert sbbf._masks(hashes)[0].tolist() == entry["mask_words"]


def test_insert_equals_one_value_at_a_time() -> None:
    """The batch scatter must set exactly the bits the per-value definition sets."""
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64, endpoint=True)
    zone_ids = np.sort(rng.integers(0, 7, 5000))
    zone_ids[zone_ids == 4] = 3  # zone 4 stays empty
    filters = sbbf.insert(hashes, np.searchsorted(zone_ids, np.arange(8)), 96)
    assert not filters[4].any(), "an empty zone has an empty filter"
    expected = np.zeros((7, 3, 8), dtype=np.uint32)
    for h, z in zip(hashes, zone_ids, strict=True):
        block = int(sbbf.block_of(np.array([h]), 3)[0])
        expected[z, block] |= sbbf._masks(np.array([h]))[0]
    assert filters.view("<u4").reshape(7, 3, 8).tolist() == expected.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.int32(), pa.string(), pa.float64()], ids=str)
def test_a_million_values_no_false_negatives_and_fpp_within_target(arrow_type: pa.DataType) -> None:
    rng = np.random.default_rng(11)
    total = 1_000_000
    values = rng.permutation(2 * total)
    present, absent = values[:total], values[total:]

    def as_array(v: np.ndarray) -> pa.Array:
        if pa.types.is_string(arrow_type):
            return pa.array(v.astype(str), pa.string())
        return pa.array(v, arrow_type)

    items = 8192
    num_zones = -(-total // items)
    zone_ids = np.arange(total) // items
    hashes, _ = hash_array(as_array(present))
    bounds = np.minimum(np.arange(num_zones + 1) * items, total)
    filters = sbbf.insert(hashes, bounds, sbbf.optimal_num_bytes(items, 0.00057))
    # Every value probes as present in its own zone: check zone by zone, all values at once.
    for zone in range(num_zones):
        members = hashes[zone_ids == zone]
        assert sbbf.check(filters[zone : zone + 1], members).all(), f"false negative in {zone}"
    # False positives: absent values probed against 20 zones each.
    probe_hashes, _ = hash_array(as_array(absent[:50_000]))
    hits = sbbf.check(filters[:20], probe_hashes)
    rate = hits.mean()
    assert rate <= 0.00057, f"measured false-positive rate {rate:.2e} above the 0.00057 target"
