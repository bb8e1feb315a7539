"""Table formats whose log names which Parquet files of their folder are live: Delta Lake
(:mod:`pruner.formats.delta`) and Iceberg (:mod:`pruner.formats.iceberg`). The rest of pruner
reads a version of such a table as a directory of Parquet files made of exactly its live
files (:class:`Snapshot`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pruner import storage
from pruner.formats import delta, iceberg
from pruner.formats.snapshot import Layout, Snapshot

__all__ = [
    "Layout",
    "Snapshot",
    "delta",
    "folder",
    "iceberg",
    "index_name",
    "kind",
    "log_entries",
    "partition_columns",
    "snapshot",
    "stored_columns",
    "version_at",
]


def kind(path: storage.Location) -> str | None:
    """``"delta"`` or ``"iceberg"`` when ``path`` is such a table's folder (or an Iceberg
    metadata file); None otherwise."""
    if delta.is_delta_table(path):
        return "delta"
    return "iceberg" if iceberg.is_iceberg_table(path) else None


def snapshot(
    path: storage.Location, version: int | None = None, *, newest: bool = False
) -> Snapshot:
    """The live files of the table at ``path`` (a :func:`kind`) at ``version`` (a Delta
    version, an Iceberg snapshot id; None: the latest). ``newest``: an Iceberg folder that
    does not say which metadata file is current is read at its newest (an index build's
    choice of files to index, never an answer's)."""
    if delta.is_delta_table(path):
        return delta.snapshot(path, version)
    return iceberg.snapshot(path, version, newest=newest)


def index_name(snapshot: Snapshot, column: str) -> str:
    """The name ``column``'s index is kept under in the table's ``_pruner/`` folder: the
    column's identity, so that a rename keeps its index and a column dropped and added again
    under its old name does not take the old one's. A Delta column's physical name under
    column mapping (else its name), an Iceberg column's field id."""
    if snapshot.kind == "iceberg":
        found = [field_id for name, field_id, _ in snapshot.shape if name == column]
        return f"iceberg-field-{found[0]}" if found and found[0] is not None else column
    for name, (in_file, _, _) in zip(snapshot.in_files, snapshot.shape, strict=True):
        if name == column:
            return in_file
    return column


def stored_columns(snapshot: Snapshot, schema: Any) -> dict[str, str]:
    """The table's columns a data file of Arrow ``schema`` holds, each by the file's name
    for it, found as the format's readers find them (a Delta column by its physical name or
    field id, an Iceberg column by its field id): a column added since the file was written
    is not in it, nor a column the file holds under a name the table gave another since.

    Raises:
        InvalidParameterError: the file holds a column otherwise than the table's schema
            says (its nested fields named or numbered otherwise).
    """
    if snapshot.kind == "delta":
        return delta.stored_columns(snapshot, schema)
    return iceberg.stored_columns(snapshot, schema)


def version_at(path: storage.Location, when: dt.datetime) -> int:
    """The version of the table at ``path`` (a :func:`kind`) current at ``when`` (an aware
    datetime): the last committed at or before it, as the format's own library finds it."""
    if delta.is_delta_table(path):
        return delta.version_at(path, when)
    return iceberg.version_at(path, when)


def partition_columns(path: storage.Location) -> tuple[str, ...]:
    """A Delta table's partition columns (their values are in its log, not its files); none
    for any other table."""
    if not delta.is_delta_table(path):
        return ()
    return delta.partition_columns(path)


def folder(path: storage.Location) -> storage.Location:
    """The table's folder (where its indexes live): ``path``, or the folder an Iceberg
    metadata file describes."""
    return iceberg.folder(path)


def log_entries(path: storage.Location) -> frozenset[str]:
    """What changes whenever the table at ``path`` (a :func:`kind`) does: the names in its
    log (a commit adds one, none is rewritten)."""
    if delta.is_delta_table(path):
        return delta.log_entries(path)
    return iceberg.log_entries(path)
