"""A Delta or Iceberg table's columns are found in each data file as the format's readers
find them, not by the name the table gives them today.

- A column added since a file was written (Delta's ``schema_mode="merge"``, Iceberg's
  ``add_column``) is NULL in that file's rows.
- Under Delta's column mapping the files name the columns by physical names
  (``col-<uuid>``); an Iceberg column is found by its field id, so a renamed column is read
  under its old name in older files, and a column dropped and added again under its old name
  is NULL in the files written before (they hold the dropped column's values under that
  name: the engines alone over the files would answer from them).
- An index is read and built by each file's name for the column, and kept under the
  column's identity (a Delta column's physical name, an Iceberg column's field id), so a
  rename keeps it; a file that does not hold the column has no zones, and being NULL in
  every row, is selected only by IS NULL.

The judges: DataFusion over deltalake's ``DeltaTable`` provider (deltalake's own
``to_pyarrow_table`` reads a column-mapped table as NULLs) and pyiceberg's ``scan()``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import pyarrow as pa
import pytest

import pruner
from pruner.errors import InvalidParameterError
from pruner.index import build_index, update_index
from pruner.index.keys import Key
from tests.support.engine_check import multiset

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

SPARK_TABLES = Path(__file__).resolve().parents[1] / "data" / "delta"
ENGINES = ("duckdb", "datafusion")


def _rows(start: int, count: int, name: str = "s") -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    names = pa.array([f"s{i}" for i in range(start, start + count)], pa.string())
    return pa.table({"id": ids, name: names})


def _delta_oracle(path: Path, sql: str) -> Any:
    context = datafusion.SessionContext()
    context.register_table("t", deltalake.DeltaTable(str(path)))
    return multiset(context.sql(sql).to_arrow_table())


def _iceberg_oracle(table: Any, sql: str) -> Any:
    connection = duckdb.connect()
    connection.register("rows", table.scan().to_arrow())
    return multiset(connection.sql(sql.replace("FROM t", "FROM rows")).arrow().read_all())


def _check(source: Any, oracle: Any, queries: list[str], step: str, engines: Any = ENGINES) -> None:
    """Every query, on each engine, pruned and not, equals the format's own reader."""
    for sql in queries:
        expected = oracle(sql)
        for engine in engines:
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": source}, engine=engine, prune=prune))
                assert got == expected, (step, sql, engine, prune)


def _pruned_rows(sql: str, source: Any) -> tuple[int, int]:
    found = pruner.explain(sql, {"t": source}).to_json()["scans"][0]  # type: ignore[index]
    return found["rows_selected"], found["rows_total"]


def _evolved(where: Path) -> Path:
    """A Delta table of 100 rows, appended to with 50 that add a column ``extra``."""
    deltalake.write_deltalake(where, _rows(0, 100))
    extra = pa.array([float(i) if i % 3 else None for i in range(50)], pa.float64())
    deltalake.write_deltalake(
        where, _rows(100, 50).append_column("extra", extra), mode="append", schema_mode="merge"
    )
    return where


DELTA_SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT * FROM t WHERE id = 120",
    "SELECT id, s FROM t WHERE id IN (3, 150, 149)",
]
EVOLVED_SQL = [
    *DELTA_SQL,
    "SELECT count(*) AS n FROM t WHERE extra IS NULL",
    "SELECT id, extra FROM t WHERE extra = 5.0",
    "SELECT id FROM t WHERE extra IN (4.0, 7.0) OR id = 2",
]


def test_a_column_added_to_a_delta_table_is_null_in_older_files(tmp_path: Path) -> None:
    path = _evolved(tmp_path / "evolved")
    build_index(path, "id")
    _check(path, lambda sql: _delta_oracle(path, sql), EVOLVED_SQL, "added")
    build_index(path, "extra")  # the older file holds no extra: no zones of it
    _check(path, lambda sql: _delta_oracle(path, sql), EVOLVED_SQL, "indexed")
    assert _pruned_rows("SELECT * FROM t WHERE id = 120", path) == (50, 150)
    # the older file's extra is NULL in every row: an equality never selects it, IS NULL does
    assert _pruned_rows("SELECT * FROM t WHERE extra = 5.0", path) == (50, 150)
    assert _pruned_rows("SELECT * FROM t WHERE extra IS NULL", path) == (150, 150)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_delta_table_with_column_mapping_reads_its_physical_names(
    tmp_path: Path, mode: str
) -> None:
    """Mode name: each column found by its physical name; mode id: by its field id."""
    path = tmp_path / "mapped"
    mapping = {"delta.columnMapping.mode": mode}
    deltalake.write_deltalake(path, _rows(0, 100), configuration=mapping)
    deltalake.write_deltalake(path, _rows(100, 100), mode="append")
    files = deltalake.DeltaTable(str(path)).file_uris()
    assert pa.parquet.read_schema(files[0].removeprefix("file://")).names[0].startswith("col-")
    # deltalake's own pyarrow read answers NULLs here: it is no judge
    assert deltalake.DeltaTable(str(path)).to_pyarrow_table().column("id").null_count == 200
    oracle = lambda sql: _delta_oracle(path, sql)  # noqa: E731
    _check(path, oracle, DELTA_SQL, "mapped")
    build_index(path, "id")  # read by the physical name, and kept under it
    assert [p.name[:4] for p in (path / "_pruner").iterdir()] == ["col-"]
    _check(path, oracle, DELTA_SQL, "indexed")
    assert _pruned_rows("SELECT * FROM t WHERE id = 120", path) == (100, 200)
    deltalake.write_deltalake(path, _rows(200, 50), mode="append")
    update_index(path, "id")
    _check(path, oracle, [*DELTA_SQL, "SELECT s FROM t WHERE id = 210"], "updated")
    assert _pruned_rows("SELECT * FROM t WHERE id = 210", path) == (50, 250)


