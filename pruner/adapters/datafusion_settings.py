"""How pruner sets DataFusion up: the settings of the contexts it makes (each turning off a
DataFusion 55 feature that answers wrongly), the shared contexts' settings for statements
without an outer join, and a caller's own context's bloom filters turned off while pruner
registers a scan that could read them (:mod:`pruner.adapters.datafusion` runs the queries)."""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datafusion
    import pyarrow as pa

    from pruner.discover import ParquetFile

__all__ = [
    "BLOOM_ON_READ",
    "INNER_SETTINGS",
    "NO_FOOTER_CACHE",
    "PUSHED_SCANS",
    "SAFE_SETTINGS",
    "new_context",
    "own_contexts",
    "own_filters_only",
    "pushed_scan",
]


SAFE_SETTINGS = {
    "datafusion.optimizer.join_reordering": "false",
    "datafusion.execution.parquet.pushdown_filters": "false",
    "datafusion.execution.listing_table_ignore_subdirectory": "false",
    "datafusion.execution.parquet.bloom_filter_on_read": "false",
}
"""Settings of every SessionContext pruner creates, each turning off a DataFusion 55 feature
that gives wrong answers (``tests/adapters/test_datafusion_bugs.py`` checks that DataFusion
alone still has each bug, so a setting goes the day its bug is fixed); the first two only
with an outer join (:data:`INNER_SETTINGS`). A caller's own context keeps its own settings.

``join_reordering`` off: when its join selection swaps an outer join's inputs and a filter on
the null-extended side has the same column name as a column of the other side,
``FROM big AS x RIGHT JOIN small AS y ON x.k = y.k WHERE x.k IS NULL`` over two
``register_parquet`` tables becomes a LEFT JOIN of ``small`` and ``big``, and the filter
pushdown puts ``k IS NULL`` into ``small``'s scan, whose row-group pruning then drops every
row (0 rows; DuckDB and DataFusion without the swap answer 5).

``parquet.pushdown_filters`` off (DataFusion's default; stated so that a future default
cannot turn it on): with it, DataFusion keeps the null-extended row of a RIGHT JOIN whose
WHERE is false or NULL for it: ``a AS x RIGHT JOIN b AS y ON x.i8 = y.i8 AND 2 = y.k WHERE
x.k IS NOT DISTINCT FROM 0`` and ``... ON x.s = y.s WHERE (x.k = 0 OR x.k = NULL)`` answer
one row where DataFusion with its defaults and DuckDB answer none (both found by make fuzz).
Row-group pruning by statistics and bloom filters stays on; only the filtering of rows
inside the Parquet decoder is off.

``listing_table_ignore_subdirectory`` off: DataFusion lists a directory's sub-folders too,
so a table whose files sit in nested or hive folders is read whole as one listed scan, as
its users register it (with the setting off), not as a union of one scan per file, on
which DataFusion 55 answered wrongly (see :func:`parquet_frame`).

``parquet.bloom_filter_on_read`` off: DataFusion 55 trusts a Parquet bloom filter that the
file cuts short and drops the row group it wrongly rules out (``id = 3005`` answered no row
of 1). pruner probes the files' filters itself, checking each (:mod:`pruner.index.native`),
and reads whatever a damaged filter covers; the engine need not read them again. A caller's
own context has it off only while pruner registers a scan of a file with filters
(:func:`own_filters_only`): DataFusion fixes a Parquet table's options when it is
registered.
"""

BLOOM_ON_READ = "datafusion.execution.parquet.bloom_filter_on_read"


def new_context(settings: Mapping[str, str] = SAFE_SETTINGS) -> datafusion.SessionContext:
    """A SessionContext with ``settings`` (:data:`SAFE_SETTINGS`) and no cache of Parquet
    footers (:data:`NO_FOOTER_CACHE`; pruner's shared contexts keep one where it is sound:
    :func:`pruner.adapters.datafusion._shared_context`)."""
    import datafusion  # the adapter imported it, or said which extra to install

    config = datafusion.SessionConfig()
    for key, value in settings.items():
        config = config.set(key, value)
    context = datafusion.SessionContext(config)
    context.sql(NO_FOOTER_CACHE).collect()
    own_contexts.add(context)
    return context


own_contexts: weakref.WeakSet[datafusion.SessionContext] = weakref.WeakSet()
"""The contexts :func:`new_context` made: they list sub-folders (:data:`SAFE_SETTINGS`)."""


