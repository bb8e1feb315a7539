"""xxHash64 (seed 0) of whole Arrow arrays, with Lance's byte encoding per type.

Lance's BLOOMFILTER index hashes each value's bytes with xxHash64, seed 0. Which bytes is
fixed by the column's physical Arrow type (``docs/format.md``, "Bytes hashed"):

=========================================================  ==================================
Arrow type                                                 bytes hashed
=========================================================  ==================================
int8 / uint8                                               1 byte
int16 / uint16                                             2 bytes little-endian
int32 / uint32, date32, time32                             4 bytes little-endian
int64 / uint64, date64, time64, timestamp (any unit, tz)   8 bytes little-endian
float32 / float64                                          raw IEEE bits, no canonicalisation
utf8 / large_utf8, binary / large_binary                   the raw bytes, no length prefix
=========================================================  ==================================

Why a NumPy xxHash64 instead of the ``xxhash`` package: the package hashes one Python
``bytes`` at a time (110-170 ns per int64 with the call overhead); here every step of the
algorithm runs on a whole chunk of values at once (a few ns per int64). The ``xxhash``
package stays the oracle in the tests.

The algorithm (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md), for an
input of ``length`` bytes read as little-endian 8-byte lanes::

    length >= 32: four accumulators eat 32-byte stripes, then are merged into h
    length <  32: h = PRIME5
    h += length
    each remaining 8-byte lane:  h ^= round(0, lane); h = rotl(h, 27) * PRIME1 + PRIME4
    a remaining 4-byte word:     h ^= word * PRIME1;  h = rotl(h, 23) * PRIME2 + PRIME3
    each remaining byte:         h ^= byte * PRIME5;  h = rotl(h, 11) * PRIME1
    avalanche

Every value of a given length follows the same straight-line program, so values are
grouped by length and each group is hashed with whole-array operations. Fixed-width types
are one group; strings are read through an unaligned 8-byte lane reader built from two
aligned words of a zero-padded copy of the Arrow data buffer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import xxhash

from pruner.buffers import scratch
from pruner.errors import UnsupportedTypeError

__all__ = [
    "hash_alike",
    "hash_array",
    "hash_input_width",
    "is_indexable",
    "is_uuid",
    "plain_type",
    "xxh64_bytes_array",
]

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
PRIME1 = _U64(0x9E3779B185EBCA87)
PRIME2 = _U64(0xC2B2AE3D27D4EB4F)
PRIME3 = _U64(0x165667B19E3779F9)
PRIME4 = _U64(0x85EBCA77C2B2AE63)
PRIME5 = _U64(0x27D4EB2F165667C5)
_ACC1_INIT = _U64((int(PRIME1) + int(PRIME2)) & _MASK64)
_ACC4_INIT = _U64(-int(PRIME1) & _MASK64)
_LOW32 = _U64(0xFFFFFFFF)
_BYTE = _U64(0xFF)

# Values are hashed in chunks this large so that temporaries stay in the L2 cache
# (FACTS.md section 3: whole-array passes were 2-3x slower).
CHUNK_VALUES = 1 << 15

LaneReader = Callable[[int], np.ndarray]


def _workspace(count: int) -> list[np.ndarray]:
    """Seven uint64 temporaries of ``count`` values, reused by every call in this thread."""
    return [scratch(f"xxh64-{i}", count, np.uint64) for i in range(7)]


def _rotl_mul(x: np.ndarray, r: int, prime: np.uint64, scratch: np.ndarray) -> None:
    """``x = rotl(x, r) * prime`` in place (``scratch`` is overwritten)."""
    np.right_shift(x, _U64(64 - r), out=scratch)
    np.left_shift(x, _U64(r), out=x)
    np.bitwise_or(x, scratch, out=x)
    np.multiply(x, prime, out=x)


def _round(acc: np.ndarray, lane: np.ndarray, scratch: np.ndarray) -> None:
    """``acc = round(acc, lane)`` in place: ``rotl(acc + lane * PRIME2, 31) * PRIME1``."""
    np.multiply(lane, PRIME2, out=scratch)
    np.add(acc, scratch, out=acc)
    _rotl_mul(acc, 31, PRIME1, scratch)


def _avalanche(h: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    for shift, prime in ((33, PRIME2), (29, PRIME3)):
        np.right_shift(h, _U64(shift), out=scratch)
        np.bitwise_xor(h, scratch, out=h)
        np.multiply(h, prime, out=h)
    np.right_shift(h, _U64(32), out=scratch)
    np.bitwise_xor(h, scratch, out=h)
    return h


def _xxh64_same_length(read_lane: LaneReader, length: int, count: int) -> np.ndarray:
    """xxHash64 of ``count`` inputs that all have ``length`` bytes.

    ``read_lane(pos)`` returns, for every input, the 8 bytes starting at byte ``pos`` as a
    little-endian uint64 (bytes past the end of an input may hold anything: they are masked
    off here). The result lives in this thread's workspace: copy it out before the next call.
    """
    scratch, lane_hash, h, *accs = _workspace(count)
    pos = 0
    if length >= 32:
        for acc, init in zip(accs, (_ACC1_INIT, PRIME2, _U64(0), _ACC4_INIT), strict=True):
            acc.fill(init)
        while pos + 32 <= length:
            for i, acc in enumerate(accs):
                _round(acc, read_lane(pos + 8 * i), scratch)
            pos += 32
        h.fill(0)
        for acc, r in zip(accs, (1, 7, 12, 18), strict=True):
            np.right_shift(acc, _U64(64 - r), out=scratch)
            np.left_shift(acc, _U64(r), out=lane_hash)
            np.bitwise_or(lane_hash, scratch, out=lane_hash)
            np.add(h, lane_hash, out=h)
        for acc in accs:
            lane_hash.fill(0)
            _round(lane_hash, acc, scratch)
            np.bitwise_xor(h, lane_hash, out=h)
            np.multiply(h, PRIME1, out=h)
            np.add(h, PRIME4, out=h)
        h += _U64(length)
    else:
        h.fill(_U64((int(PRIME5) + length) & _MASK64))
    while pos + 8 <= length:
        np.multiply(read_lane(pos), PRIME2, out=lane_hash)
        _rotl_mul(lane_hash, 31, PRIME1, scratch)
        np.bitwise_xor(h, lane_hash, out=h)
        _rotl_mul(h, 27, PRIME1, scratch)
        np.add(h, PRIME4, out=h)
        pos += 8
    if pos + 4 <= length:
        np.bitwise_and(read_lane(pos), _LOW32, out=lane_hash)
        np.multiply(lane_hash, PRIME1, out=lane_hash)
        np.bitwise_xor(h, lane_hash, out=h)
        _rotl_mul(h, 23, PRIME2, scratch)
        np.add(h, PRIME3, out=h)
        pos += 4
    if pos < length:
        tail = read_lane(pos)
        for shift in range(0, 8 * (length - pos), 8):
            np.right_shift(tail, _U64(shift), out=lane_hash)
            np.bitwise_and(lane_hash, _BYTE, out=lane_hash)
            np.multiply(lane_hash, PRIME5, out=lane_hash)
            np.bitwise_xor(h, lane_hash, out=h)
            _rotl_mul(h, 11, PRIME1, scratch)
    return _avalanche(h, scratch)


def _constant_reader(lanes: np.ndarray) -> LaneReader:
    """Fixed-width values: the whole value is lane 0 (upper bytes zero)."""
    return lambda _pos: lanes


def _strided_reader(raw: np.ndarray, first: int, length: int, count: int) -> LaneReader:
    """Same-length values back to back from byte ``first``: each lane is a strided view."""

    def read(pos: int) -> np.ndarray:
        return np.ndarray((count,), dtype="<u8", buffer=raw, offset=first + pos, strides=(length,))

    return read


def _gather_reader(words: np.ndarray, starts: np.ndarray) -> LaneReader:
    """Values at arbitrary byte ``starts``: each lane from two aligned words."""

    def read(pos: int) -> np.ndarray:
        byte_pos = starts + pos
        word_index = byte_pos >> 3
        shift = ((byte_pos & 7) << 3).astype(np.uint64)
        low = words[word_index] >> shift
        # (w << 1) << (63 - s) is w << (64 - s) without the undefined shift by 64.
        high = (words[word_index + 1] << _U64(1)) << (_U64(63) - shift)
        return low | high

    return read


def _xxh64_fixed_width(values: np.ndarray, width: int, out: np.ndarray) -> np.ndarray:
    """xxHash64 of each element of an unsigned integer array, ``width`` bytes each."""
    widened = None if values.dtype == np.uint64 else scratch("widened", CHUNK_VALUES, np.uint64)
    for start in range(0, len(values), CHUNK_VALUES):
        chunk = values[start : start + CHUNK_VALUES]
        if widened is None:
            lanes = chunk
        else:
            lanes = widened[: len(chunk)]
            np.copyto(lanes, chunk)
        out[start : start + len(lanes)] = _xxh64_same_length(
            _constant_reader(lanes), width, len(lanes)
        )
    return out


def _padded_words(data: np.ndarray) -> np.ndarray:
    """The bytes as uint64 words, zero-padded so that any 8-byte read (plus one) is in range."""
    words = np.zeros(len(data) // 8 + 2, dtype=np.uint64)
    words.view(np.uint8)[: len(data)] = data
    return words


def xxh64_bytes_array(
    offsets: np.ndarray, data: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """xxHash64 of each variable-length value ``data[offsets[i]:offsets[i+1]]``.

    Args:
        offsets: int32 or int64 Arrow offsets (``n + 1`` entries).
        data: the uint8 data buffer the offsets point into.
        out: where to write the ``n`` hashes (a new array when omitted).
    """
    count = len(offsets) - 1
    if out is None:
        out = np.empty(count, dtype=np.uint64)
    if count == 0:
        return out
    base = int(offsets[0])
    words = _padded_words(data[base : int(offsets[-1])])
    raw = words.view(np.uint8)
    for chunk_start in range(0, count, CHUNK_VALUES):
        chunk_offsets = offsets[chunk_start : chunk_start + CHUNK_VALUES + 1].astype(np.int64)
        starts = chunk_offsets[:-1] - base
        lengths = np.diff(chunk_offsets)
        chunk_out = out[chunk_start : chunk_start + len(lengths)]
        if lengths.min() == lengths.max():
            length = int(lengths[0])
            reader = _strided_reader(raw, int(starts[0]), length, len(lengths))
            chunk_out[:] = _xxh64_same_length(reader, length, len(lengths))
            continue
        order = np.argsort(lengths, kind="stable")
        sorted_lengths = lengths[order]
        cuts = np.flatnonzero(np.diff(sorted_lengths)) + 1
        bounds = np.concatenate(([0], cuts, [len(lengths)])).tolist()
        for a, b in itertools.pairwise(bounds):
            members = order[a:b]
            reader = _gather_reader(words, starts[members])
            chunk_out[members] = _xxh64_same_length(reader, int(sorted_lengths[a]), b - a)
    return out


# Arrow type -> width in bytes of the value hashed; 0 means variable width (raw bytes).
def hash_input_width(arrow_type: pa.DataType) -> int:
    """Bytes Lance hashes per value of ``arrow_type`` (0 for variable-width types).

    Raises:
        UnsupportedTypeError: Lance does not build bloom filters on this type.
    """
    t = arrow_type
    if pa.types.is_int8(t) or pa.types.is_uint8(t):
        return 1
    if pa.types.is_int16(t) or pa.types.is_uint16(t):
        return 2
    if (
        pa.types.is_int32(t)
        or pa.types.is_uint32(t)
        or pa.types.is_date32(t)
        or pa.types.is_time32(t)
        or pa.types.is_float32(t)
    ):
        return 4
    if (
        pa.types.is_int64(t)
        or pa.types.is_uint64(t)
        or pa.types.is_date64(t)
        or pa.types.is_time64(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_float64(t)
    ):
        return 8
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return 0
    raise UnsupportedTypeError(
        f"cannot build a bloom filter on Arrow type {t}: Lance's BLOOMFILTER index supports "
        "integers, float32/64, strings, binary, dates, times and timestamps; cast the column "
        "to one of those (e.g. decimal to string) or index another column"
    )


def is_indexable(arrow_type: pa.DataType) -> bool:
    """True when Lance (and so pruner) can build a bloom filter on ``arrow_type``."""
    try:
        hash_input_width(arrow_type)
    except UnsupportedTypeError:
        return False
    return True


def is_uuid(arrow_type: pa.DataType) -> bool:
    """pyarrow's ``arrow.uuid`` (how it reads Parquet's UUID logical type)."""
    return (
        isinstance(arrow_type, pa.BaseExtensionType) and arrow_type.extension_name == "arrow.uuid"
    )


def plain_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type whose values hash as ``arrow_type``'s do: a dictionary's value type, and the
    offset layout of a view type (``string_view`` -> ``large_string``). Parquet writers put
    these in schemas (Polars, DataFusion and tpchgen-cli write view types); a value's bytes,
    and so its hash, do not depend on which of them holds it.

    >>> plain_type(pa.dictionary(pa.int32(), pa.string_view()))
    DataType(large_string)
    """
    if pa.types.is_dictionary(arrow_type):
        return plain_type(arrow_type.value_type)
    if pa.types.is_string_view(arrow_type):
        return pa.large_string()
    if pa.types.is_binary_view(arrow_type):
        return pa.large_binary()
    return arrow_type


