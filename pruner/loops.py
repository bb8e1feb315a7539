"""The SBBF insert loops and xxHash64 of whole fragments, compiled by Numba (imported only
by a build, never by a query, through :mod:`pruner.kernels`).

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

``make install`` compiles these loops ahead of time (:mod:`pruner.kernels`), and builds run
that module. Where it is missing, Numba compiles them just in time: ``cache=True`` keeps the
compiled code beside this file (or in Numba's per-user cache when this directory is not
writable), so it is compiled once (about 2 s), and a process's first build still pays about
0.36 s to import Numba and load it. ``nogil``: a build's threads insert side by side.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "insert_pieces",
    "insert_words",
    "order_and_insert",
    "part_sums",
    "xxh64_bytes",
    "xxh64_fixed",
]

# xxHash64's primes (as :mod:`pruner.hashing` has them): the loops below are xxHash64 as
# its specification gives it, one value at a time, for a build's whole fragment.
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(inline="always")
def _first_word(h: np.uint64, num_blocks: np.uint64) -> np.int64:
    """The first of the 8 words of the block a hash goes to in a filter of ``num_blocks``."""
    return np.int64(((h >> np.uint64(32)) * num_blocks) >> np.uint64(32)) * 8


@numba.njit(inline="always")
def _mask(low: np.uint64, salt: np.ndarray, word: int) -> np.uint32:
    """The bit a hash whose low word is ``low`` sets in word ``word`` of its block (the same
    at any filter size)."""
    return np.uint32(1) << np.uint32(((low * salt[word]) & _LOW32) >> np.uint64(27))


@numba.njit(cache=True, nogil=True)
def insert_words(
    hashes: np.ndarray, bounds: np.ndarray, words: np.ndarray, salt: np.ndarray
) -> None:
    """Set, in ``words`` ((zones, 8 x blocks) uint32, zeroed or a filter to add to), the
    bits of ``hashes[bounds[z]:bounds[z + 1]]`` in filter ``z``, for every zone ``z``;
    ``salt``: :data:`pruner.sbbf.SALT` as uint64."""
    num_blocks = np.uint64(words.shape[1] // 8)
    for zone in range(len(bounds) - 1):
        for i in range(bounds[zone], bounds[zone + 1]):
            h = hashes[i]
            first, low = _first_word(h, num_blocks), h & _LOW32
            for word in range(8):
                words[zone, first + word] |= _mask(low, salt, word)


@numba.njit(cache=True, nogil=True)
def insert_pieces(
    hashes: np.ndarray, starts: np.ndarray, stops: np.ndarray, words: np.ndarray, salt: np.ndarray
) -> None:
    """Set, in the one filter ``words`` ((1, 8 x blocks) uint32), the bits of
    ``hashes[starts[i]:stops[i]]`` for every ``i``, in that order: pieces of many runs
    inserted together without first copying them into one array."""
    num_blocks = np.uint64(words.shape[1] // 8)
    for piece in range(len(starts)):
        for i in range(starts[piece], stops[piece]):
            h = hashes[i]
            first, low = _first_word(h, num_blocks), h & _LOW32
            for word in range(8):
                words[0, first + word] |= _mask(low, salt, word)


@numba.njit(cache=True, nogil=True)
def order_and_insert(
    hashes: np.ndarray,
    order_bits: int,
    words: np.ndarray,
    salt: np.ndarray,
    bounds: np.ndarray,
    zone_words: np.ndarray,
) -> tuple[np.ndarray, int]:
    """``hashes`` in the order of their top ``order_bits`` bits (a stable counting sort),
    each also set in the one filter ``words`` ((1, 8 x blocks) uint32, zeroed) and, when
    ``zone_words`` has rows, in zone ``z``'s filter for ``hashes[bounds[z]:bounds[z + 1]]``
    (as :func:`insert_words`); and how many of ``words``' bits are set.

    One pass counts the keys, one places the hashes and sets their bits in both filters
    (a value's bits within a block are the same at any filter size: computed once), one
    counts the filter's bits: a fragment's zones and its share of the hierarchy
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
    zones = zone_words.shape[0]
    zone_blocks = np.uint64(zone_words.shape[1] // 8)
    zone = 0
    for i in range(len(hashes)):
        h = hashes[i]
        key = h >> shift
        ordered[counts[key]] = h
        counts[key] += 1
        first, low = _first_word(h, num_blocks), h & _LOW32
        if zones:
            while i >= bounds[zone + 1]:
                zone += 1
            zone_first = _first_word(h, zone_blocks)
            for word in range(8):
                mask = _mask(low, salt, word)
                words[0, first + word] |= mask
                zone_words[zone, zone_first + word] |= mask
        else:
            for word in range(8):
                words[0, first + word] |= _mask(low, salt, word)
    set_bits = 0
    for w in range(words.shape[1]):
        x = words[0, w]
        x = x - ((x >> np.uint32(1)) & np.uint32(0x55555555))
        x = (x & np.uint32(0x33333333)) + ((x >> np.uint32(2)) & np.uint32(0x33333333))
        x = (x + (x >> np.uint32(4))) & np.uint32(0x0F0F0F0F)
        set_bits += int(((x * np.uint32(0x01010101)) >> np.uint32(24)) & np.uint32(0xFF))
    return ordered, set_bits


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(inline="always")
def _round(acc: np.uint64, lane: np.uint64) -> np.uint64:
    return _rotl(acc + lane * _P2, 31) * _P1


@numba.njit(inline="always")
def _avalanche(h: np.uint64) -> np.uint64:
    h = (h ^ (h >> np.uint64(33))) * _P2
    h = (h ^ (h >> np.uint64(29))) * _P3
    return h ^ (h >> np.uint64(32))


@numba.njit(inline="always")
def _lane(words: np.ndarray, at: int | np.int64) -> np.uint64:
    """The 8 bytes from byte ``at`` of ``words`` (the bytes as little-endian uint64, padded
    by one word) as a little-endian integer: from the two words they straddle."""
    shift = np.uint64((at & 7) * 8)
    low = words[at >> 3] >> shift
    # (w << 1) << (63 - s) is w << (64 - s) without the undefined shift by 64
    return low | ((words[(at >> 3) + 1] << np.uint64(1)) << (np.uint64(63) - shift))


@numba.njit(cache=True, nogil=True)
def xxh64_fixed(values: np.ndarray, width: int, out: np.ndarray) -> None:
    """``out[i]`` = xxHash64 (seed 0) of the ``width`` (1, 2, 4 or 8) little-endian bytes
    of ``values[i]`` (an unsigned integer of that width)."""
    for i in range(len(values)):
        v = np.uint64(values[i])
        h = _P5 + np.uint64(width)
        if width == 8:
            h ^= _round(np.uint64(0), v)
            h = _rotl(h, 27) * _P1 + _P4
        elif width == 4:
            h ^= (v & _LOW32) * _P1
            h = _rotl(h, 23) * _P2 + _P3
        else:
            for k in range(width):
                h ^= ((v >> np.uint64(8 * k)) & np.uint64(0xFF)) * _P5
                h = _rotl(h, 11) * _P1
        out[i] = _avalanche(h)


@numba.njit(cache=True, nogil=True)
def xxh64_bytes(offsets: np.ndarray, words: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = xxHash64 (seed 0) of bytes ``offsets[i]`` to ``offsets[i + 1]`` of
    ``words`` (the data buffer as little-endian uint64, zero-padded by a word at least)."""
    for i in range(len(offsets) - 1):
        at = np.int64(offsets[i])
        end = np.int64(offsets[i + 1])
        if end - at >= 32:
            v1 = _P1 + _P2
            v2 = _P2
            v3 = np.uint64(0)
            v4 = np.uint64(0) - _P1
            while at + 32 <= end:
                v1 = _round(v1, _lane(words, at))
                v2 = _round(v2, _lane(words, at + 8))
                v3 = _round(v3, _lane(words, at + 16))
                v4 = _round(v4, _lane(words, at + 24))
                at += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = (h ^ _round(np.uint64(0), v)) * _P1 + _P4
        else:
            h = _P5
        h += np.uint64(end - np.int64(offsets[i]))
        while at + 8 <= end:
            h ^= _round(np.uint64(0), _lane(words, at))
            h = _rotl(h, 27) * _P1 + _P4
            at += 8
        if at < end:
            tail = _lane(words, at)
            if at + 4 <= end:
                h ^= (tail & _LOW32) * _P1
                h = _rotl(h, 23) * _P2 + _P3
                tail >>= np.uint64(32)
                at += 4
            while at < end:
                h ^= (tail & np.uint64(0xFF)) * _P5
                h = _rotl(h, 11) * _P1
                tail >>= np.uint64(8)
                at += 1
        out[i] = _avalanche(h)


@numba.njit(cache=True, nogil=True)
def part_sums(
    words: np.ndarray, starts: np.ndarray, weights: np.ndarray, start: np.uint64, out: np.ndarray
) -> None:
    """``out[r, p]`` = ``start`` plus the sum, modulo 2^64, of ``words[r, w] * weights[w]``
    for the words ``starts[p] <= w < starts[p + 1]`` of row ``r`` (a companion's checksums:
    :func:`pruner.index.hierarchy.layout._part_checksums`), in one pass over the words and
    no temporary (NumPy's product and ``reduceat`` made a copy of every piece: 0.15 s of a
    20M-row build's 0.5 s companion)."""
    for r in range(words.shape[0]):
        for p in range(len(starts) - 1):
            total = start
            for w in range(starts[p], starts[p + 1]):
                total += words[r, w] * weights[w]
            out[r, p] = total
