"""The ``pruner`` Python data source: ``spark.read.format("pruner").load(path)``.

Its partitions are the selected Lance fragments and row ranges (or Parquet files and row
groups), and its ``read()`` yields Arrow batches. pruner's SQL path uses it for Lance (see
:mod:`pruner.adapters.spark.queries`); it is also for direct use, see
:class:`PrunerDataSource`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    In,
    InputPartition,
    IsNull,
)
from pyspark.sql.types import StructType

from pruner import storage
from pruner.adapters.sources import lance_fragment_batches
from pruner.discover import open_parquet
from pruner.errors import InvalidParameterError
from pruner.explain import explain
from pruner.reads import (
    ParquetPart,
    as_table,
    deleted_rows,
    parquet_parts,
    without_deleted,
)
from pruner.selection import Selection
from pruner.table import Table, open_table

__all__ = ["PrunerDataSource", "ZonePartition", "register_source"]


def register_source(spark: SparkSession) -> None:
    """Make ``spark.read.format("pruner")`` available on ``spark`` (idempotent)."""
    try:
        spark.dataSource.register(PrunerDataSource)
    except Exception as err:  # registered already: the registry is shared by all sessions
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(err):
            raise


@dataclass(frozen=True)
class ZonePartition(InputPartition):
    """One Lance fragment or Parquet file to read: all of it, or only ``ranges`` of
    ``(start, length)`` rows (Lance) or ``row_groups`` (Parquet)."""

    fragment_id: int
    ranges: tuple[tuple[int, int], ...] | None = None
    row_groups: tuple[int, ...] | None = None


_PUSHABLE_VALUES = (bool, int, float, str, bytes, dt.date)
"""Values of pushed filters pruner probes with. Spark hands timestamps over as naive
datetimes in the session's time zone: those filters only widen (they are not probed)."""


class PrunerDataSource(DataSource):
    """``spark.read.format("pruner").load(path)``: a Lance dataset or a Parquet directory.

    With ``.option("pushdown", "true")`` it reads only the zones that may hold rows matching
    the ``=``, ``IN`` and ``IS NULL`` filters Spark pushes into it (every filter is still
    applied by Spark). It is off by default because Spark 4.3 keeps one pushdown result per
    loaded DataFrame and hands it to every later scan of that DataFrame: after
    ``df.where("id = 5").collect()``, ``df.count()`` would count only the zones of 5. With
    pushdown on, load a new DataFrame for each query, and never use one twice in a query.
    Spark pushes no OR either (and then no filter at all for that condition).

    :func:`pruner.query` (``engine="spark"``) and :func:`sql` have neither limit: they
    analyze the SQL themselves and give every query its own source.

    Options: ``path`` (required); ``pushdown`` (see above); ``prune`` (``false``: read
    everything); ``ranges`` (JSON ``[[fragment, start, length], ...]``: read only these, as
    pruner's SQL path does); ``version`` (the Lance version to read; default the latest).
    """

    @classmethod
    def name(cls) -> str:
        return "pruner"

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        table = _open(self.options)
        try:
            return from_arrow_schema(table.schema)
        except Exception as err:
            raise InvalidParameterError(
                f"Spark cannot represent the schema of {table.path}: {err}".splitlines()[0]
            ) from err

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(dict(self.options), schema)


STORE_OPTIONS = "pruner.secret.storage_options"
"""The option carrying a table's store options (JSON) to Spark's Python workers: its name
says "secret", so Spark redacts its value in plans and its UI (``spark.redaction.regex``)."""


def _open(options: Mapping[str, str]) -> Table:
    path = options.get("path")
    if not path:
        raise InvalidParameterError(
            'the pruner data source needs a path: spark.read.format("pruner").load(PATH)'
        )
    if not storage.is_remote(storage.location(path)) and not os.path.isabs(path):
        # Spark opens a Python data source in its Python worker, whose working directory is
        # not the caller's: a relative path would name another place, or nothing.
        raise InvalidParameterError(
            f"the pruner data source needs an absolute path, got {path!r}: Spark resolves it "
            "in its Python worker, not in your process; pass os.path.abspath(path)"
        )
    version = options.get("version")
    stored = options.get(STORE_OPTIONS)
    store_options = json.loads(stored) if stored else None
    return open_table(path, None if version is None else int(version), store_options)


