"""DuckDB: run a query with every indexed table bound to a pruned source.

The SQL runs unchanged. Each table name the query uses is bound, on a cursor of the
connection (so nothing leaks into the caller's session), to:

- Lance: the selected rows themselves when few (an Arrow table, read before the query), else
  a dataset restricted to the selected fragments and row addresses
  (:class:`~pruner.adapters.sources.PrunedLanceDataset`), into whose scanner DuckDB still
  pushes its projection and filters;
- Parquet: the selected row groups read ahead into Arrow when every file read is read in
  part and they are few (:data:`pruner.reads.DUCKDB_READ_AHEAD_BYTES`; columns of types
  DuckDB and pyarrow read alike, no hive partitions); else a view over ``read_parquet``:
  one list scan of the files read whole, plus, per partial file, a ``file_row_number`` scan
  of its selected row groups (DuckDB skips the others).

A query whose every table is bound the same way for any query of its shape takes a cursor
kept from an earlier one (:class:`~pruner.adapters.kept.KeptCursors`): rows read ahead few
enough to be held (:class:`~pruner.adapters.kept.HeldRows`; a point lookup's, from one file
too) and a dataset a lookup leaves to Lance's scanner are pointed at the query's own.

>>> import tempfile, pyarrow as pa, lance, duckdb
>>> from pruner.index import build_index
>>> path = tempfile.mkdtemp() + "/t.lance"
>>> _ = lance.write_dataset(pa.table({"id": list(range(20000))}), path)
>>> _ = build_index(path, "id")
>>> query("SELECT count(*) AS n FROM t WHERE id = 7", {"t": path}).to_pylist()
[{'n': 1}]
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from pruner import reads, storage
from pruner.adapters.duckdb_views import parquet_view_sql, quote_path, quote_string
from pruner.adapters.kept import HeldRows, Pointed, kept_cursors, reusable_binding
from pruner.adapters.naming import quote_identifier
from pruner.adapters.sources import PrunedLanceDataset, lance_source, point
from pruner.discover import hive_partitioned
from pruner.evaluate import RowKeys
from pruner.parameters import Parameters
from pruner.plan import Plan, named_in, plan
from pruner.reads import (
    parquet_parts,
    read_ahead_bytes,
    read_ahead_on_store,
    read_row_groups,
)
from pruner.selection import Selection
from pruner.table import Table, TableSource, as_table

try:
    import duckdb
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "pruner's DuckDB adapter needs duckdb: pip install 'pruner-index[duckdb]'"
    ) from err

__all__ = [
    "check_sql",
    "query",
    "quote_identifier",
    "quote_path",
    "quote_string",
    "register",
    "registered",
    "sql",
]


def register(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    table: TableSource,
    selection: Selection | None = None,
) -> None:
    """Bind ``name`` on ``connection`` to ``table`` restricted to ``selection`` (None: all).

    Replaces whatever ``name`` was bound to on this connection.
    """
    opened = as_table(table)
    with contextlib.suppress(duckdb.Error):
        connection.unregister(name)
    connection.execute(f"DROP VIEW IF EXISTS temp.{quote_identifier(name)}")
    _bind_table(connection, name, opened, selection)


def _bind_table(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    opened: Table,
    selection: Selection | None,
    keys: RowKeys | None = None,
    lance_probes: bool = False,
    source: Any = None,
) -> Any:
    """Bind as :func:`bind_table` does, on a new cursor (``source``: the table's, as
    :func:`_sources` made it, else made here); return a Lance table's source."""
    if opened.kind == "parquet" and storage.is_remote(opened.path):
        from pruner.adapters.stores import read_store  # fsspec: only for tables on a store

        read_store(connection, opened)
    if opened.kind == "lance":
        # Rows read ahead (here and for Parquet below) are registered as the Arrow table
        # they are: DuckDB scans it with its own filters (DuckDB 2.0.0 dropped an outer
        # join's ON condition over one, fixed in 2.0.1, which pyproject requires:
        # tests/adapters/test_duckdb_bugs.py).
        if source is None:
            source = lance_source(opened, selection, keys, lance_probes)
        connection.register(name, source)
        return source
    rows = source if source is not None else _parquet_rows(opened, selection)
    if rows is not None:
        connection.register(name, rows)
        return None
    connection.execute(
        f"CREATE TEMP VIEW {quote_identifier(name)} AS {parquet_view_sql(opened, selection)}"
    )
    return None


