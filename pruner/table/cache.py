"""Tables opened once per process: a path is opened again only when its signature
changed (:func:`as_table`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from pruner import storage
from pruner.discover import signature
from pruner.errors import InvalidParameterError
from pruner.table.model import Table
from pruner.table.opening import is_arrow_dataset, listing_to_open, open_listed, open_table

if TYPE_CHECKING:
    import pyarrow.dataset as pads

TableSource: TypeAlias = "storage.PathLike | pads.Dataset | Table"
"""What a query's table may be given as: the path or URI of a Lance dataset, a Parquet
directory or a Parquet file; a ``lance.LanceDataset`` or ``pyarrow.dataset`` of them; or a
Table."""


def as_table(source: TableSource) -> Table:
    """``source`` opened, unless it already is a Table (which keeps its loaded indexes)
    whose files are as they were (:meth:`Table.files_unchanged`; else its path is opened).

    A path opens the table once per process: while the table's :func:`signature` (its
    Lance versions, or its Parquet and index files' sizes, times and inodes) stays the same,
    the Table opened before (with the indexes it loaded) is the answer; any change opens it
    again. So a path string costs what an opened Table costs, and is never stale.
    """
    if isinstance(source, Table):
        if source.files_unchanged():
            return source
        # Parquet files added, removed or rewritten since it was opened: the engine alone
        # reads them as they are now, and so does pruner, from the table opened again (its
        # row groups, statistics and identities are those of the files now). A Delta
        # table's at the version it was opened at.
        if source.pinned is not None:
            pinned = source.pinned
            return open_table(pinned.metadata or source.path, version=pinned.version)
        return as_table(source.path)
    if is_arrow_dataset(source):
        return open_table(source)
    try:
        path = storage.location(source).absolute()
    except ValueError as err:
        raise InvalidParameterError(str(err)) from err
    with _opened_lock:
        held = path in _opened
    found, dataset = _listing(path, held)
    with storage.listed(found):
        before = signature(path)
        if before is not None:
            with _opened_lock:
                known = _opened.get(path)
            if known is not None and known[0] == before:
                return known[1]
        table = open_table(path) if found is None else open_listed(path, None, found, dataset)
    if before is not None and _unchanged(table, before, found):  # nothing changed meanwhile
        with _opened_lock:
            _opened.pop(path, None)
            _opened[path] = (before, table)
            while len(_opened) > _OPENED_TABLES:
                del _opened[next(iter(_opened))]
    return table


def _listing(path: storage.Location, held: bool) -> tuple[storage.Listing | None, Any]:
    """On a store, every object under ``path`` from one LIST: the table's signature, and
    the answers to what opening it asks (storage.listed). When no table of ``path`` is
    ``held`` (it will be opened), the opening's first reads go out beside the LIST
    (:func:`listing_to_open`): the Lance dataset opened there, if any, comes second."""
    if not isinstance(path, storage.ObjectPath):
        return None, None
    try:
        if not held:
            return listing_to_open(path, None)
        return storage.listing(path), None
    except OSError:
        return None, None


def _unchanged(table: Table, before: tuple[object, ...], found: storage.Listing | None) -> bool:
    """Did the table stay as its signature ``before`` says while it was opened? Locally its
    signature is taken again; on a store each file's ETag as read is compared with the
    listing's (a second LIST would cost a round trip)."""
    if found is None:
        return signature(table.path) == before
    listed = found.objects
    return all(
        file.relative in listed and file.identity.etag == listed[file.relative].etag
        for file in (table.files or {}).values()
    )


_OPENED_TABLES = 64
_opened: dict[storage.Location, tuple[tuple[object, ...], Table]] = {}
_opened_lock = threading.Lock()


def open_tables(tables: Mapping[str, TableSource]) -> dict[str, Table]:
    """Every source of ``tables`` opened (see :func:`as_table`), under the same names."""
    return {name: as_table(source) for name, source in tables.items()}