class _Reader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.columns = schema.fieldNames()
        self.pushed: list[tuple[str, str, list[object]]] = []  # (column, kind, values)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for condition in filters:
            term = _term(condition)
            if term is not None:
                self.pushed.append(term)
            yield condition  # Spark applies every filter after the scan

    def partitions(self) -> Sequence[InputPartition]:
        table = _open(self.options)
        selection = self._selection(table)
        if table.kind == "lance":
            live = {f.fragment_id for f in table.lance_fragments()}
            if selection is None:
                return [ZonePartition(fid, None) for fid in sorted(live)]
            return [
                ZonePartition(fid, tuple((start, end - start) for start, end in ranges))
                for fid, ranges in sorted(selection.by_fragment().items())
                if fid in live
            ]
        file_ids = {file.path: fid for fid, file in (table.files or {}).items()}
        return [
            ZonePartition(file_ids[part.file.path], row_groups=part.row_groups)
            for part in parquet_parts(table, selection)
        ]

    def _selection(self, table: Table) -> Selection | None:
        options = {key.lower(): value for key, value in self.options.items()}
        if options.get("prune", "true").lower() == "false":
            return None
        if "ranges" in options:  # pruner's SQL path: the analysis covers every scan
            return Selection.from_ranges(json.loads(options["ranges"]))
        if self.pushed and options.get("pushdown", "false").lower() == "true":
            return _pushed_selection(table, self.pushed)
        return None

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ZonePartition):  # Spark's stand-in when there are none
            return
        table = _open(self.options)
        if table.kind == "lance":
            fragment = table.dataset.get_fragment(partition.fragment_id)
            ranges = None if partition.ranges is None else list(partition.ranges)
            batches = lance_fragment_batches(table, fragment, ranges)
        else:
            batches = _parquet_batches(table, partition)
        for batch in batches:
            yield _as_spark(batch)


def _as_spark(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its fixed-size binary and large binary columns as Arrow's binary, its
    large strings as strings: the Arrow types of Spark's BINARY and STRING, which Spark
    refuses a batch to hold otherwise (DATA_SOURCE_RETURN_SCHEMA_MISMATCH; a positional
    delete's rows are read a row group at a time, at the file's own types)."""
    if not any(_spark_type(field.type) is not None for field in batch.schema):
        return batch
    columns = [
        column if _spark_type(column.type) is None else column.cast(_spark_type(column.type))
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _spark_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """The Arrow type Spark reads a column of ``arrow_type`` as, where it differs."""
    if pa.types.is_fixed_size_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pa.binary()
    return pa.string() if pa.types.is_large_string(arrow_type) else None


def _term(condition: Filter) -> tuple[str, str, list[object]] | None:
    """A pushed filter pruner can probe with: (column, "=" / "in" / "null", values)."""
    attribute: tuple[str, ...] = getattr(condition, "attribute", ())
    if len(attribute) != 1:  # a nested field
        return None
    column = attribute[0]
    if isinstance(condition, IsNull):
        return column, "null", []
    if isinstance(condition, EqualTo):
        values = [condition.value]
    elif isinstance(condition, In):
        values = list(condition.value)
    else:
        return None
    if not values or not all(_pushable(v) for v in values):
        return None
    return column, "=" if isinstance(condition, EqualTo) else "in", values


def _pushable(value: object) -> bool:
    return isinstance(value, _PUSHABLE_VALUES) and not isinstance(value, dt.datetime)


def _pushed_selection(table: Table, pushed: list[tuple[str, str, list[object]]]) -> Selection:
    """The zones that may match every pushed term, through pruner's own analysis of the
    equivalent SQL (values as parameters, names quoted, nothing pasted)."""
    terms, values = [], []
    for column, kind, given in pushed:
        name = "`" + column.replace("`", "``") + "`"
        if kind == "null":
            terms.append(f"{name} IS NULL")
        elif kind == "=":
            terms.append(f"{name} = ?")
        else:
            terms.append(f"{name} IN ({', '.join('?' for _ in given)})")
        values.extend(given)
    text = f"SELECT * FROM t WHERE {' AND '.join(terms)}"
    found = explain(text, {"t": table}, dialect="spark", parameters=values).selections()
    return found.get("t", table.whole())


def _parquet_batches(table: Table, partition: ZonePartition) -> Iterator[pa.RecordBatch]:
    file = (table.files or {})[partition.fragment_id]
    groups = None if partition.row_groups is None else list(partition.row_groups)
    # the file as opened on the driver (on a store, its chunks fetched at once, each GET
    # conditional on that ETag); rows of a file replaced since fail, never mix in
    if storage.is_remote(file.path):
        opened = open_parquet(file.path, file.metadata, None, groups, known=file.as_opened())
    else:  # the file as it is now (its footer parsed again)
        opened = open_parquet(file.path)
    if deleted_rows(table, file) is not None:
        # a Delta deletion vector's rows left out: read a row group at a time, whose rows'
        # positions in the file are known
        for group in range(len(file.row_group_rows)) if groups is None else groups:
            rows = without_deleted(table, ParquetPart(file, (group,)), opened.read_row_group(group))
            yield from as_table(table, file, rows).to_batches()
        return
    for batch in opened.iter_batches(row_groups=groups):
        if table.layouts is None:
            yield batch
            continue
        # a Delta table's partition values, from its log, as columns of the file's rows
        yield from as_table(table, file, pa.Table.from_batches([batch])).to_batches()
