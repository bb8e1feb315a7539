"""Spark: run a query with every indexed table bound to a pruned source.

Spark never pushes an OR into a data source, so the selection comes from pruner's own
analysis of the SQL, as for the other engines. The SQL then runs unchanged with
``spark.sql`` on a clone of the caller's SparkSession (same SparkContext, catalog,
settings and temporary views; its own changes stay its own), where each table name the
query uses is a temporary view of:

- Parquet: Spark's own Parquet reader over the selected files (a superset of the selected
  rows; the file is Spark's unit of pruning, and its vectorised reader is far faster than
  any Python reader);
- Lance: the ``pruner`` Python data source (:class:`PrunerDataSource`), whose partitions
  are the selected fragments and row ranges and whose ``read()`` yields Arrow batches.

The data source is also for direct use, ``spark.read.format("pruner").load(path)``; with
``option("pushdown", "true")`` it takes the Equals / In / IsNull filters Spark pushes into
it to choose the zones to read, and hands every filter back to Spark, which still applies
them (see :class:`PrunerDataSource` for why that is opt-in on Spark 4.3).

The package: :mod:`~pruner.adapters.spark.runtime` (the session),
:mod:`~pruner.adapters.spark.queries` (the SQL path),
:mod:`~pruner.adapters.spark.datasource` (the ``pruner`` data source) and
:mod:`~pruner.adapters.spark.build` (the index build as a Spark job, which
:func:`pruner.index.build_index` runs by name for ``engine="spark"``).
"""

from __future__ import annotations

# pyspark is checked first: without it (or with one too old for Python data sources), one
# clear error instead of a failure deep in a submodule.
try:
    import pyspark.sql.datasource  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "pruner's Spark adapter needs pyspark: pip install 'pruner-index[spark]'"
    ) from err

from pruner.adapters.spark.datasource import PrunerDataSource
from pruner.adapters.spark.datasource import ZonePartition as ZonePartition
from pruner.adapters.spark.queries import query, quote_identifier, register, registered, sql
from pruner.adapters.spark.runtime import SESSION_CONFIG as SESSION_CONFIG
from pruner.adapters.spark.runtime import session

__all__ = [
    "PrunerDataSource",
    "query",
    "quote_identifier",
    "register",
    "registered",
    "session",
    "sql",
]
