"""DataFusion: run a query with every indexed table bound to a pruned source.

The SQL runs unchanged; each table name it uses is registered on the SessionContext as a
``pyarrow.dataset`` DataFusion scans with projection and filter pushdown:

- Lance: the selected rows themselves when few, registered as record batches; else a
  :class:`~pruner.adapters.sources.PrunedLanceDataset`, whose fragments DataFusion reads as
  its partitions, each restricted to the selected row addresses;
- Parquet: DataFusion's own Parquet reader (``read_parquet``) on each file read whole, and
  the selected row groups of the other files read ahead into Arrow when they are not too
  large (:data:`pruner.reads.PARQUET_READ_AHEAD_BYTES`), else those files read whole too;
  registered as one view, the union of them. DataFusion's Python API has no row-range read,
  so row groups are the finest unit (a superset of the selection). Nothing goes through a
  ``pyarrow.dataset``: DataFusion pushes its filters into one as exact and pyarrow applies
  them with its own semantics (``NOT IN`` keeps NULL rows, ``NaN = NaN`` is false), which
  changed answers.

>>> import tempfile, pyarrow as pa, lance
>>> from pruner.index import build_index
>>> path = tempfile.mkdtemp() + "/t.lance"
>>> _ = lance.write_dataset(pa.table({"id": list(range(20000))}), path)
>>> _ = build_index(path, "id")
>>> query("SELECT count(*) AS n FROM t WHERE id = 7", {"t": path}).to_pylist()
[{'n': 1}]
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import lance
import pyarrow as pa

from pruner import reads, storage
from pruner.adapters.datafusion_settings import (
    INNER_SETTINGS,
    PUSHED_SCANS,
    SAFE_SETTINGS,
    new_context,
    own_contexts,
    own_filters_only,
    pushed_scan,
)
from pruner.adapters.kept import KeptFooters, KeptViews, kept_footers, kept_views
from pruner.adapters.naming import quote_identifier
from pruner.adapters.sources import (
    lance_cannot_filter,
    lance_source,
)
from pruner.discover import ParquetFile
from pruner.errors import EngineError
from pruner.evaluate import RowKeys
from pruner.parameters import Parameters
from pruner.plan import Plan, plan
from pruner.reads import (
    ParquetPart,
    parquet_parts,
    read_ahead_bytes,
    read_ahead_on_store,
    read_row_groups,
)
from pruner.selection import Selection
from pruner.stacks import on_big_stack
from pruner.table import Table, TableSource, as_table

try:
    import datafusion
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "pruner's DataFusion adapter needs datafusion: pip install 'pruner-index[datafusion]'"
    ) from err

__all__ = [
    "check_sql",
    "new_context",
    "parquet_frame",
    "query",
    "quote_identifier",
    "register",
    "registered",
    "sql",
]


def parquet_frame(
    context: datafusion.SessionContext,
    table: Table,
    selection: Selection | None,
    before_scan: Callable[[Iterable[ParquetFile]], None] = lambda files: None,
    push_filters: bool = False,
) -> datafusion.DataFrame:
    """The selected files and row groups of a Parquet table (all when ``selection`` is None),
    as one DataFusion DataFrame read with DataFusion's semantics; ``before_scan`` is given
    the files DataFusion's reader will scan before it is asked to (not those whose row
    groups are read ahead, nor those ``push_filters`` scans: :func:`pushed_scan`, up to
    :data:`PUSHED_SCANS` files of a local table)."""
    parts = parquet_parts(table, selection)
    every_file_whole = len(parts) == len(table.files or {}) and all(
        part.row_groups is None for part in parts
    )
    recursive = context in own_contexts
    whole_directory = _listed_alone(table, recursive) if every_file_whole else None
    if whole_directory is not None:
        before_scan((table.files or {}).values())
        return _listed_frame(context, whole_directory, _read_schema(table.schema))
    parts = read_ahead_on_store(table, parts)
    partial = [part for part in parts if part.row_groups is not None]
    if read_ahead_bytes(partial) > reads.PARQUET_READ_AHEAD_BYTES:  # too much to hold
        parts = [ParquetPart(part.file, None) for part in parts]
        partial = []
    # Files with deleted rows (Delta's deletion vectors) are read by pyarrow, which leaves
    # them out (read_row_groups): DataFusion's reader cannot tell a file's row numbers.
    parts = [
        ParquetPart(part.file, tuple(range(len(part.file.row_group_rows))))
        if part.row_groups is None and reads.deleted_rows(table, part.file) is not None
        else part
        for part in parts
    ]
    partial = [part for part in parts if part.row_groups is not None]
    schema = _read_schema(table.schema)
    scanned = [part.file for part in parts if part.row_groups is None]

    def file_schema(file: ParquetFile) -> pa.Schema:
        return schema if table.layouts is None else _read_schema(table.stored_schema(file))

    pushed: dict[str, datafusion.DataFrame] = {}
    if push_filters and len(scanned) <= PUSHED_SCANS and not storage.is_remote(table.path):
        for file in scanned:
            frame = pushed_scan(context, file.path.as_uri(), file_schema(file))
            if frame is not None:
                pushed[str(file.path)] = frame
    if len(pushed) < len(scanned):
        before_scan([file for file in scanned if str(file.path) not in pushed])

    def scan(file: ParquetFile) -> datafusion.DataFrame:
        frame = pushed.get(str(file.path))
        if frame is not None:
            return frame
        return context.read_parquet(file.path.as_uri(), schema=file_schema(file), file_extension="")

    frames = [_as_table(table, part, scan(part.file)) for part in parts if part.row_groups is None]
    if partial or not frames:
        frames.append(_memory_frame(context, read_row_groups(table, partial).cast(schema)))
    if len(frames) == 1:
        return frames[0]
    # A union ends in a limit no table reaches: DataFusion 55 pushes a filter it keeps above
    # an outer join (one on the null-extended side) into the other side when that side is
    # a union, matching columns by name: ``a AS x RIGHT JOIN b AS y ON x.i8 = y.i8 WHERE
    # x.k IS NULL`` filtered ``y.k IS NULL`` in each of ``b``'s scans and answered no row
    # of 8 (found by make fuzz on files in nested folders; the same over a union of
    # in-memory tables). No filter is pushed through a limit; DataFusion applies it above.
    return functools.reduce(lambda left, right: left.union(right), frames).limit(_NO_LIMIT)


def _as_table(table: Table, part: ParquetPart, frame: datafusion.DataFrame) -> datafusion.DataFrame:
    """``frame`` of ``part``'s file as the table's columns (reads.as_table): named as the
    table names them, with the values the file holds in no column (a Delta table's
    partition values, from its log), in the table's column order."""
    layout = table.layout(part.file)
    if layout is None:
        return frame
    columns = [
        datafusion.col(in_file).alias(name)
        if in_file is not None
        else datafusion.lit(pa.scalar(value, field.type)).alias(name)
        for name, in_file, field, value in layout.columns(table.schema.names)
    ]
    return frame.select(*columns)


