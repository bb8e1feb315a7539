"""Appends that index themselves: new rows into a Lance dataset or a Parquet directory, then
every pruner index of the table brought up to date (:func:`pruner.index.update_index`).

Between the write and the index update a reader sees the new rows in fragments (files) the
index does not cover, which are read whole: never a wrong answer, only less pruning until
the update commits. A Parquet file is written under a temporary name and renamed into place,
so a reader never sees half of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pruner import formats, storage
from pruner.discover import is_lance_dataset, located, parquet_files
from pruner.errors import InvalidParameterError
from pruner.index import DEFAULT_DELETED_SHARE, UpdatePlan, update_index
from pruner.table import open_table

__all__ = ["append", "read_input"]


_FORMAT_WRITERS = {
    "delta": ("a Delta Lake", "deltalake's write_deltalake(path, data, mode='append')"),
    "iceberg": ("an Iceberg", "pyiceberg's table.append(data)"),
}


def append(
    path: storage.PathLike,
    data: Any,
    *,
    engine: str = "local",
    spark: Any = None,
    deleted_share: float = DEFAULT_DELETED_SHARE,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, UpdatePlan]:
    """Append ``data`` (a pyarrow Table or anything ``pyarrow.table`` takes) to the Lance
    dataset or Parquet directory at ``path``, then update each of its pruner indexes;
    return what each update did, by column (a compound key by its shown name, ``(a, b)``).

    Compound keys' indexes are updated the same way, on ``engine``
    (:func:`pruner.index.update_index`).

    ``path`` may be an object store URI (``s3://bucket/key``; Lance-style
    ``storage_options`` or the ``AWS_*`` environment variables say how to reach it).

    Raises:
        InvalidParameterError: ``path`` is not a table, or ``data`` does not fit its schema.
    """
    root = located(path, storage_options)
    table = data if isinstance(data, pa.Table) else pa.table(data)
    kind = formats.kind(root)
    if kind is not None:
        name, writer = _FORMAT_WRITERS[kind]
        folder = formats.folder(root)
        raise InvalidParameterError(
            f"{root} is {name} table: a Parquet file written into its folder would be no row "
            f"of it; append with {writer}, then `pruner index update {folder} --column COLUMN`"
        )
    if is_lance_dataset(root):
        _append_lance(root, table)
    elif storage.is_dir(root) and parquet_files(root):
        _append_parquet(root, table)
    else:
        raise InvalidParameterError(
            f"{root} is not a Lance dataset or a directory of Parquet files; create the table "
            "first (lance.write_dataset, or a Parquet file in a directory), then append"
        )
    updates = {}
    table_now = open_table(root)
    for column in table_now.indexed_columns():
        _, updates[column] = update_index(
            root, column, engine=engine, spark=spark, deleted_share=deleted_share
        )
    for key in table_now.compound_keys():
        _, updates[key.shown] = update_index(root, key, engine=engine, spark=spark)
    return updates


def _append_lance(root: storage.Location, table: pa.Table) -> None:
    import lance

    options = storage.lance_options(root)
    dataset = lance.dataset(str(root), storage_options=options)
    if not _fits(table.schema, dataset.schema):
        raise InvalidParameterError(
            _mismatch(table.schema, dataset.schema, f"Lance dataset {root}")
        )
    rows = table.select(dataset.schema.names)
    lance.write_dataset(rows, str(root), mode="append", storage_options=options)


def _append_parquet(root: storage.Location, table: pa.Table) -> None:
    with storage.arrow_input(parquet_files(root)[0]) as first:
        existing = pq.read_schema(first)
    if not _fits(table.schema, existing):
        raise InvalidParameterError(_mismatch(table.schema, existing, f"Parquet directory {root}"))
    target = root / f"part-{uuid.uuid4().hex}.parquet"
    temporary = storage.temporary_path(target)
    try:
        with storage.arrow_output(temporary) as sink:
            pq.write_table(table.select(existing.names).cast(existing), sink)
        storage.publish(temporary, target, storage.ABSENT)  # a new name: create only
    finally:
        storage.remove(temporary)


def _fits(new: pa.Schema, existing: pa.Schema) -> bool:
    """The new rows have the table's columns, each of the same type (any order)."""
    if sorted(new.names) != sorted(existing.names):
        return False
    return all(new.field(name).type == existing.field(name).type for name in existing.names)


def _mismatch(new: pa.Schema, existing: pa.Schema, where: str) -> str:
    def shown(schema: pa.Schema) -> str:
        return ", ".join(f"{f.name}: {f.type}" for f in schema)

    return (
        f"the new rows ({shown(new)}) do not fit {where} ({shown(existing)}): give the same "
        "columns with the same types"
    )


def read_input(path: storage.PathLike, form: str = "auto") -> pa.Table:
    """The rows of a Parquet, CSV or Arrow IPC file (``form`` 'auto': by its suffix)."""
    source = storage.location(path)
    if form == "auto":
        suffix = source.suffix.lower()
        form = {".parquet": "parquet", ".csv": "csv", ".arrow": "arrow", ".ipc": "arrow"}.get(
            suffix, ""
        )
        if not form:
            raise InvalidParameterError(
                f"cannot tell the format of {source} from its suffix; pass --format "
                "parquet, csv or arrow"
            )
    if not storage.is_file(source):
        raise InvalidParameterError(f"{source} is not a file")
    if form == "parquet":
        return pq.read_table(source)
    if form == "csv":
        import pyarrow.csv as csv

        return csv.read_csv(source)
    import pyarrow.ipc as ipc

    with storage.memory_map(source) as stream:
        try:
            return ipc.open_file(stream).read_all()
        except pa.ArrowInvalid:
            stream.seek(0)
            return ipc.open_stream(stream).read_all()
