"""Delta Lake tables: which Parquet files a version of the table is made of.

A Delta table's log (``_delta_log/``) names its live data files; files an overwrite, a
delete, an update or a compaction removed stay on disk until a vacuum, so the table is not
every ``*.parquet`` under its folder. The log is read by ``deltalake`` (delta-rs), at a
pinned version: :func:`snapshot` gives that version's live files, and the rest of pruner
reads them as a directory of Parquet files made of exactly those files (indexes are kept
per data file, which Delta never rewrites in place, so a file no longer live only drops out).

What pruner cannot read exactly is refused with an error, never answered from the raw
files: nested columns under column mapping and reader features pruner does not know. The
files' columns are found as Delta's readers find them (:func:`stored_columns`): by name, or
under column mapping by physical name or field id; a column added since a file was written
reads as NULL in its rows. Deletion vectors (rows a file still holds but the table deleted) are
read through deltalake (each file's deleted row positions): every read leaves those rows
out.
Partition columns, whose values are in the log and not in the files, are read from the log
(:class:`~pruner.formats.snapshot.Partitions`): each engine gets them from pruner as
constants of each file.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import unquote

from pruner import storage
from pruner.errors import InvalidParameterError
from pruner.formats.snapshot import Partitions, Snapshot, relative_file

__all__ = [
    "is_delta_table",
    "log_entries",
    "partition_columns",
    "snapshot",
    "stored_columns",
    "version_at",
]

LOG = "_delta_log"
FIELD_ID = b"PARQUET:field_id"

KNOWN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
"""Reader features that change nothing of which rows a file's bytes hold. Also read:
deletionVectors (applied: :func:`_deleted_rows`) and columnMapping (:func:`stored_columns`)."""


def is_delta_table(path: storage.Location) -> bool:
    """True when ``path`` is a Delta table's folder (it holds ``_delta_log/``)."""
    return storage.is_dir(path / LOG)


def log_entries(path: storage.Location) -> frozenset[str]:
    """The names in the table's log: a commit adds one and none is rewritten (a checkpoint
    adds its own), so they change whenever the table does."""
    return frozenset(storage.list_dir(path / LOG))


def snapshot(path: storage.Location, version: int | None = None) -> Snapshot:
    """The live data files of the Delta table at ``path``, at ``version`` (None: the
    latest).

    Raises:
        InvalidParameterError: deltalake is not installed, the version does not exist, or
            the table uses what pruner cannot read exactly (see the module's docstring).
    """
    import pyarrow as pa

    table = _open(path, version)
    mode = _refuse_unreadable(path, table)
    root = path.absolute()
    files = sorted(relative_file(root, uri, "Delta") for uri in table.file_uris())
    schema = pa.schema(table.schema().to_arrow())
    partitions = _partitions(path, table, schema, set(files))
    stored = set(partitions.names) if partitions is not None else set()
    return Snapshot(
        "delta",
        root,
        int(table.version()),
        tuple(files),
        tuple(schema.names),
        shape=tuple(_stored_as(field, mode) for field in schema if field.name not in stored),
        partitions=partitions,
        deleted=_deleted_rows(root, table, set(files)),
        schema=schema,
    )


def _stored_as(field: Any, mode: str) -> tuple[str, int | None, tuple[Any, ...]]:
    """How the data files hold a column (a :class:`Snapshot`'s shape): by its name, or
    under column mapping by its physical name (mode ``name``) or its field id (mode
    ``id``)."""
    if mode == "none":
        return (field.name, None, ())
    metadata = field.metadata or {}
    physical = metadata.get(b"delta.columnMapping.physicalName", field.name.encode()).decode()
    found = metadata.get(b"delta.columnMapping.id")
    return (physical, int(found) if mode == "id" and found is not None else None, ())


def stored_columns(snapshot: Snapshot, schema: Any) -> dict[str, str]:
    """The table's columns a data file of Arrow ``schema`` holds, each by the file's name
    for it (:func:`pruner.formats.stored_columns`): by the column's name, or under column
    mapping by its physical name or field id. A column added since the file was written is
    not in it."""
    names = set(schema.names)
    ids = {
        int(field.metadata[FIELD_ID]): field.name
        for field in schema
        if field.metadata and FIELD_ID in field.metadata
    }
    found = {}
    for column, (in_file, field_id, _) in zip(snapshot.in_files, snapshot.shape, strict=True):
        held = ids.get(field_id) if field_id is not None else in_file
        if held is not None and held in names:
            found[column] = held
    return found


def _deleted_rows(root: storage.Location, table: Any, files: set[str]) -> dict[str, Any] | None:
    """Per live file with a deletion vector, the row positions the table deleted (sorted
    int64), from deltalake's selection vectors (False: deleted; rows past a vector's end
    are kept); None when no file has one.

    Raises:
        InvalidParameterError: a vector names a file that is not live.
    """
    import numpy as np
    import pyarrow as pa

    if "deletionVectors" not in set(table.protocol().reader_features or ()):
        return None
    vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
    found: dict[str, Any] = {}
    for uri, keep in zip(
        vectors.column("filepath").to_pylist(),
        vectors.column("selection_vector").to_pylist(),
        strict=True,
    ):
        relative = relative_file(root, uri, "Delta")
        if relative not in files:
            raise InvalidParameterError(
                f"Delta table {root}: a deletion vector names {uri}, which is not one of its "
                "live files; query it with deltalake"
            )
        gone = np.flatnonzero(~np.asarray(keep, bool)).astype(np.int64)
        if len(gone):
            found[relative] = gone
    return found or None


