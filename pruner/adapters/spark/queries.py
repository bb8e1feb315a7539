"""Spark's SQL path: the query's tables as temporary views of their pruned sources.

Parquet is read by Spark's own Parquet reader over the selected files; Lance (and Parquet
under a path Hadoop cannot name) by the ``pruner`` data source
(:mod:`pruner.adapters.spark.datasource`). The views live on a clone of the caller's
session, so the caller's own views and settings are untouched.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from pruner import storage
from pruner.adapters.spark.datasource import STORE_OPTIONS, register_source
from pruner.adapters.spark.runtime import session
from pruner.discover import ParquetFile, hive_partitioned
from pruner.errors import InvalidParameterError
from pruner.parameters import Parameters
from pruner.plan import Plan, plan
from pruner.reads import parquet_parts
from pruner.selection import Selection
from pruner.table import Table, TableSource, as_table

__all__ = ["query", "quote_identifier", "register", "registered", "sql"]


def register(
    spark: SparkSession, name: str, table: TableSource, selection: Selection | None = None
) -> None:
    """Make ``name`` a temporary view of ``table`` restricted to ``selection`` (None: all) on
    ``spark``, replacing whatever ``name`` was."""
    _frame(spark, as_table(table), selection).createOrReplaceTempView(quote_identifier(name))


def quote_identifier(name: str) -> str:
    """``name`` as a Spark identifier: a temporary view takes only plain names otherwise
    (``with space``, ``naïve`` and ``it's`` are invalid, ``a.b`` has two parts).

    >>> quote_identifier("x`y")
    '`x``y`'
    """
    return "`" + name.replace("`", "``") + "`"


_HADOOP_SPECIAL = frozenset(":*?[]{}\\")
"""Characters Hadoop's paths read as a scheme or a glob: Spark's own reader would read other
files than the one named (``part[1]`` is ``part1``), or refuse the path."""


def _frame(spark: SparkSession, table: Table, selection: Selection | None) -> DataFrame:
    remote = storage.is_remote(table.path)
    if (
        table.kind == "parquet"
        and not remote
        and not _HADOOP_SPECIAL.intersection(str(table.path.absolute()))
        and table.deleted is None  # Delta's deletion vectors: pruner's source leaves them out
    ):
        # Files storing a column at other integer widths are read all together, as Spark
        # alone reads them (a subset could settle on another type).
        parts = parquet_parts(table, None if table.widened else selection)
        files = table.files or {}
        # A Delta or Iceberg table's folders are no partitions of Spark's (a Delta table's
        # partition values are its log's, added per file below)
        hive = table.pinned is None
        if hive and hive_partitioned(f.relative.split("/")[:-1] for f in files.values()):
            # basePath keeps hive partition columns (k=v folders) whatever subset is read.
            reader = spark.read.option("basePath", str(table.path.absolute()))
        else:
            # No partition discovery: over files at the root and in ``day=2/``, Spark's
            # discovery (``spark.read.parquet(dir)`` too) reads the ``day=2/`` files only, a
            # ``day`` column and not the root's rows. recursiveFileLookup reads every file
            # given, as ``spark.read.option("recursiveFileLookup", "true").parquet(dir)``
            # reads every file under dir (plain ``spark.read.parquet(dir)`` refuses nested
            # folders without ``=``: UNABLE_TO_INFER_SCHEMA).
            reader = spark.read.option("recursiveFileLookup", "true")
        # Spark's Parquet reader (parquet-mr) trusts a file's bloom filters: over a filter
        # whose header disagrees with its length it loses rows (id = 1005 counted 0 of 1).
        # pruner probes them itself and refuses damaged ones (pruner.index.native), so Spark
        # reads none (a Hadoop option, passed to the reader's configuration).
        reader = reader.option("parquet.filter.bloom.enabled", "false")

        def read(group: list[ParquetFile]) -> DataFrame:
            frame = reader.parquet(*(str(file.path.absolute()) for file in group))
            return _as_table(table, group[0], frame)

        if not parts:
            return read([files[min(files)]]).limit(0)
        if table.layouts is None:
            return read([part.file for part in parts])
        if _folders_name_partitions(table):
            # one scan, its partition values from the folders (each seen to be the log's)
            from pyspark.sql.pandas.types import from_arrow_schema

            first = parts[0].file
            stored = table.stored_schema(first)
            constants = [field for field, _ in table.layouts[first.relative].constants]
            schema = from_arrow_schema(pa.schema([*stored, *constants]))
            hived = spark.read.option("basePath", str(table.path.absolute())).schema(schema)
            hived = hived.option("parquet.filter.bloom.enabled", "false")
            frame = hived.parquet(*(str(part.file.path.absolute()) for part in parts))
            return frame.select(*(quote_identifier(name) for name in table.schema.names))
        groups: dict[Any, list[ParquetFile]] = {}  # by how the files hold the columns
        for part in parts:
            groups.setdefault(table.layout(part.file), []).append(part.file)
        frames = [read(group) for group in groups.values()]
        return functools.reduce(lambda left, right: left.unionByName(right), frames)
    # Lance, Parquet under a path Hadoop cannot name, a Delta table with deletion vectors,
    # and any table on an object store (Spark's s3a:// needs jars pyspark does not ship):
    # pruner's own data source, whose tasks read their ranges from the store through
    # pruner's storage layer.
    source = table.path if table.pinned is None else (table.pinned.metadata or table.path)
    reader = spark.read.format("pruner").option("path", str(source.absolute()))
    if remote and storage.lance_options(table.path):
        # Spark redacts the values of options whose name says "secret" in its plans and UI
        reader = reader.option(STORE_OPTIONS, json.dumps(storage.lance_options(table.path)))
    if table.kind == "lance":
        reader = reader.option("version", str(table.dataset.version))
    elif table.pinned is not None:  # a Delta version or Iceberg snapshot, as pinned here
        reader = reader.option("version", str(table.pinned.version))
    if selection is None:
        return reader.option("prune", "false").load()
    return reader.option("ranges", json.dumps(selection.ranges())).load()


def _folders_name_partitions(table: Table) -> bool:
    """Whether Spark's own partition discovery reads a Delta table's partition values
    exactly as its log says them: every file holds the other columns by their names, and
    sits in ``name=value`` folders, one per partition column in order, whose values Spark
    unescapes to the log's (strings, integers and dates; NULL as Hive's default partition).
    Then one scan reads every file, where a scan per group of files costs seconds of
    planning. Delta writes such folders, but need not (Spark's Delta writer may add a random
    prefix), and Spark unescapes a non-ASCII character byte by byte: those are read a group
    at a time."""
    partitions = table.pinned.partitions if table.pinned is not None else None
    if partitions is None or table.layouts is None:
        return False
    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_date32)
    if not all(any(kind(field.type) for kind in kinds) for field in partitions.fields):
        return False
    if not all(_HIVE_NAME.fullmatch(name) for name in partitions.names):
        return False
    layouts = iter(table.layouts.values())
    held = next(layouts).stored
    if any(layout.stored != held for layout in layouts) or any(a != b for a, b in held):
        return False
    for relative, values in partitions.values.items():
        folders = relative.split("/")[:-1]
        if len(folders) != len(values):
            return False
        for folder, name, value in zip(folders, partitions.names, values, strict=True):
            said, equals, raw = folder.partition("=")
            if not equals or said != name or _spark_unescape(raw) != _folder_text(value):
                return False
    return True


_HIVE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _folder_text(value: object) -> str | None:
    """The text Spark must find in a folder for a partition ``value`` (None: none will do)."""
    if value is None:
        return _DEFAULT_PARTITION
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    text = str(value)
    return text if text and text != _DEFAULT_PARTITION else None


def _spark_unescape(text: str) -> str:
    """A folder's value as Spark unescapes it (``ExternalCatalogUtils.unescapePathName``):
    each ``%XX`` the character of that code, byte by byte (``XX`` as Java's
    ``Integer.parseInt(XX, 16)`` reads it, a leading ``+`` included)."""
    return re.sub(r"%([0-9A-Fa-f]{2}|\+[0-9A-Fa-f])", lambda m: chr(int(m.group(1), 16)), text)


def _as_table(table: Table, file: ParquetFile, frame: DataFrame) -> DataFrame:
    """``frame`` of ``file`` (or of files holding the table's columns as it does) as the
    table's columns (reads.as_table): named as the table names them, with the values the
    file holds in no column (a Delta table's partition values, from its log), in the
    table's column order."""
    layout = table.layout(file)
    if layout is None:
        return frame
    from pyspark.sql import functions
    from pyspark.sql.pandas.types import from_arrow_type

    columns = []
    for name, in_file, field, value in layout.columns(table.schema.names):
        if in_file is not None:
            columns.append(functions.col(quote_identifier(in_file)).alias(name))
            continue
        if isinstance(value, dt.datetime | dt.date):  # an instant or a day, not the zone's
            value = value.isoformat()
        elif value is not None and not isinstance(value, bool | int | str):
            value = str(value)  # floats (NaN, inf), decimals: Spark casts the text exactly
        columns.append(functions.lit(value).cast(from_arrow_type(field.type)).alias(name))
    return frame.select(*columns)


def registered(spark: SparkSession, prepared: Plan) -> SparkSession:
    """A clone of ``spark`` (its settings, temporary views and data sources, on the same
    context) where every table of ``prepared`` is a view of its pruned source; ``spark``
    itself is untouched but for the ``pruner`` data source."""
    if not hasattr(spark, "_jsparkSession"):
        raise InvalidParameterError(
            "pruner needs a classic SparkSession (with a JVM in this process), not Spark "
            "Connect: start one with pruner.adapters.spark.session()"
        )
    register_source(spark)
    # newSession() would not carry registered Python data sources over; cloneSession does.
    bound = SparkSession(spark.sparkContext, jsparkSession=spark._jsparkSession.cloneSession())
    for name, table in prepared.tables.items():
        register(bound, name, table, prepared.selections.get(name))
    return bound


def sql(
    spark: SparkSession,
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
) -> DataFrame:
    """Like ``spark.sql(query_text)``, with ``tables`` bound to pruned sources on a clone
    of ``spark`` (the caller's temporary views and settings are untouched)."""
    prepared = plan(query_text, tables, dialect="spark", parameters=parameters, prune=prune)
    return _run(registered(spark, prepared), query_text, parameters)


def query(
    query_text: str,
    tables: Mapping[str, TableSource],
    *,
    parameters: Parameters = (),
    prune: bool = True,
    spark: SparkSession | None = None,
    prepared: Plan | None = None,
) -> pa.Table:
    """Run ``query_text`` on Spark with ``tables`` pruned; the result as a pyarrow Table."""
    if prepared is None:
        prepared = plan(query_text, tables, dialect="spark", parameters=parameters, prune=prune)
    frame = _run(registered(spark or session(), prepared), query_text, parameters)
    return frame.toArrow()


def _run(spark: SparkSession, query_text: str, parameters: Parameters) -> DataFrame:
    if not parameters:
        return spark.sql(query_text)
    if isinstance(parameters, Mapping):
        return spark.sql(query_text, args={str(k): v for k, v in parameters.items()})
    return spark.sql(query_text, args=list(parameters))
