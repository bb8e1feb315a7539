"""Differential harness: pruner's answer must be the engine's own, computed without pruner.

Hypothesis draws a *dataset*, two tables ``a`` and ``b`` with one schema (every type pruner
indexes and all three engines read: integers of every width, floats with NaN, -0.0 and
infinities, strings with empty, long and SQL-looking ones, dates, timestamps with and
without a zone, and an unindexable boolean; nulls everywhere), each written as a Lance
dataset (fragments of drawn sizes, rows deleted before or after the index build, stable
row ids, a fragment appended after the build, a compaction), a Delta or an Iceberg table
(one commit per fragment, deletes and a late fragment likewise; Delta compacted) or a
directory of Parquet files
(small row groups, a file added after the build; laid out flat, in nested plain folders,
hive partitioned ``p=1/`` ``p=2/``, or mixed: files at the root and in ``day=2/``), with
bloom indexes of tiny zones. On it, it draws *queries*: Equals / IN / IS NULL mixed with
ranges, LIKE, functions, NOT, OR, long IN lists and OR runs; joins of the two indexed tables
(inner, outer, self, comma, USING, NATURAL, anti-joins); IN / EXISTS / scalar subqueries;
derived tables and CTEs (swapping column names, shadowing a table name); set operations;
filters above windows, LIMITs and aggregates; placeholders, in single-table queries, joins
and subqueries. The SQL is valid in DuckDB, DataFusion and Spark alike, with a few spellings
of each dialect's own.

A *case* is one query on one dataset on one engine. Its expected answer is the *oracle*
(:class:`EngineAlone`): the engine alone over the raw files, as the engine's users read
them, with no pruner code at all (DuckDB ``read_parquet('<dir>/**/*.parquet')`` or Lance's
Arrow table; DataFusion ``register_parquet`` or Lance's Arrow table; Spark
``spark.read.parquet`` or ``createDataFrame`` of Lance's Arrow table). Both
``pruner.query(..., prune=True)`` and ``prune=False`` must give it, compared as multisets
(:func:`normalised_rows`: NaN equal to NaN, -0.0 apart from 0.0). If the oracle raises,
both pruner runs must raise the same exception type (a *refused* case). The engines' own
bugs in a scan (:data:`KNOWN_UNPRUNED_FAILURES`, :func:`unpruned_may_be_wrong`) are checked
against DataFusion's run on in-memory copies (a *known* case). Anything else is a
mismatch, reported with a reproduction that pastes into a test::

    from tests.support.differential import TableSpec, assert_same_answer
    def test_repro(tmp_path):
        tables = {"a": TableSpec(...), "b": TableSpec(...)}
        assert_same_answer("duckdb", tables, "SELECT ...", tmp_path)

``tests/end_to_end/test_differential.py`` runs it in CI and, with ``PRUNER_FUZZ_CASES`` set,
as ``make fuzz``; ``tests/analysis/test_no_false_negatives.py`` shares the value and condition
strategies.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from hypothesis import strategies as st

import pruner
from pruner.engines import ENGINES
from pruner.index import build_index, update_index
from pruner.table import Table, open_table
from tests.support.engine_check import multiset

# --------------------------------------------------------------------------- the columns

COLUMN_TYPES: dict[str, pa.DataType] = {
    "k": pa.int64(),  # the row key: unique in a table; deletions name rows by it
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u8": pa.uint8(),
    "u16": pa.uint16(),
    "u32": pa.uint32(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "s": pa.string(),
    "ls": pa.large_string(),
    "d": pa.date32(),
    "ts": pa.timestamp("us"),
    "tsms": pa.timestamp("ms"),
    "tz": pa.timestamp("us", tz="UTC"),
    "tzms": pa.timestamp("ms", tz="UTC"),
    "b": pa.bool_(),  # Lance cannot index booleans: conditions on an unindexed column
}

_UNSIGNED = frozenset({"u8", "u16", "u32"})
EXCLUDED: dict[tuple[str, str], frozenset[str]] = {
    # Spark has no unsigned integer types: its Arrow conversion refuses them, so the pruner
    # data source cannot declare a Lance schema that has one (Spark's Parquet reader widens
    # them). large_string and millisecond timestamps: the data source hands them to Spark
    # unconverted and Spark refuses the batches (DATA_SOURCE_RETURN_SCHEMA_MISMATCH), pruned
    # or not: a limitation of the adapter, not of pruning.
    ("spark", "lance"): _UNSIGNED | {"ls", "tsms", "tzms"},
    # Delta and Iceberg have no unsigned types: deltalake writes a uint8 as an int8 (255
    # becomes -1 in the files), pyiceberg a uint32 as a uint32 its schema calls a long.
    **{(engine, x): _UNSIGNED for engine in ENGINES for x in ("delta", "iceberg")},
}
"""(engine, layout) -> columns the engine cannot read in that layout, left out of any
dataset that has a table of that layout."""

_EPOCH = dt.date(1970, 1, 1)
_STRINGS = ["", "a", "A", "b", "it's", "ü", "a b", "a%", "_", "5", "zz", "x" * 40]
_STRINGS += ["1, 2", "s = 'a' OR s = 'b'", "-- /*"]  # SQL in strings: text folding must skip
_FLOATS = [0.0, -0.0, 1.5, 2.0, -3.25, math.nan, math.inf, -math.inf, 0.1, 7.0]
_EXTREME_INTS = {
    "i8": [-128, 127],
    "i16": [-(2**15), 2**15 - 1],
    "i32": [-(2**31), 2**31 - 1],
    "i64": [-(2**63), 2**63 - 1, 2**53 + 1],
    "u8": [255],
    "u16": [2**16 - 1],
    "u32": [2**32 - 1],
}


def kind_of(name: str) -> str:
    """``int``, ``uint``, ``float``, ``string``, ``date``, ``timestamp``, ``tz`` or ``bool``."""
    kind = COLUMN_TYPES[name]
    if pa.types.is_unsigned_integer(kind):
        return "uint"
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_timestamp(kind):
        return "tz" if kind.tz is not None else "timestamp"
    return "bool"


def column_values(name: str) -> st.SearchStrategy[Any]:
    """Non-null values of column ``name``: few distinct ones (so queries match rows), and
    the awkward ones (extremes, NaN, -0.0, infinities, "", long strings, sub-second and
    pre-1970 times)."""
    kind = kind_of(name)
    if kind in ("int", "uint"):
        low, high = (0, 6) if kind == "uint" else (-3, 3) if name in ("i8", "i16") else (-5, 40)
        if name == "k":  # literals for the row key; its values are 0, 1, ... rows - 1
            return st.integers(-1, 41)
        return st.one_of(st.integers(low, high), st.sampled_from(_EXTREME_INTS[name]))
    if kind == "float":
        return st.sampled_from(_FLOATS)
    if kind == "string":
        return st.sampled_from(_STRINGS)
    if kind == "date":
        return st.one_of(
            st.integers(-2, 4).map(lambda d: _EPOCH + dt.timedelta(days=d)),
            st.just(dt.date(2024, 2, 29)),
        )
    if kind in ("timestamp", "tz"):
        fractions = [0, 500_000] if name.endswith("ms") else [0, 500_000, 123]
        return st.one_of(
            st.builds(
                lambda s, f: dt.datetime(2024, 1, 1, 0, 0, s, f),
                st.integers(0, 4),
                st.sampled_from(fractions),
            ),
            st.just(dt.datetime(1969, 12, 31, 23, 59, 59)),
        )
    return st.booleans()


def nullable_values(name: str) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), column_values(name))


# --------------------------------------------------------------------------- the tables


@dataclass(eq=False)
class TableSpec:
    """One table and how it is written; ``write`` makes it, ``python`` spells it.

    Lance: ``fragments`` rows per fragment, in order; ``deleted`` the ``k`` of deleted
    rows, deleted before the index build or (``delete_after_index``) after it and after
    the late fragment; ``stable_row_ids``; ``compact``: compacted at the end. Parquet: one
    file per entry of ``fragments``, row groups of ``row_group_rows``. Both: ``late``, the
    last fragment or file is written after the indexes (no index covers it); ``items``,
    the zone size of each indexed column; ``updated``: when not None, every index is brought
    up to date at the end (``pruner index update``, with that ``deleted_share``).
    """

    layout: str  # "lance", "parquet", "delta" or "iceberg"
    data: pa.Table
    fragments: tuple[int, ...]
    items: dict[str, int]
    row_group_rows: int = 1024
    late: bool = False
    deleted: tuple[int, ...] = ()
    delete_after_index: bool = False
    stable_row_ids: bool = False
    compact: bool = False
    folders: str = "flat"  # Parquet: "flat", "nested", "hive" or "mixed" (see folder())
    # Parquet: columns the files carry their own bloom filters for (pyarrow's writer), which
    # pruner probes where it has no index of its own (pruner.index.native)
    native: tuple[str, ...] = ()
    updated: float | None = None
    # compound key indexes (pruner.index.keys), built with the columns' indexes and never
    # updated: fragments added or changed after the build are read whole
    keys: tuple[tuple[str, ...], ...] = ()
    # Delta: the partition columns (their values in the log, not the files)
    partition_by: tuple[str, ...] = ()
    # Iceberg: deletes written as positional delete files (merge-on-read), not as data files
    # rewritten (pyiceberg's own copy-on-write)
    positional: bool = False
    # Delta, Iceberg: a column added to the table after its first fragment was written
    # (Delta's schema_mode="merge", Iceberg's union_by_name): NULL in that fragment's rows
    added: str = ""

    def folder(self, number: int) -> str:
        """The folder of Parquet file ``number``: none (``flat``), plain folders
        (``nested``: x/, x/y/, z/), ``p=1/`` and ``p=2/`` (``hive``: engines reading hive
        partitions add an int column ``p``), or the root and ``day=2/`` in turn (``mixed``:
        not hive partitioned, for DuckDB's detection as for pruner)."""
        if self.folders == "nested":
            return ("x/", "x/y/", "z/")[number % 3]
        if self.folders == "hive":
            return f"p={number % 2 + 1}/"
        if self.folders == "mixed":
            return ("", "day=2/")[number % 2]
        return ""

    def write(self, path: Path) -> Path:
        """Write the table at ``path`` (``.lance`` appended for Lance) with its indexes."""
        parts, start = [], 0
        for rows in self.fragments:
            parts.append(self.data.slice(start, rows))
            start += rows
        late = parts.pop() if self.late else None
        if self.layout == "lance":
            path = path.with_suffix(".lance")
            for number, part in enumerate(parts):
                lance.write_dataset(
                    part,
                    str(path),
                    mode="create" if number == 0 else "append",
                    enable_stable_row_ids=self.stable_row_ids,
                )
            if self.deleted and not self.delete_after_index:
                self._delete(path)
            self._index(path)
            if late is not None:
                lance.write_dataset(late, str(path), mode="append")
            if self.deleted and self.delete_after_index:
                self._delete(path)
            if self.compact:
                lance.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
            self._update(path)
            return path
        if self.layout in ("delta", "iceberg"):
            return self._write_logged(path, parts, late)
        path.mkdir()
        for number, part in enumerate(parts):
            self._write_file(part, path / f"{self.folder(number)}part-{number:02d}.parquet")
        self._index(path)
        if late is not None:
            number = len(parts)
            self._write_file(late, path / f"{self.folder(number)}part-{number:02d}.parquet")
        self._update(path)
        return path

    def _write_logged(self, path: Path, parts: list[pa.Table], late: pa.Table | None) -> Path:
        """A Delta table (deltalake appends, deletes, a compaction) or an Iceberg table
        (pyiceberg appends and copy-on-write deletes, in a SQLite catalog beside it; its
        current metadata file is the path pruner reads): one commit per fragment."""
        if self.layout == "delta":
            import deltalake

            def append(part: pa.Table) -> None:
                partitions = list(self.partition_by) or None
                deltalake.write_deltalake(
                    path, part, mode="append", partition_by=partitions, schema_mode="merge"
                )

            def delete(condition: str) -> None:
                deltalake.DeltaTable(str(path)).delete(condition)
        else:
            from pyiceberg.catalog.sql import SqlCatalog

            where = path.with_name(path.name + "_warehouse")
            where.mkdir()
            catalog = SqlCatalog(
                "t", uri=f"sqlite:///{where}/catalog.db", warehouse=f"file://{where}"
            )
            catalog.create_namespace("ns")
            first = parts[0].drop_columns([self.added] if self.added else [])
            table = catalog.create_table("ns.t", schema=first.schema)

            def append(part: pa.Table) -> None:
                if part.schema.names != table.schema().as_arrow().names:
                    with table.update_schema() as update:
                        update.union_by_name(part.schema)
                table.append(part)

            def delete(condition: str) -> None:
                if self.positional:
                    _positional_delete(table, set(self.deleted))
                else:
                    table.delete(condition)

            def current() -> Path:
                return Path(table.metadata_location.removeprefix("file://"))

        if self.added:  # the first fragment written before the column was added
            parts[0] = parts[0].drop_columns([self.added])
        for part in parts:
            append(part)
        condition = "k IN (" + ", ".join(str(k) for k in self.deleted) + ")"
        if self.deleted and not self.delete_after_index:
            delete(condition)
        self._index(path if self.layout == "delta" else current())
        if late is not None:
            append(late)
        if self.deleted and self.delete_after_index:
            delete(condition)
        if self.compact and self.layout == "delta":
            deltalake.DeltaTable(str(path)).optimize.compact()
        found = path if self.layout == "delta" else current()
        self._update(found)
        return found

    def _write_file(self, part: pa.Table, file: Path) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        options = {column: {"ndv": max(1, part.num_rows), "fpp": 0.1} for column in self.native}
        pq.write_table(
            part,
            file,
            row_group_size=self.row_group_rows,
            bloom_filter_options=options or None,
        )

    def _delete(self, path: Path) -> None:
        keys = ", ".join(str(k) for k in self.deleted)
        lance.dataset(str(path)).delete(f"k IN ({keys})")

    def _index(self, path: Path) -> None:
        for column, items in self.items.items():
            build_index(path, column, items=items)
        for key in self.keys:
            build_index(path, list(key), items=min(self.items[c] for c in key))

    def _update(self, path: Path) -> None:
        if self.updated is None:
            return
        for column in self.items:
            update_index(path, column, deleted_share=self.updated)

    def python(self, indent: str = "") -> str:
        """The spec as Python source (``import datetime, math; import pyarrow as pa``)."""
        fields = []
        for spec_field in dataclasses.fields(self):
            value = getattr(self, spec_field.name)
            if spec_field.name == "data":
                text = table_literal(value, indent + "    ")
            elif value == spec_field.default:
                continue
            else:
                text = repr(value)
            fields.append(f"{indent}    {spec_field.name}={text},")
        return "TableSpec(\n" + "\n".join(fields) + f"\n{indent})"


_TYPE_SPELLING = {
    pa.int8(): "pa.int8()",
    pa.int16(): "pa.int16()",
    pa.int32(): "pa.int32()",
    pa.int64(): "pa.int64()",
    pa.uint8(): "pa.uint8()",
    pa.uint16(): "pa.uint16()",
    pa.uint32(): "pa.uint32()",
    pa.float32(): "pa.float32()",
    pa.float64(): "pa.float64()",
    pa.string(): "pa.string()",
    pa.large_string(): "pa.large_string()",
    pa.date32(): "pa.date32()",
    pa.bool_(): "pa.bool_()",
}


def _type_literal(kind: pa.DataType) -> str:
    if pa.types.is_timestamp(kind):
        zone = "" if kind.tz is None else f', tz="{kind.tz}"'
        return f'pa.timestamp("{kind.unit}"{zone})'
    return _TYPE_SPELLING[kind]


def _value_literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "math.nan" if math.isnan(value) else ("math.inf" if value > 0 else "-math.inf")
    if isinstance(value, dt.date):  # datetime too: naive, read as UTC for zoned columns
        return "datetime." + repr(value).removeprefix("datetime.")
    return repr(value)


def table_literal(table: pa.Table, indent: str = "") -> str:
    """``table`` as ``pa.table({...})`` source; zoned timestamps as naive UTC datetimes."""
    lines = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = column.cast(pa.timestamp(column.type.unit))
        values = ", ".join(_value_literal(v) for v in column.to_pylist())
        lines.append(
            f"{indent}    {name!r}: pa.array([{values}], {_type_literal(table[name].type)}),"
        )
    return "pa.table(\n" + indent + "  {\n" + "\n".join(lines) + f"\n{indent}  }}\n{indent})"


LAYOUTS = tuple(filter(None, os.environ.get("PRUNER_FUZZ_LAYOUTS", "").split(","))) or (
    "lance",
    "parquet",
    "lance",
    "parquet",
    "lance",
    "parquet",
    "delta",
    "iceberg",
)
"""What a dataset's table is drawn as: Lance and plain Parquet three times as often as a
Delta or an Iceberg table (read by pruner from the live files its log names); ``make fuzz``
with ``PRUNER_FUZZ_LAYOUTS=delta,iceberg`` (say) draws only those."""


@st.composite
def table_specs(draw: st.DrawFn, columns: Sequence[str], layout: str) -> TableSpec:
    """A table of ``columns`` (``k`` added first), 1-40 rows, in ``layout``."""
    rows = draw(st.integers(1, 40))
    keys = draw(st.permutations(range(rows)))
    data = {"k": pa.array(keys, pa.int64())}
    for name in columns:
        values = draw(st.lists(nullable_values(name), min_size=rows, max_size=rows))
        data[name] = pa.array(values, COLUMN_TYPES[name])
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, rows - 1)), max_size=3))) - {rows})
    bounds = [0, *cuts, rows]
    fragments = tuple(end - start for start, end in itertools.pairwise(bounds))
    zone_items = st.sampled_from([1, 2, 3, 5, 8, 64])
    items = {
        name: draw(zone_items)
        for name in ("k", *columns)
        if kind_of(name) != "bool" and draw(st.integers(0, 7)) > 0  # a few left unindexed
    }
    late = len(fragments) > 1 and draw(st.booleans())
    spec = TableSpec(layout, pa.table(data), fragments, items, late=late)
    indexed = list(items)
    if len(indexed) >= 2:
        key = st.lists(st.sampled_from(indexed), min_size=2, max_size=3, unique=True).map(tuple)
        spec.keys = tuple(draw(st.lists(key, max_size=2, unique=True)))
    spec.updated = draw(st.sampled_from([None, None, 0.0, 0.1]))
    if layout == "parquet":
        spec.row_group_rows = draw(st.integers(1, 8))
        spec.folders = draw(st.sampled_from(["flat", "flat", "nested", "hive", "mixed"]))
        spec.native = tuple(
            name
            for name in ("k", *columns)
            if kind_of(name) != "bool" and draw(st.integers(0, 2)) == 0
        )
        return spec
    # A Delta or Iceberg table keeps its first row: a version with no live file is refused
    # (opening.py), and one before the index build would leave nothing to index
    deletable = keys if layout == "lance" else keys[1:]
    drawn = st.lists(st.sampled_from(deletable), unique=True, max_size=rows) if deletable else None
    spec.deleted = tuple(sorted(draw(drawn))) if drawn is not None else ()
    spec.delete_after_index = bool(spec.deleted) and draw(st.booleans())
    if layout == "lance":
        spec.stable_row_ids = draw(st.integers(0, 3)) == 0
    if layout in ("lance", "delta"):
        spec.compact = draw(st.integers(0, 5)) == 0
    if layout == "iceberg":
        spec.positional = bool(spec.deleted) and draw(st.booleans())
    if layout == "delta":
        spec.partition_by = tuple(c for c in columns if draw(st.integers(0, 3)) == 0)
        # an indexed partition column is refused (nothing in the files to index)
        spec.items = {c: n for c, n in spec.items.items() if c not in spec.partition_by}
        spec.keys = tuple(k for k in spec.keys if not set(k) & set(spec.partition_by))
    written = len(fragments) - late  # fragments written before the indexes are built
    last = columns[-1] if columns else ""
    evolvable = layout in ("delta", "iceberg") and written >= 2 and last not in spec.partition_by
    if evolvable and draw(st.integers(0, 3)) == 0:
        # the last column (the table's column order stays), added after the first
        # fragment: NULL in its rows; a compound key over it is refused
        spec.added = last
        held = [None] * fragments[0] + spec.data.column(last).to_pylist()[fragments[0] :]
        position = spec.data.schema.get_field_index(last)
        field = spec.data.schema.field(last)
        spec.data = spec.data.set_column(position, field, pa.array(held, field.type))
        spec.keys = tuple(k for k in spec.keys if last not in k)
        if spec.deleted and not spec.delete_after_index:
            # deletes may leave no live file holding the column: its build is refused then
            spec.items.pop(last, None)
    return spec


