"""Iceberg tables: which Parquet files a snapshot of the table is made of.

An Iceberg table's metadata (``metadata/*.metadata.json``, each naming a manifest list per
snapshot) names its live data files; files an overwrite, a delete or a compaction removed stay
on disk until their snapshots expire. The metadata is read by ``pyiceberg`` at a pinned
snapshot: :func:`snapshot` gives its live files, and the rest of pruner reads them as a
directory of Parquet files made of exactly those files, as a Delta table's.

Which metadata file is the table's current one is known to its catalog, not to its folder (a
commit that lost its race leaves a metadata file behind). So a table is given, for an answer,
as its current metadata file (``table.metadata_location``), as the pyiceberg ``Table`` a
catalog loaded, or as its folder when the folder says which file is current
(``metadata/version-hint.text``, as Hadoop tables and DuckDB's ``iceberg_scan`` have it). An
index build only picks which files get zones, so there the folder's newest metadata file will
do (:func:`snapshot`'s ``newest``).

Positional delete files and deletion vectors (Puffin files, format version 3) are applied:
each data file's deleted row positions are read from them, and every read leaves those rows
out (as a Delta deletion vector's). What pruner cannot read exactly is refused with an
error, never answered from the raw files: equality delete files, files that hold a
column's nested fields otherwise than its schema does (:func:`stored_columns`; columns are
found by field id, so a column renamed, or dropped and added again under its old name, reads
as Iceberg's readers read it), data files that are not Parquet or lie
outside the table's folder, and tables on object stores other than S3 (not read yet).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from pruner import storage
from pruner.errors import InvalidParameterError
from pruner.formats.snapshot import Snapshot, relative_file

__all__ = [
    "CATALOG_PREFIX",
    "catalog_table",
    "file_io_properties",
    "folder",
    "is_iceberg_table",
    "is_metadata_file",
    "is_table_object",
    "log_entries",
    "metadata_names",
    "snapshot",
    "storage_options",
    "stored_columns",
    "version_at",
]

METADATA = "metadata"
SUFFIX = ".metadata.json"
HINT = "version-hint.text"
FIELD_ID = b"PARQUET:field_id"

_QUERY_IT = "query it with pyiceberg (table.scan(row_filter=...).to_arrow())"


def is_metadata_file(path: storage.Location) -> bool:
    """Whether ``path`` names an Iceberg metadata file (``<table>/metadata/*.metadata.json``)."""
    return path.name.endswith(SUFFIX) and path.parent.name == METADATA


def is_iceberg_table(path: storage.Location) -> bool:
    """True when ``path`` is an Iceberg table's folder (its ``metadata`` folder holds a
    ``*.metadata.json``) or one of its metadata files."""
    if is_metadata_file(path):
        return storage.is_file(path)
    return any(name.endswith(SUFFIX) for name in metadata_names(path))


CATALOG_PREFIX = "iceberg:"
"""How a table of the user's configured Iceberg catalogs is named where a path could be:
``iceberg:CATALOG.NAMESPACE.TABLE`` (a nested namespace's parts joined by dots)."""


def catalog_table(source: str) -> Any:
    """The pyiceberg ``Table`` that ``source`` (``iceberg:CATALOG.NAMESPACE.TABLE``) names,
    loaded from the catalog ``CATALOG`` as pyiceberg's ``load_catalog`` configures it
    (``~/.pyiceberg.yaml``, or ``PYICEBERG_CATALOG__CATALOG__*`` environment variables).

    Raises:
        InvalidParameterError: the name is not of that form, pyiceberg is not installed, or
            the catalog or table cannot be loaded (the message without credentials).
    """
    name = source[len(CATALOG_PREFIX) :]
    parts = name.split(".")
    if len(parts) < 3 or not all(parts):
        raise InvalidParameterError(
            f"{source!r} names no Iceberg table: give {CATALOG_PREFIX}CATALOG.NAMESPACE.TABLE, "
            "a catalog pyiceberg is configured with (~/.pyiceberg.yaml or PYICEBERG_CATALOG__* "
            "variables), or the table's metadata file"
        )
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError as err:
        raise InvalidParameterError(
            f"{source} is an Iceberg table; pruner reads those with pyiceberg: "
            "pip install 'pruner-index[iceberg]'"
        ) from err
    from pyiceberg.utils.config import Config

    try:
        # the configuration as it is now (pyiceberg reads it once, when first imported)
        configured: dict[str, Any] = dict(Config().get_catalog_config(parts[0]) or {})
        catalog = load_catalog(parts[0], **configured)
    except Exception as err:  # pyiceberg's own errors (no URI configured, ...)
        raise InvalidParameterError(
            f"cannot load the Iceberg catalog {parts[0]!r} ({_without_credentials(err)}); "
            f"configure it in ~/.pyiceberg.yaml or PYICEBERG_CATALOG__{parts[0].upper()}__* "
            "variables, as pyiceberg's load_catalog reads them"
        ) from None
    try:
        return catalog.load_table(".".join(parts[1:]))
    except Exception as err:  # NoSuchTableError, NoSuchNamespaceError, ...
        raise InvalidParameterError(
            f"the Iceberg catalog {parts[0]!r} has no table {'.'.join(parts[1:])!r} "
            f"({_without_credentials(err)})"
        ) from None


def _without_credentials(err: Exception) -> str:
    """A catalog's error, its first line, without a URL's user and password."""
    text = storage.scrub(f"{type(err).__name__}: {err}")
    return re.sub(r"://[^/@\s]*@", "://***@", text)


def is_table_object(source: object) -> bool:
    """Whether ``source`` is a pyiceberg ``Table`` (asked without importing pyiceberg: a
    caller holding one has imported it)."""
    module = sys.modules.get("pyiceberg.table")
    return module is not None and isinstance(source, module.Table)


def folder(path: storage.Location) -> storage.Location:
    """The table's folder: ``path`` itself, or for a metadata file the folder it describes
    (where the table's indexes live, under ``_pruner/``)."""
    return path.parent.parent if is_metadata_file(path) else path


def log_entries(path: storage.Location) -> frozenset[str]:
    """What changes whenever the table read at ``path`` does: for a folder, the names in its
    ``metadata`` folder (a commit adds a metadata file, and its hint moves with it); a
    metadata file is never rewritten, so its own name."""
    if is_metadata_file(path):
        return frozenset({path.name})
    return frozenset(metadata_names(path))


def metadata_names(path: storage.Location) -> list[str]:
    """What ``path``'s ``metadata`` folder holds (nothing when there is none)."""
    metadata = path / METADATA
    if storage.is_remote(path):
        try:
            return storage.list_dir(metadata)
        except FileNotFoundError:
            return []
    return storage.list_dir(metadata) if storage.is_dir(metadata) else []


def _newest(path: storage.Location) -> storage.Location:
    """The folder's metadata file of the highest version number (``v3.metadata.json``,
    ``00003-<uuid>.metadata.json``)."""
    numbered = []
    for name in metadata_names(path):
        found = re.match(r"v?(\d+)[-.]", name)
        if name.endswith(SUFFIX) and found:
            numbered.append((int(found.group(1)), name))
    if not numbered:
        raise InvalidParameterError(f"{path} holds no numbered Iceberg metadata file")
    return path / METADATA / max(numbered)[1]


def snapshot(
    path: storage.Location, version: int | None = None, *, newest: bool = False
) -> Snapshot:
    """The live data files of the Iceberg table at ``path`` (its folder or a metadata file),
    at snapshot id ``version`` (None: the current snapshot of that metadata).

    A folder is read at the metadata file its ``version-hint.text`` names; without one it is
    refused, unless ``newest`` (for an index build) takes its newest metadata file.

    Raises:
        InvalidParameterError: pyiceberg is not installed; the table is on an object store;
            the folder does not say which metadata file is current; the snapshot does not
            exist; or the table uses what pruner cannot read exactly (the module's
            docstring).
    """
    root, metadata, table = _static_table(path, newest)
    what = f"Iceberg table {root}"
    if version is None:
        current = table.current_snapshot()
    else:
        current = table.snapshot_by_id(version)
        if current is None:
            raise InvalidParameterError(
                f"{what} has no snapshot {version} in {metadata.name}; its snapshots: "
                + ", ".join(str(s.snapshot_id) for s in table.metadata.snapshots)
            )
    if current is None:  # a table created and never written: no rows
        return Snapshot("iceberg", root, -1, (), (), metadata=metadata)
    # The current snapshot reads with the table's current schema, an older one with its own
    # (pyiceberg's and Spark's time travel)
    scan = table.scan() if version is None else table.scan(snapshot_id=version)
    try:
        tasks = list(scan.plan_files())
    except ValueError as err:  # equality deletes, which pyiceberg refuses to plan
        raise InvalidParameterError(
            f"{what} (snapshot {current.snapshot_id}) cannot be read exactly: {err}; pruner "
            "does not read it yet: query it with a reader that applies equality deletes "
            "(Spark with Iceberg's runtime), or rewrite its data files (rewrite_data_files)"
        ) from err
    files = []
    deleted: dict[str, Any] = {}
    read: dict[str, Any] = {}  # each delete file read once, however many files it covers
    for task in tasks:
        data = task.file
        if str(data.file_format.value).upper() != "PARQUET":
            raise InvalidParameterError(
                f"{what} has a {data.file_format.value} data file ({data.file_path}); pruner "
                f"reads Parquet; {_QUERY_IT}"
            )
        relative = relative_file(root, data.file_path, "Iceberg")
        files.append(relative)
        if task.delete_files:
            positions = _deleted_positions(what, root, data.file_path, task.delete_files, read)
            if len(positions):
                deleted[relative] = positions
    shape = tuple(_iceberg_shape(field) for field in scan.projection().fields)
    columns = tuple(node[0] or "" for node in shape)
    return Snapshot(
        "iceberg",
        root,
        current.snapshot_id,
        tuple(sorted(files)),
        columns,
        metadata,
        shape,
        _name_mapping(table),
        deleted=deleted or None,
        schema=scan.projection().as_arrow(),
    )


def _deleted_positions(
    what: str, root: storage.Location, data_file: str, deletes: Any, read: dict[str, Any]
) -> Any:
    """The positions of the rows of ``data_file`` its positional delete files and deletion
    vectors delete (sorted int64; pyiceberg's planning already chose the delete files that
    apply to it). ``read``: the delete files read so far, by path (a file may cover many
    data files): a Parquet file's ``(file_path, pos)`` rows, or a Puffin file's deletion
    vectors by the data file each names (its ``referenced-data-file``, as pyiceberg's reader
    matches them).

    Raises:
        InvalidParameterError: a delete file pruner does not read (an equality delete, a
            format other than Parquet and Puffin).
    """
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found = [np.zeros(0, np.int64)]
    for delete in deletes:
        kind = str(getattr(delete.content, "name", delete.content)).upper()
        fmt = str(delete.file_format.value).upper()
        if "POSITION" not in kind or fmt not in ("PARQUET", "PUFFIN"):
            raise InvalidParameterError(
                f"{what} has a {fmt} {kind.lower()} delete file ({delete.file_path}), which "
                f"pruner does not apply yet; {_QUERY_IT}, or rewrite its data files "
                "(rewrite_data_files in Spark)"
            )
        where = delete.file_path
        rows: Any = read.get(where)
        if rows is None:
            if isinstance(root, storage.ObjectPath):
                location = storage.location(where, root.options)
            else:
                location = storage.location(where.removeprefix("file://").removeprefix("file:"))
            with storage.arrow_input(location) as handle:
                if fmt == "PUFFIN":
                    rows = read[where] = _deletion_vectors(what, where, handle.read())
                else:
                    rows = read[where] = pq.read_table(handle, columns=["file_path", "pos"])
        if fmt == "PUFFIN":
            found.append(rows.get(data_file, np.zeros(0, np.int64)))
            continue
        mine = rows.filter(pc.equal(rows.column("file_path"), data_file))
        found.append(mine.column("pos").to_numpy().astype(np.int64))
    return np.unique(np.concatenate(found))


def _deletion_vectors(what: str, where: str, content: bytes) -> dict[str, Any]:
    """The deletion vectors of a Puffin file (format version 3 deletes): per data file its
    deleted positions (int64), read by pyiceberg (``deletion-vector-v1`` blobs).

    Raises:
        InvalidParameterError: pyiceberg cannot read the file (damaged, or a blob it does not
            know).
    """
    import numpy as np
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    try:
        vectors = deletion_vectors_from_puffin_file(PuffinFile(content))
        return {
            vector.referenced_data_file: vector.to_vector().to_numpy().astype(np.int64)
            for vector in vectors
        }
    except Exception as err:  # pyiceberg's and pyroaring's own errors
        raise InvalidParameterError(
            f"{what}: its deletion vector file {where} cannot be read ({err}); {_QUERY_IT}"
        ) from err


def version_at(path: storage.Location, when: dt.datetime) -> int:
    """The id of the table's snapshot current at ``when`` (an aware datetime): the last
    one committed at or before it, as pyiceberg's ``snapshot_as_of_timestamp`` finds it.

    Raises:
        InvalidParameterError: the table had no snapshot then (or :func:`snapshot`'s).
    """
    root, metadata, table = _static_table(path, newest=False)
    found = table.snapshot_as_of_timestamp(round(when.timestamp() * 1000))
    if found is None:
        raise InvalidParameterError(
            f"Iceberg table {root} had no snapshot at {when.isoformat()} ({metadata.name})"
        )
    return int(found.snapshot_id)


def _static_table(path: storage.Location, newest: bool) -> tuple[Any, Any, Any]:
    """The table's folder, the metadata file read (see :func:`snapshot`) and pyiceberg's
    ``StaticTable`` of it."""
    properties = file_io_properties(path)
    try:
        from pyiceberg.table import StaticTable
    except ImportError as err:
        raise InvalidParameterError(
            f"{path} is an Iceberg table; pruner reads those with pyiceberg: "
            "pip install 'pruner-index[iceberg]'"
        ) from err
    root = folder(path).absolute()
    metadata = path.absolute()
    if not is_metadata_file(path):
        hinted = _hinted(root) if storage.is_file(root / METADATA / HINT) else None
        if hinted is not None:
            metadata = hinted
        elif newest:
            metadata = _newest(root)
        else:
            raise InvalidParameterError(
                f"{root} is an Iceberg table whose folder does not say which metadata file is "
                f"current (it has no {METADATA}/{HINT}, or an empty one; the table's catalog "
                "knows): give its current metadata file (table.metadata_location) or the "
                "pyiceberg Table a catalog loaded"
            )
    try:
        table = StaticTable.from_metadata(str(metadata), properties)
    except Exception as err:  # pyiceberg's and the file system's own errors
        raise InvalidParameterError(f"cannot read Iceberg metadata {metadata}: {err}") from err
    return root, metadata, table


def _hinted(root: storage.Location) -> storage.Location | None:
    """The metadata file ``version-hint.text`` names (a version number ``N`` for
    ``vN.metadata.json``, or a file name), as pyiceberg and DuckDB read it; None for an
    empty hint (Impala's tables have one), which names none."""
    content = storage.read_tail(root / METADATA / HINT, 4096)[0].decode().strip()
    if not content:
        return None
    if content.endswith(SUFFIX):
        return root / METADATA / content
    name = f"v{content}" if content.isdecimal() else content
    return root / METADATA / f"{name}{SUFFIX}"


_S3_PROPERTIES = {
    "s3.endpoint": ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url"),
    "s3.access-key-id": ("aws_access_key_id", "access_key_id"),
    "s3.secret-access-key": ("aws_secret_access_key", "secret_access_key"),
    "s3.session-token": ("aws_session_token", "session_token", "token"),
    "s3.region": ("aws_region", "region"),
}
"""pyiceberg's FileIO property for S3, and the Lance-style storage option names that say
the same (the first is the one :func:`storage_options` gives back)."""

_S3_ENVIRONMENT = {
    "s3.endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
    "s3.access-key-id": ("AWS_ACCESS_KEY_ID",),
    "s3.secret-access-key": ("AWS_SECRET_ACCESS_KEY",),
    "s3.session-token": ("AWS_SESSION_TOKEN",),
    "s3.region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}


def file_io_properties(path: storage.Location) -> dict[str, str]:
    """What pyiceberg needs to read the table at ``path``: for a table on S3 its FileIO's
    ``s3.*`` properties, from the path's storage options, else the standard ``AWS_*``
    environment variables (nothing for a local table).

    Raises:
        InvalidParameterError: the table is on a store pruner does not read Iceberg tables
            on yet (GCS, Azure).
    """
    if not isinstance(path, storage.ObjectPath):
        return {}
    if path.scheme not in ("s3", "s3a"):
        raise InvalidParameterError(
            f"{path} is an Iceberg table on {path.scheme}://, where pruner does not read "
            f"Iceberg tables yet (it reads them on S3); {_QUERY_IT}"
        )
    options = {name.lower(): value for name, value in path.options.items()}
    found = {}
    for name, aliases in _S3_PROPERTIES.items():
        value = next((options[a] for a in aliases if a in options), None)
        if value is None:
            value = next((os.environ[v] for v in _S3_ENVIRONMENT[name] if v in os.environ), None)
        if value is not None:
            found[name] = value
    return found


def storage_options(properties: Mapping[str, str]) -> dict[str, str]:
    """The Lance-style storage options of a pyiceberg Table's FileIO ``properties`` (how
    it reaches its S3 store), for the table pruner reads from its metadata location."""
    found = {
        aliases[0]: properties[name]
        for name, aliases in _S3_PROPERTIES.items()
        if name in properties
    }
    if found.get("aws_endpoint", "").startswith("http://"):
        found["allow_http"] = "true"
    return found


Shape = tuple[str | None, int | None, tuple[Any, ...]]
"""A column as its files must hold it: its name (None for a list's element or a map's key or
value, whose names writers choose), its field id, and its children's shapes."""


def _iceberg_shape(field: Any, named: bool = True) -> Shape:
    from pyiceberg.types import ListType, MapType, StructType

    kind = field.field_type
    children: tuple[Shape, ...] = ()
    if isinstance(kind, StructType):
        children = tuple(_iceberg_shape(child) for child in kind.fields)
    elif isinstance(kind, ListType):
        children = (_iceberg_shape(kind.element_field, named=False),)
    elif isinstance(kind, MapType):
        children = tuple(
            _iceberg_shape(child, named=False) for child in (kind.key_field, kind.value_field)
        )
    return (field.name if named else None, field.field_id, children)


NameMap = dict[str, tuple[int | None, "NameMap"]]
"""A table's name mapping (``schema.name-mapping.default``): each name a field of a data file
without field ids may have, its field id and its children's mapping."""


def _name_mapping(table: Any) -> NameMap:
    def mapped(fields: Any) -> NameMap:
        found: NameMap = {}
        for field in fields:
            for name in field.names:
                found[name] = (field.field_id, mapped(field.fields))
        return found

    mapping = table.metadata.name_mapping()
    return mapped(mapping) if mapping is not None else {}


def _arrow_shape(field: Any, mapping: NameMap, name: str | None = None) -> Shape:
    """A data file's field as :data:`Shape`: its field id written in the file, or for a
    file written without field ids (added from elsewhere) the one the table's name mapping
    gives its name (``name``: the name it is mapped by, for a list's element or a map's key
    or value, which have no name in the shape)."""
    import pyarrow as pa

    kind = field.type
    found = (field.metadata or {}).get(FIELD_ID)
    field_id, inner = int(found) if found is not None else None, mapping
    if field_id is None:
        field_id, inner = mapping.get(name or field.name, (None, {}))
    else:
        inner = mapping.get(name or field.name, (None, {}))[1]
    children: tuple[Shape, ...] = ()
    if pa.types.is_struct(kind):
        children = tuple(_arrow_shape(kind.field(i), inner) for i in range(kind.num_fields))
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        children = (_arrow_shape(kind.value_field, inner, "element"),)
    elif pa.types.is_map(kind):
        children = (
            _arrow_shape(kind.key_field, inner, "key"),
            _arrow_shape(kind.item_field, inner, "value"),
        )
    return (None if name else field.name, field_id, children)


def stored_columns(snapshot: Snapshot, schema: Any) -> dict[str, str]:
    """The table's columns a data file of Arrow ``schema`` holds (by field id: a column
    renamed since the file was written by its old name, a column dropped and added again
    under its old name not at all), each by the file's name for it. A file written without
    field ids (added from elsewhere) has the ids the table's name mapping gives its names.

    Raises:
        InvalidParameterError: a column's nested fields differ from the schema's (a nested
            field renamed, added or dropped since the file was written).
    """
    mapping = snapshot.name_mapping or {}
    held: dict[int, tuple[str, Shape]] = {}
    for field in schema:
        shape = _arrow_shape(field, mapping)
        if shape[1] is not None:
            held[shape[1]] = (field.name, shape)
    found = {}
    for name, field_id, children in snapshot.shape:
        if field_id not in held:
            continue
        in_file, shape = held[field_id]
        if shape[2] != children:
            raise InvalidParameterError(
                f"a data file of Iceberg table {snapshot.root} holds column {name!r} with "
                "other nested fields than the table's schema (a nested field renamed, added "
                f"or dropped since it was written), which pruner does not read yet; {_QUERY_IT}"
            )
        found[name or ""] = in_file
    return found
