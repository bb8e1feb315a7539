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
from pruner.index import ZoneIndex


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
        assert sbbf.masks(hashes)[0].tolist() == entry["mask_words"]


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
        expected[z, block] |= sbbf.masks(np.array([h]))[0]
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


# ------------------------------------------------------------------ the sliced layout


def _filters_with_members(
    num_zones: int, num_bytes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Filters with ~20-35% of their bits set, and up to 40 of the hashes inserted."""
    rng = np.random.default_rng(seed)
    per_zone = max(2, num_bytes // 4) if num_bytes >= 1024 else num_bytes // 4 + 4
    hashes = rng.integers(0, 2**64 - 1, num_zones * per_zone, dtype=np.uint64, endpoint=True)
    filters = sbbf.insert(hashes, np.arange(num_zones + 1) * per_zone, num_bytes)
    return filters, rng.choice(hashes, size=min(len(hashes), 40), replace=False)


def _probes(members: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    absent = rng.integers(0, 2**64 - 1, 60, dtype=np.uint64, endpoint=True)
    return np.concatenate([members, absent])


@pytest.mark.parametrize("num_bytes", [32, 64, 32768])
@pytest.mark.parametrize("num_zones", [1, 63, 64, 65, 130])
def test_sliced_probe_equals_check(num_zones: int, num_bytes: int) -> None:
    filters, members = _filters_with_members(num_zones, num_bytes, seed=num_zones + num_bytes)
    hashes = _probes(members, seed=num_zones)
    expected = sbbf.check(filters, hashes)
    assert expected[: len(members)].any(axis=1).all(), "every member is found somewhere"
    assert not expected.all(), "some (value, zone) pairs are proved absent"
    sliced = sbbf.SlicedFilters(filters)
    got = sliced.might_contain(hashes)
    assert got.dtype == bool and got.shape == (len(hashes), num_zones)
    assert np.array_equal(got, expected)
    assert np.array_equal(sliced.may_contain_any(hashes), expected.any(axis=0))
    assert np.array_equal(sliced.may_contain_any(members[:1]), expected[0])


def test_check_equals_the_per_value_definition() -> None:
    """The batched ``check`` against the 8 masks tested one (value, zone) at a time."""
    filters, members = _filters_with_members(5, 64, seed=1)
    hashes = _probes(members, seed=2)
    words = filters.view("<u4").reshape(5, 2, 8)
    blocks, masks = sbbf.block_of(hashes, 2), sbbf.masks(hashes)
    expected = [
        [bool(((words[z, blocks[k]] & masks[k]) == masks[k]).all()) for z in range(5)]
        for k in range(len(hashes))
    ]
    assert sbbf.check(filters, hashes).tolist() == expected


def test_sliced_bits_are_the_transposed_filter_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bit z % 64 of word z // 64 of row p is bit p of zone z's filter, in every chunking."""
    rng = np.random.default_rng(5)
    filters = rng.integers(0, 256, (130, 224), dtype=np.uint8)  # 28 columns of 8 bytes
    bits = np.unpackbits(filters, axis=1, bitorder="little")  # (zones, positions)
    expected = np.zeros((224 * 8, 192), dtype=np.uint8)
    expected[:, :130] = bits.T
    expected_words = np.packbits(expected, axis=1, bitorder="little").view("<u8")
    # Chunks of 3 columns x 2 zone words: partial chunks on both axes, several threads.
    monkeypatch.setattr(sbbf, "SLICE_COLUMNS", 3)
    monkeypatch.setattr(sbbf, "SLICE_CHUNK_BYTES", 64 * 8 * 3 * 2)
    for threads in (1, 3):
        assert np.array_equal(sbbf.SlicedFilters(filters, threads=threads).bits, expected_words)
    monkeypatch.undo()
    assert np.array_equal(sbbf.SlicedFilters(filters).bits, expected_words)


def test_sliced_probe_in_many_small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    filters, members = _filters_with_members(65, 64, seed=9)
    hashes = _probes(members, seed=10)
    monkeypatch.setattr(sbbf, "PROBE_GATHER_BYTES", 1)  # one value per step
    sliced = sbbf.SlicedFilters(filters)
    expected = sbbf.check(filters, hashes)
    assert np.array_equal(sliced.might_contain(hashes), expected)
    assert np.array_equal(sliced.may_contain_any(hashes), expected.any(axis=0))


@pytest.mark.parametrize("num_zones", [0, 1, 65])
def test_sliced_probe_of_no_values_and_no_zones(num_zones: int) -> None:
    filters, members = (
        _filters_with_members(num_zones, 32, seed=4)
        if num_zones
        else (
            np.zeros((0, 32), dtype=np.uint8),
            np.zeros(0, dtype=np.uint64),
        )
    )
    sliced = sbbf.SlicedFilters(filters)
    none = np.zeros(0, dtype=np.uint64)
    assert sliced.might_contain(none).shape == (0, num_zones)
    assert sliced.may_contain_any(none).tolist() == [False] * num_zones
    assert sbbf.check(filters, none).shape == (0, num_zones)
    hashes = _probes(members, seed=3)
    assert np.array_equal(sliced.might_contain(hashes), sbbf.check(filters, hashes))


def test_sliced_layout_refuses_bad_filter_lengths() -> None:
    with pytest.raises(IndexFormatError, match="multiple of 32"):
        sbbf.SlicedFilters(np.zeros((3, 48), dtype=np.uint8))


def _mixed_index() -> tuple[ZoneIndex, np.ndarray]:
    """An index of 130 zones with 64-byte filters and 67 zones with 96-byte ones, interleaved."""
    small, small_members = _filters_with_members(130, 64, seed=21)
    large, large_members = _filters_with_members(67, 96, seed=22)
    rows = [bytes(f) for f in small] + [bytes(f) for f in large]
    order = np.random.default_rng(23).permutation(len(rows))
    zones = len(rows)
    index = ZoneIndex(
        column="x",
        items=16,
        probability=0.01,
        fragment_id=np.zeros(zones, dtype=np.uint64),
        zone_start=np.arange(zones, dtype=np.uint64),
        zone_length=np.ones(zones, dtype=np.uint64),
        has_null=np.zeros(zones, dtype=bool),
        filter_data=[rows[i] for i in order],
    )
    return index, _probes(np.concatenate([small_members, large_members]), seed=24)


def test_zone_index_answers_the_same_before_and_after_the_sliced_layout() -> None:
    index, hashes = _mixed_index()
    assert len(index.filter_groups()) == 2
    expected = np.zeros((len(hashes), index.num_zones), dtype=bool)
    for zones, filters in index.filter_groups():
        expected[:, zones] = sbbf.check(filters, hashes)
    # One value: far below the price of a build, probed directly.
    assert np.array_equal(index.might_contain(hashes[:1]), expected[:1])
    assert np.array_equal(index.zone_mask(hashes[:1]), expected[0])
    assert not index.sliced_groups(), "one value does not pay for the sliced layout"
    index.prepare_probes()
    assert sorted(index.sliced_groups()) == [0, 1]
    assert np.array_equal(index.might_contain(hashes), expected)
    assert np.array_equal(index.zone_mask(hashes), expected.any(axis=0))
    assert np.array_equal(index.zone_mask(hashes[:0]), np.zeros(index.num_zones, dtype=bool))


def test_zone_index_builds_the_sliced_layout_when_direct_probes_have_cost_as_much() -> None:
    index, hashes = _mixed_index()
    (_, large) = index.filter_groups()[1]
    expected = np.zeros((1, index.num_zones), dtype=bool)
    for zones, filters in index.filter_groups():
        expected[:, zones] = sbbf.check(filters, hashes[:1])
    # Ski rental: direct probes until their pairs would pass the price of a build.
    price = ZoneIndex._PAIRS_PER_SLICED_BYTE * large.nbytes
    values = int(price // len(large))
    for _ in range(values):
        assert np.array_equal(index.might_contain(hashes[:1]), expected)
    assert 1 not in index.sliced_groups(), "the large-filter group has not paid for its build yet"
    assert np.array_equal(index.zone_mask(hashes[:1]), expected[0])
    assert 1 in index.sliced_groups(), "one more value passes the price: built"
    assert np.array_equal(index.might_contain(hashes[:1]), expected)
    # One probe of enough values pays for both builds at once.
    fresh, _ = _mixed_index()
    for _, filters in fresh.filter_groups():
        assert len(hashes) * len(filters) > ZoneIndex._PAIRS_PER_SLICED_BYTE * filters.nbytes
    direct = fresh.might_contain(hashes[:1])
    assert not fresh.sliced_groups()
    assert np.array_equal(fresh.zone_mask(hashes), index.zone_mask(hashes))
    assert sorted(fresh.sliced_groups()) == [0, 1]
    assert np.array_equal(fresh.might_contain(hashes[:1]), direct)


@pytest.mark.parametrize("num_bytes", [32, 1024, 8192])
def test_resize_keeps_every_value_and_halving_is_a_build_at_half_size(num_bytes: int) -> None:
    rng = np.random.default_rng(num_bytes)
    hashes = rng.integers(0, 2**64 - 1, size=3 * num_bytes // 32 * 4, dtype=np.uint64)
    bounds = np.array([0, len(hashes) // 3, len(hashes)])
    filters = sbbf.insert(hashes, bounds, num_bytes)
    assert np.array_equal(sbbf.resize(filters, num_bytes), filters)
    for size in (32, num_bytes // 2, num_bytes * 2, num_bytes * 8):
        if size < 32:
            continue
        resized = sbbf.resize(filters, size)
        assert resized.shape == (2, size)
        hits = sbbf.check(resized, hashes)
        assert hits[: bounds[1], 0].all() and hits[bounds[1] :, 1].all(), size
        fresh = sbbf.insert(hashes, bounds, size)
        if size <= num_bytes:
            # A value's block at half the size is its block here, halved: ORing each pair
            # of blocks is inserting at half the size.
            assert np.array_equal(resized, fresh), size
        else:
            # Growing repeats blocks: it holds the bits a build at that size sets, and more.
            assert np.array_equal(resized & fresh, fresh), size
            assert (resized != fresh).any(), size


def test_resize_refuses_sizes_that_are_not_powers_of_two() -> None:
    with pytest.raises(ValueError, match="only powers of two"):
        sbbf.resize(np.zeros((1, 96), np.uint8), 64)
    with pytest.raises(ValueError, match="only powers of two"):
        sbbf.resize(np.zeros((1, 64), np.uint8), 48)
    with pytest.raises(ValueError, match="only powers of two"):
        sbbf.resize(np.zeros((1, 64), np.uint8), 16)


@pytest.mark.parametrize("count", [1, 100, 4096])
def test_insert_into_a_big_filter_sets_each_values_bits(count: int) -> None:
    """A hierarchy's dataset filter (MiBs, few values per block) and repeated values: the
    compiled insert sets exactly the bits of the per-value definition."""
    rng = np.random.default_rng(count)
    hashes = rng.integers(0, 2**64 - 1, size=count, dtype=np.uint64, endpoint=True)
    hashes = np.concatenate([hashes, hashes[: count // 2]])  # repeats set the same bits
    num_bytes = 1 << 20
    filters = sbbf.insert(hashes, np.array([0, len(hashes)]), num_bytes)
    expected = np.zeros(num_bytes // 4, np.uint32)
    first_word = sbbf.block_of(hashes, num_bytes // 32) * 8
    words = (first_word[:, None] + np.arange(8)).ravel()
    np.bitwise_or.at(expected, words, sbbf.masks(hashes).ravel())
    assert filters.shape == (1, num_bytes)
    assert np.array_equal(filters[0].view("<u4"), expected)
    assert sbbf.check(filters, hashes).all()


@pytest.mark.parametrize(
    ("count", "order_bits"), [(0, 8), (1, 8), (5_000, 8), (5_000, 3), (70_000, 16)]
)
def test_ordered_insert_orders_stably_and_counts_the_filters_bits(
    count: int, order_bits: int
) -> None:
    """One compiled pass gives a fragment's coarse share: its hashes ordered (stably) by
    their top bits, the filter :func:`insert` builds of them, and that filter's set bits."""
    rng = np.random.default_rng(count + order_bits)
    hashes = rng.integers(0, 2**64 - 1, size=count, dtype=np.uint64, endpoint=True)
    hashes = np.concatenate([hashes, hashes[: count // 3]])
    ordered, bits, ones, none = sbbf.ordered_insert(hashes, 1 << 16, order_bits)
    top = hashes >> np.uint64(64 - order_bits)
    assert np.array_equal(ordered, hashes[np.argsort(top, kind="stable")])
    assert np.array_equal(bits, sbbf.insert(hashes, np.array([0, len(hashes)]), 1 << 16)[0])
    assert ones == int(np.bitwise_count(bits).sum())
    assert none.shape[0] == 0
    # The same pass fills the zones' filters too: as insert builds them, empty zones included.
    cuts = np.sort(rng.integers(0, len(hashes), size=6, endpoint=True))
    bounds = np.concatenate([[0], cuts, [len(hashes)], [len(hashes)]])
    again, bits_again, ones_again, zones = sbbf.ordered_insert(
        hashes, 1 << 16, order_bits, bounds, 1024
    )
    assert np.array_equal(again, ordered) and np.array_equal(bits_again, bits)
    assert ones_again == ones
    assert np.array_equal(zones, sbbf.insert(hashes, bounds, 1024))
