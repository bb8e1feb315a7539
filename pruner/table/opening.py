"""A Lance dataset, a Parquet directory or file, or a dataset object of them, opened as a
:class:`~pruner.table.model.Table`."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pruner import formats, storage
from pruner.discover import (
    ParquetFile,
    arrow_schema,
    ask_table_format_ahead,
    is_lance_dataset,
    located,
    parquet_files,
    parquet_names,
    read_footers_ahead,
    read_parquet_files,
)
from pruner.errors import InvalidParameterError
from pruner.hashing import hash_alike
from pruner.index.footers import read_kept_footers
from pruner.index.hierarchy import read_heads_ahead
from pruner.table.model import Table

if TYPE_CHECKING:
    import pyarrow.dataset as pads


def is_arrow_dataset(source: object) -> bool:
    """Whether ``source`` is a ``pyarrow.dataset.Dataset`` (a ``lance.LanceDataset`` is one),
    asked without importing ``pyarrow.dataset``, whose import has pyarrow import pandas where
    it is installed (0.5-1.5 s that ``import pruner`` must not cost): a caller holding a
    dataset has imported it."""
    module = sys.modules.get("pyarrow.dataset")
    return module is not None and isinstance(source, module.Dataset)


def open_table(
    source: storage.PathLike | pads.Dataset,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    *,
    asof: dt.datetime | str | None = None,
) -> Table:
    """Open a Lance dataset, a Delta Lake table (at ``version``, default the latest), an
    Iceberg table (at snapshot id ``version``, default the current one), a directory of
    Parquet files or one Parquet file: by path (relative or absolute) or URI
    (``s3://bucket/key`` and the other stores of :mod:`pruner.storage`, with Lance-style
    ``storage_options``), or as the ``lance.LanceDataset``, ``pyarrow.dataset`` or pyiceberg
    ``Table`` of them a user already holds (an Iceberg table's folder is read at the metadata
    file its ``version-hint.text`` names; else give its metadata file).

    ``asof`` (a datetime, naive for UTC, or its ISO 8601 text) opens the version current
    then instead: the last committed at or before it, as Lance, deltalake and pyiceberg
    find it.

    Raises:
        InvalidParameterError: the source is none of these; a version (or ``asof``) of a
            Parquet directory or file, which has none; both ``version`` and ``asof``.
    """
    if asof is not None:
        if version is not None:
            raise InvalidParameterError("give a version or asof, not both")
        where = source.uri if is_arrow_dataset(source) and hasattr(source, "uri") else source
        where = located(where, storage_options or getattr(source, "_storage_options", None))
        return open_table(where, version_at(where.absolute(), instant(asof)))
    if is_arrow_dataset(source):
        return _open_dataset(source, version)
    path = located(source, storage_options).absolute()
    found = storage.current_listing(path)
    dataset = None
    if found is None and isinstance(path, storage.ObjectPath):
        found, dataset = listing_to_open(path, version)
    return open_listed(path, version, found, dataset)


def instant(asof: dt.datetime | str) -> dt.datetime:
    """``asof`` as an aware datetime: a naive one (or ISO 8601 text without an offset) is
    UTC.

    Raises:
        InvalidParameterError: the text is no ISO 8601 date and time.
    """
    if isinstance(asof, str):
        try:
            asof = dt.datetime.fromisoformat(asof)
        except ValueError as err:
            raise InvalidParameterError(
                f"asof wants an ISO 8601 date and time (2026-11-27T10:00:00+00:00), got {asof!r}"
            ) from err
    return asof if asof.tzinfo is not None else asof.replace(tzinfo=dt.UTC)


def version_at(path: storage.Location, when: dt.datetime) -> int:
    """The version of the table at ``path`` current at ``when``: the last committed at or
    before it.

    Raises:
        InvalidParameterError: the table had no version then, or has no versions at all (a
            Parquet directory or file).
    """
    if is_lance_dataset(path):
        import lance

        dataset = lance.dataset(str(path), storage_options=storage.lance_options(path))
        local = when.astimezone().replace(tzinfo=None)  # Lance's version times: naive, local
        versions: list[Any] = dataset.versions()
        found = [v["version"] for v in versions if v["timestamp"] <= local]
        if not found:
            raise InvalidParameterError(
                f"Lance dataset {path} has no version at or before {when.isoformat()}"
            )
        return int(max(found))
    if formats.kind(path) is not None:
        return formats.version_at(path, when)
    raise _unversioned(path)


def _unversioned(path: storage.Location) -> InvalidParameterError:
    return InvalidParameterError(
        f"{path} has no versions (a directory of Parquet files or one file): a version or asof "
        "applies to Lance datasets, Delta Lake and Iceberg tables"
    )


def listing_to_open(path: storage.ObjectPath, version: int | None) -> tuple[storage.Listing, Any]:
    """What opening the table at ``path`` on a store starts with, in one round trip: the
    LIST of every object under it (which answers what opening asks: storage.listed), and
    beside it Lance's own opening of the path as a dataset (a LIST of its versions, then its
    manifest; None unless Lance opened one). As soon as the listing is known, its indexes'
    companion heads start on their way (:func:`read_heads_ahead`), so does the question
    whether a folder above a plain Parquet folder is a Delta or Iceberg table
    (:func:`pruner.discover.ask_table_format_ahead`), the footers kept beside the indexes are
    read (:func:`read_kept_footers`: one GET for every file's), and any other Parquet file's
    footer starts on its way (:func:`read_footers_ahead`), read while opening asks the rest.

    Raises:
        OSError: the store refused the LIST.
    """

    def listed() -> storage.Listing:
        found = storage.listing(path)
        read_heads_ahead(found)
        if _plain_parquet_folder(found):  # opening asks the folders above for a table format
            ask_table_format_ahead(path, found)
        read_kept_footers(found)
        read_footers_ahead(found)
        return found

    found, dataset = storage.gather([listed, lambda: _lance_dataset_or_none(path, version)])
    return found, dataset


def _plain_parquet_folder(found: storage.Listing) -> bool:
    """Whether the listed folder holds Parquet files and is no Lance dataset, Delta or
    Iceberg table itself (what :func:`pruner.discover.parquet_names` refuses inside one)."""
    names = found.objects
    if any(name.startswith(("_versions/", "_delta_log/", "metadata/")) for name in names):
        return False
    return any(name.endswith(".parquet") for name in names)


def open_listed(
    path: storage.Location, version: int | None, found: storage.Listing | None, dataset: Any
) -> Table:
    """The table at ``path`` opened with what :func:`listing_to_open` found (a listing that
    answers opening's questions, a Lance dataset opened there), where it found them."""
    with storage.listed(found):
        table = _open_path(path, version, dataset)
    table.listing = found
    return table


def _lance_dataset_or_none(path: storage.ObjectPath, version: int | None) -> Any:
    """Lance's dataset at ``path``, or None where Lance cannot open one (it is not a Lance
    dataset, say: :func:`_open_path` opens it again when it is one, with Lance's error)."""
    import lance

    try:
        return lance.dataset(str(path), version=version, storage_options=path.options)
    except Exception:
        return None


_READERS = {
    "delta": "deltalake or DataFusion's DeltaTable provider",
    "iceberg": "pyiceberg (table.scan(row_filter=...).to_arrow())",
}


def _logged_table(snapshot: formats.Snapshot) -> Table:
    """The table of a Delta or Iceberg ``snapshot``'s live files, each file's columns found
    as the format's readers find them."""
    name = "Delta" if snapshot.kind == "delta" else "Iceberg"
    what = f"{name} table {snapshot.root} at version {snapshot.version}"
    if not snapshot.files:
        raise InvalidParameterError(
            f"{what} has no rows (no live data file), which pruner does not read yet; query it "
            f"with {_READERS[snapshot.kind]}"
        )
    table = _parquet_table(snapshot.root, snapshot.root, list(snapshot.files))
    table.pinned = snapshot
    table.deleted = snapshot.deleted
    columns = snapshot.in_files
    # the columns each distinct Parquet schema holds (files usually share one or two)
    shapes: list[tuple[Any, Any, pa.Schema, dict[str, str]]] = []
    held: dict[str, tuple[pa.Schema, dict[str, str]]] = {}  # per file
    for file in (table.files or {}).values():
        metadata = file.metadata
        known = (metadata.schema, metadata.metadata)
        found = next((s for s in shapes if s[0].equals(known[0]) and s[1] == known[1]), None)
        if found is None:
            schema = arrow_schema(metadata)
            found = (*known, schema, formats.stored_columns(snapshot, schema))
            shapes.append(found)
        held[file.relative] = found[2:]
    by_name = {name: name for name in columns}
    if snapshot.partitions is None and all(
        s[3] == by_name and s[2].names == columns for s in shapes
    ):
        return table  # every file holds every column by its name, and nothing else
    return _laid_out(table, snapshot, held, what)


def _laid_out(
    table: Table,
    snapshot: formats.Snapshot,
    held: dict[str, tuple[pa.Schema, dict[str, str]]],
    what: str,
) -> Table:
    """``table`` reading each file as its :class:`~pruner.formats.Layout` says: the table's
    columns under the file's names for them (``held``: per file, its Arrow schema and those
    names), a Delta table's partition values, and NULL for a column added since the file was
    written. A column is typed as the files hold it (or as the format's schema says, when no
    file holds it yet).

    Raises:
        InvalidParameterError: two files hold a column at types that do not read alike (an
            integer of two widths, say).
    """
    fields: dict[str, pa.Field] = {}
    uniform = True  # every file holds each column at one Arrow type
    for schema, found in {id(found): (schema, found) for schema, found in held.values()}.values():
        for name, in_file in found.items():
            field = schema.field(in_file).with_name(name)
            if name not in fields:
                fields[name] = field
                continue
            uniform = uniform and fields[name].type.equals(field.type)
            # string, large_string and string_view (and their dictionaries) read alike
            if not hash_alike(fields[name].type, field.type):
                raise InvalidParameterError(
                    f"the live files of {what} hold column {name!r} at different types "
                    f"({fields[name].type} and {field.type}: its type changed since some were "
                    f"written), which pruner does not read yet; query it with "
                    f"{_READERS[snapshot.kind]}"
                )
    partitions = snapshot.partitions
    if partitions is not None:
        fields.update((field.name, field) for field in partitions.fields)
    for name in snapshot.columns:
        if name not in fields:  # in no file yet
            fields[name] = snapshot.schema.field(name)
    table.schema = pa.schema([fields[name] for name in snapshot.columns])
    table.layouts = {}
    for relative, (_, found) in held.items():
        values = (
            dict(zip(partitions.names, partitions.values[relative], strict=True))
            if partitions
            else {}
        )
        table.layouts[relative] = formats.Layout(
            tuple((name, found[name]) for name in snapshot.columns if name in found),
            tuple(
                (fields[name], values.get(name)) for name in snapshot.columns if name not in found
            ),
        )
    # every file is read as the table's schema says, at the type each column has
    table.mixed_types, table.widened, table.uniform_schema = frozenset(), frozenset(), uniform
    return table


def _open_path(path: storage.Location, version: int | None, dataset: Any = None) -> Table:
    if is_lance_dataset(path):
        import lance

        if dataset is None:
            options = storage.lance_options(path)
            dataset = lance.dataset(str(path), version=version, storage_options=options)
        return _lance_table(path, dataset)
    kind = formats.kind(path)
    if kind is not None:
        # The live files of the version (pinned: the Table reads it however the table
        # moves on, as a Lance dataset's does).
        return _logged_table(formats.snapshot(path, version))
    if version is not None:
        raise _unversioned(path)
    if path.suffix == ".parquet" and storage.is_file(path):
        # One file: a table of one fragment (no index lives beside a single file, so it is
        # read whole: a small table joined to an indexed one, say).
        return _parquet_table(path, path.parent, [path.name])
    if not storage.is_dir(path):
        raise InvalidParameterError(
            f"{path} does not exist; give a Lance dataset, a directory of Parquet files or a "
            "Parquet file"
        )
    found = parquet_names(path)
    if not found:
        raise InvalidParameterError(
            f"{path} is neither a Lance dataset nor a directory of Parquet files"
        )
    return _parquet_table(path, path, found)


def _lance_table(path: storage.Location, dataset: Any) -> Table:
    rows = {f.fragment_id: f.physical_rows for f in dataset.get_fragments()}
    return Table(path, "lance", dataset.schema, rows, dataset=dataset)


def _open_dataset(source: pads.Dataset, version: int | None) -> Table:
    """A ``lance.LanceDataset`` (its version, unless ``version`` says another) or a
    ``pyarrow.dataset`` of Parquet files (all of one directory's, or one file)."""
    uri = getattr(source, "uri", None)
    if uri is not None and hasattr(source, "get_fragments") and hasattr(source, "version"):
        # a dataset on a store keeps the options it was opened with
        path = located(str(uri), getattr(source, "_storage_options", None)).absolute()
        if version is None or version == source.version:
            return _lance_table(path, source)
        return open_table(path, version)
    files = [Path(f).absolute() for f in getattr(source, "files", [])]
    fmt = getattr(source, "format", None)
    import pyarrow.dataset as pads

    if not files or not isinstance(fmt, pads.ParquetFileFormat):
        raise InvalidParameterError(
            "pruner reads a pyarrow dataset of Parquet files (or a lance.LanceDataset); give "
            "the path of the Lance dataset or Parquet directory instead"
        )
    if len(files) == 1:
        return open_table(files[0])
    root = Path(os.path.commonpath(files))
    if sorted(files) == sorted(p.absolute() for p in parquet_files(root)):
        return open_table(root)
    raise InvalidParameterError(
        f"the pyarrow dataset holds {len(files)} of the Parquet files under {root}: pruner "
        "reads a whole directory of them; give the directory"
    )


def _parquet_table(path: storage.Location, root: storage.Location, found: list[str]) -> Table:
    """The Parquet files ``found`` (paths relative to ``root``) as one table at ``path``.

    A file whose Parquet schema and key-value metadata equal the first file's has its
    Arrow schema (pyarrow derives that from those two alone) and is not converted. On a
    store the footers are read side by side (one suffix-range GET each): a request costs a
    round trip, not bytes."""
    files: dict[int, ParquetFile] = {}
    schema = None
    first: tuple[Any, Any] | None = None
    mixed: set[str] = set()
    widened: set[str] = set()
    uniform = True
    read = read_parquet_files(root, found)
    for fid, file in enumerate(read):
        files[fid] = file
        metadata = file.metadata
        if first is not None and metadata.schema.equals(first[0]) and metadata.metadata == first[1]:
            continue
        file_schema = arrow_schema(metadata)
        if schema is None:
            schema, first = file_schema, (metadata.schema, metadata.metadata)
        if not file_schema.equals(schema, check_metadata=False):
            widths = _widened(schema, file_schema)
            uniform = uniform and widths is not None
            widened.update(widths or ())
        mixed.update(
            f.name
            for f in file_schema
            if f.name in schema.names and not hash_alike(schema.field(f.name).type, f.type)
        )
    assert schema is not None
    rows = {fid: f.rows for fid, f in files.items()}
    return Table(
        path,
        "parquet",
        schema,
        rows,
        files=files,
        mixed_types=frozenset(mixed),
        uniform_schema=uniform,
        widened=frozenset(widened) if uniform else frozenset(),
    )


def _widened(schema: pa.Schema, other: pa.Schema) -> set[str] | None:
    """The columns ``other`` stores as INT32 where ``schema`` (the first file's) has INT64,
    when that is all the two disagree on; else None. Only that way round: DuckDB reads every
    file at the first file's type, and an INT64 value read as INT32 may fail to fit (DuckDB
    alone then fails on the files that hold one, whichever rows the query keeps)."""
    if other.names != schema.names:
        return None
    found = set()
    for mine, theirs in zip(schema, other, strict=True):
        if mine.equals(theirs):
            continue
        wider = mine.type == pa.int64() and theirs.type == pa.int32()
        if not wider or mine.nullable != theirs.nullable:
            return None
        found.add(mine.name)
    return found