def _partitions(path: storage.Location, table: Any, schema: Any, files: set[str]) -> Any:
    """The partition columns of ``table`` and each live file's values (typed, from the
    add actions), or None for a table without partitions.

    Raises:
        InvalidParameterError: the add actions name other files than the live ones, or a
            partition column's type has no constant pruner can hand every engine.
    """
    import pyarrow as pa

    names = list(table.metadata().partition_columns or ())
    if not names:
        return None
    fields = tuple(schema.field(name) for name in names)
    for field in fields:
        if not _constant_type(field.type):
            raise InvalidParameterError(
                f"Delta table {path} is partitioned by {field.name} of type {field.type}, "
                "whose values pruner does not hand the engines yet; query it with deltalake "
                "or DataFusion's DeltaTable provider"
            )
    actions = pa.table(table.get_add_actions(flatten=True))
    # an action's path is URL-encoded once more than the file's name on disk
    paths = [unquote(p) for p in actions.column("path").to_pylist()]
    columns = [actions.column(f"partition.{name}").to_pylist() for name in names]
    values = {p: tuple(column[i] for column in columns) for i, p in enumerate(paths)}
    if set(values) != files:
        raise InvalidParameterError(
            f"Delta table {path}: its add actions name other files than its live ones, so "
            "pruner cannot tell each file's partition values; query it with deltalake"
        )
    return Partitions(fields, values)


def _constant_type(kind: Any) -> bool:
    """Partition column types whose values pruner hands each engine as a constant."""
    import pyarrow as pa

    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_decimal(kind)
    )


def version_at(path: storage.Location, when: dt.datetime) -> int:
    """The table's version at ``when`` (an aware datetime): the last committed at or before
    it, as deltalake's ``load_as_version`` finds it (which gives the first version for an
    earlier time).

    Raises:
        InvalidParameterError: deltalake cannot open the table or find the version.
    """
    table = _open(path, None)
    try:
        table.load_as_version(when)
    except Exception as err:  # deltalake's own errors
        raise InvalidParameterError(
            f"Delta table {path} has no version at {when.isoformat()}: {err}"
        ) from err
    return int(table.version())


def partition_columns(path: storage.Location) -> tuple[str, ...]:
    """The table's partition columns, at its latest version."""
    return tuple(_open(path, None).metadata().partition_columns or ())


def _open(path: storage.Location, version: int | None) -> Any:
    """deltalake's ``DeltaTable`` of ``path`` at ``version`` (None: the latest)."""
    try:
        from deltalake import DeltaTable
    except ImportError as err:
        raise InvalidParameterError(
            f"{path} is a Delta Lake table; pruner reads those with deltalake: "
            "pip install 'pruner-index[delta]'"
        ) from err
    try:
        return DeltaTable(str(path), version=version, storage_options=storage.lance_options(path))
    except Exception as err:  # deltalake's own errors (TableNotFoundError, DeltaError...)
        at = "its latest version" if version is None else f"version {version}"
        raise InvalidParameterError(
            f"cannot open Delta table {path} at {at}: {err}; pruner reads Delta tables "
            "through deltalake, which cannot open this one (a newer deltalake may, or "
            "Spark's own Delta reader)"
        ) from err


def _refuse_unreadable(path: storage.Location, table: Any) -> str:
    """The table's column mapping mode (``none``, ``name`` or ``id``), once nothing in it is
    what pruner cannot read exactly.

    Raises:
        InvalidParameterError: an unknown mode or reader feature, or a nested column under
            column mapping (whose nested fields the files name by physical names too).
    """
    metadata = table.metadata()
    what = f"Delta table {path} (version {table.version()})"
    mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none")
    if mode not in ("none", "name", "id"):
        raise InvalidParameterError(
            f"{what} uses column mapping mode {mode!r}, which pruner does not know; query it "
            "with deltalake or DataFusion's DeltaTable provider"
        )
    if mode != "none":
        import pyarrow as pa

        for field in pa.schema(table.schema().to_arrow()):
            if pa.types.is_nested(field.type):
                raise InvalidParameterError(
                    f"{what} uses column mapping (mode {mode}) and has a nested column "
                    f"{field.name!r}, whose fields its files name by physical names, which "
                    "pruner does not map yet; query it with deltalake or DataFusion's "
                    "DeltaTable provider"
                )
    features = set(table.protocol().reader_features or ())
    unknown = features - KNOWN_READER_FEATURES - {"deletionVectors", "columnMapping"}
    if unknown:
        raise InvalidParameterError(
            f"{what} needs reader features pruner does not know ({', '.join(sorted(unknown))}); "
            "query it with deltalake"
        )
    return mode