def test_a_spark_written_table_with_column_mapping_and_partitions(tmp_path: Path) -> None:
    """Column mapping on a partitioned table Spark wrote (tests/data/delta/README.md): the
    partition values are keyed by physical names in the log, the files name the other column
    by its physical name, and the table's names hold spaces."""
    path = tmp_path / "mapped"
    shutil.copytree(SPARK_TABLES / "table_with_column_mapping", path)
    queries = [
        "SELECT * FROM t",
        'SELECT "Super Name" FROM t WHERE "Company Very Short" = \'BME\'',
        "SELECT count(*) AS n FROM t WHERE \"Super Name\" IN ('Timothy Lamb', 'Nathan Bennett')",
    ]
    oracle = lambda sql: _delta_oracle(path, sql)  # noqa: E731
    _check(path, oracle, queries, "as written")
    build_index(path, "Super Name")
    _check(path, oracle, queries, "indexed")
    assert _pruned_rows("SELECT * FROM t WHERE \"Super Name\" = 'Timothy Lamb'", path) == (1, 5)


def test_what_column_mapping_pruner_cannot_read_is_refused(tmp_path: Path) -> None:
    nested = tmp_path / "nested"
    rows = _rows(0, 10).append_column("point", pa.array([{"x": i} for i in range(10)]))
    deltalake.write_deltalake(nested, rows, configuration={"delta.columnMapping.mode": "name"})
    for call in (
        lambda: pruner.query("SELECT count(*) AS n FROM t", {"t": nested}),
        lambda: pruner.open_table(nested),
        lambda: build_index(nested, "id"),
    ):
        with pytest.raises(InvalidParameterError, match="nested column 'point'") as err:
            call()
        assert "deltalake" in str(err.value)
    mapped = tmp_path / "mapped"
    deltalake.write_deltalake(
        mapped, _rows(0, 10), configuration={"delta.columnMapping.mode": "name"}
    )
    with pytest.raises(InvalidParameterError, match="compound keys"):
        build_index(mapped, Key(("id", "s")))
    evolved = _evolved(tmp_path / "evolved")
    with pytest.raises(InvalidParameterError, match="compound keys"):
        build_index(evolved, Key(("id", "extra")))


def _catalog(where: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    where.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("local", uri=f"sqlite:///{where}/catalog.db", warehouse=f"file://{where}")
    catalog.create_namespace("ns")
    return catalog


ICEBERG_SQL = [
    "SELECT count(*) AS n FROM t WHERE s IS NULL",
    "SELECT * FROM t WHERE s = 's5'",
    "SELECT * FROM t WHERE name = 's5' OR name = 's120'",
    "SELECT id, s FROM t WHERE id IN (5, 120, 160)",
]


def test_iceberg_columns_are_found_by_field_id(tmp_path: Path) -> None:
    """Renamed, then a new column under the old name, then that one dropped and added again:
    each file read as pyiceberg reads it, indexes built before each change included."""
    from pyiceberg.types import StringType

    groups = {"write.parquet.row-group-limit": "10"}  # rows of one row group read ahead
    schema = _rows(0, 0).schema
    table = _catalog(tmp_path).create_table("ns.events", schema=schema, properties=groups)
    table.append(_rows(0, 100))  # s has no NULL here: an index of it says so
    build_index(table, "s")
    build_index(table, "id")
    oracle = lambda sql: _iceberg_oracle(table, sql)  # noqa: E731
    with table.update_schema() as update:
        update.rename_column("s", "name")
    table.append(_rows(100, 50, "name"))
    renamed = ["SELECT * FROM t WHERE name = 's5' OR name = 's120'", "SELECT * FROM t WHERE id = 5"]
    _check(table, oracle, renamed, "renamed")
    # the index of s, kept under its field id, is name's: the first file is ruled out
    assert _pruned_rows("SELECT * FROM t WHERE name = 's120'", table) == (50, 150)
    with table.update_schema() as update:
        update.add_column("s", StringType())
    news = pa.array(["s5"] * 25 + [None] * 25, pa.string())
    table.append(_rows(150, 50, "name").append_column("s", news))
    # the first file holds the old s (no NULL) under the name s: its zones of s are never
    # used for the new s, which is NULL in every one of its rows
    _check(table, oracle, ICEBERG_SQL, "added again")
    assert _iceberg_oracle(table, ICEBERG_SQL[0]) == multiset(pa.table({"n": [175]}))
    with table.update_schema() as update:
        update.delete_column("s")
    with table.update_schema() as update:
        update.add_column("s", StringType())
    update_index(table, "id")  # the rows of a file holding the dropped s are read ahead
    dropped = ["SELECT id, name, s FROM t WHERE id = 160"]
    _check(table, oracle, [*ICEBERG_SQL, *dropped], "dropped and added again")
    table.append(_rows(200, 20, "name").append_column("s", pa.array(["x"] * 20)))
    build_index(table, "s")  # only the last file holds this s
    _check(table, oracle, [*ICEBERG_SQL, "SELECT id FROM t WHERE s = 'x'"], "indexed")
    assert _pruned_rows("SELECT id FROM t WHERE s = 'x'", table)[0] < 220


def test_a_column_whose_type_changed_is_refused(tmp_path: Path) -> None:
    """int promoted to long beside a column added: the files hold the column at two types
    (pruner reads a table whose files all hold every column by its name, types aside, as a
    directory of Parquet files of two integer widths)."""
    from pyiceberg.types import LongType, StringType

    schema = pa.schema([("id", pa.int64()), ("n", pa.int32())])
    table = _catalog(tmp_path).create_table("ns.promoted", schema=schema)
    table.append(pa.table({"id": [1, 2], "n": pa.array([1, 2], pa.int32())}, schema=schema))
    with table.update_schema() as update:
        update.update_column("n", LongType())
    with table.update_schema() as update:
        update.add_column("s", StringType())
    wider = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("s", pa.string())])
    table.append(pa.table({"id": [3], "n": [3], "s": ["c"]}, schema=wider))
    with pytest.raises(InvalidParameterError, match="at different types") as err:
        pruner.query("SELECT count(*) AS n FROM t", {"t": table})
    assert "pyiceberg" in str(err.value)


