"""Split Block Bloom Filters (SBBF) on NumPy, in Lance's byte layout.

The filter is the one Parquet specifies
(https://github.com/apache/parquet-format/blob/master/BloomFilter.md) and Lance's
BLOOMFILTER index stores per zone (``../shared/seeds/lance_bloom_filter_index.md``)::

    filter = [block 0][block 1] ... [block B-1]            B = len(bytes) / 32
    block  = [word 0][word 1] ... [word 7]                 8 x uint32, little-endian

    h      = xxHash64(value bytes, seed 0)
    block  = ((h >> 32) * B) >> 32                          multiply-shift, any B works
    word i = bit ((lo32(h) * SALT[i]) mod 2**32) >> 27      one bit in each of the 8 words

A value may be present when all 8 of its bits are set in its block; a missing bit proves it
absent. Insert sets the 8 bits; nothing is ever removed.

Sizing follows Lance exactly: the false-positive probability of B blocks holding ``ndv``
values is Putze et al.'s equation 3 (a Poisson mixture over the number of values per block,
750 terms), and the size is the smallest power of two of bytes, found by binary search over
log2(bytes), whose probability is at most the target, clamped to 32 B .. 128 MiB.

The batch kernels work on many zones at once (one filter per zone, all the same size):
``insert`` scatters the 8 bits of every value into a byte-per-bit image of a batch of zones
(a conflict-free assignment: duplicates write the same 1) and packs it; ``check`` gathers one
whole 32-byte block per (value, zone) with a single ``take``.
"""

from __future__ import annotations

import math

import numpy as np

from pruner.buffers import scratch
from pruner.errors import IndexFormatError, InvalidParameterError

__all__ = [
    "BLOCK_BYTES",
    "MAX_BYTES",
    "MIN_BYTES",
    "SALT",
    "block_of",
    "check",
    "fpp_at",
    "insert",
    "min_log2_bytes",
    "optimal_num_bytes",
    "validate_filter_length",
]

# Spec: "a block is 256 bits, broken into eight contiguous 32-bit words".
BLOCK_BYTES = 32
WORDS_PER_BLOCK = 8
BITS_PER_BLOCK = BLOCK_BYTES * 8
# Lance clamps log2(bytes) to [5, 27]: one block .. 128 MiB.
MIN_LOG2_BYTES = 5
MAX_LOG2_BYTES = 27
MIN_BYTES = 1 << MIN_LOG2_BYTES
MAX_BYTES = 1 << MAX_LOG2_BYTES
# Spec: the eight odd salt constants, one per word.
SALT = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    dtype=np.uint32,
)
# Putze's sum is truncated at this many Poisson terms, as in Lance.
_POISSON_TERMS = 750
# Bits of the per-batch bit image, one byte per bit: 512 KiB stays in the L2 cache, where the
# scattered writes of insert are cheap (measured: 4 MiB images were 1.5x slower).
_INSERT_BATCH_BITS = 1 << 19

_U64 = np.uint64


def fpp_at(ndv: float, num_bytes: float) -> float:
    """False-positive probability of a ``num_bytes`` filter holding ``ndv`` distinct values.

    Putze et al., "Cache-, hash- and space-efficient bloom filters", equation 3, with 256-bit
    blocks and 8 one-bit-per-word probes:
    ``sum_i Poisson(i; lam) * (1 - (31/32)**i)**8``, ``lam = 256 * ndv / bits``.

    >>> round(fpp_at(8192, 32768), 7)
    3.61e-05
    """
    if ndv == 0:
        return 0.0
    bits = num_bytes * 8
    if bits <= 0 or ndv / bits > 2:
        # Too few bits per value for the truncated sum to hold its Poisson mass.
        return 1.0
    lam = BITS_PER_BLOCK / (bits / ndv)
    log_lam = math.log(lam)
    total = 0.0
    for i in range(_POISSON_TERMS - 1, 0, -1):
        log_block_fpp = WORDS_PER_BLOCK * math.log(1.0 - (31.0 / 32.0) ** i)
        total += math.exp(i * log_lam - lam - math.lgamma(i + 1) + log_block_fpp)
    return min(total, 1.0)


def optimal_num_bytes(ndv: int, fpp: float) -> int:
    """Filter size in bytes Lance chooses for ``ndv`` values at false-positive rate ``fpp``.

    Raises:
        InvalidParameterError: ``ndv`` < 1 or ``fpp`` outside [0, 1).

    >>> optimal_num_bytes(8192, 0.00057)
    32768
    """
    if isinstance(ndv, bool) or not isinstance(ndv, int | np.integer) or ndv < 1:
        raise InvalidParameterError(
            f"number of items per zone must be an integer >= 1, got {ndv!r}"
        )
    if not (isinstance(fpp, float | int) and 0.0 <= fpp < 1.0) or math.isnan(fpp):
        raise InvalidParameterError(
            f"false-positive probability must be in [0, 1), got {fpp!r} (the default is 0.00057)"
        )
    return 1 << min(max(min_log2_bytes(ndv, fpp), MIN_LOG2_BYTES), MAX_LOG2_BYTES)


def min_log2_bytes(ndv: int, fpp: float) -> int:
    """Smallest log2(bytes) whose Putze probability is at most ``fpp`` (not clamped).

    >>> min_log2_bytes(1000, 0.01)
    11
    """
    # Lance's search keeps ``low`` strictly below the answer, so log2 = 0 is never chosen.
    low, high = 0, 64
    while high - low > 1:
        mid = (low + high) // 2
        if fpp_at(ndv, 2.0**mid) <= fpp:
            high = mid
        else:
            low = mid
    return high