def _reads_alike(arrow_type: pa.DataType) -> bool:
    """Types that DuckDB's ``read_parquet`` and DuckDB over pyarrow's read of the same file
    see as the same DuckDB type (a timestamp, decimal, binary or nested column may map to
    another: INT96, units, UUID, BLOB against VARCHAR)."""
    return (
        pa.types.is_signed_integer(arrow_type)
        or pa.types.is_float32(arrow_type)
        or pa.types.is_float64(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_date32(arrow_type)
    )


def _parquet_rows(
    table: Table, selection: Selection | None, one_file: bool = False
) -> pa.Table | None:
    """The selected row groups of ``table`` read ahead
    (:data:`pruner.reads.DUCKDB_READ_AHEAD_BYTES`; no rows when none is selected), or None
    when the view reads them: everything selected, a file read whole, row groups of one
    file on the machine's own disk (with ``one_file``, only when too many to be held,
    :data:`HeldRows.VALUES`), files that disagree on their schema, hive partitions (their
    columns come from the paths), or a column of a type that pyarrow and DuckDB read
    differently."""
    if selection is None or not table.uniform_schema:
        return None
    if not all(_reads_alike(field.type) for field in table.schema):
        return None
    files = (table.files or {}).values()
    if table.pinned is None and hive_partitioned(f.path.absolute().parts[:-1] for f in files):
        return None  # (a Delta table's partition values are its log's: read_row_groups')
    parts = read_ahead_on_store(table, parquet_parts(table, selection))
    if any(part.row_groups is None for part in parts):
        return None
    if len(parts) == 1 and not storage.is_remote(table.path):
        values = parts[0].rows() * max(1, len(table.schema))
        if not one_file or values > HeldRows.VALUES:
            return None
    if read_ahead_bytes(parts) > reads.DUCKDB_READ_AHEAD_BYTES:
        return None
    return read_row_groups(table, parts)


def registered(
    connection: duckdb.DuckDBPyConnection,
    prepared: Plan,
    pointed: Pointed | None = None,
    sources: Mapping[str, Any] | None = None,
    held: Mapping[str, pa.Table] | None = None,
) -> duckdb.DuckDBPyConnection:
    """A new cursor of ``connection`` with every table of ``prepared`` bound to its pruned
    source (``sources``: those :func:`_sources` made; the others are made here); the
    caller's connection and its other tables are untouched. The tables of ``held`` are
    bound to their rows through a :class:`~pruner.adapters.kept.HeldRows`. ``pointed`` gets
    those holders and the datasets of the tables bound as ``lance``
    (:data:`pruner.adapters.kept.Pointed`).

    A view or macro of the database resolves a table name to the cursor's binding when the
    query runs, and the analyzer never saw its body: a table such a definition names is
    bound whole. So is every table when the database compares strings under a default
    collation (``SET GLOBAL default_collation = 'nocase'``): 'V7' then equals 'v7', which
    a probe of the bytes of 'V7' would miss. Both are read from the database's catalog
    (:func:`_catalog`), which costs ~30 ms, once per change of the catalog.
    """
    cursor = connection.cursor()
    catalog = _catalog(connection, cursor)
    bound = 0
    for name, table in prepared.tables.items():
        selection = prepared.selections.get(name)
        keys = prepared.keys(name)
        source = (sources or {}).get(name)
        if catalog.collation or any(named_in(name, text) for text in catalog.definitions):
            selection = keys = source = None
        elif held and name in held:
            holder = HeldRows(held[name])
            cursor.register(name, holder)
            if pointed is not None:
                pointed[name] = holder
            bound += 1
            continue
        probes = name in prepared.lance_probes and selection is not None and selection.num_rows > 0
        made = source  # the query's own restriction of a Lance table, bound as ``pruned``
        source = _bind_table(cursor, name, table, selection, keys, probes, source)
        if pointed is not None and (probes or isinstance(made, PrunedLanceDataset)):
            pointed[name] = source
        bound += 1
    catalog.after_own_changes(connection, bound)
    return cursor


class _Catalog:
    """What pruner reads of a database's catalog before binding tables on it: the SQL of its
    own views and macros, and its default collation; and the catalog version they are of.

    DuckDB counts, per database, the statements that may change what a name binds to
    (``CREATE``, ``DROP``, ``SET``, ``ATTACH``, a registration; on any connection to it):
    ``connection._catalog_version()`` (0.1 us). While it stays as it was, so do the views,
    the macros and the collation, and they are not read again.
    """

    def __init__(self, version: int | None, definitions: list[str], collation: str) -> None:
        self.version = version
        self.definitions = definitions
        self.collation = collation

    def after_own_changes(self, connection: duckdb.DuckDBPyConnection, own: int) -> None:
        """Record that pruner itself made ``own`` more catalog changes (one registration or
        view per table, on its cursor, which no other cursor sees): when nothing else
        changed the catalog meanwhile, the version after them is still this catalog's."""
        now = _catalog_version(connection)
        if self.version is not None and now == self.version + own:
            self.version = now
            _catalogs[connection] = self


_catalogs: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Catalog] = (
    weakref.WeakKeyDictionary()
)


