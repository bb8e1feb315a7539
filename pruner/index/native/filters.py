"""The probe of Parquet files' own bloom filters: one zone per row group, each filter
located by its header at open and read by offset (:class:`NativeFilters`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import sbbf, storage
from pruner.discover import ParquetFile
from pruner.errors import IndexFormatError
from pruner.hashing import hash_array
from pruner.index.native.header import _BLOCK, read_header
from pruner.index.native.value_types import _signed_width, parquet_value_type

SOURCE = "parquet bloom filter"

NO_FILTER = "no filter in this row group"
NOT_USABLE = "no usable filter for the column"
OTHER_WIDTH = "stored at the other integer width"
"""Why a row group has no filter to probe that are not damage (the writer wrote none, or
the column is stored another way than in the other files); every other problem is a
filter the file has and pruner refused: :attr:`NativeFilters.damaged`."""
"""How explain names a zone decided by a Parquet file's own filter."""

_HEADER_GUESS = 64  # a header is 15-20 bytes; read this much when the length is not recorded
_ALL_SET = b"\xff" * sbbf.BLOCK_BYTES
_WHOLE_AT = 16  # from this many values probed, a zone's whole bitset is read once instead
_KEEP_AFTER = 8  # from this many probes of one open table on, the bitsets are kept in memory


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
        members: dict[storage.Location, list[int]] = {}
        owners: dict[storage.Location, ParquetFile] = {}
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
        return _damaged(self.problems)

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
                handle = storage.RangeFile(path)
            except OSError:
                continue  # gone: the engine raises reading it, pruned or not
            try:
                if not file.unchanged(handle.file_stat()):
                    continue  # changed since the table was opened: read whole
                holds[members] = self._check(handle, members, blocks[:, members], hashes, keep)
            except OSError:
                continue  # an unreadable filter proves nothing
            finally:
                handle.close()
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
                stat = storage.stat(path)
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
        handle: storage.RangeFile,
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
                data = handle.read(int(self._bitset[position]), size)
                if len(data) == size:
                    whole = self._whole[position] = np.frombuffer(data, np.uint8).reshape(
                        -1, _BLOCK
                    )
            if whole is not None:
                rows[:, column] = whole[blocks[:, column]]
                continue
            start = int(self._bitset[position])
            for k, block in enumerate(blocks[:, column].tolist()):
                data = handle.read(start + _BLOCK * block, _BLOCK)
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
                    data = storage.read_range(chunk.file.path, chunk.bitset, chunk.size)
                except OSError:
                    data = b""
            result.append(data if len(data) == getattr(chunk, "size", -1) else _ALL_SET)
        return result


def native_index(
    files: dict[int, ParquetFile],
    schema: pa.Schema,
    column: str,
    names: Mapping[int, str | None] | None = None,
) -> tuple[Any, pa.DataType] | None:
    """The zones (one per row group) and filters of ``column`` in ``files``, or None when no
    file has a filter for it (usable or damaged). ``names``: each file's name for the
    column, None in a file that does not hold it (a Delta or Iceberg table's layouts; None:
    every file holds it by its name).

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
        in_file = column if names is None else names[fid]
        found = None if in_file is None else _column_index(metadata, in_file)
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
                    handle = storage.RangeFile(file.path)
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
                handle.close()
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


def _damaged(problems: dict[int, str]) -> list[int]:
    """The zones of ``problems`` whose filter the file has and pruner refused (not those
    without one, or stored at the other integer width)."""
    return [z for z, why in problems.items() if why not in (NO_FILTER, NOT_USABLE, OTHER_WIDTH)]


def _note(problems: dict[int, str], num_zones: int) -> str:
    """What explain says decided a probe of filters with ``problems``."""
    if not problems:
        return SOURCE
    whole = f"{len(problems)} of {num_zones} row groups read whole"
    damaged = len(_damaged(problems))
    if damaged:
        whole += f"; {damaged} damaged {'filter' if damaged == 1 else 'filters'} refused"
    return f"{SOURCE} ({whole})"


_WIDTHS = (pa.int32(), pa.int64())


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
        return _damaged(self.problems)

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


def _may_have_nulls(meta: Any) -> bool:
    stats = meta.statistics if meta.is_stats_set else None
    if stats is None or not stats.has_null_count:
        return True
    return bool(stats.null_count)


def _locate(
    handle: storage.RangeFile, file: ParquetFile, meta: Any
) -> tuple[_Chunk | None, str | None]:
    """The chunk's filter, read as far as its header, or why it cannot be used."""
    offset, length = meta.bloom_filter_offset, meta.bloom_filter_length
    if offset is None or offset <= 0:
        return None, NO_FILTER
    want = length if length is not None and 0 < length <= _HEADER_GUESS else _HEADER_GUESS
    raw = handle.read(offset, want)
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
