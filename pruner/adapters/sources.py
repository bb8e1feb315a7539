"""From a Selection to what an engine reads: the half every adapter shares.

- **Lance**: a small selection (at most :data:`pruner.reads.LANCE_READ_AHEAD_VALUES`
  values) is read into an Arrow table before the query runs: one Lance read of the
  selected rows costs less than an engine's set-up of a streamed scan. A larger one is a
  :class:`PrunedLanceDataset`, a ``LanceDataset`` whose scans are forced onto the selected
  fragments and row addresses. DuckDB calls ``scanner(columns=..., filter=...)`` and
  DataFusion calls ``get_fragments()`` then each part's ``scanner(...)``; both keep their
  projection and filter pushdown, and pruner adds ``fragments=`` and
  ``row_addr_allowlist=``.
- **Parquet**: :func:`parquet_parts` maps a Selection to files read whole and files of which
  only some row groups are read. A row group is read when any selected row falls in it, so a
  zone (which never straddles a row group, see :mod:`pruner.zones`) always maps to whole
  row groups and no needed row is dropped.

``selection=None`` means "read everything"; it is also what the unpruned runs use, so pruned
and unpruned reads go through the same code and differ only in what they skip.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from pruner import reads, roaring, storage
from pruner.evaluate import RowKeys
from pruner.reads import ParquetPart, parquet_parts
from pruner.selection import Selection
from pruner.table import Table
from pruner.table.trust import lance_cannot_filter, lance_may_probe

__all__ = [
    "KEYS_IN_SCAN",
    "ParquetPart",
    "PrunedLanceDataset",
    "lance_allowlist",
    "lance_cannot_filter",
    "lance_fragment_batches",
    "lance_source",
    "parquet_parts",
    "point",
]


def lance_allowlist(selection: Selection) -> bytes:
    """Lance's ``row_addr_allowlist`` bytes for ``selection``.

    The layout (learnt by experiment, ``docs/format.md``, "row_addr_allowlist"): u32
    fragment count, then per fragment in ascending id order u32 id, u32 byte length and a
    portable Roaring bitmap of the selected offsets (:mod:`pruner.roaring`).

    >>> len(lance_allowlist(Selection.from_ranges([(1, 0, 10)])))
    27
    """
    by_fragment = selection.by_fragment()
    return roaring.encode({f: roaring.ranges_bitmap(r) for f, r in by_fragment.items()})


NO_SCALAR_INDEX = {"use_scalar_index": False}
"""What every Lance scan pruner makes is given: Lance probes none of the dataset's scalar
indexes. The bloom index pruner committed is one of them, and Lance trusts it as it is on
disk: with one bit of a filter cleared, Lance alone drops the rows of the value it hid
(tests/index/test_damaged.py). pruner checks the zones it probes and reads a damaged one's
fragment whole; Lance, probing the same file under that read, would drop them again. An
unpruned read (no selection) is a read with no index at all, as before."""


class PrunedLanceDataset(lance.LanceDataset):
    """A Lance dataset whose every scan reads only the rows of a Selection.

    Made from an open dataset by :func:`lance_source`; engines see an ordinary
    ``LanceDataset`` (a ``pyarrow.dataset.Dataset``). Its own attributes start with
    ``pruner_`` so they never shadow Lance's: ``pruner_allowlist`` (the row addresses every
    scan is restricted to, None: whole fragments), ``pruner_whole`` (the selection is every
    row: scans list no fragments, as for the dataset itself), ``pruner_lance_probes`` (its
    scans, of whole fragments, may probe the index pruner checked as a whole read's may),
    ``pruner_may_refuse_filters`` (the table has a column Lance may refuse a pushed filter
    on) and ``pruner_keys`` (a filter every scan also applies: ``column IN (values)``, when
    every row the query keeps holds one of them, :class:`~pruner.evaluate.RowKeys`).
    """

    _pruner_fragments: list[Any]
    pruner_whole: bool
    pruner_allowlist: bytes | None
    _pruner_fragment_allowlists: dict[int, bytes | None]
    pruner_lance_probes: bool
    pruner_may_refuse_filters: bool
    pruner_keys: pc.Expression | None
    pruner_table: Table

    def scanner(self, *args: Any, **kwargs: Any) -> Any:
        probes = self.pruner_whole or self.pruner_lance_probes
        if not (probes and self._pruner_may_probe(kwargs.get("filter"))):
            kwargs.update(NO_SCALAR_INDEX)
        _add_keys(kwargs, self.pruner_keys)
        if not self.pruner_whole:  # else Lance scans as for the dataset itself
            kwargs["fragments"] = self._pruner_fragments
        if self.pruner_allowlist is not None:
            kwargs["row_addr_allowlist"] = self.pruner_allowlist
        return _scan(
            lambda options: lance.LanceDataset.scanner(self, *args, **options), kwargs, self
        )

    def _pruner_may_probe(self, condition: Any) -> bool:
        """A whole read (the cost model's, or a query pruner cannot analyse) reads as the
        engine alone reads: Lance may probe its indexes on the columns the pushed filter
        names, when pruner checked each (:func:`lance_may_probe`); so may a read of the
        fragments a lookup left to Lance's scanner may find its rows in. DuckDB
        alone over the dataset did, so a query pruner could not prune ran 4x slower than
        without pruner (the demo's ``* REPLACE`` count: 11.2 ms against 2.6)."""
        if not isinstance(condition, pc.Expression) or self.pruner_keys is not None:
            return False
        return lance_may_probe(self.pruner_table, str(condition))

    def get_fragments(self, filter: Any = None) -> list[Any]:
        # The engine's filter is applied again by each part's scanner.
        return [_PrunedFragment(self, fragment) for fragment in self._pruner_fragments]


class _PrunedFragment:
    """One selected fragment, as DataFusion's dataset scan sees it."""

    def __init__(self, dataset: PrunedLanceDataset, fragment: Any) -> None:
        self._dataset = dataset
        self._fragment = fragment

    def scanner(self, schema: Any = None, **kwargs: Any) -> Any:
        kwargs.update(NO_SCALAR_INDEX)
        _add_keys(kwargs, self._dataset.pruner_keys)
        kwargs["fragments"] = [self._fragment]
        allow = self._dataset._pruner_fragment_allowlists[self._fragment.fragment_id]
        if allow is not None:
            kwargs["row_addr_allowlist"] = allow
        dataset = self._dataset
        return _scan(
            lambda options: lance.LanceDataset.scanner(dataset, **options), kwargs, dataset
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fragment, name)


def _add_keys(options: dict[str, Any], keys: pc.Expression | None) -> None:
    """Add ``keys`` to the filter of a scan's ``options`` (the engine's pushed one, which
    :func:`_scan` has Lance or else pyarrow apply). A constant filter (DataFusion pushed
    ``NULL`` as a BooleanScalar) is left alone: the scan then reads every selected row."""
    if keys is None:
        return
    condition = options.get("filter")
    if condition is None:
        options["filter"] = keys
    elif isinstance(condition, pc.Expression):
        options["filter"] = keys & condition


_LANCE_FILTER_DEPTH = 12
"""Parentheses nested in a pushed filter beyond which pyarrow, not Lance, applies it: Lance
hands the filter to pyarrow's Substrait serializer, whose time doubles with every level
(measured: 14 levels 0.18 s, 18 levels 3.8 s; DuckDB pushes ``s = 'a' OR s = 'b' OR ...``
as one level per term), where pyarrow's own filter takes 0.2 s at 1,000 levels."""


def _too_deep_for_lance(condition: pc.Expression) -> bool:
    text = str(condition)
    if text.count("(") <= _LANCE_FILTER_DEPTH:
        return False  # no deeper than it has parentheses (the usual filter: one pass in C)
    depth = deepest = 0
    for char in re.sub(r"[^()]", "", text):
        depth += 1 if char == "(" else -1
        deepest = max(deepest, depth)
    return deepest > _LANCE_FILTER_DEPTH


def _scan(make: Any, options: dict[str, Any], dataset: PrunedLanceDataset) -> Any:
    """``make(options)``, a Lance scanner, with the engine's pushed filter applied by Lance
    whenever Lance takes it, else by pyarrow on what Lance reads.

    An engine treats a filter it pushed as done, so it must be applied exactly. Lance applies
    it with DataFusion's semantics (``NaN = NaN`` is true, ``NULL NOT IN (...)`` is NULL),
    pyarrow with its own, so pyarrow is only the fallback: for a filter Lance refuses (one
    on a column of a type it cannot filter on, or with a cast pyarrow cannot put into
    Substrait, refused when the scan is built or starts), a constant
    (DataFusion pushes ``NULL`` as a BooleanScalar) and one nested too deeply for Lance to
    take in reasonable time.
    """
    condition = options.get("filter")
    if condition is None:
        return make(options)
    if isinstance(condition, pc.Expression) and not _too_deep_for_lance(condition):
        try:
            scanner = make(options)
            if not dataset.pruner_may_refuse_filters:
                return scanner
            return pads.Scanner.from_batches(scanner.to_reader())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            # pyarrow could not put the filter into Substrait (a cast, e.g. of a timestamp
            # with a zone), or Lance refused a column: pyarrow applies it below.
            pass
    if not isinstance(condition, pc.Expression):
        condition = pc.scalar(condition.as_py() is True)
    columns = options.get("columns")
    options = {k: v for k, v in options.items() if k not in ("filter", "columns")}
    reader = make(options).to_reader()
    return pads.Scanner.from_batches(reader, filter=condition, columns=columns)


KEYS_IN_SCAN = 4096
"""A larger selection whose rows the query keeps all hold one of at most this many keys
(:class:`~pruner.evaluate.RowKeys`) is scanned with ``column IN (keys)`` added to every scan's
filter, which Lance applies while it reads: an engine then joins or filters the matching
rows only (a 100,000-key batch lookup: 1,000 rows of 990,144 read; DuckDB's semi-join of
them took 122 ms against 49 ms for the read). Lance turns the list into Substrait at about
3 us a value (measured: 1,000 values 5.7 ms, 10,000 29 ms), hence the limit."""


def lance_source(
    table: Table,
    selection: Selection | None,
    keys: RowKeys | None = None,
    lance_probes: bool = False,
) -> pa.Table | lance.LanceDataset:
    """``table``'s dataset restricted to ``selection`` (all of it when None): the selected rows
    themselves when they are few (:data:`pruner.reads.LANCE_READ_AHEAD_VALUES`), else a
    pruned dataset. ``lance_probes``: a pruned dataset whatever the selection (whole
    fragments), whose scans may probe the index pruner checked, as for a whole read
    (:attr:`pruner.plan.Plan.lance_probes`).

    ``keys`` (the values every row the query keeps holds in one column) lets the read-ahead
    drop the selected rows that hold none of them: it reads that column of the selected
    rows, then only the matching rows' other columns. Not on an object store: there each
    Lance read of a file costs its round trips (footer, column metadata, pages: about 3.4
    measured), so the selected rows are read in one read, every column at once.

    On a dataset with stable row ids Lance matches the allowlist against row ids, not
    addresses, so there only whole fragments are restricted.

    No scan probes a scalar index of Lance's (:data:`NO_SCALAR_INDEX`): not the one pruner
    committed, which pruner checks and Lance does not, nor any other.
    """
    dataset = table.dataset
    fragments = table.lance_fragments()
    if selection is not None:
        fragments = table.lance_fragments_of(selection.fragment_ids())
    partial: dict[int, list[tuple[int, int]]] = {}
    if selection is not None and not dataset.has_stable_row_ids:
        for fragment, ranges in selection.by_fragment().items():
            if ranges != [(0, table.fragment_rows.get(fragment, -1))]:
                partial[fragment] = ranges
        values = selection.num_rows * max(1, len(table.schema))
        if not lance_probes and values <= reads.LANCE_READ_AHEAD_VALUES:
            names = table.schema.names
            if (
                keys is not None
                and keys.column in names
                and _filterable(table, keys.column)
                and not storage.is_remote(table.path)
            ):
                return _matching_rows(table, selection, fragments, partial, keys)
            return _read_rows(table, selection, fragments, partial)
    pruned = PrunedLanceDataset.__new__(PrunedLanceDataset)
    pruned.__dict__.update(dataset.__dict__)
    pruned._pruner_fragments = fragments
    pruned.pruner_whole = (
        selection is not None and not partial and len(fragments) == len(table.lance_fragments())
    )
    pruned.pruner_lance_probes = lance_probes
    pruned.pruner_may_refuse_filters = any(lance_cannot_filter(f.type) for f in table.schema)
    pruned.pruner_table = table
    pruned.pruner_keys = None
    if (
        selection is not None
        and keys is not None
        and keys.column in table.schema.names
        and _filterable(table, keys.column)
        and len(keys.values) <= KEYS_IN_SCAN
    ):
        column_type = table.schema.field(keys.column).type
        pruned.pruner_keys = pc.field(keys.column).isin(pa.array(sorted(keys.values), column_type))
    pruned._pruner_fragment_allowlists = {
        f.fragment_id: _allowlist_of(f.fragment_id, partial) for f in fragments
    }
    pruned.pruner_allowlist = None
    if partial and selection is not None:
        pruned.pruner_allowlist = lance_allowlist(selection)
    return pruned


def point(
    dataset: PrunedLanceDataset,
    table: Table,
    selection: Selection,
    made: PrunedLanceDataset | None = None,
) -> None:
    """Point ``dataset``, bound on a kept cursor by :func:`lance_source`, at the next
    query's read of ``table``: ``made``, the dataset :func:`lance_source` made for it (a
    binding of a table restricted to its selection), else whole fragments of ``selection``,
    with ``lance_probes`` (as it was bound). Its scans then read those rows, without a new
    binding (~0.6 ms)."""
    pointed = made if made is not None else lance_source(table, selection, lance_probes=True)
    assert isinstance(pointed, PrunedLanceDataset)
    dataset.__dict__.update(pointed.__dict__)


def _read_rows(
    table: Table,
    selection: Selection,
    fragments: list[Any],
    partial: dict[int, list[tuple[int, int]]],
) -> pa.Table:
    """The rows of ``selection`` (in ``fragments``; ``partial`` those not read whole): one
    fragment as :func:`lance_fragment_batches` reads it, several in one allowlist scan."""
    if len(fragments) == 1:
        fragment = fragments[0]
        ranges = partial.get(fragment.fragment_id)
        spans = None if ranges is None else [(start, end - start) for start, end in ranges]
        batches = lance_fragment_batches(table, fragment, spans)
        return pa.Table.from_batches(batches, schema=table.schema)
    if not fragments:
        return table.schema.empty_table()
    allowlist = lance_allowlist(selection) if partial else None
    return table.dataset.scanner(fragments=fragments, row_addr_allowlist=allowlist).to_table()


def _filterable(table: Table, column: str) -> bool:
    return not lance_cannot_filter(table.schema.field(column).type)


def _matching_rows(
    table: Table,
    selection: Selection,
    fragments: list[Any],
    partial: dict[int, list[tuple[int, int]]],
    keys: RowKeys,
) -> pa.Table:
    """The selected rows of ``fragments`` whose ``keys.column`` holds one of ``keys.values``.

    In one fragment without deletions: that column of the selected rows read by offset,
    then the matching rows taken by offset (~1 ms for a zone of 8,192 rows). Else one Lance
    scan of the selection filtered by ``column IN (values)``, which Lance applies exactly on
    integers and strings (one scan of several fragments costs less than a read per
    fragment)."""
    column_type = table.schema.field(keys.column).type
    wanted = pa.array(sorted(keys.values), column_type)
    if len(fragments) == 1 and fragments[0].metadata.deletion_file is None:
        fragment = fragments[0]
        fid = fragment.fragment_id
        found = []
        for start, end in partial.get(fid) or [(0, table.fragment_rows.get(fid, 0))]:
            column = fragment.to_table(
                columns=[keys.column], offset=start, limit=end - start
            ).column(0)
            hits = pc.is_in(column, value_set=wanted).to_numpy(zero_copy_only=False)
            found.append(np.flatnonzero(hits) + start)
        offsets = np.concatenate(found)
        if not len(offsets):
            return table.schema.empty_table()
        return fragment.take(offsets.tolist()).cast(table.schema)
    if not fragments:
        return table.schema.empty_table()
    allowlist = lance_allowlist(selection) if partial else None
    scanner = table.dataset.scanner(
        filter=pc.field(keys.column).isin(wanted),
        fragments=fragments,
        row_addr_allowlist=allowlist,
        **NO_SCALAR_INDEX,
    )
    return scanner.to_table().cast(table.schema)


def lance_fragment_batches(
    table: Table, fragment: Any, ranges: list[tuple[int, int]] | None
) -> Iterator[pa.RecordBatch]:
    """The rows of one Lance fragment in ``ranges`` of ``(start, length)`` physical offsets
    (all of it when None), read the cheapest way that keeps every one of them.

    A fragment without deletions is read by offset, Lance's cheapest read (its offsets count
    live rows, so they are physical only when nothing is deleted); one with deletions through
    the address allowlist, except on a dataset with stable row ids, where Lance matches the
    allowlist against row ids: that fragment is read whole.
    """
    if ranges is None:
        yield from fragment.to_batches()
    elif fragment.metadata.deletion_file is None:
        for start, length in ranges:
            yield from fragment.to_batches(offset=start, limit=length)
    elif table.dataset.has_stable_row_ids:
        yield from fragment.to_batches()
    else:
        spans = ((fragment.fragment_id, start, length) for start, length in ranges)
        allowlist = lance_allowlist(Selection.from_ranges(spans))
        scanner = table.dataset.scanner(fragments=[fragment], row_addr_allowlist=allowlist)
        yield from scanner.to_batches()


def _allowlist_of(fragment: int, partial: dict[int, list[tuple[int, int]]]) -> bytes | None:
    if fragment not in partial:
        return None
    ranges = ((fragment, start, end - start) for start, end in partial[fragment])
    return lance_allowlist(Selection.from_ranges(ranges))
