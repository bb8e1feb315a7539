"""Parquet's own bloom filters as a zone source: one zone per row group.

Writers (pyarrow, DuckDB, DataFusion, Spark, Iceberg) may store, per row group and column
chunk, a Split Block Bloom Filter: the SBBF pruner builds (:mod:`pruner.sbbf`), hashed with
xxHash64 seed 0 as Lance's is, but over each value's *Parquet plain encoding*, which is not
always Lance's: an int8 or int16 is hashed as a 4-byte INT32, a timestamp as an INT64 in the
unit the file stores (``shared/seeds/parquet_bloom_filter_spec.md``). So such a zone index
carries :attr:`ZoneIndex.value_type`, the Arrow type whose bytes equal that encoding, and a
probe's literals are cast to it before they are hashed.

Where a chunk's filter sits is in the file's metadata (``bloom_filter_offset``, and
``bloom_filter_length`` when the writer recorded it; Spark does not). At the offset a Thrift
``BloomFilterHeader`` (decoded by thriftpy2 from ``parquet_bloom.thrift``) gives the bitset's
size, algorithm, hash and compression; the bitset follows. A probe reads only the 32-byte
block each hash points at, by offset.

Nothing unproven prunes: a chunk without a filter, with a header the format does not allow
(a size that is not a power of two of 32 bytes to 128 MiB, an unknown algorithm, hash or
compression, a length that disagrees), a bitset cut short, or a file changed since the table
was opened, leaves its row group selected.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import thriftpy2
from thriftpy2.protocol.compact import TCompactProtocol

from pruner import sbbf
from pruner.discover import ParquetFile, arrow_schema
from pruner.errors import IndexFormatError
from pruner.hashing import hash_array, plain_type
from pruner.index.model import ZoneIndex
from pruner.selection import FRAGMENT_SHIFT

__all__ = [
    "SOURCE",
    "STATISTICS_ZONES",
    "NativeFilters",
    "hashable",
    "index_from_filters",
    "native_index",
    "parquet_value_type",
    "read_header",
    "ruled_out_by_statistics",
    "write_parquet",
]

SOURCE = "parquet bloom filter"

NO_FILTER = "no filter in this row group"
NOT_USABLE = "no usable filter for the column"
OTHER_WIDTH = "stored at the other integer width"
"""Why a row group has no filter to probe that are not damage (the writer wrote none, or
the column is stored another way than in the other files); every other problem is a
filter the file has and pruner refused: :attr:`NativeFilters.damaged`."""
"""How explain names a zone decided by a Parquet file's own filter."""

_HEADER_GUESS = 64  # a header is 15-20 bytes; read this much when the length is not recorded
_MAX_BITSET = 128 * 1024 * 1024  # the format's upper bound on a filter
_BLOCK = sbbf.BLOCK_BYTES
_ALL_SET = b"\xff" * sbbf.BLOCK_BYTES
_WHOLE_AT = 16  # from this many values probed, a zone's whole bitset is read once instead
_KEEP_AFTER = 8  # from this many probes of one open table on, the bitsets are kept in memory

_THRIFT = thriftpy2.load(
    str(Path(__file__).with_name("parquet_bloom.thrift")), module_name="pruner_parquet_bloom_thrift"
)

_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


