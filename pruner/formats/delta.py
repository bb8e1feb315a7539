"""Delta Lake tables: which Parquet files a version of the table is made of.

A Delta table's log (``_delta_log/``) names its live data files; files an overwrite, a
delete, an update or a compaction removed stay on disk until a vacuum, so the table is not
every ``*.parquet`` under its folder. The log is read by ``deltalake`` (delta-rs), at a
pinned version: :func:`snapshot` gives that version's live files, and the rest of pruner
reads them as a directory of Parquet files made of exactly those files (indexes are kept
per data file, which Delta never rewrites in place, so a file no longer live only drops out).

What pruner cannot read exactly is refused with an error, never answered from the raw
files: deletion vectors (rows a file still holds but the table deleted), column mapping
(the files' column names are not the table's), partition columns (their values are in the
log, not in the files) and reader features pruner does not know.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pruner import storage
from pruner.errors import InvalidParameterError
from pruner.formats.snapshot import Snapshot, relative_file

__all__ = ["is_delta_table", "log_entries", "snapshot", "version_at"]

LOG = "_delta_log"

KNOWN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
"""Reader features that change nothing of which rows a file's bytes hold. Also read: the
deletionVectors and columnMapping features when the table uses neither (checked)."""


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
    table = _open(path, version)
    _refuse_unreadable(path, table)
    root = path.absolute()
    files = sorted(relative_file(root, uri, "Delta") for uri in table.file_uris())
    columns = tuple(field.name for field in table.schema().fields)
    return Snapshot("delta", root, int(table.version()), tuple(files), columns)


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
        raise InvalidParameterError(
            f"cannot open Delta table {path} at version {version}: {err}"
        ) from err


def _refuse_unreadable(path: storage.Location, table: Any) -> None:
    metadata = table.metadata()
    what = f"Delta table {path} (version {table.version()})"
    if metadata.partition_columns:
        raise InvalidParameterError(
            f"{what} is partitioned by {', '.join(metadata.partition_columns)}: the partition "
            "values are in the log, not in the files, and pruner does not read them yet; "
            "query it with deltalake or DataFusion's DeltaTable provider"
        )
    mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise InvalidParameterError(
            f"{what} uses column mapping (mode {mode}): its files name columns by physical "
            "names, which pruner does not map yet; query it with deltalake or DataFusion's "
            "DeltaTable provider"
        )
    features = set(table.protocol().reader_features or ())
    unknown = features - KNOWN_READER_FEATURES - {"deletionVectors", "columnMapping"}
    if unknown:
        raise InvalidParameterError(
            f"{what} needs reader features pruner does not know ({', '.join(sorted(unknown))}); "
            "query it with deltalake"
        )
    if "deletionVectors" in features and _has_deletion_vectors(table):
        raise InvalidParameterError(
            f"{what} has deletion vectors: rows its files hold that the table deleted, which "
            "pruner does not apply yet; query it with deltalake, or rewrite the files "
            "(OPTIMIZE / REORG ... APPLY (PURGE) in Spark)"
        )


def _has_deletion_vectors(table: Any) -> bool:
    import pyarrow as pa

    found = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
    return found.num_rows > 0