@dataclass(eq=False)
class Dataset:
    """Two tables of one schema, ``a`` and ``b``, and the queries to run on them."""

    tables: dict[str, TableSpec]
    queries: list[Query] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return self.tables["a"].data.column_names


@contextmanager
def written(
    specs: Mapping[str, TableSpec], directory: Path | None = None
) -> Iterator[dict[str, Written]]:
    """The tables written under ``directory`` (a temporary one, removed after) and opened."""
    root = Path(tempfile.mkdtemp(dir=directory))
    try:
        tables = {}
        for name, spec in specs.items():
            path = spec.write(root / name)
            tables[name] = Written(spec, path, open_table(path))
        yield tables
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- SQL literals


def sql_literal(name: str, value: Any, style: int, dialect: str = "") -> str:
    """``value`` as a SQL literal for column ``name``, in spelling number ``style``: the
    spellings every dialect reads first, then (``dialect`` given) that dialect's own. The
    analyzer must coerce each to the column's type as the engine does, or not prune."""
    if value is None:
        return "NULL"
    kind = kind_of(name)
    if kind in ("int", "uint"):
        spellings = [str(value), f"'{value}'", f"{value}.0", f"CAST({value} AS BIGINT)"]
        if dialect == "duckdb":
            spellings.append(f"{value}::HUGEINT")
        elif dialect == "spark" and -(2**63) <= value < 2**63:
            spellings.append(f"{value}L")
        return spellings[style % len(spellings)]
    if kind == "float":
        if math.isnan(value) or math.isinf(value):
            text = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            spellings = [f"CAST('{text}' AS DOUBLE)", f"CAST('{text}' AS FLOAT)"]
            if dialect == "duckdb":
                spellings.append(f"'{text}'::DOUBLE")
            return spellings[style % len(spellings)]
        spellings = [repr(value), f"CAST({value!r} AS DOUBLE)", f"'{value!r}'"]
        spellings.append(f"CAST('{value!r}' AS DOUBLE)")
        if dialect == "spark":
            spellings.append(f"{value!r}D")
        return spellings[style % len(spellings)]
    if kind == "string":
        return "'" + value.replace("'", "''") + "'"
    if kind == "bool":
        return "TRUE" if value else "FALSE"
    if kind == "date":
        spellings = [f"DATE '{value}'", f"'{value}'", f"CAST('{value}' AS DATE)"]
        spellings.append(f"TIMESTAMP '{value} 00:00:00'")
        return spellings[style % len(spellings)]
    text = value.isoformat(sep=" ")
    spellings = [f"TIMESTAMP '{text}'", f"'{text}'", f"CAST('{text}' AS TIMESTAMP)"]
    if kind == "tz":
        spellings += [f"'{text}+00:00'", f"TIMESTAMP '{text}+00:00'"]
        if dialect == "duckdb":
            spellings.append(f"TIMESTAMPTZ '{text}+00'")
    return spellings[style % len(spellings)]