class _Bytes:
    """A read-only transport over bytes that knows how many were consumed."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def read(self, count: int) -> bytes:
        end = self.position + count
        if end > len(self.data):
            raise IndexFormatError("bloom filter header cut short")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk


def read_header(raw: bytes) -> tuple[int, int]:
    """``(bitset bytes, header bytes)`` of the ``BloomFilterHeader`` at the start of ``raw``.

    Raises:
        IndexFormatError: the header does not decode, or describes a filter the Parquet
            format does not define.
    """
    transport = _Bytes(raw)
    header = _THRIFT.BloomFilterHeader()
    try:
        header.read(TCompactProtocol(transport))
    except IndexFormatError:
        raise
    except Exception as err:  # thriftpy2 raises several types on garbage
        raise IndexFormatError(f"bloom filter header does not decode ({err})") from err
    size = header.numBytes
    if not isinstance(size, int) or size < _BLOCK or size > _MAX_BITSET or size & (size - 1):
        raise IndexFormatError(
            f"bloom filter of {size} bytes: the format allows a power of two from "
            f"{_BLOCK} bytes to 128 MiB"
        )
    for part, name, allowed in (
        (header.algorithm, "algorithm", "BLOCK"),
        (header.hash, "hash", "XXHASH"),
        (header.compression, "compression", "UNCOMPRESSED"),
    ):
        if part is None or getattr(part, allowed, None) is None:
            raise IndexFormatError(f"bloom filter with an unknown {name} (not {allowed})")
    return size, transport.position


def parquet_value_type(arrow_type: pa.DataType, column: Any) -> pa.DataType | None:
    """The Arrow type whose little-endian bytes are Parquet's plain encoding of the values
    of ``column`` (a ``pyarrow.parquet.ColumnSchema``) as engines read them at
    ``arrow_type``; None when pruner does not probe that column's filters (booleans,
    decimals, INT96 and fixed-length byte arrays, nested columns, a timestamp whose stored
    unit is not the unit it is read at)."""
    physical = column.physical_type
    arrow_type = plain_type(arrow_type)
    if column.max_repetition_level or column.name != column.path:
        return None  # nested: a leaf's path names its parents (a top-level name may hold dots)
    if pa.types.is_decimal(arrow_type):
        return _decimal_value_type(arrow_type, column)
    if physical == "FIXED_LEN_BYTE_ARRAY" and _logical(column).get("Type") == "UUID":
        # Read as pyarrow's arrow.uuid (DuckDB: UUID); a filter holds the 16 stored bytes.
        uuid = (
            isinstance(arrow_type, pa.BaseExtensionType)
            and arrow_type.extension_name == "arrow.uuid"
        )
        return pa.large_binary() if uuid and column.length == 16 else None
    if physical == "FIXED_LEN_BYTE_ARRAY":
        # The bytes themselves (a UUID, a hash); hashed as binary of that width.
        fixed = pa.types.is_fixed_size_binary(arrow_type)
        same = fixed and arrow_type.byte_width == column.length
        return pa.large_binary() if same and _logical(column).get("Type") == "None" else None
    if physical == "INT32":
        if pa.types.is_integer(arrow_type) and arrow_type.bit_width <= 32:
            # Narrow integers are stored as INT32 (sign- or zero-extended, as the value).
            return pa.int32() if arrow_type.bit_width < 32 else arrow_type
        if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
            return arrow_type
        return None
    if physical == "INT64":
        if pa.types.is_integer(arrow_type) and arrow_type.bit_width == 64:
            return arrow_type
        if pa.types.is_timestamp(arrow_type) or pa.types.is_time64(arrow_type):
            unit = _UNITS.get(_logical(column).get("timeUnit", ""))
            return arrow_type if unit == arrow_type.unit else None
        return None
    if physical == "FLOAT" and pa.types.is_float32(arrow_type):
        return arrow_type
    if physical == "DOUBLE" and pa.types.is_float64(arrow_type):
        return arrow_type
    if physical == "BYTE_ARRAY" and (
        pa.types.is_large_string(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
    ):
        return pa.large_binary()
    return None


def _decimal_value_type(arrow_type: pa.DataType, column: Any) -> pa.DataType | None:
    """A decimal's Parquet encoding is its unscaled integer, at the file's precision and
    scale: an INT32 or INT64, or big-endian two's complement in a FIXED_LEN_BYTE_ARRAY
    (``fixed_size_binary`` of its width). None when the file's scale or precision is not
    the column's, or the decimal is stored another way (a BYTE_ARRAY: its width varies)."""
    logical = _logical(column)
    if (
        logical.get("Type") != "Decimal"
        or logical.get("precision") != arrow_type.precision
        or logical.get("scale") != arrow_type.scale
    ):
        return None
    stored = {"INT32": pa.int32(), "INT64": pa.int64()}.get(column.physical_type)
    if stored is not None:
        return stored
    if column.physical_type == "FIXED_LEN_BYTE_ARRAY" and 0 < column.length <= 32:
        return pa.binary(column.length)
    return None


def index_value_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """What pruner's own index of a Parquet column of ``arrow_type`` hashes its values as,
    when Lance's hashing has no encoding for the type: a decimal as Parquet's writers store
    it (the unscaled integer as an INT32 up to 9 digits, an INT64 up to 18, else big-endian
    in the fewest bytes that hold its precision), a fixed-length byte array as its bytes.
    None for every other type (hashed as Lance hashes it).

    >>> [str(index_value_type(pa.decimal128(p, 2))) for p in (9, 18, 19, 38)]
    ['int32', 'int64', 'fixed_size_binary[9]', 'fixed_size_binary[16]']
    """
    arrow_type = plain_type(arrow_type)
    if pa.types.is_fixed_size_binary(arrow_type):
        return pa.large_binary()
    if not pa.types.is_decimal(arrow_type):
        return None
    if arrow_type.precision <= 9:
        return pa.int32()
    if arrow_type.precision <= 18:
        return pa.int64()
    largest = 10**arrow_type.precision - 1
    return pa.binary(next(n for n in range(9, 33) if largest < 2 ** (8 * n - 1)))


