"""A build's reads: each fragment's values of the indexed column (a Lance fragment, a
group of neighbouring ones read in one scan, or a Parquet file) and its zones, for
:mod:`pruner.index.build` (and the Spark build's executors) to index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pruner import formats, storage
from pruner.discover import open_parquet, parquet_names, read_parquet_files
from pruner.errors import IndexFormatError, IndexNotFoundError, InvalidParameterError
from pruner.hashing import hash_alike, hash_input_width, plain_type
from pruner.index.fileformat import read_index_file
from pruner.index.keys import Key, key_index_path
from pruner.index.lance import open_lance
from pruner.index.model import FragmentFile
from pruner.index.native import hashable, index_value_type
from pruner.index.store import assign_fragment_ids, load_index
from pruner.zones import (
    FragmentZones,
    contiguous_zones,
    lance_fragment_zones,
    parquet_file_zones,
)

__all__ = [
    "GROUP_ROWS",
    "FragmentColumn",
    "lance_fragments",
    "lance_readers",
    "parquet_fragments",
    "parquet_index_value_type",
    "read_lance_fragment",
    "read_lance_fragments",
    "read_parquet_fragment",
]


@dataclass(frozen=True, slots=True)
class FragmentColumn:
    fragment_id: int
    values: pa.Array | pa.ChunkedArray  # live rows, physical order
    zones: FragmentZones
    live_offsets: np.ndarray | None  # physical offset of each live row; None: 0, 1, 2, ...


def _column_type(schema: pa.Schema, column: str, where: str, lance: bool) -> pa.DataType:
    """The column's type, once it is known to be indexable: Lance's type list for a Lance
    dataset (Lance itself reads the index), and for Parquet also the dictionary and view
    types writers use, hashed as their plain values (:func:`pruner.hashing.plain_type`), and
    decimals and fixed-length byte arrays, hashed in Parquet's encoding
    (:func:`pruner.index.native.index_value_type`)."""
    if column not in schema.names:
        raise InvalidParameterError(
            f"column {column!r} is not in {where}; its columns are {', '.join(schema.names)}"
        )
    arrow_type = schema.field(column).type
    if lance or index_value_type(arrow_type) is None:
        # raises UnsupportedTypeError with advice
        hash_input_width(arrow_type if lance else plain_type(arrow_type))
    return arrow_type


def _columns(column: str | Key) -> list[str]:
    return list(column.columns) if isinstance(column, Key) else [column]


def _values(table: pa.Table, column: str | Key) -> pa.Array | pa.ChunkedArray:
    """The values an index of ``column`` hashes: the column's, or a key's encoded tuples."""
    return column.encode(table) if isinstance(column, Key) else table.column(column)


def read_lance_fragment(
    dataset: object, fragment_id: int, column: str | Key, items: int, version: int | None = None
) -> FragmentColumn:
    """The live values of ``column`` (or a compound key's tuples) in one Lance fragment, and
    the fragment's zones.

    ``dataset`` is an open dataset, or its URI opened here at ``version``: all a Spark
    executor can be handed, since an open dataset does not pickle.
    """
    fragment = open_lance(dataset, version).get_fragment(fragment_id)
    if fragment.metadata.deletion_file is None:
        table = fragment.to_table(columns=_columns(column))
        return FragmentColumn(
            fragment_id, _values(table, column), contiguous_zones(table.num_rows, items), None
        )
    table = fragment.to_table(columns=_columns(column), with_row_address=True)
    addresses = table.column("_rowaddr").to_numpy()
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return FragmentColumn(
        fragment_id, _values(table, column), lance_fragment_zones(offsets, items), offsets
    )


def lance_fragments(dataset: object, column: str | Key) -> tuple[Any, list[Any]]:
    """The open dataset and its fragments, once ``column`` is known to be indexable."""
    ds = open_lance(dataset)
    if isinstance(column, Key):
        column.types(ds.schema, f"Lance dataset {ds.uri}")
    else:
        _column_type(ds.schema, column, f"Lance dataset {ds.uri}", lance=True)
    return ds, ds.get_fragments()


GROUP_ROWS = 1 << 20
"""Lance fragments without deleted rows are read together, up to this many rows in one scan:
a scan per fragment costs about 1 ms besides its rows (200 fragments of 25,000 rows: 150-180
ms read one by one, 52-84 ms twenty at a time)."""


def lance_readers(
    ds: Any, fragments: list[Any], counts: list[int], column: str | Key, items: int
) -> list[Callable[[], FragmentColumn | list[FragmentColumn]]]:
    """The readers of a build over ``fragments`` (``counts``: their live rows), in order:
    neighbouring fragments without deleted rows in groups of up to :data:`GROUP_ROWS` rows
    (:func:`read_lance_fragments`), any other fragment on its own."""
    readers: list[Callable[[], FragmentColumn | list[FragmentColumn]]] = []
    group: list[tuple[int, int]] = []

    def close() -> None:
        if group:
            ids, rows = [f for f, _ in group], [n for _, n in group]
            readers.append(partial(read_lance_fragments, ds, ids, rows, column, items))
            group.clear()

    for fragment, rows in zip(fragments, counts, strict=True):
        if fragment.metadata.deletion_file is not None:
            close()
            readers.append(partial(read_lance_fragment, ds, fragment.fragment_id, column, items))
            continue
        if group and sum(n for _, n in group) + rows > GROUP_ROWS:
            close()
        group.append((fragment.fragment_id, rows))
    close()
    return readers


def read_lance_fragments(
    dataset: object, fragment_ids: list[int], rows: list[int], column: str | Key, items: int
) -> list[FragmentColumn]:
    """:func:`read_lance_fragment` of each of ``fragment_ids`` (fragments without deleted
    rows, of ``rows`` rows each), read in one ordered scan and cut at their row counts,
    once the rows' addresses prove each fragment's rows are where the cut puts them (else
    each is read on its own)."""
    if len(fragment_ids) == 1:
        return [read_lance_fragment(dataset, fragment_ids[0], column, items)]
    ds = open_lance(dataset)
    table = ds.scanner(
        columns=_columns(column),
        fragments=[ds.get_fragment(f) for f in fragment_ids],
        scan_in_order=True,
        with_row_address=True,
    ).to_table()
    if not _in_place(table.column("_rowaddr").to_numpy(), fragment_ids, rows):
        return [read_lance_fragment(ds, f, column, items) for f in fragment_ids]
    parts, at = [], 0
    for fragment_id, count in zip(fragment_ids, rows, strict=True):
        piece = table.slice(at, count)
        at += count
        parts.append(
            FragmentColumn(
                fragment_id, _values(piece, column), contiguous_zones(count, items), None
            )
        )
    return parts


def _in_place(addresses: np.ndarray, fragment_ids: list[int], rows: list[int]) -> bool:
    """Are ``addresses`` (row addresses, in scan order) rows 0 to n - 1 of each fragment
    ``f`` of ``fragment_ids`` in turn, n its ``rows``? They are when there are as many, each
    non-empty fragment's first is its row 0, and every other is one more than the one before
    (n addresses rising by ones from row 0 are rows 0 to n - 1). Three passes: building the
    expected addresses and comparing took seven, 10 ms per million rows against 0.5 ms."""
    counts = np.asarray(rows, np.int64)
    if len(addresses) != int(counts.sum()):
        return False
    starts = (np.cumsum(counts) - counts)[counts > 0]
    ids = np.asarray(fragment_ids, np.uint64)[counts > 0]
    if not np.array_equal(addresses[starts], ids << np.uint64(32)):
        return False
    steps = np.diff(addresses)
    steps[starts[1:] - 1] = 1  # a fragment's first address was checked above
    return bool((steps == 1).all())


def read_parquet_fragment(
    file: storage.PathLike | pq.ParquetFile,
    fragment_id: int,
    column: str | Key,
    items: int,
    metadata: Any = None,
    known: storage.Stat | None = None,
) -> FragmentColumn:
    """The values of ``column`` (or a compound key's tuples) in one Parquet file (an open
    one, or a path, whose footer ``metadata`` and stat ``known`` may be known), and its
    zones."""
    if isinstance(file, pq.ParquetFile):
        meta = file
    else:
        meta = open_parquet(storage.location(file), metadata, _columns(column), known=known)
    group_rows = [meta.metadata.row_group(i).num_rows for i in range(meta.num_row_groups)]
    values = _values(meta.read(columns=_columns(column)), column)
    value_type = index_value_type(values.type)
    if value_type is not None:  # hashed as the index records (ZoneIndex.value_type)
        values = hashable(values.cast(plain_type(values.type)).combine_chunks(), value_type)
    return FragmentColumn(fragment_id, values, parquet_file_zones(group_rows, items), None)


def parquet_fragments(
    directory: storage.PathLike, column: str | Key
) -> tuple[list[pq.ParquetFile], list[FragmentFile], list[str]]:
    """The Parquet files under ``directory``, open and as the index records them (paths
    relative to ``directory``), once ``column`` is known to be indexable and stored with one
    type in all of them; and each file's name for ``column`` ('' for a compound key). A
    Delta or Iceberg table's files are its live ones that hold the column, each by its name
    for it (a renamed column's, a Delta column's physical name).

    On a store, what the folder holds (its files, the table format's markers, the index
    already there) is answered from one LIST of it, and the footers are read side by side.
    """
    root = storage.location(directory)
    found = None
    if isinstance(root, storage.ObjectPath) and storage.current_listing(root) is None:
        found = storage.listing(root)
    with storage.listed(found):
        return _parquet_fragments(root, column)


def _parquet_fragments(
    directory: storage.PathLike, column: str | Key
) -> tuple[list[pq.ParquetFile], list[FragmentFile], list[str]]:
    root = storage.location(directory)
    if not storage.is_dir(root):
        raise InvalidParameterError(
            f"{root} is not a directory; pass a directory of Parquet files or a Lance dataset"
        )
    snapshot = formats.snapshot(root, newest=True) if formats.kind(root) is not None else None
    relative = list(snapshot.files) if snapshot is not None else parquet_names(root)
    if not relative:
        raise InvalidParameterError(f"no *.parquet files under {root}")
    # Identity first, content second: a file replaced in between then fails to match the
    # identity the index records, and is read whole instead of probed with stale zones.
    read = read_parquet_files(root, relative)
    identities = [file.identity for file in read]
    metas = [
        open_parquet(root / name, file.metadata, columns=(), known=file.as_opened())
        for name, file in zip(relative, read, strict=True)
    ]
    names = [column if isinstance(column, str) else ""] * len(metas)
    if snapshot is not None:
        names, kept = _stored_names(snapshot, column, metas)
        relative = [relative[i] for i in kept]
        identities = [identities[i] for i in kept]
        metas = [metas[i] for i in kept]
    paths = [root / name for name in relative]
    for name in _columns(column):
        if snapshot is not None and isinstance(column, str):
            name = names[0]  # the files' name for it (each file's, checked below)
        arrow_type = _column_type(
            metas[0].schema_arrow, name, f"Parquet file {paths[0]}", lance=False
        )
        for path, meta, in_file in zip(paths[1:], metas[1:], names[1:], strict=True):
            if isinstance(column, str):
                name = in_file
            other = _column_type(meta.schema_arrow, name, f"Parquet file {path}", lance=False)
            if not hash_alike(other, arrow_type):
                # Values are hashed at their column's width: a probe at one width would miss
                # every zone of a file stored at another, a wrong answer.
                raise InvalidParameterError(
                    f"column {name!r} is {other} in {path} but {arrow_type} in {paths[0]}; "
                    "every file must store the column with one type: rewrite the odd files, "
                    "or keep them in a directory of their own"
                )
    try:
        if isinstance(column, Key):
            previous = read_index_file(key_index_path(root, column)).files or []
        else:
            previous = load_index(root, column).files or []
    except (IndexNotFoundError, IndexFormatError, FileNotFoundError):
        previous = []
    ids = assign_fragment_ids(relative, previous)
    files: list[FragmentFile] = []
    for identity, rel, fid, meta in zip(identities, relative, ids, metas, strict=True):
        rows = meta.metadata.num_rows
        files.append(FragmentFile(fid, rel, identity, rows))
    return metas, files, names


def _stored_names(
    snapshot: formats.Snapshot, column: str | Key, metas: list[pq.ParquetFile]
) -> tuple[list[str], list[int]]:
    """Each file's name for ``column`` of a Delta or Iceberg table, as its readers find it
    (:func:`pruner.formats.stored_columns`), and which files (by position) hold it: a file
    written before the column was added is left out of the index (read whole).

    Raises:
        InvalidParameterError: ``column`` is a partition column, or in no live file yet; or
            a compound key's column is not held by its name in every file.
    """
    root = snapshot.root
    partitions = snapshot.partitions.names if snapshot.partitions is not None else ()
    for name in _columns(column):
        if name in partitions:
            raise InvalidParameterError(
                f"{name!r} is a partition column of Delta table {root}: its values are in the "
                "table's log, one per file, not in the files, so there is nothing to index; "
                "index the columns its files hold"
            )
    held = [formats.stored_columns(snapshot, meta.schema_arrow) for meta in metas]
    if isinstance(column, Key):
        if all(held[i].get(c) == c for i in range(len(metas)) for c in column.columns):
            return [""] * len(metas), list(range(len(metas)))
        raise InvalidParameterError(
            f"the live files of {root} do not all hold the key's columns "
            f"({', '.join(column.columns)}) by their names (a column added or renamed since "
            "some were written, or column mapping), which pruner's compound keys do not index "
            "yet; index each column alone"
        )
    kept = [i for i in range(len(metas)) if column in held[i]]
    if not kept:
        if column in snapshot.columns:
            raise InvalidParameterError(
                f"no live file of {root} holds column {column!r} yet (it was added since "
                "they were written): there is nothing to index; build the index once some do"
            )
        raise InvalidParameterError(
            f"column {column!r} is not in the table at {root}; its columns are "
            f"{', '.join(snapshot.columns)}"
        )
    return [held[i][column] for i in kept], kept


def parquet_index_value_type(meta: pq.ParquetFile, column: str) -> pa.DataType | None:
    """What an index of ``column`` over Parquet files like ``meta`` hashes (its
    ``value_type``; None: the column's values, as Lance hashes them)."""
    return index_value_type(meta.schema_arrow.field(column).type)