_SMALL_OFFSETS = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def hash_alike(a: pa.DataType, b: pa.DataType) -> bool:
    """Do values of types ``a`` and ``b`` hash alike, so one index serves files that store a
    column as either (``string``, ``large_string``, ``string_view`` and a dictionary of
    strings do; ``int32`` and ``int64`` do not: their widths differ)?

    >>> hash_alike(pa.string_view(), pa.string()), hash_alike(pa.int32(), pa.int64())
    (True, False)
    """
    a, b = plain_type(a), plain_type(b)
    return _SMALL_OFFSETS.get(a, a) == _SMALL_OFFSETS.get(b, b)


def _plain(array: pa.Array) -> pa.Array:
    """``array`` at its :func:`plain_type`."""
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    target = plain_type(array.type)
    return array if target == array.type else array.cast(target)


_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


_FEW = 8
"""Arrays of at most this many values (a query's literals) are hashed one value at a time by
the xxhash package: the vectorised kernels cost ~0.1 ms to set up, a value costs ~1 us."""


def _hash_chunk(array: pa.Array, out: np.ndarray, compiled: bool) -> np.ndarray:
    width = hash_input_width(array.type)
    buffers = array.buffers()
    if compiled:
        from pruner import kernels  # a build's: a query never imports the compiled loops
    if width:
        dtype = _UINT_OF_WIDTH[width]
        raw = np.frombuffer(buffers[1], dtype=dtype, count=array.offset + len(array))
        if compiled:
            kernels.xxh64_fixed(raw[array.offset :], width, out)
            return out
        if len(array) <= _FEW:
            for i, value in enumerate(raw[array.offset :]):
                out[i] = xxhash.xxh64_intdigest(value.astype(f"<u{width}").tobytes())
            return out
        return _xxh64_fixed_width(raw[array.offset :], width, out)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offset_type = np.int64 if large else np.int32
    offsets = np.frombuffer(buffers[1], dtype=offset_type, count=array.offset + len(array) + 1)
    offsets = offsets[array.offset :]
    data_buffer = buffers[2]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    if compiled:
        kernels.xxh64_bytes(offsets, _padded_words(data), out)
        return out
    if len(array) <= _FEW:
        bounds = offsets.tolist()
        for i in range(len(array)):
            out[i] = xxhash.xxh64_intdigest(data[bounds[i] : bounds[i + 1]].tobytes())
        return out
    return xxh64_bytes_array(offsets, data, out)


