"""The companion file's layout: its name, magic, version and header prefix, the checksums
of its pieces, the block-major order of its filters, and a section's image as probes read it
(the format is described in :mod:`pruner.index.hierarchy`)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pyarrow as pa

from pruner import sbbf, storage

COMPANION_NAME = "bloomfilter.hierarchy"
MAGIC = b"PRUNERH1"
VERSION = 6
"""The index file's fingerprint is its size and the xxHash64 of its last bytes (Lance's
footer: the offsets of every column page and global buffer, which move with the content).
Since version 6 the zones' table is stored compressed (:func:`zones_codec`)."""

_PREFIX = len(MAGIC) + 4 + 8  # magic, header length, header checksum
_BLOCK = sbbf.BLOCK_BYTES
_CELL = np.dtype((np.void, _BLOCK))  # one filter block as one item
_DATASET_CHUNK = 1024
"""The dataset filter is checksummed (and read) in chunks of this many bytes: a checksum
per 32-byte block cost the build more than the rest of the companion."""


def zones_codec() -> pa.Codec:
    """The zones' table is stored compressed with zstd: at 100M rows its 12,000 zones' 25 B
    each (305 KB, read by every cold open) took 6 KB, so the open of a companion on a store
    reads it with the header, in one request, up to a billion rows."""
    return pa.Codec("zstd")


def companion_path(index_file: storage.PathLike) -> storage.Location:
    return storage.location(index_file).with_name(COMPANION_NAME)


_SUM_START = np.uint64(0x2545F4914F6CDD1D)


@functools.lru_cache(maxsize=32)
def _weights(words: int) -> np.ndarray:
    """Odd, well-mixed 64-bit weights of the word positions 0 .. ``words - 1`` of a piece
    (SplitMix64's finaliser of 1, 2, ..., with the lowest bit set)."""
    z = np.arange(1, words + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    weights = (z ^ (z >> np.uint64(31))) | np.uint64(1)
    weights.flags.writeable = False
    return weights


def _row_checksums(rows: np.ndarray) -> np.ndarray:
    """The checksum of each row of a 2-D uint8 array of rows a multiple of 8 bytes long:
    modulo 2^64, a constant plus the sum of the row's little-endian 64-bit words, each times
    an odd weight of its position (:func:`_weights`).

    A change of any one word changes it (an odd number is invertible modulo 2^64); a row
    zeroed with its checksum fails (the constant); other damage passes with a chance of
    about 2^-64. NumPy sums all rows in one pass: xxHash64 row by row cost a Python call per
    row (tens of thousands per build and per many-value probe).
    """
    words = np.ascontiguousarray(rows).view("<u8")
    return np.einsum("ij,j->i", words, _weights(words.shape[1])) + _SUM_START


def _block_major(
    filters: np.ndarray | list[np.ndarray], first: int = 0, stop: int | None = None
) -> np.ndarray:
    """(n, B*32) filters (or n filters of B*32 bytes) -> (B, n*32): row b holds block b of
    every filter, in order; or only its rows ``first`` to ``stop``."""
    if isinstance(filters, list):
        if not filters:
            return np.zeros((0 if stop is None else stop - first, 0), np.uint8)
        blocks = len(filters[0]) // _BLOCK
        stop = blocks if stop is None else stop
        # Each block as one 32-byte item, as below (64 MB of fragment filters, 1,000 of
        # them: 43-59 ms against 63-100 ms as bytes along three axes).
        rows = [np.ascontiguousarray(f).view(_CELL)[first:stop] for f in filters]
        return np.stack(rows, axis=1).view(np.uint8).reshape(stop - first, len(filters) * _BLOCK)
    count, num_bytes = filters.shape
    blocks = num_bytes // _BLOCK
    stop = blocks if stop is None else stop
    # Each block as one 32-byte item: NumPy moves whole items, not bytes along three axes
    # (80 MB of zones, 20M rows: 31-46 ms against 58-185 ms).
    cells = np.ascontiguousarray(filters).view(_CELL).reshape(count, blocks)[:, first:stop]
    return np.ascontiguousarray(cells.T).view(np.uint8).reshape(stop - first, count * _BLOCK)


def _part_checksums(rows: np.ndarray, edges: list[int]) -> np.ndarray:
    """(rows, parts): :func:`_row_checksums` of each row's bytes ``edges[p]`` to
    ``edges[p + 1]`` (multiples of 8), for every part ``p`` at once, by a compiled pass
    (:func:`pruner.kernels.part_sums`; a build's, never a query's: a call per part cost 10
    us each, 13,000 a companion at 100M rows)."""
    from pruner.kernels import part_sums  # compiled: a query never imports it

    words = np.ascontiguousarray(rows).view("<u8")
    if len(edges) < 2:
        return np.zeros((len(words), 0), np.uint64)
    starts = np.array([edge // 8 for edge in edges], np.int64)
    weights = np.concatenate(
        [_weights(int(b - a)) for a, b in itertools.pairwise(starts)] or [np.zeros(0, np.uint64)]
    )
    # weights[w] is word w's weight within its part: the parts' weights side by side
    placed = np.zeros(words.shape[1], np.uint64)
    placed[starts[0] : starts[0] + len(weights)] = weights
    sums = np.empty((len(words), len(edges) - 1), np.uint64)
    part_sums(words, starts, placed, _SUM_START, sums)
    return sums


class Section:
    """One section of an open companion as probes read it: an image of its ``rows`` x
    ``edges[-1]`` bytes, zeroed until read (pages never written are never allocated), in
    which a unit (``row * parts + part``; part ``p`` of a row is its bytes ``edges[p]`` to
    ``edges[p + 1]``; the unit's checksum is the section's ``unit``-th) is used only once
    it passed its checksum, and is never written again after that."""

    def __init__(self, offset: int, sums: int, rows: int, edges: list[int]) -> None:
        self.offset = offset
        self.sums = sums
        self.rows = rows
        self.edges = np.array(edges, np.int64)
        self.parts = len(edges) - 1
        self.width = int(edges[-1])
        self.image: np.ndarray | None = None
        self.checked = np.zeros(0, bool)
        self.written = 0  # bytes read into the image, what keeping it costs

    def drop(self) -> None:
        self.image, self.checked, self.written = None, np.zeros(0, bool), 0