def _read_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` as DataFusion 55 reads Parquet: extension types (``arrow.uuid``, which
    pyarrow reads for the UUID logical type) as their storage type (DataFusion alone
    answers a UUID column as ``fixed_size_binary(16)``)."""
    fields = [
        f.with_type(f.type.storage_type) if isinstance(f.type, pa.BaseExtensionType) else f
        for f in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)


def _listed_frame(
    context: datafusion.SessionContext, directory: str, schema: pa.Schema
) -> datafusion.DataFrame:
    """DataFusion's own listing of ``directory`` as a user registers it (one scan it
    parallelises and pushes filters into), listed now: ``read_parquet`` of a directory
    answers from the context's cache of listings (DataFusion 55: a file added since an
    earlier ``read_parquet`` of it is not read, 3 rows counted of 5), ``register_parquet``
    lists it anew. Registered under a name of its own only while the frame is made."""
    name = f"pruner_listing_{uuid.uuid4().hex}"
    context.register_parquet(name, directory, schema=schema)
    try:
        return context.table(name)
    finally:
        context.deregister_table(name)


def _listed_alone(table: Table, recursive: bool = False) -> str | None:
    """The table's directory, when DataFusion listing it reads exactly the table's files:
    they are all it holds named ``*.parquet`` (in it, or with ``recursive``, the context
    listing sub-folders, anywhere under it, hidden folders included) and agree on their
    schema. None otherwise, and always for a Delta table: DataFusion lists the folder again
    when it runs the query, and a Delta writer puts its files there before it commits them
    (a file written after the query was planned would be read)."""
    files = table.files or {}
    if not files or not table.uniform_schema or table.pinned is not None or table.deleted:
        return None
    directory = table.path.absolute()
    ours = {f.path.absolute() for f in files.values()}
    names = storage.walk_files(directory, hidden=()) if recursive else storage.list_dir(directory)
    listed = {directory / name for name in names if name.endswith(".parquet")}
    # A URL, so DataFusion reads no glob in the path (``g[1]`` would list ``g1``); the
    # trailing slash makes it a directory to list.
    return directory.as_uri() + "/" if listed == ours else None


def _unfiltered_columns(
    context: datafusion.SessionContext, source: lance.LanceDataset, every: bool = False
) -> datafusion.DataFrame:
    """``source`` with every column Lance cannot filter on (``every``: every column) passed
    through an identity UDF, so DataFusion applies the filters on them itself instead of
    pushing them into the scan.

    Lance refuses such filters, and pyarrow, which would then apply them, does so with its
    own semantics (``NaN = NaN`` false where DataFusion says true). Filters on the other
    columns still reach Lance, which applies them with DataFusion's semantics.
    """
    frame = context.read_table(datafusion.catalog.Table(source))
    columns = []
    for field in source.schema:
        column = datafusion.col(quote_identifier(field.name))
        if every or lance_cannot_filter(field.type):
            keep = datafusion.udf(
                lambda values: values, [field], field, "immutable", "pruner_unpushed"
            )
            column = keep(column).alias(field.name)
        columns.append(column)
    frame = frame.select(*columns)
    if every:
        # A filter of literals only (``NULL AND NULL`` after DataFusion simplifies
        # ``k = NULL OR s = NULL``) names no column, so it passes the identity UDF and is
        # pushed into the scan, where DataFusion 55 fails to turn it into a pyarrow
        # expression ("bit_wise_and has no kernel matching (bool, bool)") or hands Lance a
        # bare BooleanScalar; found by make fuzz. No filter is pushed through a limit.
        frame = frame.limit(_NO_LIMIT)
    return frame


_NO_LIMIT = 1 << 62
"""A limit no table reaches: it stops DataFusion pushing filters into the scan below it."""


def _memory_frame(context: datafusion.SessionContext, data: pa.Table) -> datafusion.DataFrame:
    """``data`` as a DataFusion DataFrame of one partition (also when empty: DataFusion
    refuses a source of no partitions under a TopK or a window).

    ``create_dataframe`` registers its rows in the context as a table (under a random name
    when given none), which stays there, rows and all, for as long as the context lives: a
    query on the shared context kept every row it read ahead (30 run-time joins: 372 MiB).
    The frame holds its rows itself, so the name is dropped at once."""
    batches = data.to_batches() or [pa.RecordBatch.from_pylist([], schema=data.schema)]
    name = f"pruner_rows_{uuid.uuid4().hex}"
    frame = context.create_dataframe([batches], name=name, schema=data.schema)
    context.deregister_table(name)
    return frame


def register(
    context: datafusion.SessionContext,
    name: str,
    table: TableSource,
    selection: Selection | None = None,
) -> None:
    """Register ``name`` on ``context`` as ``table`` restricted to ``selection`` (None: all).

    Like DataFusion's own ``register_*`` calls, it refuses a name that is already
    registered (deregister it first): it never drops a table of the caller's.

    Raises:
        EngineError: ``context`` already has a table named ``name``.
    """
    quoted = quote_identifier(name)
    if context.table_exist(quoted):
        raise EngineError(
            f"DataFusion already has a table named {name!r}: deregister it first "
            "(context.deregister_table), or run the query with pruner.adapters.datafusion.sql, "
            "which binds pruner's tables only while DataFusion plans it"
        )
    opened = as_table(table)
    with own_filters_only(context) as before_scan:
        _register(context, quoted, opened, selection, before_scan=before_scan)


def _register(
    context: datafusion.SessionContext,
    quoted: str,
    opened: Table,
    selection: Selection | None,
    keys: RowKeys | None = None,
    null_literals: bool = False,
    before_scan: Callable[[Iterable[ParquetFile]], None] = lambda files: None,
    push_filters: bool = False,
) -> None:
    if opened.kind == "parquet":
        if isinstance(opened.path, storage.ObjectPath):
            from pruner.adapters.stores import register_store  # fsspec: on a store only

            register_store(context, opened.path)
        frame = parquet_frame(context, opened, selection, before_scan, push_filters)
        context.register_view(quoted, frame)
        return
    source = lance_source(opened, selection, keys)
    if isinstance(source, pa.Table):
        context.register_view(quoted, _memory_frame(context, source))
    elif not source.get_fragments():
        # A dataset of no fragments is a scan of no partitions, which DataFusion refuses
        # under a TopK or a window.
        context.register_view(quoted, _memory_frame(context, opened.schema.empty_table()))
    elif not source.pruner_may_refuse_filters and not null_literals:
        context.register_dataset(quoted, source)
    else:
        # With a NULL literal in the query, DataFusion 55 may push a filter it cannot turn
        # into a pyarrow expression (``k IN (NULL, 0)`` fails in its dataset scan:
        # "unsupported operand type(s) for |: 'pyarrow.lib.BooleanScalar' and
        # 'pyarrow._compute.Expression'"; found by make fuzz): no filter is pushed then.
        context.register_view(quoted, _unfiltered_columns(context, source, null_literals))


@contextlib.contextmanager
def registered(
    context: datafusion.SessionContext, prepared: Plan, *, null_literals: bool = True
) -> Iterator[datafusion.SessionContext]:
    """``context`` with every table of ``prepared`` registered under its name, pruned, for
    the duration of the ``with`` block; then ``context`` is as it was (the caller's tables of
    those names are back, the others gone), but for pruner's shared contexts, which keep the
    Parquet tables read whole bound for the next query (:class:`KeptViews`).

    A DataFrame planned inside the block keeps the pruned sources it was planned with, so it
    can be collected after the block. ``null_literals`` False (the query has no NULL literal
    and no NULL parameter) lets DataFusion push its filters into Lance's scans. On a
    caller's own context, a statement with no outer join scans Parquet files filtering rows
    as they are decoded, as pruner's shared context does (:func:`parquet_frame`).
    """
    saved: dict[str, datafusion.catalog.Table | None] = {}
    kept = kept_views.get(context)
    push_filters = prepared.no_outer_join and context not in own_contexts
    with _registration_lock, own_filters_only(context) as before_scan:
        if kept is not None:
            kept.forget_all_but(context, prepared)
        try:
            for name, table in prepared.tables.items():
                quoted = quote_identifier(name)
                if quoted in saved or (kept is not None and kept.holds(quoted, table)):
                    continue
                saved[quoted] = (
                    context.table_provider(quoted) if context.table_exist(quoted) else None
                )
                if saved[quoted] is not None:
                    context.deregister_table(quoted)
                selection = prepared.selections.get(name)
                _register(
                    context,
                    quoted,
                    table,
                    selection,
                    prepared.keys(name),
                    null_literals,
                    before_scan,
                    push_filters,
                )
                if kept is not None and kept.keeps(quoted, table, prepared.reads_whole(name)):
                    del saved[quoted]
            yield context
        finally:
            for quoted, provider in saved.items():
                if context.table_exist(quoted):
                    context.deregister_table(quoted)
                if provider is not None:
                    context.register_table(quoted, provider)


T = TypeVar("T")

_registration_lock = threading.RLock()
"""Held while pruner's tables are bound on a context: two pruned queries on one context at
once would otherwise see each other's sources, or restore each other's."""


def sql(
    context: datafusion.SessionContext,
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
) -> datafusion.DataFrame:
    """Like ``context.sql(query_text)``, with ``tables`` registered as pruned sources while
    DataFusion plans the query: the DataFrame reads the pruned sources, and ``context`` is
    left as it was (its own tables of those names included)."""
    prepared = plan(query_text, tables, dialect="datafusion", parameters=parameters, prune=prune)
    return _on_stack(
        lambda: _frame(context, prepared, query_text, parameters), prepared, query_text
    )


def query(
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
    context: datafusion.SessionContext | None = None,
    prepared: Plan | None = None,
) -> pa.Table:
    """Run ``query_text`` on DataFusion with ``tables`` pruned; the result as a pyarrow
    Table. A given ``context`` is left as it was."""
    if prepared is None:
        prepared = plan(
            query_text, tables, dialect="datafusion", parameters=parameters, prune=prune
        )
    session = context if context is not None else _shared_context(prepared.no_outer_join)
    footers = kept_footers.get(session)
    unsettled = footers is not None and footers.before(session, prepared)
    try:
        try:
            return _on_stack(
                lambda: _frame(session, prepared, query_text, parameters).to_arrow_table(),
                prepared,
                query_text,
            )
        except Exception as err:  # DataFusion's own error
            if not any(failure in str(err) for failure in _PUSH_FAILURES):
                raise
        # DataFusion pushed a filter into the Lance dataset's scan that its pyarrow filter
        # conversion cannot express (see _PUSH_FAILURES; found by make fuzz) and failed
        # planning it, before reading a row: run it again with no filter pushed into Lance.
        return _on_stack(
            lambda: _frame(session, prepared, query_text, parameters, push=False).to_arrow_table(),
            prepared,
            query_text,
        )
    finally:
        if unsettled and footers is not None:
            footers.flush(session)


_PUSH_FAILURES = ("pyarrow.lib.BooleanScalar", "PyArrow can't handle ScalarValue")
"""In DataFusion's error when it pushed into a dataset scan a filter its pyarrow
conversion cannot express: one folded to a constant (``k = 0 AND k IN (2147483648)``), or
an IN list of timestamps with a time zone (it made one of ``y.tz = T1 OR ... OR y.tz = T4``
in a LEFT JOIN's ON clause: "PyArrow can't handle ScalarValue: TimestampMicrosecond(-1000000,
Some("UTC"))", DataFusion 55)."""


_shared: dict[bool, datafusion.SessionContext] = {}
_shared_lock = threading.Lock()


def _shared_context(inner: bool = False) -> datafusion.SessionContext:
    """The context :func:`query` uses when given none, kept as DataFusion users keep theirs
    (and one for statements with no outer join, :data:`INNER_SETTINGS`): it caches footers
    where they cannot be stale (:class:`KeptFooters`) and keeps tables read whole bound."""
    with _shared_lock:
        if inner not in _shared:
            made = new_context(INNER_SETTINGS if inner else SAFE_SETTINGS)
            kept_views[made] = KeptViews()
            kept_footers[made] = KeptFooters()
            kept_footers[made].flush(made)  # footers cached from here on
            _shared[inner] = made
        return _shared[inner]


_INLINE_CHARS = 1_000
_INLINE_PARTS = 64


def _on_stack(function: Callable[[], T], prepared: Plan, query_text: str) -> T:
    """``function()`` on a thread with a big stack (:data:`_STACK_BYTES`) when DataFusion may
    recurse deeply planning or running it: long SQL, or a table read as a union of many
    files; on this thread otherwise (starting such a thread costs ~1-3 ms)."""
    parts = sum(len(t.files or ()) for t in prepared.tables.values())
    if len(query_text) <= _INLINE_CHARS and parts <= _INLINE_PARTS:
        return function()
    return on_big_stack(function, _STACK_BYTES, "pruner-datafusion")


def _frame(
    context: datafusion.SessionContext,
    prepared: Plan,
    query_text: str,
    parameters: Parameters,
    push: bool = True,
) -> datafusion.DataFrame:
    """``query_text`` planned on ``context`` with ``prepared`` bound while it plans; with
    ``push`` False no filter is pushed into a Lance dataset's scan."""
    values = parameters.values() if isinstance(parameters, Mapping) else parameters
    nulls = not push or "null" in query_text.lower() or any(v is None for v in values)
    with registered(context, prepared, null_literals=nulls):
        return context.sql(query_text, param_values=_engine_parameters(parameters))


_STACK_BYTES = 1 << 30
"""DataFusion plans on the calling thread and recurses once per operator of an expression:
10,000 ORed equalities overflowed the 8 MiB main-thread stack and killed the process
(SIGSEGV); on a thread with this stack they are planned and answered."""


def _engine_parameters(parameters: Parameters) -> dict[str, object] | None:
    """DataFusion's ``param_values``: ``$1``, ``$2``... by position, or by name."""
    if not parameters:
        return None
    if isinstance(parameters, Mapping):
        return {str(k): v for k, v in parameters.items()}
    return {str(i): v for i, v in enumerate(parameters, start=1)}


def check_sql(sql: str, schemas: Mapping[str, pa.Schema], parameters: Parameters = ()) -> None:
    """Have DataFusion plan ``sql`` over empty tables of ``schemas``: DataFusion's own error
    for SQL it refuses (a misspelt column, an unknown table or function), raised unchanged."""
    context = new_context()
    for name, schema in schemas.items():
        batch = pa.RecordBatch.from_pylist([], schema=schema)
        context.register_record_batches(quote_identifier(name), [[batch]])
    context.sql(sql, param_values=_engine_parameters(parameters))