def hashable(values: pa.Array, value_type: pa.DataType) -> pa.Array:
    """``values`` (at their column's plain type) as an array whose hashed bytes are
    ``value_type``'s: a cast, except for decimals, whose Parquet encoding
    (:func:`_decimal_value_type`) is the unscaled integer, little-endian as an INT32 /
    INT64, big-endian bytes of a ``fixed_size_binary`` width otherwise.

    Raises:
        pyarrow.ArrowInvalid: a value does not fit ``value_type`` (the caller widens).

    >>> from decimal import Decimal
    >>> hashable(pa.array([Decimal("-1.25")], pa.decimal128(9, 2)), pa.binary(4)).to_pylist()
    [b'\\xff\\xff\\xff\\x83']
    """
    if not pa.types.is_decimal(values.type):
        return values.cast(value_type)
    if values.offset:
        values = pa.concat_arrays([values])  # its buffers from its first value on
    width = values.type.byte_width
    raw = np.frombuffer(values.buffers()[1], np.uint8, len(values) * width)
    # Two's complement, little-endian: reversed, the big-endian bytes.
    big = raw.reshape(-1, width)[:, ::-1]
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
    if pa.types.is_fixed_size_binary(value_type):
        keep = value_type.byte_width
    elif pa.types.is_int32(value_type) or pa.types.is_int64(value_type):
        keep = value_type.bit_width // 8
    else:
        raise pa.ArrowInvalid(f"a decimal is not stored as {value_type} in Parquet")
    sign = np.where(big[:, -keep] >= 0x80, 0xFF, 0x00).astype(np.uint8)
    if not (big[valid, : width - keep] == sign[valid, None]).all():
        raise pa.ArrowInvalid(f"a value of {values.type} does not fit {value_type}")
    kept = np.ascontiguousarray(big[:, width - keep :])
    validity = values.buffers()[0] if values.null_count else None
    if pa.types.is_fixed_size_binary(value_type):
        fixed = pa.Array.from_buffers(
            value_type, len(values), [validity, pa.py_buffer(kept.tobytes())]
        )
        return fixed.cast(pa.large_binary())
    little = np.ascontiguousarray(kept[:, ::-1]).view(f"<i{keep}").ravel()
    return pa.Array.from_buffers(value_type, len(values), [validity, pa.py_buffer(little)])


def _logical(column: Any) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads(column.logical_type.to_json()))
    except (ValueError, AttributeError, TypeError):
        return {}


@dataclass(frozen=True, slots=True)
class _Chunk:
    """Where one row group's filter of the column is, once its header is read."""

    file: ParquetFile
    bitset: int  # offset of the bitset in the file
    size: int  # its bytes


@dataclass(frozen=True, slots=True)
class Probe:
    mask: np.ndarray
    decided: str