def hash_array(
    array: pa.Array | pa.ChunkedArray, out: np.ndarray | None = None, *, compiled: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Hash every value of an Arrow array the way Lance's bloom filter index does.

    Args:
        array: the values; any type whose :func:`plain_type` :func:`hash_input_width`
            accepts.
        out: optional uint64 array of ``len(array)`` to write the hashes into.
        compiled: hash with the compiled loops of :mod:`pruner.kernels` (a build's whole
            fragments: 5-10x faster on integers, 2x on strings, after Numba's import and
            load; equal hashes, tested).

    Returns:
        ``(hashes, valid)``: one uint64 per position (the hash of a null is meaningless) and
        a boolean validity mask, or ``None`` when the array has no nulls.

    Raises:
        UnsupportedTypeError: the array's type cannot be indexed.

    >>> hashes, valid = hash_array(pa.array([b""], pa.binary()))
    >>> int(hashes[0])
    17241709254077376921
    """
    hash_input_width(plain_type(array.type))
    chunks = [
        _plain(chunk) for chunk in (array.chunks if isinstance(array, pa.ChunkedArray) else [array])
    ]
    hashes = np.empty(len(array), dtype=np.uint64) if out is None else out[: len(array)]
    position = 0
    for chunk in chunks:
        _hash_chunk(chunk, hashes[position : position + len(chunk)], compiled)
        position += len(chunk)
    if all(chunk.null_count == 0 for chunk in chunks):
        return hashes, None
    valid = np.concatenate(
        [np.asarray(c.is_valid().to_numpy(zero_copy_only=False), dtype=bool) for c in chunks]
    )
    return hashes, valid