def _foreign_literal(name: str) -> st.SearchStrategy[str]:
    """Literals of another type than the column's: out of range, fractional, of no row."""
    kind = kind_of(name)
    if kind in ("int", "uint"):
        return st.sampled_from(
            ["1.5", "300", "-1", "2147483648", "'7'", "1e0", "CAST(2.0 AS DOUBLE)"]
        )
    if kind == "float":
        return st.sampled_from(["1", "CAST(1.5 AS FLOAT)", "'1.5'", "2", "16777217"])
    if kind == "date":
        return st.sampled_from(["TIMESTAMP '1970-01-02 12:00:00'", "'1970-01-02'"])
    if kind in ("timestamp", "tz"):
        return st.sampled_from(
            ["DATE '2024-01-01'", "'2024-01-01'", "TIMESTAMP '2024-01-01 00:00:03.5'"]
        )
    if kind == "string":
        return st.sampled_from(["'A'", "'a '", "' a'", "'ü'"])
    return st.sampled_from(["TRUE", "FALSE"])


def literals(name: str, dialect: str = "") -> st.SearchStrategy[str]:
    """A SQL literal for comparisons with column ``name``: mostly one of its own values,
    sometimes NULL or a value of another type."""
    own = st.builds(
        lambda value, style: sql_literal(name, value, style, dialect),
        column_values(name),
        st.integers(0, 7),
    )
    return st.one_of(own, own, own, own, st.just("NULL"), _foreign_literal(name))


# --------------------------------------------------------------------------- conditions