class NativeFilters:
    """The column's filters in every row group of a table's Parquet files, probed by offset.

    Plugged into :class:`pruner.index.ZoneIndex` as its ``hierarchy``: a probe reads, per
    usable row group, the 32-byte block each value's hash points at (one ``pread`` each,
    computed for all row groups at once): a cold lookup reads kilobytes. A probe of
    ``_WHOLE_AT`` values or more, and every probe from the ``_KEEP_AFTER``-th on (a table
    kept open and used), reads each filter whole once and keeps it, so later probes read
    nothing. A zone without a usable filter is always selected, and ``problems`` says why
    for each; a file whose size or modification time changed is read whole (its kept
    filters are not used).
    """

    def __init__(self, chunks: list[_Chunk | None], problems: dict[int, str]) -> None:
        self.chunks = chunks
        self.problems = problems
        usable = [z for z, c in enumerate(chunks) if c is not None and z not in problems]
        self._usable = np.array(usable, np.int64)
        found = [chunks[z] for z in usable]
        self._bitset = np.array([c.bitset for c in found], np.int64)  # type: ignore[union-attr]
        self._blocks = np.array([c.size // _BLOCK for c in found], np.uint64)  # type: ignore[union-attr]
        # The usable zones of each file, as positions into the arrays above.
        members: dict[Path, list[int]] = {}
        owners: dict[Path, ParquetFile] = {}
        for position, chunk in enumerate(found):
            assert chunk is not None
            members.setdefault(chunk.file.path, []).append(position)
            owners[chunk.file.path] = chunk.file
        self._files = {
            path: (owners[path], np.array(positions, np.int64))
            for path, positions in members.items()
        }
        self._probes = 0  # probes so far: a table kept open keeps its filters once it is used
        self._whole: dict[int, np.ndarray] = {}  # position -> the (blocks, 32) bitset, kept
        # Once every bitset is kept: per bitset size, the positions and their bitsets stacked.
        self._stacks: list[tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def num_zones(self) -> int:
        return len(self.chunks)

    @property
    def damaged(self) -> list[int]:
        """Zones whose filter the file has but pruner refused (a header it cannot decode, a
        length that disagrees, bytes past the footer): read whole by pruner, and by the
        engines under pruner without their own filter reading (they may misread it)."""
        return [
            z for z, why in self.problems.items() if why not in (NO_FILTER, NOT_USABLE, OTHER_WIDTH)
        ]

    def note(self) -> str:
        """What explain says decided a probe."""
        return _note(self.problems, self.num_zones)

    def probe(self, hashes: np.ndarray) -> Probe:
        """Row groups that may hold any of the hashed values."""
        hashes = np.unique(np.asarray(hashes, np.uint64))
        mask = np.ones(self.num_zones, bool)
        if not len(hashes):
            mask[:] = False
            mask[list(self.problems)] = True
            return Probe(mask, self.note())
        # (K, usable zones): the block of each value in each zone's filter.
        blocks = ((hashes[:, None] >> np.uint64(32)) * self._blocks[None, :]) >> np.uint64(32)
        blocks = blocks.astype(np.int64)
        self._probes += 1
        keep = len(hashes) >= _WHOLE_AT or self._probes >= _KEEP_AFTER
        holds = np.ones(len(self._usable), bool)
        if self._stacks is not None:
            fresh = self._unchanged()
            holds[fresh] = self._check_kept(fresh, blocks[:, fresh], hashes)
            mask[self._usable] = holds
            return Probe(mask, self.note())
        for path, (file, members) in self._files.items():
            try:
                handle = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # gone: the engine raises reading it, pruned or not
            try:
                stat = os.fstat(handle)
                if not file.unchanged(stat):
                    continue  # changed since the table was opened: read whole
                holds[members] = self._check(handle, members, blocks[:, members], hashes, keep)
            except OSError:
                continue  # an unreadable filter proves nothing
            finally:
                os.close(handle)
        if len(self._whole) == len(self._usable):
            self._stack()
        mask[self._usable] = holds
        return Probe(mask, self.note())

    def _stack(self) -> None:
        """Stack the kept bitsets by size, so that later probes check every zone at once
        (the kept bitsets become views of the stacks)."""
        stacks = []
        sizes = self._blocks
        for size in np.unique(sizes).tolist():
            positions = np.flatnonzero(sizes == size)
            stack = np.stack([self._whole[int(p)] for p in positions.tolist()])
            for i, position in enumerate(positions.tolist()):
                self._whole[position] = stack[i]
            stacks.append((positions, stack))
        self._stacks = stacks

    def _unchanged(self) -> np.ndarray:
        """The positions of the usable zones whose file has the size and modification time
        it had when the table was opened (a changed or gone file's are read whole)."""
        fresh = np.zeros(len(self._usable), bool)
        for path, (file, members) in self._files.items():
            try:
                stat = os.stat(path)
            except OSError:
                continue
            if file.unchanged(stat):
                fresh[members] = True
        return np.flatnonzero(fresh)

    def _check_kept(
        self, positions: np.ndarray, blocks: np.ndarray, hashes: np.ndarray
    ) -> np.ndarray:
        """:meth:`_check` of ``positions`` (sorted) from the stacked bitsets, all at once."""
        assert self._stacks is not None
        found = np.zeros(len(positions), bool)
        for members, stack in self._stacks:
            here = np.isin(positions, members)
            if not here.any():
                continue
            local = np.searchsorted(members, positions[here])
            rows = stack[local[None, :], blocks[:, here]]  # (values, zones, 32)
            count = rows.shape[1]
            hit = sbbf.check_blocks(rows.reshape(-1, _BLOCK), np.repeat(hashes, count))
            found[here] = hit.reshape(len(hashes), count).any(axis=0)
        return found

    def _check(
        self,
        handle: int,
        members: np.ndarray,
        blocks: np.ndarray,
        hashes: np.ndarray,
        keep: bool,
    ) -> np.ndarray:
        """(members,) bool: may the zone hold any of ``hashes`` (its blocks: ``blocks``)?
        ``keep``: read each zone's whole bitset and keep it, instead of the blocks."""
        count = len(hashes)
        rows = np.empty((count, len(members), _BLOCK), np.uint8)
        cut = np.zeros(len(members), bool)
        for column, position in enumerate(members.tolist()):
            whole = self._whole.get(position)
            if whole is None and keep:
                size = int(self._blocks[position]) * _BLOCK
                data = os.pread(handle, size, int(self._bitset[position]))
                if len(data) == size:
                    whole = self._whole[position] = np.frombuffer(data, np.uint8).reshape(
                        -1, _BLOCK
                    )
            if whole is not None:
                rows[:, column] = whole[blocks[:, column]]
                continue
            start = int(self._bitset[position])
            for k, block in enumerate(blocks[:, column].tolist()):
                data = os.pread(handle, _BLOCK, start + _BLOCK * block)
                if len(data) < _BLOCK:
                    cut[column] = True  # the bitset is cut short: prove nothing
                    break
                rows[k, column] = np.frombuffer(data, np.uint8)
        found = sbbf.check_blocks(rows.reshape(-1, _BLOCK), np.repeat(hashes, len(members)))
        return found.reshape(count, len(members)).any(axis=0) | cut

    def whole_filters(self) -> list[bytes]:
        """Every zone's whole bitset, read now; a zone without a usable one gets a filter
        of one block with every bit set, which no probe rules out."""
        result = []
        for zone, chunk in enumerate(self.chunks):
            data = b""
            if chunk is not None and zone not in self.problems:
                try:
                    with open(chunk.file.path, "rb") as handle:
                        data = os.pread(handle.fileno(), chunk.size, chunk.bitset)
                except OSError:
                    data = b""
            result.append(data if len(data) == getattr(chunk, "size", -1) else _ALL_SET)
        return result


def native_index(
    files: dict[int, ParquetFile], schema: pa.Schema, column: str
) -> tuple[Any, pa.DataType] | None:
    """The zones (one per row group) and filters of ``column`` in ``files``, or None when no
    file has a filter for it (usable or damaged).

    Returns ``(zones, value_type)``: ``zones`` as ``(fragment ids, zone starts, zone lengths,
    has_null, NativeFilters)``.
    """
    if column not in schema.names:
        return None
    arrow_type = schema.field(column).type
    fragment_id: list[int] = []
    zone_start: list[int] = []
    zone_length: list[int] = []
    has_null: list[bool] = []
    chunks: list[_Chunk | None] = []
    problems: dict[int, str] = {}
    value_type: pa.DataType | None = None
    widths: dict[int, pa.DataType] = {}  # each file's type, where it has usable filters
    usable = 0
    for fid, file in sorted(files.items()):
        metadata = file.metadata
        if metadata is None:
            return None
        found = _column_index(metadata, column)
        file_type = None if found is None else parquet_value_type(arrow_type, found[1])
        if found is not None and file_type is None and arrow_type in _WIDTHS:
            file_type = _signed_width(found[1])  # a signed column stored wider or narrower
        if (
            file_type is not None
            and value_type is not None
            and file_type != value_type
            and {file_type, value_type} != set(_WIDTHS)
        ):
            file_type = None  # stored another way than the other files: read whole
        if file_type is not None:
            widths[fid] = file_type
            value_type = file_type if value_type is None else value_type
        start = 0
        handle = None
        try:
            for group in range(metadata.num_row_groups):
                rows = metadata.row_group(group).num_rows
                zone = len(chunks)
                fragment_id.append(fid)
                zone_start.append(start)
                zone_length.append(rows)
                start += rows
                if file_type is None or found is None:
                    has_null.append(True)
                    chunks.append(None)
                    problems[zone] = NOT_USABLE
                    continue
                meta = metadata.row_group(group).column(found[0])
                has_null.append(_may_have_nulls(meta))
                if handle is None:
                    handle = os.open(file.path, os.O_RDONLY)
                chunk, problem = _locate(handle, file, meta)
                chunks.append(chunk)
                if problem is not None:
                    problems[zone] = problem
                else:
                    usable += 1
        except OSError:
            return None
        finally:
            if handle is not None:
                os.close(handle)
    filters: NativeFilters | IntegerWidths = NativeFilters(chunks, problems)
    # Damaged filters alone still make an index: explain then says they were refused, and
    # the engines under pruner are kept from reading them (Table.damaged_filter_files).
    if value_type is None or not (usable or filters.damaged):
        return None
    if len(set(widths.values())) > 1:  # INT32 in some files, INT64 in others
        narrow = np.array([widths.get(f) == pa.int32() for f in fragment_id], bool)
        filters = IntegerWidths(chunks, problems, narrow)
        value_type = pa.int64()
    arrays = (
        np.array(fragment_id, np.uint64),
        np.array(zone_start, np.uint64),
        np.array(zone_length, np.uint64),
        np.array(has_null, bool),
        filters,
    )
    return arrays, value_type


def _note(problems: dict[int, str], num_zones: int) -> str:
    """What explain says decided a probe of filters with ``problems``."""
    if not problems:
        return SOURCE
    whole = f"{len(problems)} of {num_zones} row groups read whole"
    damaged = sum(why not in (NO_FILTER, NOT_USABLE, OTHER_WIDTH) for why in problems.values())
    if damaged:
        whole += f"; {damaged} damaged {'filter' if damaged == 1 else 'filters'} refused"
    return f"{SOURCE} ({whole})"


_WIDTHS = (pa.int32(), pa.int64())


def _signed_width(column: Any) -> pa.DataType | None:
    """int32 or int64 for a column stored as a plain signed INT32 or INT64 (no logical type,
    or a signed integer of the physical width), else None."""
    width = {"INT32": 32, "INT64": 64}.get(column.physical_type)
    logical = _logical(column)
    if width is None or logical.get("Type") not in ("None", "Int"):
        return None
    if logical.get("Type") == "Int" and (
        logical.get("bitWidth") != width or not logical.get("isSigned")
    ):
        return None
    return pa.int32() if width == 32 else pa.int64()


class IntegerWidths:
    """The filters of a signed integer column stored as INT32 in some files and INT64 in
    others (writers widen a column between files). Parquet hashes a value's plain encoding,
    4 bytes in one, 8 in the other, so each file is probed with its own hashes: the index's
    hashes are the INT64 ones, and :meth:`probe_values` hashes the values as INT32 for the
    narrow files. A probe of hashes alone keeps every narrow file's row groups.

    The engines read such a table at the first file's type (DuckDB), or refuse it
    (DataFusion 55: "Fail to merge schema"); the values come already coerced to the first
    file's type, so a value the INT32 files cannot hold is simply absent from them.
    """

    def __init__(
        self, chunks: list[_Chunk | None], problems: dict[int, str], narrow: np.ndarray
    ) -> None:
        self.problems = problems
        self.narrow = narrow
        other = {z: OTHER_WIDTH for z in np.flatnonzero(narrow).tolist()}
        self.wide = NativeFilters(chunks, {**problems, **other})
        other = {z: OTHER_WIDTH for z in np.flatnonzero(~narrow).tolist()}
        self.narrow_filters = NativeFilters(chunks, {**problems, **other})

    @property
    def num_zones(self) -> int:
        return len(self.narrow)

    @property
    def damaged(self) -> list[int]:
        return [z for z in self.wide.damaged if not self.narrow[z]] + [
            z for z in self.narrow_filters.damaged if self.narrow[z]
        ]

    def note(self) -> str:
        return f"{_note(self.problems, self.num_zones)}, INT32 and INT64 files each in its own"

    def probe(self, hashes: np.ndarray) -> Probe:
        """Row groups that may hold any of the values hashed as INT64; every row group of
        an INT32 file is kept."""
        mask = self.wide.probe(hashes).mask
        mask[self.narrow] = True
        return Probe(mask, self.note())

    def probe_values(self, hashes: np.ndarray, values: Sequence[object]) -> Probe:
        """:meth:`probe`, with the INT32 files probed too: ``values`` hashed as INT32 (those
        in its range; the others cannot be in those files)."""
        mask = self.wide.probe(hashes).mask
        small = [v for v in values if isinstance(v, int) and -(2**31) <= v < 2**31]
        narrow_hashes, _ = hash_array(pa.array(small, pa.int32()))
        mask[self.narrow] = self.narrow_filters.probe(narrow_hashes).mask[self.narrow]
        return Probe(mask, self.note())

    def whole_filters(self) -> list[bytes]:
        """The INT64 files' bitsets; the INT32 files' zones get filters that rule nothing
        out (a probe of INT64 hashes cannot use them)."""
        return self.wide.whole_filters()


def _column_index(metadata: Any, column: str) -> tuple[int, Any] | None:
    """The leaf column of the top-level ``column`` (its path is its own name: a top-level
    ``a.b`` and the field ``b`` of a struct ``a`` have the same dotted path)."""
    schema = metadata.schema
    for i in range(len(schema)):
        leaf = schema.column(i)
        if leaf.path == column and leaf.name == column:
            return i, leaf
    return None


STATISTICS_ZONES = 256
"""At most this many zones a probe kept are checked against their row group's min/max
statistics (:func:`ruled_out_by_statistics`, ~10 us each; reading a row group ruled out
costs 0.2-1 ms)."""


def ruled_out_by_statistics(
    files: Mapping[int, ParquetFile],
    column: str,
    arrow_type: pa.DataType,
    starts: np.ndarray,
    ends: np.ndarray,
    values: Sequence[object],
) -> np.ndarray:
    """(len(starts),) bool: True for a zone (half-open row addresses ``starts`` to ``ends``)
    that lies in one row group whose min/max statistics of ``column`` hold none of
    ``values``, so that no row of it can equal one of them.

    Only where the statistics are exact in the order Python compares ``values`` in: a
    signed integer column (``arrow_type``) stored as INT32 or INT64 with no unsigned
    logical type, and every value a Python int; and only in a file whose size and
    modification time are still those it had when the table was opened (the statistics
    are read from its footer then). Anything else rules nothing out.
    """
    out = np.zeros(len(starts), bool)
    if not pa.types.is_signed_integer(arrow_type) or not values:
        return out
    if not all(type(v) is int for v in values):
        return out
    wanted = np.sort(np.array(values, dtype=object))
    # Per file: its row groups' end rows and the column's position (None: not usable).
    usable: dict[int, tuple[np.ndarray, int] | None] = {}
    unchanged: dict[int, bool] = {}
    for z, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        fid = start >> FRAGMENT_SHIFT
        file = files.get(fid)
        if file is None or file.metadata is None:
            continue
        if fid not in usable:
            found = _column_index(file.metadata, column)
            usable[fid] = None
            if found is not None and _logical(found[1]).get("isSigned") is not False:
                usable[fid] = (np.cumsum(file.row_group_rows), found[0])
        known = usable[fid]
        if known is None:
            continue
        bounds, position = known
        first, last = start - (fid << FRAGMENT_SHIFT), end - (fid << FRAGMENT_SHIFT)
        group = int(np.searchsorted(bounds, first, side="right"))
        if group >= len(bounds) or last > bounds[group]:
            continue  # not inside one row group
        meta = file.metadata.row_group(group).column(position)
        stats = meta.statistics if meta.is_stats_set else None
        if meta.physical_type not in ("INT32", "INT64") or stats is None or not stats.has_min_max:
            continue
        low, high = stats.min, stats.max
        if type(low) is not int or type(high) is not int:
            continue
        at = int(np.searchsorted(wanted, low))  # the first value >= low
        if at < len(wanted) and wanted[at] <= high:
            continue  # a value lies within
        if fid not in unchanged:
            try:
                unchanged[fid] = file.unchanged(os.stat(file.path))
            except OSError:
                unchanged[fid] = False
        out[z] = unchanged[fid]
    return out


def _may_have_nulls(meta: Any) -> bool:
    stats = meta.statistics if meta.is_stats_set else None
    if stats is None or not stats.has_null_count:
        return True
    return bool(stats.null_count)


def _locate(handle: int, file: ParquetFile, meta: Any) -> tuple[_Chunk | None, str | None]:
    """The chunk's filter, read as far as its header, or why it cannot be used."""
    offset, length = meta.bloom_filter_offset, meta.bloom_filter_length
    if offset is None or offset <= 0:
        return None, NO_FILTER
    want = length if length is not None and 0 < length <= _HEADER_GUESS else _HEADER_GUESS
    raw = os.pread(handle, want, offset)
    try:
        size, header = read_header(raw)
    except IndexFormatError as err:
        return None, str(err)
    if length is not None and length > 0 and header + size != length:
        return None, f"filter length {length} disagrees with its header ({header} + {size})"
    footer = file.identity.size - 8 - int(getattr(file.metadata, "serialized_size", 0) or 0)
    if offset + header + size > footer:
        return None, "filter runs into the file's footer or past its end"
    return _Chunk(file, offset + header, size), None


def write_parquet(
    table: pa.Table,
    path: str | os.PathLike[str],
    columns: list[str],
    *,
    items: int = 8192,
    probability: float = 0.00057,
    **options: Any,
) -> None:
    """Write ``table`` as one Parquet file with the format's own bloom filters on
    ``columns``, through pyarrow, sized like pruner's zones: row groups of ``items`` rows,
    each filter sized for ``items`` distinct values at false-positive ``probability`` (the
    defaults of ``pruner index build``). Every engine that reads Parquet bloom filters can
    use them, and pruner prunes on them without an index of its own.

    ``options`` go to ``pyarrow.parquet.write_table``.

    Raises:
        InvalidParameterError: a column is not in ``table``.
        UnsupportedTypeError: pruner cannot probe a filter of that column's type.
    """
    import pyarrow.parquet as pq

    from pruner.errors import InvalidParameterError
    from pruner.hashing import hash_input_width

    for column in columns:
        if column not in table.schema.names:
            raise InvalidParameterError(
                f"column {column!r} is not in the table; its columns are "
                f"{', '.join(table.schema.names)}"
            )
        arrow_type = plain_type(table.schema.field(column).type)
        if not (pa.types.is_decimal(arrow_type) or pa.types.is_fixed_size_binary(arrow_type)):
            hash_input_width(arrow_type)  # probed in their Parquet encoding
    if items <= 0 or not 0 < probability < 1:
        raise InvalidParameterError("items must be positive and probability between 0 and 1")
    pq.write_table(
        table,
        path,
        row_group_size=items,
        bloom_filter_options={c: {"ndv": items, "fpp": probability} for c in columns},
        **options,
    )


def index_from_filters(directory: str | os.PathLike[str], column: str) -> ZoneIndex:
    """A pruner index of ``column`` over a Parquet directory, made from its files' own
    filters without reading any data: one zone per row group, its filter the file's bitset
    (a row group without a usable one gets a filter no probe rules out). The index records
    that its values were hashed in Parquet's plain encoding (``value_encoding``
    ``"parquet"``, and ``value_type`` where that differs in bytes from the column's own), so
    it is never probed in Lance's.

    Raises:
        InvalidParameterError: not a directory of Parquet files, or no file has a usable
            filter for ``column``.
    """
    from pruner.discover import parquet_names, read_parquet_file
    from pruner.errors import InvalidParameterError
    from pruner.hashing import hash_alike
    from pruner.index.model import FragmentFile

    root = Path(directory)
    names = parquet_names(root) if root.is_dir() else []
    if not names:
        raise InvalidParameterError(f"no *.parquet files under {root}")
    files = {fid: read_parquet_file(root / name, name) for fid, name in enumerate(names)}
    schema = arrow_schema(files[0].metadata)
    if column not in schema.names:
        raise InvalidParameterError(
            f"column {column!r} is not in {files[0].path}; its columns are "
            f"{', '.join(schema.names)}"
        )
    found = native_index(files, schema, column)
    if found is None:
        raise InvalidParameterError(
            f"no file under {root} has a Parquet bloom filter on {column!r} that pruner can "
            "probe; build the index from the data instead (without --from-parquet-filters)"
        )
    (fragment_id, zone_start, zone_length, has_null, filters), value_type = found
    data = filters.whole_filters()
    column_type = schema.field(column).type
    probability = max(
        sbbf.fpp_at(float(rows), float(len(bitset)))
        for rows, bitset in zip(zone_length.tolist(), data, strict=True)
    )
    return ZoneIndex(
        column=column,
        items=int(zone_length.max()),
        probability=min(probability, 0.999999),
        fragment_id=fragment_id,
        zone_start=zone_start,
        zone_length=zone_length,
        has_null=has_null,
        filter_data=data,
        files=[
            FragmentFile(fid, file.relative, file.identity, file.rows)
            for fid, file in sorted(files.items())
        ],
        value_type=None if hash_alike(column_type, value_type) else value_type,
        value_encoding="parquet",
    )
