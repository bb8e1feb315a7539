"""Where the index of a source is stored, and loading it whichever the source.

- **Lance dataset**: committed in the dataset (:mod:`pruner.index.lance`).
- **Directory of Parquet files**: ``<dir>/_pruner/<column>/bloomfilter.lance`` (a folder
  whose name starts with ``_``, which ``*.parquet`` globs, Spark and pyarrow skip). The files
  it covers (path, size, modification time, rows, footer hash) are kept in the schema
  metadata; a file keeps its fragment id across rebuilds (:func:`assign_fragment_ids`).
"""

from __future__ import annotations

from urllib.parse import quote

from pruner import formats, storage
from pruner.discover import is_lance_dataset
from pruner.errors import IndexNotFoundError
from pruner.index.fileformat import INDEX_FILE_NAME, read_index_file
from pruner.index.lance import load_lance_index
from pruner.index.model import FragmentFile, ZoneIndex

__all__ = [
    "PARQUET_INDEX_DIR",
    "assign_fragment_ids",
    "column_index_path",
    "load_index",
    "parquet_index_path",
]

PARQUET_INDEX_DIR = "_pruner"


def parquet_index_path(directory: storage.PathLike, name: str) -> storage.Location:
    """Where the index named ``name`` over a Parquet directory lives (a column's: its name,
    or a Delta or Iceberg table's :func:`pruner.formats.index_name`)."""
    folder = storage.location(directory) / PARQUET_INDEX_DIR
    return folder / quote(name, safe="") / INDEX_FILE_NAME


def column_index_path(directory: storage.PathLike, column: str) -> storage.Location:
    """Where the index of ``column`` over a Parquet directory lives: under its name, or in
    a Delta or Iceberg table under the column's identity at the table's latest version
    (:func:`pruner.formats.index_name`)."""
    root = storage.location(directory)
    if formats.kind(root) is None:
        return parquet_index_path(root, column)
    return parquet_index_path(root, formats.index_name(formats.snapshot(root, newest=True), column))


def assign_fragment_ids(relative_paths: list[str], previous: list[FragmentFile]) -> list[int]:
    """Keep the id a file had in the previous index; new files get ids above every old one."""
    known = {f.path: f.fragment_id for f in previous}
    next_id = max(known.values(), default=-1) + 1
    ids = []
    for path in relative_paths:
        if path in known:
            ids.append(known[path])
        else:
            ids.append(next_id)
            next_id += 1
    return ids


def load_index(source: storage.PathLike, column: str) -> ZoneIndex:
    """Load the bloom index of ``column`` stored with a Lance dataset or Parquet directory.

    Raises:
        IndexNotFoundError: there is none; build one with ``pruner index build``.
        IndexFormatError: there is one, but it is damaged.
    """
    path = storage.location(source)
    if is_lance_dataset(path):
        index = load_lance_index(path, column)
        if index is not None:
            return index
        location = f"Lance dataset {path}"
    else:
        index_path = column_index_path(path, column)
        if storage.exists(index_path):
            return read_index_file(index_path, column)
        location = f"Parquet directory {path}"
    raise IndexNotFoundError(
        f"no bloom index on column {column!r} in {location}; "
        f"build one with `pruner index build {path} --column {column}`"
    )