def validate_filter_length(num_bytes: int, where: str = "bloom filter") -> None:
    """Raise IndexFormatError unless ``num_bytes`` is a positive multiple of 32."""
    if num_bytes <= 0 or num_bytes % BLOCK_BYTES:
        raise IndexFormatError(
            f"{where} has {num_bytes} bytes: an SBBF is a positive multiple of {BLOCK_BYTES} "
            "bytes; the index file is damaged, rebuild it with `pruner index build`"
        )


def block_of(hashes: np.ndarray, num_blocks: int) -> np.ndarray:
    """Block index of each hash in a filter of ``num_blocks`` blocks (int64)."""
    block = (hashes >> _U64(32)) * _U64(num_blocks)
    block >>= _U64(32)
    return block.astype(np.int64)


def _masks(hashes: np.ndarray) -> np.ndarray:
    """(n, 8) uint32: for each hash, its one-bit mask in each of the 8 words."""
    low = hashes.astype(np.uint32)  # keeps the low 32 bits
    positions = low[:, None] * SALT[None, :]
    positions >>= np.uint32(27)
    return np.left_shift(np.uint32(1), positions)


def insert(hashes: np.ndarray, zone_bounds: np.ndarray, num_bytes: int) -> np.ndarray:
    """Build one filter per zone from hashes grouped by zone.

    Args:
        hashes: uint64 xxHash64 of the values to insert, zone after zone.
        zone_bounds: ``num_zones + 1`` nondecreasing positions in ``hashes``: zone ``z`` holds
            ``hashes[zone_bounds[z]:zone_bounds[z + 1]]``.
        num_bytes: bytes per filter (a positive multiple of 32).

    Returns:
        (num_zones, num_bytes) uint8: filter ``z`` is row ``z``, in Lance's byte layout.
    """
    validate_filter_length(num_bytes)
    num_zones = len(zone_bounds) - 1
    num_blocks = num_bytes // BLOCK_BYTES
    filters = np.zeros((num_zones, num_bytes), dtype=np.uint8)
    if len(hashes) == 0 or num_zones == 0:
        return filters
    bits_per_zone = num_bytes * 8
    zones_per_batch = max(1, _INSERT_BATCH_BITS // bits_per_zone)
    bounds = np.asarray(zone_bounds, dtype=np.int64).tolist()
    most = max(
        bounds[min(z + zones_per_batch, num_zones)] - bounds[z]
        for z in range(0, num_zones, zones_per_batch)
    )
    # Buffers reused by every batch and call: fresh large arrays page-fault on first touch
    # (measured: that alone doubled the cost of insert).
    positions_buffer = scratch("insert-positions", WORDS_PER_BLOCK * most, np.uint32)
    bit_index_buffer = scratch("insert-bit-index", WORDS_PER_BLOCK * most, np.int64)
    image = scratch("insert-image", zones_per_batch * bits_per_zone, np.uint8)
    word_offsets = (np.arange(WORDS_PER_BLOCK, dtype=np.int64) * 32)[:, None]
    for first_zone in range(0, num_zones, zones_per_batch):
        batch_zones = min(zones_per_batch, num_zones - first_zone)
        lo, hi = bounds[first_zone], bounds[first_zone + batch_zones]
        if lo == hi:
            continue
        batch_hashes = hashes[lo:hi]
        # Bit number in the batch image of word 0 of each value's block.
        block_bit = block_of(batch_hashes, num_blocks)
        for zone in range(1, batch_zones):
            block_bit[bounds[first_zone + zone] - lo : bounds[first_zone + zone + 1] - lo] += (
                zone * num_blocks
            )
        block_bit <<= 8
        # Word-major (8, n) layout: every step is a contiguous pass, no broadcasting.
        count = hi - lo
        low = batch_hashes.astype(np.uint32)
        positions = positions_buffer[: WORDS_PER_BLOCK * count].reshape(WORDS_PER_BLOCK, count)
        for word in range(WORDS_PER_BLOCK):
            np.multiply(low, SALT[word], out=positions[word])
        positions >>= np.uint32(27)
        bit_index = bit_index_buffer[: WORDS_PER_BLOCK * count].reshape(WORDS_PER_BLOCK, count)
        np.add(positions, block_bit, out=bit_index)
        bit_index += word_offsets
        batch_image = image[: batch_zones * bits_per_zone]
        batch_image.fill(0)
        batch_image[bit_index.ravel()] = 1
        filters[first_zone : first_zone + batch_zones] = np.packbits(
            batch_image, bitorder="little"
        ).reshape(batch_zones, num_bytes)
    return filters


def check(filters: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Which (value, zone) pairs may hold a match.

    Args:
        filters: (num_zones, num_bytes) uint8, every zone's filter, all the same size.
        hashes: uint64 hashes of the K values probed.

    Returns:
        (K, num_zones) bool: ``False`` proves value k is not in zone z.
    """
    num_zones, num_bytes = filters.shape
    validate_filter_length(num_bytes)
    num_blocks = num_bytes // BLOCK_BYTES
    result = np.empty((len(hashes), num_zones), dtype=bool)
    if len(hashes) == 0 or num_zones == 0:
        return result
    words = (
        np.ascontiguousarray(filters).view("<u4").reshape(num_zones, num_blocks, WORDS_PER_BLOCK)
    )
    blocks = block_of(hashes, num_blocks)
    masks = _masks(hashes)
    for k in range(len(hashes)):
        block_words = words[:, blocks[k], :]
        missing = np.bitwise_and(~block_words, masks[k])
        result[k] = ~missing.any(axis=1)
    return result
