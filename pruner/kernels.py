"""The SBBF insert loops, compiled by Numba (imported only by a build, never by a query).

Inserting a value sets one bit in each of the 8 words of one 32-byte block
(:mod:`pruner.sbbf`). NumPy cannot OR scattered bits with repeats in place without
``bitwise_or.at`` (slow), so the NumPy insert this replaces scattered ones into a
byte-per-bit image 8x the filter's size and packed it: fine for a zone's 32 KiB filter,
but a hierarchy's dataset filter (16 MiB at 5M values, 64 MiB at 20M) made a 128-512 MiB
image, and the build with the hierarchy cost 1.8x the build without it. This loop sets the
bits in the filter itself: one cache line per value. Measured on this machine (2 cores
shared with a mutation run): 5M random hashes into one 16 MiB filter 0.76 s with the
image, 0.26 s here (0.06 s when the hashes come sorted, as a fragment's distinct hashes
do); 5M into 8,192-value zones 0.12-0.18 s -> 0.08-0.10 s.

``cache=True`` keeps the compiled code beside this file (or in Numba's per-user cache when
this directory is not writable), so it is compiled once (about 2 s); a process's first build
still pays 0.6-1 s to import Numba and load it. A 1M-row `pruner index build` in a new
process took as long as before (2.1-2.6 s against 2.1-2.4 s, five runs each); larger builds,
and every later build of a process, are faster. ``nogil``: a build's threads insert side by
side.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["insert_words", "order_and_insert"]


@numba.njit(cache=True, nogil=True)
def insert_words(
    hashes: np.ndarray, bounds: np.ndarray, words: np.ndarray, salt: np.ndarray
) -> None:
    """Set, in ``words`` ((zones, 8 x blocks) uint32, zeroed or a filter to add to), the
    bits of ``hashes[bounds[z]:bounds[z + 1]]`` in filter ``z``, for every zone ``z``;
    ``salt``: :data:`pruner.sbbf.SALT` as uint64."""
    num_blocks = np.uint64(words.shape[1] // 8)
    low32 = np.uint64(0xFFFFFFFF)
    for zone in range(len(bounds) - 1):
        for i in range(bounds[zone], bounds[zone + 1]):
            h = hashes[i]
            block = ((h >> np.uint64(32)) * num_blocks) >> np.uint64(32)
            low = h & low32
            first = np.int64(block) * 8
            for word in range(8):
                bit = ((low * salt[word]) & low32) >> np.uint64(27)
                words[zone, first + word] |= np.uint32(1) << np.uint32(bit)


@numba.njit(cache=True, nogil=True)
def order_and_insert(
    hashes: np.ndarray, order_bits: int, words: np.ndarray, salt: np.ndarray
) -> tuple[np.ndarray, int]:
    """``hashes`` in the order of their top ``order_bits`` bits (a stable counting sort),
    each also set in the one filter ``words`` ((1, 8 x blocks) uint32, zeroed); and how
    many of the filter's bits are set.

    One pass counts the keys, one places the hashes and sets their bits, one counts the
    filter's bits: a fragment's share of the hierarchy
    (:class:`pruner.index.hierarchy.FragmentCoarse`) in one compiled call, where NumPy
    took an argsort, a gather, an insert and a popcount."""
    shift = np.uint64(64 - order_bits)
    counts = np.zeros((1 << order_bits) + 1, np.int64)
    for i in range(len(hashes)):
        counts[(hashes[i] >> shift) + np.uint64(1)] += 1
    for k in range(1, len(counts)):
        counts[k] += counts[k - 1]
    ordered = np.empty_like(hashes)
    num_blocks = np.uint64(words.shape[1] // 8)
    low32 = np.uint64(0xFFFFFFFF)
    for i in range(len(hashes)):
        h = hashes[i]
        key = h >> shift
        ordered[counts[key]] = h
        counts[key] += 1
        first = np.int64(((h >> np.uint64(32)) * num_blocks) >> np.uint64(32)) * 8
        low = h & low32
        for word in range(8):
            bit = ((low * salt[word]) & low32) >> np.uint64(27)
            words[0, first + word] |= np.uint32(1) << np.uint32(bit)
    set_bits = 0
    for w in range(words.shape[1]):
        x = words[0, w]
        x = x - ((x >> np.uint32(1)) & np.uint32(0x55555555))
        x = (x & np.uint32(0x33333333)) + ((x >> np.uint32(2)) & np.uint32(0x33333333))
        x = (x + (x >> np.uint32(4))) & np.uint32(0x0F0F0F0F)
        set_bits += int(((x * np.uint32(0x01010101)) >> np.uint32(24)) & np.uint32(0xFF))
    return ordered, set_bits
