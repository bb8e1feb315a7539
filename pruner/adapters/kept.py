"""What an adapter keeps bound between queries: tables bound the same way for any query
(read whole, unpruned, with no row selected, or re-pointed by each query at its own rows
or fragments), for the next query over the same tables; and the Parquet footers
DataFusion parsed (:class:`KeptFooters`).

Binding a table (a DuckDB view or registration on a new cursor, a DataFusion listing) costs
about 1 ms, a tenth of a short scan of 1M rows, and a query pruner does not prune must cost
what the engine alone costs (:mod:`pruner.costs`). :func:`pruner.adapters.duckdb.query`
takes a kept cursor when every table of its plan is bound so (:func:`reusable_binding`);
:func:`pruner.adapters.datafusion.registered` skips a view its shared context kept
(:class:`KeptViews`).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pruner import storage
from pruner.adapters.naming import quote_identifier
from pruner.costs import sql_words
from pruner.discover import RACY_SECONDS
from pruner.plan import Plan
from pruner.table import Table

if TYPE_CHECKING:  # each adapter imports its engine, naming the extra when it is missing
    import datafusion
    import duckdb

__all__ = [
    "Bindings",
    "HeldRows",
    "KeptCursors",
    "KeptFooters",
    "KeptViews",
    "Pointed",
    "kept_cursors",
    "kept_footers",
    "kept_views",
    "reads_only",
    "reusable_binding",
]


Bindings = tuple[tuple[str, Table, str], ...]
"""Per table name, the table and how it is bound, the same for every query that binds it so:
``unpruned`` (no selection: no index at all, Lance's own included), ``whole`` (a whole
Selection, with no keys to filter by), ``empty`` (no row selected: bound as no rows),
``lance`` (a Lance dataset whose scans Lance's scanner probes within whole fragments,
:attr:`pruner.plan.Plan.lance_probes`: the next query points it at its own fragments),
``pruned`` (a Lance dataset whose scans read only a selection's rows, pruner's own read of
more rows than are read ahead: the next query points it at its own selection) or ``rows``
(rows read ahead, held by a :class:`HeldRows` the next query points at its own)."""

Pointed = dict[str, Any]
"""What a cursor binds as ``lance``, ``pruned`` or ``rows`` (:data:`Bindings`), by table
name: each query that takes the cursor points the datasets at its own fragments or selection
(:func:`pruner.adapters.sources.point`) and the :class:`HeldRows` at its own rows."""


class HeldRows:
    """Rows read ahead (an Arrow table), as DuckDB scans them through the Arrow PyCapsule
    stream interface, which it asks again at each query: registered once on a kept cursor,
    then pointed at each query's rows (:meth:`hold`), where a lookup bound anew paid a new
    cursor and a registration (0.6-0.7 ms) or a view of its file's row groups (~1.4 ms;
    DuckDB 2.0.1). DuckDB pushes no filter into a stream: it filters the rows itself, as
    over any rows it reads.

    Once its query answered, the holder keeps only the schema (:meth:`release`), so a kept
    cursor holds no rows between queries."""

    VALUES = 1 << 18
    """Rows read ahead of at most this many values (rows x columns: a zone of 8,192 rows of
    up to 32 columns) are held; more are registered as the Arrow table they are, which
    DuckDB scans on every core with its filters pushed into it (a stream, on one)."""

    __slots__ = ("rows",)

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows

    @classmethod
    def holds(cls, source: object) -> bool:
        """Whether ``source`` is rows read ahead few enough to be held."""
        return (
            isinstance(source, pa.Table)
            and source.num_rows * max(1, source.num_columns) <= cls.VALUES
        )

    def hold(self, rows: pa.Table) -> bool:
        """Point at ``rows``; False (and nothing changed) when their schema is not the one
        DuckDB bound."""
        if not rows.schema.equals(self.rows.schema, check_metadata=True):
            return False
        self.rows = rows
        return True

    def release(self) -> None:
        self.rows = self.rows.schema.empty_table()

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)


class KeptCursors:
    """Cursors of one connection with tables bound the same way for any query (whole,
    unpruned, empty, or re-pointed as ``lance`` or ``rows``: :data:`Bindings`), kept for the
    next query over the same tables bound so (an absent key's lookup binds its table empty
    every time; a point lookup holds its rows read ahead). Binding a table on a
    new cursor (a view, or a registration, and DuckDB binding it anew) costs about 1 ms, a
    tenth of a short scan of 1M rows, and a query pruner does not prune must cost what
    DuckDB alone costs (:mod:`pruner.costs`); an empty binding cost 0.9 ms of a 1.8 ms
    lookup of an absent key (DuckDB alone: 0.8 ms).

    A cursor is kept only after a statement that reads (:func:`reads_only`), so what it
    holds is exactly its bindings; a query takes it for itself, and it is kept again only
    when the query answered. Tables are matched by identity: a table opened anew (changed
    files, another version) binds a new cursor."""

    LIMIT = 4  # cursors kept per connection

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[tuple[Bindings, duckdb.DuckDBPyConnection, Pointed]] = []

    def take(self, bindings: Bindings) -> tuple[duckdb.DuckDBPyConnection, Pointed] | None:
        with self.lock:
            for position, (tables, cursor, pointed) in enumerate(self.idle):
                if _same_tables(tables, bindings):
                    del self.idle[position]
                    return cursor, pointed
        return None

    def keep(self, bindings: Bindings, cursor: duckdb.DuckDBPyConnection, pointed: Pointed) -> None:
        """Keep ``cursor``, unless a table it binds as ``lance`` or ``rows`` is not in
        ``pointed``; the rows it holds are released."""
        if any(how in _POINTED and name not in pointed for name, _, how in bindings):
            cursor.close()
            return
        for held in pointed.values():
            if isinstance(held, HeldRows):
                held.release()
        with self.lock:
            self.idle.append((bindings, cursor, pointed))
            dropped = self.idle[: -self.LIMIT]
            del self.idle[: -self.LIMIT]
        for _, old, _ in dropped:
            old.close()


_POINTED = ("lance", "pruned", "rows")


def _same_tables(one: Bindings, other: Bindings) -> bool:
    return len(one) == len(other) and all(
        a_name == b_name and a is b and a_how == b_how
        for (a_name, a, a_how), (b_name, b, b_how) in zip(one, other, strict=True)
    )


_kept: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, KeptCursors] = (
    weakref.WeakKeyDictionary()
)
_kept_lock = threading.Lock()


def kept_cursors(connection: duckdb.DuckDBPyConnection) -> KeptCursors:
    with _kept_lock:
        found = _kept.get(connection)
        if found is None:
            found = _kept[connection] = KeptCursors()
        return found


def reusable_binding(
    prepared: Plan,
    query_text: str,
    held: Mapping[str, pa.Table] | None = None,
    pruned: Collection[str] = (),
) -> Bindings | None:
    """The tables of ``prepared`` by name, with how each is bound, when every one is bound
    the same way for any query (read whole, unpruned, no row selected, as ``lance``, as
    ``rows``: those whose rows the adapter read ahead to hold, ``held``, or as ``pruned``: the
    Lance tables the adapter restricted to their selection, ``pruned``) and the statement only
    reads (a cursor bound for it may serve the next such query); else None."""
    if not reads_only(query_text):
        return None
    held = held or {}
    bound = []
    for name, table in sorted(prepared.tables.items(), key=lambda item: item[0]):
        selection = prepared.selections.get(name)
        if selection is None:
            how = "unpruned"
        elif selection.num_rows == 0:
            how = "empty"
        elif name in prepared.lance_probes:
            how = "lance"
        elif name in held:
            how = "rows"
        elif prepared.reads_whole(name):
            how = "whole"
        elif name in pruned:
            how = "pruned"
        else:
            return None
        bound.append((name, table, how))
    return tuple(bound)


_READS = frozenset({"select", "with", "from", "values", "table"})
_CHANGES = frozenset(
    [
        "insert",
        "update",
        "delete",
        "merge",
        "truncate",
        "create",
        "drop",
        "alter",
        "replace",
        "comment",
        "set",
        "reset",
        "pragma",
        "attach",
        "detach",
        "use",
        "install",
        "load",
        "copy",
        "export",
        "import",
        "call",
        "prepare",
        "execute",
        "deallocate",
        "begin",
        "start",
        "commit",
        "rollback",
        "abort",
        "transaction",
        "checkpoint",
        "vacuum",
        "analyze",
        "setseed",
    ]
)


def reads_only(query_text: str) -> bool:
    """Is ``query_text`` one statement that reads and cannot change what a cursor holds
    (no DDL, no setting, no transaction, no second statement)? Judged by its words, so a
    column or string that spells such a word only costs the query a new cursor.

    >>> reads_only("SELECT count(*) FROM t WHERE k > 1;"), reads_only("SET threads = 1")
    (True, False)
    >>> reads_only("SELECT 1; DROP VIEW t"), reads_only("WITH x AS (SELECT 1) INSERT INTO y ...")
    (False, False)
    """
    if ";" in query_text.strip().rstrip(";"):
        return False
    words = sql_words(query_text)
    return bool(words) and words[0] in _READS and _CHANGES.isdisjoint(words)


class KeptViews:
    """The Parquet tables a shared context of pruner's keeps registered whole between
    queries (name -> the Table): listing a directory and registering it cost about 1 ms a
    query, and a query pruner does not prune must cost what DataFusion alone costs
    (:mod:`pruner.costs`). Matched by Table identity (a table whose files changed is opened
    anew); every other name is deregistered before a query binds its own, so a query never
    sees a table it does not name."""

    def __init__(self) -> None:
        self.views: dict[str, Table] = {}

    def forget_all_but(self, context: datafusion.SessionContext, prepared: Plan) -> None:
        wanted = {
            quote_identifier(name): table
            for name, table in prepared.tables.items()
            if prepared.reads_whole(name)
        }
        for quoted, table in list(self.views.items()):
            if wanted.get(quoted) is not table:
                del self.views[quoted]
                if context.table_exist(quoted):
                    context.deregister_table(quoted)

    def holds(self, quoted: str, table: Table) -> bool:
        return self.views.get(quoted) is table

    def keeps(self, quoted: str, table: Table, whole: bool) -> bool:
        """Keep ``table``, just registered as ``quoted``, when it is a Parquet table read
        whole (a Lance table's registration depends on the query's NULL literals)."""
        if not whole or table.kind != "parquet":
            return False
        self.views[quoted] = table
        return True


kept_views: weakref.WeakKeyDictionary[datafusion.SessionContext, KeptViews] = (
    weakref.WeakKeyDictionary()
)


class KeptFooters:
    """The Parquet footers a shared DataFusion context of pruner's keeps parsed between
    queries, in DataFusion's own cache (:data:`LIMIT`): parsing every footer again made a
    query pruner does not prune 1.4-1.8x DataFusion alone (10 files, 1M rows), which keeps
    them.

    DataFusion 55 matches a cached footer to a file by its size and modification time only,
    so a file rewritten within the file system's timestamp granularity with the same size
    is read on its old footer (tests/adapters/test_datafusion_bugs.py). A footer parsed from
    a file last modified over :data:`~pruner.discover.RACY_SECONDS` ago is sound: any later
    write moves its time. So the cache is emptied (:meth:`flush`) after a query that read a
    file modified more recently, or on a store (where times are of seconds), and before a
    query whose file pruner saw with another size, time or inode than at the previous one on
    this context (one rewritten while a query read it, say)."""

    LIMIT = "64M"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, tuple[int, int, int]] = {}

    def before(self, context: datafusion.SessionContext, prepared: Plan) -> bool:
        """Note the files of ``prepared``'s Parquet tables; empty the cache if one is not as
        noted before. True when the cache must be emptied after the query too."""
        settled_before = time.time_ns() - RACY_SECONDS * 1e9
        unsettled = changed = False
        with self.lock:
            for table in prepared.tables.values():
                if table.kind != "parquet" or table.files is None:
                    continue
                unsettled |= storage.is_remote(table.path)
                for file in table.files.values():
                    identity = (file.identity.size, file.identity.mtime_ns, file.inode)
                    unsettled |= file.identity.mtime_ns > settled_before
                    known = self.seen.setdefault(str(file.path), identity)
                    if known != identity:
                        self.seen[str(file.path)] = identity
                        changed = True
            if len(self.seen) > 1 << 20:
                self.seen.clear()
                changed = True
        if changed:
            self.flush(context)
        return unsettled

    def flush(self, context: datafusion.SessionContext) -> None:
        """Empty the context's cache of footers (a limit of 0 evicts every one)."""
        for limit in ("0", self.LIMIT):
            context.sql(f"SET datafusion.runtime.metadata_cache_limit = '{limit}'").collect()


kept_footers: weakref.WeakKeyDictionary[datafusion.SessionContext, KeptFooters] = (
    weakref.WeakKeyDictionary()
)