NO_FOOTER_CACHE = "SET datafusion.runtime.metadata_cache_limit = '0'"
"""A runtime setting of every SessionContext :func:`new_context` creates (not a
SessionConfig key): no cache of parsed Parquet footers. DataFusion 55 keeps each file's
footer, checked only against the file's size and modification time, so a file rewritten in
place within the file system's timestamp granularity keeps its old statistics, and
row-group pruning by them drops the new rows (``k > 10`` answered none of 4 rows). The
shared contexts :func:`pruner.adapters.datafusion.query` uses turn the cache on and empty it
where it could be stale (:class:`~pruner.adapters.kept.KeptFooters`)."""


INNER_SETTINGS = SAFE_SETTINGS | {
    "datafusion.optimizer.join_reordering": "true",
    "datafusion.execution.parquet.pushdown_filters": "true",
}
"""The settings of the shared context :func:`pruner.adapters.datafusion.query` plans a
statement with no outer join on (``Plan.no_outer_join``: inner joins only, none made from a
subquery, or one table): the join selection and the Parquet filter pushdown of
:data:`SAFE_SETTINGS` on again, whose bugs need an outer join. With them, a hash join builds
on its smaller input (a pruned fact table joined to 100 rows of a dimension built on the
fact's 800,000 rows, 18 ms of 20), and a filter is applied while the files are decoded (100
keys read whole: 37 ms against 49)."""


@contextlib.contextmanager
def own_filters_only(
    context: datafusion.SessionContext,
) -> Iterator[Callable[[Iterable[ParquetFile]], None]]:
    """``context`` not reading Parquet bloom filters while the ``with`` block registers
    Parquet scans (they keep that option), then as it was (see :data:`SAFE_SETTINGS`). The
    block calls what it is given with the files of each scan before it makes it: the setting
    is read (``SHOW``: ~1 ms of a caller's context's point lookup) and turned off only when
    one of them has a filter its footer places (``ParquetFile.has_bloom_filters``, looked up
    only then: a file without one has nothing to misread, and row groups read ahead are
    scanned by no Parquet reader)."""
    turned = False
    checked = context in own_contexts

    def before_scan(files: Iterable[ParquetFile]) -> None:
        nonlocal turned, checked
        if checked or not any(file.has_bloom_filters for file in files):
            return
        checked = True
        (shown,) = context.sql(f"SHOW {BLOOM_ON_READ}").to_pylist()
        if shown["value"] == "true":
            context.sql(f"SET {BLOOM_ON_READ} = false").collect()
            turned = True

    try:
        yield before_scan
    finally:
        if turned:
            context.sql(f"SET {BLOOM_ON_READ} = true").collect()


PUSHED_SCANS = 8
"""A pruned read of a caller's own context scans at most this many files the pushing way
(:func:`pushed_scan`); past it, each costs DataFusion ~0.55 ms more to register than a
``read_parquet`` (it reads the file's footer for its schema), and the files are read as
before."""

_PUSHED_OPTIONS = {
    "format.pushdown_filters": "true",
    "format.bloom_filter_on_read": "false",
    "format.schema_force_view_types": "false",
}


def pushed_scan(
    context: datafusion.SessionContext, uri: str, schema: pa.Schema
) -> datafusion.DataFrame | None:
    """A scan of the one Parquet file ``uri`` on a caller's own ``context`` that filters rows
    while the file is decoded (``pushdown_filters``, as pruner's shared context for a
    statement with no outer join: :data:`INNER_SETTINGS`) and reads no bloom filter of the
    file's (:data:`SAFE_SETTINGS`), whatever the context's own settings; or None where
    DataFusion makes it otherwise than ``read_parquet`` of ``schema`` would (then it is read
    that way, as before).

    A caller's context keeps its own settings: the options are the scan's own
    (``CREATE EXTERNAL TABLE ... OPTIONS``), registered under a name of its own only while
    the frame is made; the context's ``SHOW`` would cost ~1 ms a query. The one caller is a
    statement with no outer join (``Plan.no_outer_join``), as for the shared context. A
    point lookup pruned to one file of 100,000 rows on a context with DataFusion's defaults:
    6.7 ms against 11.2 read as before (``schema_force_view_types`` off: its strings read as
    ``read_parquet`` of ``schema`` reads them, not as views)."""
    name = f"pruner_scan_{uuid.uuid4().hex}"
    options = ", ".join(f"'{key}' '{value}'" for key, value in _PUSHED_OPTIONS.items())
    location = uri.replace("'", "''")
    try:
        context.sql(
            f"CREATE EXTERNAL TABLE {name} STORED AS PARQUET LOCATION '{location}' "
            f"OPTIONS ({options})"
        ).collect()
    except Exception:  # DataFusion refused it (its errors are Exception): read as before
        return None
    try:
        frame = context.table(name)
        return frame if frame.schema() == schema else None
    except Exception:  # as above
        return None
    finally:
        context.deregister_table(name)
