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
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from pruner.adapters.sources import lance_fragment_batches, parquet_parts
from pruner.errors import EngineError, InvalidParameterError
from pruner.explain import explain
from pruner.parameters import Parameters
from pruner.plan import Plan, plan
from pruner.selection import Selection
from pruner.table import Table, TableSource, as_table, open_table

try:
    from pyspark.sql import DataFrame, SparkSession
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
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("pruner's Spark adapter needs pyspark: pip install 'pruner[spark]'") from err

__all__ = [
    "PrunerDataSource",
    "bind",
    "query",
    "quote_identifier",
    "register",
    "session",
    "sql",
]

_session: SparkSession | None = None
_session_lock = threading.Lock()

SESSION_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.driver.memory": "4g",
}
"""Settings of the session :func:`session` starts when there is none."""


def session(master: str | None = None) -> SparkSession:
    """The active SparkSession, or a local one started now (``local[*]`` unless ``master``
    says otherwise); the ``pruner`` data source is registered on it.

    A session that is already active is never stopped: Spark runs one SparkContext per
    process, so a ``master`` other than the active session's is an error.

    Raises:
        EngineError: no Java, the session could not start, or another session is active.
    """
    global _session
    with _session_lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            running = active.sparkContext.master
            if master is not None and running != master:
                raise EngineError(
                    f"a SparkSession with master {running!r} is already active and Spark runs "
                    f"one per process: pruner will not stop it to start {master!r}; call "
                    "session() without a master to use it, or stop it yourself first"
                )
            _register_source(active)
            return active
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise EngineError(
                "Spark needs Java 17 or newer: install a JDK (for example "
                "'apt install openjdk-17-jre-headless') or set JAVA_HOME"
            )
        builder = SparkSession.builder.master(master or "local[*]").appName("pruner")
        for key, value in SESSION_CONFIG.items():
            builder = builder.config(key, value)
        # Python workers must be this interpreter, which has pruner and its dependencies
        # (Python data sources start theirs from the environment, not from the config).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        try:
            _session = builder.getOrCreate()
        except Exception as err:
            raise EngineError(f"Spark could not start a session: {err}".splitlines()[0]) from err
        _session.sparkContext.setLogLevel("ERROR")
        _register_source(_session)
        return _session


def _register_source(spark: SparkSession) -> None:
    """Make ``spark.read.format("pruner")`` available on ``spark`` (idempotent)."""
    try:
        spark.dataSource.register(PrunerDataSource)
    except Exception as err:  # registered already: the registry is shared by all sessions
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(err):
            raise


# --------------------------------------------------------------------------- the SQL path


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
    if table.kind == "parquet" and not _HADOOP_SPECIAL.intersection(str(table.path.absolute())):
        parts = parquet_parts(table, selection)
        files = table.files or {}
        # basePath keeps hive partition columns (k=v folders) whatever subset is read.
        reader = spark.read.option("basePath", str(table.path.absolute()))
        if not parts:
            return reader.parquet(str(files[min(files)].path.absolute())).limit(0)
        return reader.parquet(*(str(part.file.path.absolute()) for part in parts))
    # Lance, and Parquet under a path Hadoop cannot name: pruner's own data source.
    reader = spark.read.format("pruner").option("path", str(table.path.absolute()))
    if table.kind == "lance":
        reader = reader.option("version", str(table.dataset.version))
    if selection is None:
        return reader.option("prune", "false").load()
    return reader.option("ranges", json.dumps(selection.ranges())).load()


def bind(spark: SparkSession, prepared: Plan) -> SparkSession:
    """A clone of ``spark`` (its settings, temporary views and data sources, on the same
    context) where every table of ``prepared`` is a view of its pruned source; ``spark``
    itself is untouched but for the ``pruner`` data source."""
    if not hasattr(spark, "_jsparkSession"):
        raise InvalidParameterError(
            "pruner needs a classic SparkSession (with a JVM in this process), not Spark "
            "Connect: start one with pruner.adapters.spark.session()"
        )
    _register_source(spark)
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
    return _run(bind(spark, prepared), query_text, parameters)


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
    frame = _run(bind(spark or session(), prepared), query_text, parameters)
    return frame.toArrow()


def _run(spark: SparkSession, query_text: str, parameters: Parameters) -> DataFrame:
    if not parameters:
        return spark.sql(query_text)
    if isinstance(parameters, Mapping):
        return spark.sql(query_text, args={str(k): v for k, v in parameters.items()})
    return spark.sql(query_text, args=list(parameters))


# --------------------------------------------------------------------------- the data source


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


def _open(options: Mapping[str, str]) -> Table:
    path = options.get("path")
    if not path:
        raise InvalidParameterError(
            'the pruner data source needs a path: spark.read.format("pruner").load(PATH)'
        )
    version = options.get("version")
    return open_table(path, None if version is None else int(version))


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
            yield from lance_fragment_batches(table, fragment, ranges)
        else:
            yield from _parquet_batches(table, partition)


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
    import pyarrow.parquet as pq

    file = (table.files or {})[partition.fragment_id]
    groups = None if partition.row_groups is None else list(partition.row_groups)
    yield from pq.ParquetFile(file.path).iter_batches(row_groups=groups)