@pytest.mark.slow
def test_spark_reads_mapped_and_evolved_columns(tmp_path: Path, spark: Any) -> None:
    from pyiceberg.types import StringType

    table = _catalog(tmp_path / "iceberg").create_table("ns.events", schema=_rows(0, 0).schema)
    table.append(_rows(0, 100))
    build_index(table, "s")
    with table.update_schema() as update:
        update.rename_column("s", "name")
    with table.update_schema() as update:
        update.add_column("s", StringType())
    table.append(_rows(100, 50, "name").append_column("s", pa.array(["x"] * 50)))
    queries = [
        "SELECT count(*) AS n FROM t WHERE s IS NULL",
        "SELECT id, s FROM t WHERE name = 's120'",
    ]
    _check(table, lambda sql: _iceberg_oracle(table, sql), queries, "iceberg", ["spark"])
    evolved = _evolved(tmp_path / "evolved")
    build_index(evolved, "extra")
    _check(evolved, lambda sql: _delta_oracle(evolved, sql), EVOLVED_SQL[3:], "evolved", ["spark"])
    mapped = tmp_path / "mapped"
    shutil.copytree(SPARK_TABLES / "table_with_column_mapping", mapped)
    build_index(mapped, "Super Name")
    queries = ["SELECT `Super Name` FROM t WHERE `Company Very Short` = 'BME'"]
    _check(
        mapped,
        lambda sql: _delta_oracle(mapped, sql.replace("`", '"')),
        queries,
        "mapped",
        ["spark"],
    )


def test_more_of_what_pruner_cannot_read_exactly_is_refused(tmp_path: Path) -> None:
    """A reader feature neither deltalake nor pruner knows, a binary partition column, and
    an Iceberg column whose nested field was renamed since a file was written: each refused
    with what to do, never answered from the files."""
    import json

    featured = tmp_path / "featured"
    deltalake.write_deltalake(featured, _rows(0, 5))
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    protocol |= {"readerFeatures": ["madeUpFeature"], "writerFeatures": ["madeUpFeature"]}
    commit = featured / "_delta_log" / "00000000000000000001.json"
    commit.write_text(json.dumps({"protocol": protocol}) + "\n")
    binary = tmp_path / "binary"
    rows = _rows(0, 5).append_column("k", pa.array([b"a", b"b"] * 2 + [b"c"]))
    deltalake.write_deltalake(binary, rows, partition_by=["k"])
    point = pa.struct([("x", pa.int64())])
    schema = pa.schema([("id", pa.int64()), ("pt", point)])
    nested = _catalog(tmp_path / "iceberg").create_table("ns.nested", schema=schema)
    nested.append(pa.table({"id": [1], "pt": [{"x": 1}]}, schema=schema))
    with nested.update_schema() as update:
        update.rename_column("pt.x", "y")
    for source, said in [
        (featured, "madeUpFeature"),
        (binary, "of type binary"),
        (nested, "other nested fields"),
    ]:
        with pytest.raises(InvalidParameterError, match=said) as err:
            pruner.query("SELECT count(*) AS n FROM t", {"t": source})
        assert "deltalake" in str(err.value) or "pyiceberg" in str(err.value)
