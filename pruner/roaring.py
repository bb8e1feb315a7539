"""Lance's per-fragment Roaring bitmaps, as bytes: one codec for all their uses.

Two Lance buffers share one layout (``docs/format.md``): an index file's ``null_bitmap``
(the null row offsets of each fragment) and a scan's ``row_addr_allowlist`` (the row
offsets to read of each fragment). It is a u32 fragment count, then per fragment in
ascending id order a u32 id, a u32 byte length and the fragment's bitmap in Roaring's
portable format; every integer little-endian.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import numpy as np
from pyroaring import BitMap

__all__ = ["decode", "encode", "offsets_bitmap", "ranges_bitmap"]


def offsets_bitmap(offsets: np.ndarray) -> BitMap:
    """The bitmap of ``offsets`` with array and bitmap containers only, never run containers:
    what Lance (roaring-rs) writes in an index file's ``null_bitmap``."""
    return BitMap(offsets, optimize=False)


def ranges_bitmap(ranges: Iterable[tuple[int, int]]) -> BitMap:
    """The bitmap of the offsets in the ``[start, end)`` ranges (Roaring chooses the
    containers, run containers included: Lance's scan reads them)."""
    offsets = BitMap()
    for start, end in ranges:
        offsets.add_range(start, end)
    return offsets


def encode(bitmaps: Mapping[int, BitMap]) -> bytes:
    """The bytes of one bitmap per fragment id (written in ascending id order).

    >>> encode({1: ranges_bitmap([(0, 10)])}).hex()[:24]  # 1 fragment: id 1, 15 bytes
    '01000000010000000f000000'
    """
    parts = [struct.pack("<I", len(bitmaps))]
    for fragment_id in sorted(bitmaps):
        serialized = bitmaps[fragment_id].serialize()
        parts.append(struct.pack("<II", fragment_id, len(serialized)))
        parts.append(serialized)
    return b"".join(parts)


def decode(data: bytes) -> dict[int, np.ndarray]:
    """Fragment id -> its offsets (ascending uint32), from the bytes :func:`encode` writes.

    Raises:
        struct.error, ValueError, OverflowError: the bytes are damaged.
    """
    (count,) = struct.unpack_from("<I", data, 0)
    position = 4
    result: dict[int, np.ndarray] = {}
    for _ in range(count):
        fragment_id, length = struct.unpack_from("<II", data, position)
        position += 8
        if position + length > len(data):
            raise ValueError("bitmap runs past the end of the buffer")
        chunk = data[position : position + length]
        position += length
        result[fragment_id] = (
            np.array(BitMap.deserialize(chunk), dtype=np.uint32)
            if length
            else np.zeros(0, dtype=np.uint32)
        )
    return result