# Functions that cannot fail on a value: an error raised by one row (abs(-128) overflows
# TINYINT) would make the unpruned run fail where a pruned one skips the row.
_FUNCTIONS: dict[str, list[str]] = {
    "int": ["{c} % 3", "coalesce({c}, 0)", "CAST({c} AS BIGINT)", "CAST({c} AS DOUBLE) + 1"],
    "uint": ["{c} % 3", "coalesce({c}, 0)", "CAST({c} AS BIGINT)"],
    "float": ["abs({c})", "round({c})", "coalesce({c}, 0.0)", "{c} * 2"],
    "string": ["lower({c})", "upper({c})", "substr({c}, 1, 1)", "trim({c})", "concat({c}, 'x')"],
    "date": ["coalesce({c}, DATE '1970-01-01')", "CAST({c} AS TIMESTAMP)"],
    "timestamp": ["coalesce({c}, TIMESTAMP '2024-01-01 00:00:00')", "CAST({c} AS DATE)"],
    "tz": ["CAST({c} AS DATE)"],
    "bool": ["coalesce({c}, FALSE)", "NOT {c}"],
}
_LENGTH_FUNCTIONS = ["length({c}) = {n}", "char_length({c}) = {n}"]
_FAMILY = {"int": "number", "uint": "number", "float": "number", "string": "string"}
_FAMILY |= {"date": "time", "timestamp": "time", "tz": "tz", "bool": "bool"}


@st.composite
def leaf(
    draw: st.DrawFn,
    scope: Sequence[tuple[str, Sequence[str]]],
    dialect: str = "",
) -> str:
    """One comparison on a column of ``scope``: (qualifier, columns) pairs, e.g. ("x.", [...])."""
    qualifier, names = draw(st.sampled_from(list(scope)))
    name = draw(st.sampled_from(list(names)))
    column = qualifier + name
    kind = kind_of(name)
    literal = literals(name, dialect)
    shape = draw(st.integers(0, 16))
    if shape == 16 and kind != "bool":
        return draw(long_lists(column, name, dialect))
    if kind == "bool" and shape >= 9:
        return draw(
            st.sampled_from(
                [column, f"NOT {column}", f"{column} IS TRUE", f"{column} IS NOT FALSE"]
            )
        )
    if shape == 0:
        return f"{column} IS NULL"
    if shape == 1:
        return f"{column} IS NOT NULL"
    if shape in (2, 3):
        values = draw(st.lists(literal, min_size=1, max_size=4))
        return f"{column} {'NOT IN' if shape == 3 else 'IN'} ({', '.join(values)})"
    if shape == 4:
        return f"{draw(literal)} = {column}"
    if shape == 5:
        if dialect == "spark" and draw(st.booleans()):
            return f"{column} <=> {draw(literal)}"
        distinct = draw(st.sampled_from(["IS NOT DISTINCT FROM", "IS DISTINCT FROM"]))
        return f"{column} {distinct} {draw(literal)}"
    if shape == 6:
        return f"{column} {draw(st.sampled_from(['!=', '<>']))} {draw(literal)}"
    if shape == 7:
        operator = draw(st.sampled_from(["<", "<=", ">", ">="]))
        return f"{column} {operator} {draw(literal)}"
    if shape == 8:
        negate = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {negate}BETWEEN {draw(literal)} AND {draw(literal)}"
    if shape == 9 and kind == "string":
        pattern = draw(st.sampled_from(["a%", "%a", "_", "%", "", "it%", "a b", "%'%", "x%"]))
        negate = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {negate}LIKE '{pattern.replace(chr(39), chr(39) * 2)}'"
    if shape == 10:
        if kind == "string" and draw(st.booleans()):
            template = draw(st.sampled_from(_LENGTH_FUNCTIONS))
            return template.format(c=column, n=draw(st.integers(0, 3)))
        function = draw(st.sampled_from(_FUNCTIONS[kind])).format(c=column)
        if function.startswith("CAST") or function.startswith("NOT"):
            return (
                f"{function} IS NULL"
                if function.startswith("NOT")
                else f"{function} = {draw(literal)}"
            )
        return f"{function} = {draw(literal)}"
    if shape == 11:
        others = [
            (q, other)
            for q, columns in scope
            for other in columns
            if _FAMILY[kind_of(other)] == _FAMILY[kind] and q + other != column
        ]
        if others:
            q, other = draw(st.sampled_from(others))
            operator = draw(st.sampled_from(["=", "=", "<", "!="]))
            return f"{column} {operator} {q}{other}"
    return f"{column} = {draw(literal)}"


@st.composite
def long_lists(draw: st.DrawFn, column: str, name: str, dialect: str = "") -> str:
    """``IN`` of 32-48 literals, or as many ``column = v`` joined by OR: pruner
    folds such runs out of the SQL text before parsing (pruner/folding.py). The OR run is
    left bare, so in ``c AND x = 1 OR x = 2 ...`` the AND binds tighter, and a NOT may
    precede it."""
    plain = st.builds(
        lambda value, style: sql_literal(name, value, style, dialect),
        column_values(name),
        st.sampled_from([0, 0, 0, 1]),  # mostly plain literals: those are folded
    )
    values = draw(st.lists(plain, min_size=32, max_size=48))
    if kind_of(name) in ("int", "uint") and draw(st.booleans()):
        values[draw(st.integers(0, len(values) - 1))] = draw(_foreign_literal(name))
    variant = draw(st.integers(0, 4))
    if variant <= 1:
        return f"{column} {'NOT ' if variant else ''}IN ({', '.join(values)})"
    run = " OR ".join(f"{column} = {value}" for value in values)
    if variant == 2:
        return run
    if variant == 3:
        return f"NOT {run}"
    return f"({run})"


@st.composite
def conditions(
    draw: st.DrawFn,
    scope: Sequence[tuple[str, Sequence[str]]],
    dialect: str = "",
    depth: int = 0,
) -> str:
    """A boolean tree of leaves over ``scope``: AND, OR, NOT, nested up to three deep."""
    if depth < 3 and draw(st.integers(0, 2)) == 0:
        operator = draw(st.sampled_from(["AND", "OR", "NOT"]))
        below = conditions(scope, dialect, depth + 1)
        if operator == "NOT":
            return f"NOT ({draw(below)})"
        parts = draw(st.lists(below, min_size=2, max_size=3))
        return "(" + f" {operator} ".join(parts) + ")"
    return draw(leaf(scope, dialect))


# --------------------------------------------------------------------------- queries