def _catalog_version(connection: duckdb.DuckDBPyConnection) -> int | None:
    """The database's catalog version, or None where DuckDB does not say (then the catalog
    is read on every call)."""
    version = getattr(connection, "_catalog_version", None)
    return None if version is None else int(version())


def _catalog(connection: duckdb.DuckDBPyConnection, cursor: duckdb.DuckDBPyConnection) -> _Catalog:
    version = _catalog_version(connection)
    known = _catalogs.get(connection)
    if known is not None and version is not None and known.version == version:
        return known
    [(collation,)] = cursor.execute("SELECT current_setting('default_collation')").fetchall()
    rows = cursor.execute(
        "SELECT sql FROM duckdb_views() WHERE NOT internal UNION ALL "
        "SELECT macro_definition FROM duckdb_functions() "
        "WHERE function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall()
    catalog = _Catalog(version, [text for (text,) in rows if text], collation or "")
    if version is not None and _catalog_version(connection) == version:
        _catalogs[connection] = catalog
    return catalog


def _binds_as_planned(connection: duckdb.DuckDBPyConnection, prepared: Plan) -> bool:
    """Whether the database's catalog, as last read and unchanged since (its version: 0.1
    us), lets :func:`registered` bind every table of ``prepared`` as planned: no default
    collation, no view or macro naming one. A kept cursor serves a query only then (it was
    bound as planned, and a table bound empty must not answer under ``nocase``)."""
    version = _catalog_version(connection)
    known = _catalogs.get(connection)
    if known is None or version is None or known.version != version:
        return False
    return not known.collation and not any(
        named_in(name, text) for name in prepared.tables for text in known.definitions
    )


_shared: duckdb.DuckDBPyConnection | None = None
_shared_lock = threading.Lock()


def shared_connection() -> duckdb.DuckDBPyConnection:
    """The in-memory database :func:`query` uses when given no connection (opening one
    costs ~10 ms; every query gets its own cursor of it).

    Its catalog is known from the start: a database opened with no configuration has no
    view, no macro and no default collation, so the first query does not read them (listing
    ``duckdb_functions()`` costs ~23 ms, a third of a short query in a new process). Any
    later change, by pruner or by a caller holding this connection, moves its catalog
    version, and :func:`_catalog` reads the catalog again."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = duckdb.connect()
            version = _catalog_version(_shared)
            if version is not None:
                _catalogs[_shared] = _Catalog(version, [], "")
        return _shared


def sql(
    connection: duckdb.DuckDBPyConnection,
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
) -> duckdb.DuckDBPyRelation:
    """Like ``connection.sql(query_text)``, with ``tables`` bound to pruned sources.

    The tables are bound on a cursor of ``connection``, which the returned relation keeps
    alive; the database's own tables stay visible to the query.
    """
    prepared = plan(query_text, tables, dialect="duckdb", parameters=parameters, prune=prune)
    cursor = registered(connection, prepared)
    if parameters:
        return cursor.sql(query_text, params=_engine_parameters(parameters))
    return cursor.sql(query_text)


def query(
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
    connection: duckdb.DuckDBPyConnection | None = None,
    prepared: Plan | None = None,
) -> pa.Table:
    """Run ``query_text`` on DuckDB with ``tables`` pruned; the result as a pyarrow Table."""
    if prepared is None:
        prepared = plan(query_text, tables, dialect="duckdb", parameters=parameters, prune=prune)
    database = connection if connection is not None else shared_connection()
    sources = _sources(prepared)
    held = {n: s for n, s in sources.items() if HeldRows.holds(s)}
    pruned = {n for n, s in sources.items() if isinstance(s, PrunedLanceDataset)}
    bindings = reusable_binding(prepared, query_text, held, pruned)
    taken = None
    if bindings is not None and _binds_as_planned(database, prepared):
        taken = kept_cursors(database).take(bindings)
    if taken is not None and not _point(taken[1], prepared, sources):
        taken[0].close()  # rows of another schema than DuckDB bound: bound anew
        taken = None
    if taken is None:
        pointed: Pointed = {}
        cursor = registered(database, prepared, pointed, sources, held)
    else:
        cursor, pointed = taken
    answered = False
    try:
        if parameters:
            relation = cursor.sql(query_text, params=_engine_parameters(parameters))
        else:
            relation = cursor.sql(query_text)
        result = pa.table({}) if relation is None else relation.to_arrow_table()
        answered = True
        return result
    finally:
        if answered and bindings is not None:
            kept_cursors(database).keep(bindings, cursor, pointed)
        else:
            cursor.close()


def _sources(prepared: Plan) -> dict[str, Any]:
    """The sources of the tables ``prepared`` reads in part (neither whole, nor no row, nor
    left to Lance's scanner), by name: a Lance table's rows read ahead or pruned dataset
    (:func:`~pruner.adapters.sources.lance_source`), a Parquet table's rows read ahead
    (:func:`_parquet_rows`, of one local file too when few enough to be held on a kept
    cursor); a Parquet table read by its view has none."""
    found: dict[str, Any] = {}
    for name, table in prepared.tables.items():
        selection = prepared.selections.get(name)
        if (
            selection is None
            or selection.num_rows == 0
            or name in prepared.lance_probes
            or prepared.reads_whole(name)
        ):
            continue
        if table.kind == "lance":
            found[name] = lance_source(table, selection, prepared.keys(name))
        else:
            rows = _parquet_rows(table, selection, one_file=True)
            if rows is not None:
                found[name] = rows
    return found


def _point(pointed: Pointed, prepared: Plan, sources: Mapping[str, Any]) -> bool:
    """Point what a kept cursor binds as ``lance``, ``pruned`` or ``rows`` at ``prepared``'s
    fragments, selections and rows (``sources``, :func:`_sources`'); False when rows cannot be
    held by the cursor's holder."""
    for name, source in pointed.items():
        if isinstance(source, HeldRows):
            if not source.hold(sources[name]):
                return False
            continue
        selection = prepared.selections[name]
        assert selection is not None
        point(source, prepared.tables[name], selection, sources.get(name))
    return True


def _engine_parameters(parameters: Parameters) -> Any:
    return dict(parameters) if isinstance(parameters, Mapping) else list(parameters)


def check_sql(sql: str, schemas: Mapping[str, pa.Schema], parameters: Parameters = ()) -> None:
    """Have DuckDB plan ``sql`` over empty tables of ``schemas``: DuckDB's own error for SQL
    it refuses (a misspelt column, an unknown table or function), raised unchanged."""
    con = duckdb.connect()
    try:
        for name, schema in schemas.items():
            con.register(name, schema.empty_table())
        con.execute("EXPLAIN " + sql, _engine_parameters(parameters))
    finally:
        con.close()
