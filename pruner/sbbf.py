"""Split Block Bloom Filters (SBBF) on NumPy, in Lance's byte layout.

The filter is the one Parquet specifies
(https://github.com/apache/parquet-format/blob/master/BloomFilter.md) and Lance's
BLOOMFILTER index stores per zone (``docs/format.md``, "The filter")::

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
``insert`` sets the 8 bits of every value in its zone's filter (a loop compiled by Numba,
:mod:`pruner.kernels`); ``check`` gathers one
whole 32-byte block per (value, zone) with a single ``take``, so its cost grows with values x
zones. ``SlicedFilters`` transposes the filters once into one bitmap over the zones per bit
position; a value then costs 8 bitmap rows whatever the number of zones it is checked against,
which is 10-100x faster on big indexes once the transposition is paid for.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pruner.buffers import scratch
from pruner.errors import IndexFormatError, InvalidParameterError

__all__ = [
    "BLOCK_BYTES",
    "MAX_BYTES",
    "MIN_BYTES",
    "PROBE_GATHER_BYTES",
    "SALT",
    "SLICE_CHUNK_BYTES",
    "SLICE_COLUMNS",
    "SlicedFilters",
    "block_of",
    "check",
    "check_blocks",
    "fpp_at",
    "insert",
    "masks",
    "min_log2_bytes",
    "optimal_num_bytes",
    "probe_positions",
    "resize",
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
_SALT64 = SALT.astype(np.uint64)  # the compiled insert multiplies in 64 bits
# Putze's sum is truncated at this many Poisson terms, as in Lance.
_POISSON_TERMS = 750
# Pairs gathered per step of ``check``: 16k x 32 B = 512 KiB stays in the L2 cache (measured:
# 64k-256k pairs per step were up to 2x slower at K = 10 and 100).
_CHECK_BATCH_PAIRS = 1 << 14
# The sliced layout's build works on chunks of up to this many uint64 filter columns x a
# group of 64-zone tiles of about SLICE_CHUNK_BYTES (measured on 12k zones x 32 KiB:
# 16-32 columns best, 2-8 and 64-256 columns 1.2-2x slower).
SLICE_COLUMNS = 32
SLICE_CHUNK_BYTES = 3 << 20
# Bytes of bitmap rows gathered per step of a sliced probe.
PROBE_GATHER_BYTES = 1 << 19
# The six rounds of a 64 x 64 bit transpose: (j, mask of the bits q with q & j == 0).
_TRANSPOSE_ROUNDS = [
    (np.uint64(32), np.uint64(0x00000000FFFFFFFF)),
    (np.uint64(16), np.uint64(0x0000FFFF0000FFFF)),
    (np.uint64(8), np.uint64(0x00FF00FF00FF00FF)),
    (np.uint64(4), np.uint64(0x0F0F0F0F0F0F0F0F)),
    (np.uint64(2), np.uint64(0x3333333333333333)),
    (np.uint64(1), np.uint64(0x5555555555555555)),
]
# Bit number of bit 0 of each word of a block.
_WORD_BITS = np.arange(WORDS_PER_BLOCK, dtype=np.int64) * 32
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


def count_from_fill(bits: int, ones: int, inserted: int) -> int:
    """The number of distinct values in one filter of ``bits`` bits of which ``ones`` are
    set, estimated from the share of its bits still zero; never above ``inserted`` (the
    values put in, repeats included).

    Linear counting: a value sets one bit in each of the 8 words of one block, so each of
    the filter's ``m`` bits is set by a given value with probability ``8 / m``, and after
    ``n`` distinct values the zero share is about ``exp(-8 n / m)``; ``n = -m / 8 x
    ln(zero share)``. Unbiased, with a standard error of a fraction of a percent while the
    filter is not nearly full (a filter sized for ``inserted`` values never is).

    >>> hashes = np.arange(1, 2001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    >>> f = insert(hashes, np.array([0, 2000]), 8192)
    >>> ones = int(np.bitwise_count(f).sum())
    >>> count_from_fill(8192 * 8, ones, 2000) in range(1980, 2001)
    True
    """
    zeros = bits - ones
    if zeros == 0:
        return inserted
    return min(inserted, round(-bits / 8 * math.log(zeros / bits)))


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


@functools.lru_cache(maxsize=256)
def min_log2_bytes(ndv: int, fpp: float) -> int:
    """Smallest log2(bytes) whose Putze probability is at most ``fpp`` (not clamped).
    Cached: each call computes :func:`fpp_at` six times, 3-4 ms holding the GIL.

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


def resize(filters: np.ndarray, num_bytes: int) -> np.ndarray:
    """(n, B) filters as (n, ``num_bytes``) filters that hold every value they hold
    (``filters`` itself when B is ``num_bytes``).

    Filter sizes are powers of two, and a value's block is the top bits of its hash's high
    word (:func:`block_of`): its block at twice the size is one of the two halves of its
    block at this size. So doubling repeats every block, and halving ORs each pair of
    blocks (which is inserting at half the size); a value's bits within its block come from
    its hash's low word alone and do not move. A grown filter's false-positive rate stays
    the old one's; a shrunk one holds its values in fewer bits (a higher rate). Neither
    loses a value.

    >>> f = insert(np.array([7 << 40], np.uint64), np.array([0, 1]), 64)
    >>> [bool(check(resize(f, n), np.array([7 << 40], np.uint64))[0, 0]) for n in (32, 256)]
    [True, True]
    """
    count, old_bytes = filters.shape
    for size in (old_bytes, num_bytes):
        if size < BLOCK_BYTES or size & (size - 1):
            raise ValueError(f"only powers of two resize: {old_bytes} B to {num_bytes} B")
    if old_bytes == num_bytes:
        return filters
    old_blocks, new_blocks = old_bytes // BLOCK_BYTES, num_bytes // BLOCK_BYTES
    blocks = filters.reshape(count, old_blocks, BLOCK_BYTES)
    if new_blocks > old_blocks:
        grown = np.repeat(blocks, new_blocks // old_blocks, axis=1)
        return np.ascontiguousarray(grown.reshape(count, num_bytes))
    lanes = np.ascontiguousarray(filters).view("<u8")  # a block is 4 lanes
    groups = lanes.reshape(count, new_blocks, old_blocks // new_blocks, BLOCK_BYTES // 8)
    folded = groups[:, :, 0].copy()  # OR in place: np.bitwise_or.reduce was 4x slower
    for member in range(1, groups.shape[2]):
        folded |= groups[:, :, member]
    return folded.view(np.uint8).reshape(count, num_bytes)


def masks(hashes: np.ndarray) -> np.ndarray:
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
    bounds = np.asarray(zone_bounds, dtype=np.int64)
    words = np.zeros((len(bounds) - 1, num_bytes // 4), dtype="<u4")
    if len(hashes) and len(words):
        insert_into(words, hashes, bounds)
    return words.view(np.uint8)


def insert_into(
    words: np.ndarray, hashes: np.ndarray, zone_bounds: np.ndarray | None = None
) -> None:
    """Add to the filters ``words`` ((zones, bytes / 4) little-endian uint32, C order) the
    hashes of each zone (``zone_bounds`` as for :func:`insert`; default: one filter, all of
    ``hashes``). The compiled loop releases the GIL: threads may fill disjoint blocks of
    one filter side by side."""
    from pruner.kernels import insert_words  # compiled: a query never imports it

    bounds = np.array([0, len(hashes)]) if zone_bounds is None else zone_bounds
    insert_words(np.ascontiguousarray(hashes, dtype=np.uint64), bounds, words, _SALT64)


def insert_pieces(
    words: np.ndarray, hashes: np.ndarray, starts: np.ndarray, stops: np.ndarray
) -> None:
    """Add to the one filter ``words`` ((1, bytes / 4) little-endian uint32) the hashes
    ``hashes[starts[i]:stops[i]]`` of every piece ``i``, in the pieces' order. Releases the
    GIL, as :func:`insert_into`."""
    from pruner.kernels import insert_pieces as kernel  # compiled: a query never imports it

    kernel(
        np.ascontiguousarray(hashes, dtype=np.uint64),
        np.asarray(starts, np.int64),
        np.asarray(stops, np.int64),
        words,
        _SALT64,
    )


def ordered_insert(
    hashes: np.ndarray,
    num_bytes: int,
    order_bits: int,
    zone_bounds: np.ndarray | None = None,
    zone_bytes: int = 0,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """``hashes`` ordered by their top ``order_bits`` bits (stably), the one filter of
    ``num_bytes`` holding them (as :func:`insert` builds it), how many of its bits are set,
    and, given ``zone_bounds`` and ``zone_bytes``, the zones' filters of them (what
    :func:`insert` returns: (zones, ``zone_bytes``) uint8; else none), from one compiled
    pass (:func:`pruner.kernels.order_and_insert`)."""
    from pruner.kernels import order_and_insert  # compiled: a query never imports it

    validate_filter_length(num_bytes)
    words = np.zeros((1, num_bytes // 4), dtype="<u4")
    if zone_bounds is None:
        bounds = np.zeros(1, np.int64)
        zone_words = np.zeros((0, 8), dtype="<u4")
    else:
        validate_filter_length(zone_bytes)
        bounds = np.asarray(zone_bounds, dtype=np.int64)
        zone_words = np.zeros((len(bounds) - 1, zone_bytes // 4), dtype="<u4")
    ordered, ones = order_and_insert(
        np.ascontiguousarray(hashes, dtype=np.uint64),
        order_bits,
        words,
        _SALT64,
        bounds,
        zone_words,
    )
    return ordered, words.view(np.uint8)[0], int(ones), zone_words.view(np.uint8)


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
    count = len(hashes)
    result = np.empty((count, num_zones), dtype=bool)
    if count == 0 or num_zones == 0:
        return result
    # A block as 4 uint64 lanes: half the elements of 8 uint32 words, same bits.
    lanes = np.ascontiguousarray(filters).view("<u8").reshape(num_zones, num_blocks, 4)
    blocks = block_of(hashes, num_blocks)
    value_masks = np.ascontiguousarray(masks(hashes).astype("<u4", copy=False)).view("<u8")
    # Zone after zone with all values at once: one ``take`` per batch of zones gathers every
    # (zone, value) block, values of one zone next to each other, so a zone's filter is
    # visited once per batch (measured, 12k zones x 32 KiB: the former loop over values
    # was 36-56 ns per pair; this is 15-22 ns at K = 1 and 9-17 ns from K = 10).
    zones_per_batch = max(1, _CHECK_BATCH_PAIRS // count)
    for first in range(0, num_zones, zones_per_batch):
        last = min(first + zones_per_batch, num_zones)
        gathered = np.take(lanes[first:last], blocks, axis=1)  # (zones, K, 4)
        gathered &= value_masks
        gathered ^= value_masks  # the mask bits that are missing from the block
        missing = gathered[..., 0] | gathered[..., 1]
        missing |= gathered[..., 2]
        missing |= gathered[..., 3]
        np.equal(missing.T, 0, out=result[:, first:last])
    return result


def check_blocks(blocks: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """(K,) bool: value k may be in ``blocks[k]``, the (K, 32) uint8 block its hash points
    at (read by offset from a filter, so only the blocks probed are ever read)."""
    return blocks_hold(blocks, masks(hashes))


def blocks_hold(blocks: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """(K,) bool: ``blocks[k]`` (a (K, 32) uint8 block) holds the bits of ``wanted[k]``, or
    of ``wanted`` itself when it is one value's (1, 8) :func:`masks` (its blocks in many
    filters)."""
    words = np.ascontiguousarray(blocks).view("<u4").reshape(-1, WORDS_PER_BLOCK)
    return np.asarray(((words & wanted) == wanted).all(axis=1))


def probe_positions(hashes: np.ndarray, num_blocks: int) -> np.ndarray:
    """(n, 8) int64: the bit numbers, in a filter of ``num_blocks`` blocks, a hash probes.

    Bit ``p`` of a filter is bit ``p % 8`` (least significant first) of byte ``p // 8``: word i
    of block b holds the bits ``(b * 8 + i) * 32 .. + 31`` because words are little-endian.
    """
    low = hashes.astype(np.uint32)
    positions = low[:, None] * SALT[None, :]
    positions >>= np.uint32(27)
    bits = (block_of(hashes, num_blocks) * BITS_PER_BLOCK)[:, None] + _WORD_BITS
    bits += positions
    return bits


class SlicedFilters:
    """Many zones' filters transposed bit by bit, for probing many values at once.

    ``check`` reads one 32-byte block per (value, zone) pair: its cost grows with
    values x zones and is bounded by memory latency (~10 ns a pair on 12,000 zones).
    Here, as in bit-sliced signature files and BitFunnel, the layout is turned around: for
    each of the ``num_bytes * 8`` bit positions of a filter, a bitmap over the zones (bit z of
    row p is bit p of zone z's filter; 64 zones per uint64 word). A value probes 8 positions,
    so its answer for every zone is the AND of 8 rows of ``ceil(zones / 64)`` words, and "any
    of these values" is the OR of those. A value reads 8 rows of zones / 8 bytes, one byte per
    zone instead of a 32-byte block per zone, in whole-row NumPy passes.

    The layout costs as much memory as the filters (plus padding to 64 zones) and one pass of
    bit transposition to build: 0.15 s with 2 threads, 0.3 s with 1, for 12,000 zones of
    32 KiB (393 MB) here, the price of probing about 10 million (value, zone) pairs directly.
    Then one value against all 12,000 zones takes ~20 us, 1,000 values ~2 ms.
    ``ZoneIndex`` decides when it pays off.

    Building: the filters are read as uint64 columns; each 64 zones x 64 bits tile is
    transposed with the six butterfly rounds of Hacker's Delight's ``transpose32`` widened to
    64 bits, done "vertically": the 64 rows of a tile are 64 arrays, and a round is six in-place
    ufunc passes over half of them, for all the tiles of a chunk at once. Chunks of a few MB
    stay in cache (measured: 32 columns x all zones of 12k was best; smaller slices made NumPy
    iterate short inner loops and were 1.5-2x slower). Threads take chunks side by side
    (2 threads on 2 cores: 1.6x).
    """

    def __init__(self, filters: np.ndarray, threads: int | None = None) -> None:
        """Transpose ``filters`` ((num_zones, num_bytes) uint8, as ``check`` takes them).

        ``threads``: worker threads for the build (default: one per CPU, at most 4).
        """
        num_zones, num_bytes = filters.shape
        validate_filter_length(num_bytes)
        self.num_zones = num_zones
        self.num_bytes = num_bytes
        self.num_blocks = num_bytes // BLOCK_BYTES
        words = -(-num_zones // 64)
        columns = num_bytes // 8
        # (column, bit, zone word) is the same memory as (bit position, zone word).
        sliced = np.empty((columns, 64, words), dtype=np.uint64)
        self.bits = sliced.reshape(columns * 64, words)
        if num_zones == 0:
            return
        source = np.ascontiguousarray(filters).view("<u8")
        step = min(columns, SLICE_COLUMNS)
        tile_words = min(words, max(1, SLICE_CHUNK_BYTES // (64 * 8 * step)))
        chunks = [
            (first_word, first_column)
            for first_word in range(0, words, tile_words)
            for first_column in range(0, columns, step)
        ]

        def transpose(part: list[tuple[int, int]]) -> None:
            for first_word, first_column in part:
                last_word = min(first_word + tile_words, words)
                last_column = min(first_column + step, columns)
                _transpose_chunk(source, sliced, first_word, last_word, first_column, last_column)

        workers = min(threads or min(os.cpu_count() or 1, 4), len(chunks))
        if workers <= 1:
            transpose(chunks)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(transpose, [chunks[i::workers] for i in range(workers)]))

    @property
    def nbytes(self) -> int:
        """Memory held by the layout."""
        return int(self.bits.nbytes)

    def _matches(self, hashes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(first value, (n, words) uint64)``: per value, the zones whose 8 bits are all set."""
        positions = probe_positions(np.asarray(hashes, dtype=np.uint64), self.num_blocks)
        words = self.bits.shape[1]
        # Values per step: their 8 gathered rows take ~512 KiB (measured flat from 256 KiB to
        # 4 MiB; one gather of everything was 1.6x slower at 10,000 values).
        step = max(1, PROBE_GATHER_BYTES // (WORDS_PER_BLOCK * 8 * max(words, 1)))
        for first in range(0, len(positions), step):
            rows = self.bits[positions[first : first + step]]  # (n, 8, words)
            yield first, np.bitwise_and.reduce(rows, axis=1)

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        """(K, num_zones) bool, equal to ``check(filters, hashes)``."""
        matches = np.empty((len(hashes), self.bits.shape[1]), dtype=np.uint64)
        for first, found in self._matches(hashes):
            matches[first : first + len(found)] = found
        return self._unpack(matches)

    def may_contain_any(self, hashes: np.ndarray) -> np.ndarray:
        """(num_zones,) bool: zones that may hold any of the values, ``check(...).any(0)``."""
        matches = np.zeros((1, self.bits.shape[1]), dtype=np.uint64)
        for _, found in self._matches(hashes):
            matches[0] |= np.bitwise_or.reduce(found, axis=0)
        return self._unpack(matches)[0]

    def _unpack(self, matches: np.ndarray) -> np.ndarray:
        """(n, words) uint64 -> (n, num_zones) bool: zone z is bit z % 64 of word z // 64."""
        as_bytes = matches.astype("<u8", copy=False).view(np.uint8)
        bits = np.unpackbits(as_bytes, axis=1, count=self.num_zones, bitorder="little")
        return bits.view(bool)


def _transpose_chunk(
    source: np.ndarray,
    sliced: np.ndarray,
    first_word: int,
    last_word: int,
    first_column: int,
    last_column: int,
) -> None:
    """Transpose zones ``64 * first_word ..`` x uint64 columns ``first_column ..`` into ``sliced``.

    ``source`` is (zones, columns) little-endian uint64; ``sliced`` is (columns, 64, words):
    bit z % 64 of ``sliced[c, q, z // 64]`` becomes bit q of ``source[z, c]``.
    """
    num_zones = source.shape[0]
    tiles = last_word - first_word
    width = last_column - first_column
    # tile[i, t, c] = source[64 * (first_word + t) + i, first_column + c]: row i of every tile
    # is one contiguous array, so each butterfly round is a few long ufunc passes.
    tile = scratch("slice-tile", 64 * tiles * width, np.uint64).reshape(64, tiles, width)
    full = min(tiles, (num_zones - 64 * first_word) // 64)
    zones = source[64 * first_word : 64 * (first_word + full), first_column:last_column]
    tile[:, :full] = zones.reshape(full, 64, width).transpose(1, 0, 2)
    if full < tiles:  # the last 64 zones are incomplete: pad with empty filters
        rest = num_zones - 64 * (first_word + full)
        tile[:rest, full] = source[num_zones - rest :, first_column:last_column]
        tile[rest:, full] = 0
    rows = tile.reshape(64, tiles * width)
    temp = scratch("slice-temp", 32 * tiles * width, np.uint64)
    for shift, low_mask in _TRANSPOSE_ROUNDS:
        # Rows k and k + j (k & j == 0) swap their off-diagonal j x j sub-blocks: the bits
        # with ``q & j`` set in row k and the bits without in row k + j.
        j = int(shift)
        pairs = rows.reshape(32 // j, 2, j * tiles * width)
        upper, lower = pairs[:, 0], pairs[:, 1]
        swap = temp.reshape(upper.shape)
        np.right_shift(upper, shift, out=swap)
        swap ^= lower
        swap &= low_mask
        lower ^= swap
        swap <<= shift
        upper ^= swap
    # Row q of the tile now holds bit q of its 64 zones' column: bit position 64 * c + q.
    sliced[first_column:last_column, :, first_word:last_word] = tile.transpose(2, 0, 1)
