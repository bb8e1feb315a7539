"""One version of a table whose log names its live data files (Delta Lake, Iceberg)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pruner import storage
from pruner.errors import InvalidParameterError

__all__ = ["Layout", "Partitions", "Snapshot", "relative_file"]


@dataclass(frozen=True)
class Partitions:
    """A table's partition columns, whose values are in its log, not in its data files
    (Delta's): each column's Arrow field, and each live file's values (by its path relative
    to the table's folder, in the fields' order)."""

    fields: tuple[Any, ...]
    values: dict[str, tuple[Any, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields)


@dataclass(frozen=True)
class Layout:
    """How one data file holds its table's columns: the file's name of each column it
    stores (in the table's column order), and the value of each it does not (the same in
    every row of the file: a Delta partition value, from the log)."""

    stored: tuple[tuple[str, str], ...]  # (the table's column, the file's name of it)
    constants: tuple[tuple[Any, Any], ...]  # (the table's Arrow field, the value)

    def stored_name(self, column: str) -> str | None:
        """The file's name of the table's ``column``, None when the file does not hold it."""
        for name, in_file in self.stored:
            if name == column:
                return in_file
        return None

    def columns(self, names: Iterable[str]) -> Iterator[tuple[str, str | None, Any, Any]]:
        """Per table column of ``names`` (in that order) the file holds or holds a value
        of: the column, the file's name of it, or None and the column's Arrow field and the
        value the file holds in every row."""
        stored = dict(self.stored)
        constants = {field.name: (field, value) for field, value in self.constants}
        for name in names:
            if name in stored:
                yield name, stored[name], None, None
            elif name in constants:
                yield name, None, *constants[name]

    def null_in(self, column: str) -> bool:
        """Whether ``column`` is NULL in every row of the file (a column added since it was
        written, a NULL partition value)."""
        return any(field.name == column and value is None for field, value in self.constants)


@dataclass(frozen=True)
class Snapshot:
    """One version of a ``kind`` table (``"delta"``, ``"iceberg"``): its live data files,
    relative to the table's folder ``root`` (``/``-separated, sorted), and its columns'
    names. For Iceberg, the metadata file read (which a table opened again reads again), the
    columns' shapes (names and field ids) its data files must have, and the table's name
    mapping (the field ids of files written without them). For Delta, the shape of each
    column its files hold: its name in them (its physical name under column mapping) and
    its field id where the files are read by id (column mapping's mode ``id``)."""

    kind: str
    root: storage.Location
    version: int
    files: tuple[str, ...]
    columns: tuple[str, ...] = ()
    metadata: storage.Location | None = None
    shape: tuple[Any, ...] = ()
    name_mapping: dict[str, Any] | None = None
    # Delta: the partition columns, whose values the engines get from pruner, not the files
    partitions: Partitions | None = None
    # Delta: the rows each file with a deletion vector still holds but the table deleted
    # (by the file's path relative to the folder: its sorted row positions, int64)
    deleted: dict[str, Any] | None = None
    # The table's columns as the format's schema types them (Arrow): the type of a column
    # no file holds yet
    schema: Any = None

    @property
    def in_files(self) -> list[str]:
        """The columns its data files hold: all but a Delta table's partition columns (in
        the order of a Delta table's ``shape``)."""
        partitions = set(self.partitions.names) if self.partitions is not None else set()
        return [name for name in self.columns if name not in partitions]


def relative_file(root: storage.Location, uri: str, kind: str) -> str:
    """The data file ``uri`` (a path, a ``file:`` URI or a store's URI) of a ``kind``
    table relative to the table's folder ``root`` (a prefix cut: a table's hundreds of files
    cost no path parsing each).

    Raises:
        InvalidParameterError: the file is not under the folder.
    """
    if isinstance(root, storage.ObjectPath):  # s3a:// and s3:// name the same objects
        found = storage.location(uri)
        ours = isinstance(found, storage.ObjectPath) and found.bucket == root.bucket
        where = found.key if isinstance(found, storage.ObjectPath) and ours else ""
        under = root.key
    else:
        where = uri.removeprefix("file://") if uri.startswith("file://") else uri
        where, under = where.removeprefix("file:"), root.as_posix()
    prefix = under.rstrip("/") + "/"
    relative = where[len(prefix) :] if where.startswith(prefix) else ""
    if not relative or {"", ".", ".."} & set(relative.split("/")):
        raise InvalidParameterError(
            f"{kind} table {root} names a data file outside its folder ({uri}); pruner reads "
            "tables whose files lie under their folder"
        )
    return relative