@st.composite
def sql_queries(
    draw: st.DrawFn,
    columns: Sequence[str],
    dialect: str = "",
    keys: Mapping[str, Sequence[tuple[str, ...]]] | None = None,
    rows: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """One query over tables ``a`` and ``b`` of ``columns`` (``k`` included), valid in
    DuckDB, DataFusion and Spark (with ``dialect``'s own spellings here and there)."""
    names = list(columns)
    values = [n for n in names if n != "k"]  # projected next to k
    plain = [n for n in names if kind_of(n) != "float"]  # join and group keys

    def where(*scope: tuple[str, Sequence[str]]) -> str:
        return draw(conditions(scope, dialect))

    def pick(pool: Sequence[str]) -> str:
        return draw(st.sampled_from(list(pool)))

    table = pick(["a", "b"])
    other = "b" if table == "a" else "a"
    shape = draw(st.integers(0, 30))
    if shape >= 27:  # every column of a compound key fixed in one AND, or an OR of such
        mine = (keys or {}).get(table, ())
        data = (rows or {}).get(table, ())
        if len(mine) > 0 and draw(st.integers(0, 3)) > 0:
            fixed = list(draw(st.sampled_from(list(mine))))
        else:
            fixed = draw(st.lists(st.sampled_from(names), min_size=2, max_size=3, unique=True))

        def conjunction() -> str:
            if len(data) > 0 and draw(st.integers(0, 3)) > 0:  # values of a row of the table
                row = draw(st.sampled_from(list(data)))
                return " AND ".join(
                    f"{c} IS NULL"
                    if row[c] is None
                    else f"{c} = {sql_literal(c, row[c], draw(st.integers(0, 7)), dialect)}"
                    for c in fixed
                )
            terms = []
            for column in fixed:
                literal = draw(literals(column, dialect))
                many = draw(st.integers(0, 3)) == 0
                if many:
                    more = draw(literals(column, dialect))
                    terms.append(f"{column} IN ({literal}, {more})")
                else:
                    terms.append(f"{column} = {literal}")
            return " AND ".join(terms)

        if draw(st.integers(0, 3)) == 0:  # a row-value IN list: struct equality, NULLs equal
            listed = []
            for _ in range(draw(st.integers(1, 3))):
                row = draw(st.sampled_from(list(data))) if len(data) > 0 else None
                values = [
                    "NULL"
                    if row is not None and row[c] is None
                    else sql_literal(c, row[c], 0, dialect)
                    if row is not None
                    else draw(literals(c, dialect))
                    for c in fixed
                ]
                listed.append("(" + ", ".join(values) + ")")
            projection = pick(["*", "k", "count(*) AS n"])
            columns = ", ".join(fixed)
            return f"SELECT {projection} FROM {table} WHERE ({columns}) IN ({', '.join(listed)})"
        condition = conjunction()
        if shape % 2:
            condition = f"({condition}) OR ({conjunction()})"
        projection = pick(["*", "k", "count(*) AS n"])
        return f"SELECT {projection} FROM {table} WHERE {condition}"
    if shape <= 3:  # one table, a filter, some projection; names in any case, or quoted
        projection = pick(["*", "k", f"k, {pick(values)}", "count(*) AS n"])
        spelling = draw(st.integers(0, 5))
        if spelling == 0:  # unquoted names are case-insensitive in all three
            return f"SELECT {projection.upper()} FROM {table.upper()} WHERE {where(('', names))}"
        if spelling == 1:
            quote = "`" if dialect == "spark" else '"'
            condition = where((f"{quote}{table}{quote}.", names))
            return f"SELECT {projection} FROM {quote}{table}{quote} WHERE {condition}"
        return f"SELECT {projection} FROM {table} WHERE {where(('', names))}"
    if shape == 4:  # aggregates
        group = pick(plain)
        aggregate = pick(["count(*)", f"count({pick(names)})", f"min({pick(names)})", "max(k)"])
        having = pick(["", " HAVING count(*) > 1"])
        return (
            f"SELECT {group}, {aggregate} AS v FROM {table} WHERE {where(('', names))} "
            f"GROUP BY {group}{having}"
        )
    if shape == 5:  # qualified through an alias, DISTINCT, ORDER BY ... LIMIT
        tail = pick(["", " ORDER BY t.k LIMIT 3"])
        column = pick(names)
        distinct = "DISTINCT " if not tail else ""
        return f"SELECT {distinct}t.{column} FROM {table} AS t WHERE {where(('t.', names))}{tail}"
    if shape <= 8:  # joins of the two indexed tables
        key = pick(plain)
        join = pick(["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"])
        on = f"x.{key} = y.{key}"
        if draw(st.booleans()):
            on += f" AND {where(('y.', names))}"
        projection = f"x.k AS xk, y.k AS yk, y.{pick(names)} AS yv"
        clause = f" WHERE {where(('x.', names), ('y.', names))}" if draw(st.integers(0, 3)) else ""
        right = pick([other, other, table])  # now and then a self-join
        return f"SELECT {projection} FROM {table} AS x {join} {right} AS y ON {on}{clause}"
    if shape == 9:  # comma join
        key = pick(plain)
        return (
            f"SELECT x.k AS xk, y.k AS yk FROM a AS x, b AS y WHERE x.{key} = y.{key} "
            f"AND {where(('x.', names), ('y.', names))}"
        )
    if shape == 10:  # IN / NOT IN subquery
        key = pick(plain)
        negate = pick(["", "NOT "])
        combine = pick(["", f" AND {where(('', names))}", f" OR {where(('', names))}"])
        return (
            f"SELECT k FROM {table} WHERE {key} {negate}IN "
            f"(SELECT {key} FROM {other} WHERE {where(('', names))}){combine}"
        )
    if shape == 11:  # correlated EXISTS
        key = pick(plain)
        negate = pick(["", "NOT "])
        return (
            f"SELECT x.k FROM {table} AS x WHERE {negate}EXISTS (SELECT 1 FROM {other} AS y "
            f"WHERE y.{key} = x.{key} AND {where(('y.', names))})"
        )
    if shape == 12:  # scalar subqueries
        column = pick([n for n in names if kind_of(n) in ("int", "uint", "string", "date")])
        aggregate = pick(["max", "min"])
        return (
            f"SELECT k FROM {table} WHERE {column} = "
            f"(SELECT {aggregate}({column}) FROM {other} WHERE {where(('', names))})"
        )
    if shape == 13:  # derived table filtered outside
        return (
            f"SELECT t.k FROM (SELECT * FROM {table} WHERE {where(('', names))}) AS t "
            f"WHERE {where(('t.', names))}"
        )
    if shape == 14:  # CTEs: plain, used twice, or shadowing the other table's name
        variant = pick(["plain", "twice", "shadow"])
        if variant == "plain":
            return (
                f"WITH c AS (SELECT * FROM {table} WHERE {where(('', names))}) "
                f"SELECT c.k FROM c JOIN {other} AS y ON c.k = y.k WHERE {where(('y.', names))}"
            )
        if variant == "twice":
            return (
                f"WITH c AS (SELECT * FROM {table} WHERE {where(('', names))}) "
                "SELECT c1.k FROM c AS c1 JOIN c AS c2 ON c1.k = c2.k "
                f"WHERE {where(('c2.', names))}"
            )
        return (
            f"WITH {other} AS (SELECT * FROM {table} WHERE {where(('', names))}) "
            f"SELECT k FROM {other} WHERE {where(('', names))}"
        )
    if shape == 15:  # set operations
        operator = pick(["UNION ALL", "UNION", "EXCEPT", "INTERSECT"])
        right = pick([table, other])
        return (
            f"SELECT k FROM {table} WHERE {where(('', names))} {operator} "
            f"SELECT k FROM {right} WHERE {where(('', names))}"
        )
    if shape == 16:  # a filter above a window: must not be pushed below it
        column = pick(values)
        window = pick(
            ["row_number() OVER (ORDER BY k)", "count(*) OVER ()", "lag(k) OVER (ORDER BY k)"]
        )
        return (
            f"SELECT t.k, t.w FROM (SELECT k, {column}, {window} AS w FROM {table}) AS t "
            f"WHERE {where(('t.', [column]))}"
        )
    if shape == 17:  # a filter above a LIMIT: must not be pushed below it
        column = pick(values)
        limit = draw(st.integers(0, 5))
        return (
            f"SELECT t.k FROM (SELECT k, {column} FROM {table} ORDER BY k LIMIT {limit}) AS t "
            f"WHERE {where(('t.', [column]))}"
        )
    if shape == 18:  # a filter above an aggregate
        group = pick(plain)
        return (
            f"SELECT t.{group}, t.n FROM (SELECT {group}, count(*) AS n FROM {table} "
            f"GROUP BY {group}) AS t WHERE {where(('t.', [group]))}"
        )
    if shape == 19:  # a derived table or CTE that swaps two column names (of one family,
        # so that every literal compares with both without a per-row cast error)
        first = pick(names)
        family = [n for n in names if _FAMILY[kind_of(n)] == _FAMILY[kind_of(first)]]
        partners = [n for n in family if n != first]
        if not partners:
            inner = f"SELECT * FROM {table}"
            return f"SELECT t.k FROM ({inner}) AS t WHERE {where(('t.', names))}"
        second = pick(partners)
        variant = pick(["aliases", "column list", "cte"])
        if variant == "aliases":
            inner = f"SELECT {first} AS {second}, {second} AS {first} FROM {table}"
            return f"SELECT t.{first} FROM ({inner}) AS t WHERE {where(('t.', [first, second]))}"
        if variant == "column list":
            inner = f"SELECT {first}, {second} FROM {table}"
            return (
                f"SELECT t.{first} FROM ({inner}) AS t({second}, {first}) "
                f"WHERE {where(('t.', [first, second]))}"
            )
        return (
            f"WITH c({second}, {first}) AS (SELECT {first}, {second} FROM {table}) "
            f"SELECT c.{first} FROM c WHERE {where(('c.', [first, second]))}"
        )
    if shape == 20:  # USING and NATURAL joins (DataFusion: qualified, it calls k ambiguous)
        join = pick(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN", "NATURAL JOIN"])
        using = "" if join == "NATURAL JOIN" else " USING (k)"
        key = "a.k" if dialect == "datafusion" else "k"
        scope = [("a.", names), ("b.", names)] + ([] if key == "a.k" else [("", ["k"])])
        return f"SELECT {key} FROM a {join} b{using} WHERE {where(*scope)}"
    if shape == 21:  # anti-join: IS NULL on the nullable side means "no match"
        key = pick(plain)
        on = f"x.{key} = y.{key}"
        if draw(st.booleans()):
            on += f" AND {where(('y.', names))}"
        missing = pick([f"y.{key} IS NULL", f"y.{pick(names)} IS NULL", "y.k IS NULL"])
        more = pick(["", f" AND {where(('x.', names))}", f" OR {where(('y.', names))}"])
        return f"SELECT x.k FROM {table} AS x LEFT JOIN {other} AS y ON {on} WHERE {missing}{more}"
    if shape == 22:  # correlated scalar subquery in the projection
        key = pick(plain)
        return (
            f"SELECT x.k, (SELECT count(*) FROM {other} AS y WHERE y.{key} = x.{key} AND "
            f"{where(('y.', names))}) AS n FROM {table} AS x WHERE {where(('x.', names))}"
        )
    if shape == 23:  # a window partitioned by the filtered column, or filtered on its value
        group = pick([n for n in plain if n != "k"] or values)
        outer = pick([where(("t.", [group])), f"t.w > 1 AND {where(('t.', [group]))}"])
        return (
            f"SELECT t.k, t.w FROM (SELECT k, {group}, count(*) OVER (PARTITION BY {group}) "
            f"AS w FROM {table}) AS t WHERE {outer}"
        )
    if shape == 24:  # the same table twice with different filters
        key = pick(plain)
        return (
            f"SELECT k FROM {table} WHERE {key} IN (SELECT {key} FROM {table} WHERE "
            f"{where(('', names))}) AND {where(('', names))}"
        )
    if shape == 25:  # CASE in WHERE
        condition, then, otherwise = (where(("", names)) for _ in range(3))
        return f"SELECT k FROM {table} WHERE CASE WHEN {condition} THEN {then} ELSE {otherwise} END"
    if shape == 26 and draw(st.booleans()):  # a CTE / derived table as a join's small side
        key = pick(plain)
        condition = where(("", names))
        body = pick(
            [
                f"SELECT {key} FROM {other} WHERE {condition}",
                f"SELECT DISTINCT {key} FROM {other} WHERE {condition}",
                f"SELECT {key} FROM {other} WHERE {condition} GROUP BY {key}",
                f"SELECT {key} FROM {other} WHERE {condition} ORDER BY k LIMIT 3",
                f"SELECT * FROM {other}",
            ]
        )
        outer = where(("x.", names))
        form = pick(["cte", "derived", "in"])
        if form == "cte":
            return (
                f"WITH d AS ({body}) SELECT x.k FROM {table} AS x JOIN d "
                f"ON x.{key} = d.{key} WHERE {outer}"
            )
        if form == "derived":
            return f"SELECT x.k FROM {table} AS x JOIN ({body}) AS d ON x.{key} = d.{key}"
        return f"WITH d AS ({body}) SELECT k FROM {table} WHERE {key} IN (SELECT {key} FROM d)"
    # no WHERE at all, or a constant one
    return f"SELECT count(*) AS n FROM {table}{pick(['', ' WHERE 1 = 1', ' WHERE 1 = 0'])}"


@dataclass(frozen=True)
class Query:
    """SQL and the values of its placeholders."""

    sql: str
    parameters: tuple[Any, ...] = ()


def placeholder(dialect: str, number: int) -> str:
    """The ``number``-th (from 1) positional placeholder in ``dialect``."""
    return f"${number}" if dialect == "datafusion" else "?"


@st.composite
def parameter_queries(draw: st.DrawFn, columns: Sequence[str], dialect: str) -> Query:
    """Equals / IN with placeholders bound to Python values (pruner coerces those too): on
    one table, on both sides of a join of ``a`` and ``b``, or in and around an IN
    subquery; placeholders numbered in the order they appear (DuckDB and Spark ``?``,
    DataFusion ``$n``)."""
    names = [n for n in columns if kind_of(n) != "bool"]
    plain = [n for n in columns if kind_of(n) not in ("float", "bool")]
    values: list[Any] = []

    def condition(qualifier: str) -> str:
        first, second = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        drawn = [draw(column_values(first)), *draw(st.lists(column_values(second), max_size=3))]
        marks = [placeholder(dialect, len(values) + i + 1) for i in range(len(drawn))]
        values.extend(drawn)
        text = f"{qualifier}{first} = {marks[0]}"
        if len(drawn) > 1:
            joiner = draw(st.sampled_from(["AND", "OR"]))
            text += f" {joiner} {qualifier}{second} IN ({', '.join(marks[1:])})"
        more = draw(conditions([(qualifier, list(columns))], dialect))
        return "(" + text + draw(st.sampled_from(["", f" AND {more}", f" OR {more}"])) + ")"

    table = draw(st.sampled_from(["a", "b"]))
    other = "b" if table == "a" else "a"
    shape = draw(st.integers(0, 3))
    if shape == 0 or not plain:
        return Query(f"SELECT k FROM {table} WHERE {condition('')}", tuple(values))
    key = draw(st.sampled_from(plain))
    if shape == 1:
        join = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"]))
        on = f"x.{key} = y.{key}"
        if draw(st.booleans()):
            on += f" AND {condition('y.')}"
        where = f" WHERE {condition('x.')}" if draw(st.booleans()) else ""
        sql = f"SELECT x.k AS xk, y.k AS yk FROM {table} AS x {join} {other} AS y ON {on}{where}"
        return Query(sql, tuple(values))
    negate = draw(st.sampled_from(["", "NOT "]))
    if shape == 2:
        inner = condition("")  # drawn (numbered) in the order they appear
        outer = f" AND {condition('')}" if draw(st.booleans()) else ""
        sql = (
            f"SELECT k FROM {table} WHERE {key} {negate}IN "
            f"(SELECT {key} FROM {other} WHERE {inner}){outer}"
        )
    else:
        inner = condition("y.")
        outer = f" AND {condition('x.')}" if draw(st.booleans()) else ""
        sql = (
            f"SELECT x.k FROM {table} AS x WHERE {negate}EXISTS (SELECT 1 FROM {other} AS y "
            f"WHERE y.{key} = x.{key} AND {inner}){outer}"
        )
    return Query(sql, tuple(values))


def queries(
    columns: Sequence[str],
    dialect: str,
    keys: Mapping[str, Sequence[tuple[str, ...]]] | None = None,
    rows: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> st.SearchStrategy[Query]:
    """Mostly literal SQL, sometimes with placeholders; ``keys``: per table, its compound
    keys; ``rows``: per table, its rows (for conditions that match)."""
    literal = sql_queries(columns, dialect, keys, rows).map(Query)
    with_parameters = parameter_queries(columns, dialect)
    return st.one_of(literal, literal, literal, literal, with_parameters)


@st.composite
def datasets(
    draw: st.DrawFn,
    engine: str,
    queries_per_dataset: int,
    layouts_drawn: Sequence[str] = LAYOUTS,
) -> Dataset:
    """Two tables of one drawn schema and ``queries_per_dataset`` queries for ``engine``,
    each table of one of ``layouts_drawn``."""
    layouts = {name: draw(st.sampled_from(layouts_drawn)) for name in ("a", "b")}
    excluded = frozenset().union(*(EXCLUDED.get((engine, x), ()) for x in layouts.values()))
    pool = [n for n in COLUMN_TYPES if n != "k" and n not in excluded]
    columns = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=6, unique=True))
    tables = {name: draw(table_specs(columns, layout)) for name, layout in layouts.items()}
    keys = {name: spec.keys for name, spec in tables.items()}
    rows = {name: spec.data.to_pylist() for name, spec in tables.items()}
    sql = queries(["k", *columns], engine, keys, rows)
    drawn = draw(st.lists(sql, min_size=queries_per_dataset, max_size=queries_per_dataset))
    return Dataset(tables, drawn)


# --------------------------------------------------------------------------- running


normalised_rows = multiset
"""``table``'s rows as a multiset (:func:`tests.support.engine_check.multiset`: -0.0 apart
from 0.0, any NaN equal to any NaN, floats to 10 significant digits)."""


def _positional_delete(table: Any, keys: set[int]) -> None:
    """Rows of ``table`` whose ``k`` is in ``keys`` deleted by one positional delete file
    (merge-on-read, as Spark, Flink or Trino delete), committed through pyiceberg's own
    snapshot API (pyiceberg writes no delete files itself)."""
    from pyiceberg.manifest import DataFileContent

    from tests.support.iceberg import commit_file

    paths, positions = [], []
    for task in table.scan().plan_files():
        found = pq.read_table(task.file.file_path.removeprefix("file://"), columns=["k"])
        for position, key in enumerate(found.column("k").to_pylist()):
            if key in keys:
                paths.append(task.file.file_path)
                positions.append(position)
    if not paths:
        return
    data = Path(table.location().removeprefix("file://")) / "data"
    deletes = data / f"deletes-{len(list(data.glob('deletes-*')))}.parquet"
    pq.write_table(pa.table({"file_path": paths, "pos": pa.array(positions, pa.int64())}), deletes)
    commit_file(table, deletes, DataFileContent.POSITION_DELETES, record_count=len(paths))


@dataclass(frozen=True)
class Answer:
    """A query's rows as a multiset, or the exception it raised."""

    rows: Counter[tuple[Any, ...]] | None = None
    error: BaseException | None = None

    def describe(self, limit: int = 12) -> str:
        if self.error is not None:
            text = str(self.error).strip().splitlines()
            return f"raised {type(self.error).__name__}: {text[0] if text else ''}"[:400]
        assert self.rows is not None
        shown = sorted(self.rows.items(), key=repr)[:limit]
        more = "" if len(self.rows) <= limit else f" ... ({len(self.rows)} distinct)"
        return f"{sum(self.rows.values())} rows: {shown}{more}"


def answer(
    engine: str, sql: str, tables: Mapping[str, Any], prune: bool, parameters: Sequence[Any] = ()
) -> Answer:
    try:
        result = pruner.query(sql, tables, engine=engine, prune=prune, parameters=parameters)
        return Answer(rows=normalised_rows(result))
    except Exception as err:  # the engine's (or pruner's) error: compared by type
        return Answer(error=err)


# --------------------------------------------------------------------------- the oracle


class EngineAlone:
    """The *oracle*: ``engine`` alone over the raw files of the written tables, without any
    pruner code (no pruner.query, adapter, Table or file listing), as a user of the engine
    reads a Lance dataset or a directory of Parquet files. Built once per dataset (the
    tables are registered on first use) and reused for its queries.

    - DuckDB, a fresh connection: Parquet is a temporary view of
      ``read_parquet('<dir>/**/*.parquet', hive_partitioning = <hive layout>)``; Lance is
      ``lance.dataset(path).to_table()`` registered (over the ``LanceDataset`` itself,
      DuckDB pushes filters Lance refuses or takes minutes to serialise: see ``_duckdb``).
    - DataFusion, a fresh context: Parquet is ``register_parquet(name, dir)`` with
      ``listing_table_ignore_subdirectory`` off (by default DataFusion skips folders without
      ``=``: no files found in ``x/y/``) and no ``table_partition_cols``: pruner declares no
      partition column on DataFusion (no drawn query filters on ``p`` yet; ``SELECT *``
      reads it on DuckDB and Spark, where it is a column of the hive layout's table). Lance
      is ``lance.dataset(path).to_table()`` registered as record batches: DataFusion's own
      ``register_dataset`` over a ``LanceDataset`` fails in this version (checked: with a
      filter, "get_fragments() does not support filter yet"; pruner's adapter passes its
      own dataset class).
    - Spark, a ``newSession()`` of the run's one session (its settings that matter copied):
      Parquet is ``spark.read.parquet(dir)`` for the hive layout (partition discovery adds
      ``p``), else with ``recursiveFileLookup`` (plain ``spark.read.parquet(dir)`` refuses
      nested folders and, over files at the root and in ``day=2/``, reads ``day=2/`` only);
      Lance is ``spark.createDataFrame(lance.dataset(path).to_table())``.
    - Delta and Iceberg tables, on every engine, as Lance's: the rows of the format's own
      reader (delta-rs's ``QueryBuilder``, pyiceberg's ``scan().to_arrow()``) registered
      (:func:`whole_table`).
    """

    SPARK_SETTINGS = (
        "spark.sql.codegen.wholeStage",
        "spark.sql.adaptive.enabled",
        "spark.sql.shuffle.partitions",
        "spark.sql.session.timeZone",
    )

    def __init__(self, engine: str, specs: Mapping[str, TableSpec], paths: Mapping[str, Path]):
        self.engine = engine
        self.specs = specs
        self.paths = paths
        self._session: Any = None

    def _parquet_hive(self, name: str) -> bool:
        return self.specs[name].folders == "hive"

    def session(self) -> Any:
        if self._session is None:
            self._session = getattr(self, f"_{self.engine}")()
        return self._session

    def _duckdb(self) -> Any:
        import duckdb

        con = duckdb.connect()
        # No Python variable of a calling frame read as a table; every table a temp view
        # (of this connection: no cursor, which would be a connection of its own).
        con.execute("SET python_enable_replacements = false")
        for name, path in self.paths.items():
            if self.specs[name].layout != "parquet":
                # The plain Lance read (Delta's, Iceberg's: their own readers), not the
                # LanceDataset: DuckDB would push its filters
                # into Lance's scanner, which refuses one on an unsigned integer or
                # large_string column ("not yet supported by Substrait conversion") and takes
                # minutes to serialise a deeply nested one (lance.dataset's
                # _serialize_expression, seen on the CI cases: pruner's adapter applies such
                # filters itself).
                # As a pyarrow dataset: over an Arrow table, DuckDB 2.0 drops an outer join's
                # ON condition when it makes the join an anti join (make fuzz found it;
                # tests/adapters/test_duckdb_bugs.py).
                dataset = pads.dataset(whole_table(self.specs[name], path))
                # Under a view: DuckDB finds a registered object only by its exact name
                # ("Table with name A does not exist"), a view (as any table) in any case.
                con.register(f"lance_{name}", dataset)
                con.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM "lance_{name}"')
                continue
            glob = str(path / "**" / "*.parquet").replace("'", "''")
            hive = str(self._parquet_hive(name)).lower()
            con.execute(
                f'CREATE TEMP VIEW "{name}" AS SELECT * FROM '
                f"read_parquet('{glob}', hive_partitioning = {hive})"
            )
        return con

    def _datafusion(self) -> Any:
        import datafusion

        # join_reordering off: DataFusion 55 with it on answers wrongly when it swaps an outer
        # join's inputs (tests/adapters/test_datafusion_bugs.py); the oracle must be right.
        config = (
            datafusion.SessionConfig()
            .set("datafusion.execution.listing_table_ignore_subdirectory", "false")
            .set("datafusion.optimizer.join_reordering", "false")
        )
        context = datafusion.SessionContext(config)
        for name, path in self.paths.items():
            if self.specs[name].layout != "parquet":
                data = whole_table(self.specs[name], path)
                empty = [pa.RecordBatch.from_pylist([], schema=data.schema)]
                context.register_record_batches(name, [data.to_batches() or empty])
            else:
                context.register_parquet(name, str(path))
        return context

    def _spark(self) -> Any:
        from pyspark.sql import SparkSession

        parent = SparkSession.builder.getOrCreate()  # the run's one session
        session = parent.newSession()
        for key in self.SPARK_SETTINGS:
            value = parent.conf.get(key, None)
            if value is not None:
                session.conf.set(key, value)
        for name, path in self.paths.items():
            if self.specs[name].layout != "parquet":
                data = whole_table(self.specs[name], path)
                frame = session.createDataFrame(data)
                # Spark's Arrow conversion makes a timestamp without a zone a TIMESTAMP (of
                # the session's zone); Spark's Parquet reader and pruner's data source make
                # it TIMESTAMP_NTZ, as its type says: cast back (exact: the same zone).
                for field in data.schema:
                    if pa.types.is_timestamp(field.type) and field.type.tz is None:
                        column = frame[field.name].cast("timestamp_ntz")
                        frame = frame.withColumn(field.name, column)
            elif self._parquet_hive(name):
                frame = session.read.parquet(str(path))
            else:
                frame = session.read.option("recursiveFileLookup", "true").parquet(str(path))
            frame.createOrReplaceTempView(name)
        return session

    def answer(self, sql: str, parameters: Sequence[Any] = ()) -> Answer:
        try:
            session = self.session()
            if self.engine == "duckdb":
                if parameters:
                    result = session.execute(sql, list(parameters))
                else:
                    result = session.execute(sql)
                return Answer(rows=normalised_rows(result.to_arrow_table()))
            if self.engine == "datafusion":
                values = {str(i): v for i, v in enumerate(parameters, start=1)} or None
                frame = session.sql(sql, param_values=values)
                return Answer(rows=normalised_rows(frame.to_arrow_table()))
            frame = session.sql(sql, args=list(parameters)) if parameters else session.sql(sql)
            return Answer(rows=normalised_rows(frame.toArrow()))
        except Exception as err:
            return Answer(error=err)


@dataclass(frozen=True)
class Outcome:
    """``equal`` (pruned and unpruned both gave the oracle's answer), ``refused`` (the
    oracle raised, and pruned and unpruned raised the same exception type), ``known`` (a
    known engine bug, see :data:`KNOWN_UNPRUNED_FAILURES` and :func:`unpruned_may_be_wrong`:
    the pruned answer is the engine's over in-memory copies) or ``mismatch``."""

    kind: str
    expected: Answer
    observed: Answer
    unpruned: Answer | None = None

    def difference(self) -> str:
        lines = [f"oracle:   {self.expected.describe()}", f"pruned:   {self.observed.describe()}"]
        if self.unpruned is not None:
            lines.append(f"unpruned: {self.unpruned.describe()}")
        if self.expected.rows is not None and self.observed.rows is not None:
            missing = self.expected.rows - self.observed.rows
            extra = self.observed.rows - self.expected.rows
            lines.append(f"rows only oracle: {sorted(missing.elements(), key=repr)[:12]}")
            lines.append(f"rows only pruned: {sorted(extra.elements(), key=repr)[:12]}")
        return "\n".join(lines)


KNOWN_UNPRUNED_FAILURES: dict[str, tuple[str, ...]] = {
    # DataFusion's own bug: it folds a condition to a constant (``col = NULL AND ...``,
    # ``k BETWEEN NULL AND 3``) and its pyarrow-dataset scan (datafusion-python's
    # DatasetExec) then fails combining a BooleanScalar with the other pushed filters, on
    # any ``register_dataset`` source, before pruner's code runs. A small pruned Lance
    # selection is read ahead into Arrow, has no such scan, and answers; so does the oracle.
    "datafusion": (
        "pyarrow.lib.BooleanScalar",
        "has no kernel matching input types (bool, bool)",
    ),
}
"""Errors of the unpruned run, by engine, that are the engine's own bugs in a scan the
oracle and the pruned run may not have: the unpruned run is then not held to the oracle."""


KNOWN_ALONE_FAILURES = ("Utf8View",)
"""DataFusion alone (``register_parquet``) reads strings as Utf8View and then fails on some
comparisons of them ("Invalid argument error: ... IS NOT DISTINCT FROM Utf8View", make fuzz);
pruner reads the files with their own types and answers."""


def unpruned_may_be_wrong(engine: str, tables: Mapping[str, Written]) -> bool:
    """DataFusion's own bug: its Parquet reader prunes row groups by their statistics for
    ``f = NaN`` (min/max leave NaN out), dropping the NaN rows its in-memory scan returns
    (``NaN = NaN`` is true in DataFusion). The oracle reads Parquet with that reader too; a
    pruned selection read ahead into Arrow keeps them. So a DataFusion + Parquet case whose
    answers differ is checked against :func:`in_memory`: ``known`` when the differing
    answers are DataFusion's in-memory one."""
    return engine == "datafusion" and any(t.spec.layout != "lance" for t in tables.values())


def whole_table(spec: TableSpec, path: Path) -> pa.Table:
    """Every live row of the written table, read with pyarrow / Lance / the table format's
    own reader (no partition column: pruner and the oracle give DataFusion none)."""
    if spec.layout == "lance":
        return lance.dataset(str(path)).to_table()
    if spec.layout == "delta":  # delta-rs's own reader (its DataFusion), views made plain
        import deltalake

        read = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
        data = pa.RecordBatchReader.from_stream(read.execute("SELECT * FROM t")).read_all()
        plain = [
            pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
            for f in data.schema
        ]
        data = data.cast(pa.schema(plain))
        # Delta's protocol: "an empty string for any type translates to a null partition
        # value" (Spark's Delta reads it so, and so does pruner); delta-rs's reader answers ''
        for name in spec.partition_by:
            column = data.column(name)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                empty = pc.equal(column, pa.scalar("", column.type))
                cleared = pc.if_else(empty, pa.scalar(None, column.type), column)
                data = data.set_column(data.schema.get_field_index(name), name, cleared)
        return data
    if spec.layout == "iceberg":  # pyiceberg's own reader, of the metadata file at path
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(str(path)).scan().to_arrow()
    files = sorted(path.glob("**/*.parquet"))
    return pa.concat_tables([pq.read_table(file, partitioning=None) for file in files])


def in_memory(
    engine: str, sql: str, tables: Mapping[str, Written], parameters: Sequence[Any] = ()
) -> Answer:
    """DataFusion's answer over in-memory copies of the whole tables (no scan to push into)."""
    import datafusion

    try:
        context = datafusion.SessionContext()
        for name, table in tables.items():
            data = whole_table(table.spec, table.path)
            empty = [pa.RecordBatch.from_pylist([], schema=data.schema)]
            context.register_record_batches(name, [data.to_batches() or empty])
        values = {str(i): v for i, v in enumerate(parameters, start=1)} or None
        return Answer(rows=normalised_rows(context.sql(sql, param_values=values).to_arrow_table()))
    except Exception as err:
        return Answer(error=err)


@dataclass(eq=False)
class Written:
    """A table written: its spec, its path, pruner's Table of it and the dataset's oracle."""

    spec: TableSpec
    path: Path
    table: Table
    oracle: EngineAlone | None = None


def compare(
    engine: str, sql: str, tables: Mapping[str, Written], parameters: Sequence[Any] = ()
) -> Outcome:
    """Run ``sql`` on ``engine`` alone (the oracle), then through pruner pruned and unpruned,
    and classify: both pruner runs must give the oracle's answer, or all three raise the
    same exception type."""
    oracle = next(iter(tables.values())).oracle
    if oracle is None or oracle.engine != engine:
        oracle = EngineAlone(
            engine, {n: t.spec for n, t in tables.items()}, {n: t.path for n, t in tables.items()}
        )
        for table in tables.values():
            table.oracle = oracle
    opened = {name: table.table for name, table in tables.items()}
    expected = oracle.answer(sql, parameters)
    observed = answer(engine, sql, opened, True, parameters)
    unpruned = answer(engine, sql, opened, False, parameters)
    if expected.error is not None:
        kind = type(expected.error)
        same = all(type(a.error) is kind for a in (observed, unpruned))
        if same:
            return Outcome("refused", expected, observed, unpruned)
        if engine == "datafusion" and any(t in str(expected.error) for t in KNOWN_ALONE_FAILURES):
            # DataFusion alone fails on its own view types; pruner reads the table's own
            # types and answers: it must answer as DataFusion over in-memory copies does.
            reference = in_memory(engine, sql, tables, parameters)
            if reference.rows is not None and observed.rows == unpruned.rows == reference.rows:
                return Outcome("known", expected, observed, unpruned)
        return Outcome("mismatch", expected, observed, unpruned)
    known = KNOWN_UNPRUNED_FAILURES.get(engine, ())
    unpruned_known = unpruned.error is not None and any(t in str(unpruned.error) for t in known)
    if observed.rows == expected.rows and (unpruned.rows == expected.rows or unpruned_known):
        return Outcome("known" if unpruned_known else "equal", expected, observed, unpruned)
    if unpruned_may_be_wrong(engine, tables) and observed.error is None:
        reference = in_memory(engine, sql, tables, parameters)
        if reference.rows is not None and all(
            a.rows in (expected.rows, reference.rows) for a in (observed, unpruned)
        ):
            if not unpruned_known and unpruned.error is not None:
                return Outcome("mismatch", expected, observed, unpruned)
            return Outcome("known", expected, observed, unpruned)
    return Outcome("mismatch", expected, observed, unpruned)


def reproduction(engine: str, specs: Mapping[str, TableSpec], query: Query) -> str:
    """Python source of a test that reproduces the case."""
    tables = "\n".join(
        f"        {name!r}: {spec.python('        ')}," for name, spec in specs.items()
    )
    parameters = ""
    if query.parameters:
        values = ", ".join(_value_literal(v) for v in query.parameters)
        parameters = f", parameters=[{values}]"
    return (
        "import datetime\n"
        "import math\n\n"
        "import pyarrow as pa\n\n"
        "from tests.support.differential import TableSpec, assert_same_answer\n\n\n"
        "def test_differential_reproduction(tmp_path):\n"
        "    tables = {\n"
        f"{tables}\n"
        "    }\n"
        f"    sql = {query.sql!r}\n"
        f"    assert_same_answer({engine!r}, tables, sql, tmp_path{parameters})\n"
    )


def mismatch_report(
    engine: str, specs: Mapping[str, TableSpec], query: Query, outcome: Outcome
) -> str:
    parameters = f"\nparameters: {list(query.parameters)!r}" if query.parameters else ""
    return (
        f"pruning changed the answer on {engine}\nSQL: {query.sql}{parameters}\n"
        f"{outcome.difference()}\n"
        f"--- reproduction (paste into a test) ---\n{reproduction(engine, specs, query)}"
    )


def assert_same_answer(
    engine: str,
    specs: Mapping[str, TableSpec],
    sql: str,
    directory: Path | None = None,
    parameters: Sequence[Any] = (),
) -> Outcome:
    """Write ``specs``, run ``sql`` on ``engine`` pruned and unpruned, assert no mismatch."""
    with written(specs, directory) as tables:
        outcome = compare(engine, sql, tables, parameters)
    query = Query(sql, tuple(parameters))
    assert outcome.kind != "mismatch", mismatch_report(engine, specs, query, outcome)
    return outcome
