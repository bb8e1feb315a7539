"""The SBBF insert loop, compiled by Numba (imported only by a build, never by a query).

Inserting a value sets one bit in each of the 8 words of one 32-byte block
(:mod:`pruner.sbbf`). NumPy cannot OR scattered bits with repeats in place without
``bitwise_or.at`` (slow), so the NumPy insert this replaces scattered ones into a
byte-per-bit image 8x the filter's size and packed it: fine for a zone's 32 KiB filter,
but a hierarchy's dataset filter (16 MiB at 5M values, 64 MiB at 20M) made a 128-512 MiB
image, and the build with the hierarchy cost 1.8x the build without it. This loop sets the
bits in the filter itself: one cache line per value. Measured on this machine
(``bench/cold.py``'s build cost, 1M rows, with a mutation run beside it): the build with the
hierarchy 0.54-0.66 s -> 0.34-0.46 s, 1.75-1.85x -> 1.06-1.29x the build without it.

``cache=True`` keeps the compiled code beside this file (or in Numba's per-user cache when
this directory is not writable): a process's first build loads it in milliseconds instead
of compiling it (about a second). ``nogil``: a build's threads insert side by side.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["insert_words"]

_SALT = np.array(
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
    dtype=np.uint64,
)


@numba.njit(cache=True, nogil=True)
def insert_words(hashes: np.ndarray, bounds: np.ndarray, words: np.ndarray) -> None:
    """Set, in ``words`` ((zones, 8 x blocks) uint32, zeroed or a filter to add to), the
    bits of ``hashes[bounds[z]:bounds[z + 1]]`` in filter ``z``, for every zone ``z``."""
    num_blocks = np.uint64(words.shape[1] // 8)
    low32 = np.uint64(0xFFFFFFFF)
    for zone in range(len(bounds) - 1):
        for i in range(bounds[zone], bounds[zone + 1]):
            h = hashes[i]
            block = ((h >> np.uint64(32)) * num_blocks) >> np.uint64(32)
            low = h & low32
            first = np.int64(block) * 8
            for word in range(8):
                bit = ((low * _SALT[word]) & low32) >> np.uint64(27)
                words[zone, first + word] |= np.uint32(1) << np.uint32(bit)
