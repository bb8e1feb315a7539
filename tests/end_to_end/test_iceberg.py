"""Iceberg tables read at a pinned snapshot, from the live files pyiceberg lists.

The judges: pyiceberg's own reader (``scan().to_arrow()``, the query run by DuckDB over the
rows it returns), and DuckDB alone over exactly the files pyiceberg plans. Tables are written
by pyiceberg into a SQLite catalog, as its users write them, through a table's life: create,
append, overwrite, delete (copy-on-write), overwrite by filter, time travel.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet
import pytest

import pruner
from pruner.errors import InvalidParameterError
from pruner.index import build_index, update_index
from tests.support.engine_check import multiset
from tests.support.iceberg import commit_file, relocated

pytest.importorskip("pyiceberg")

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import LongType, StringType

PRUNER = [sys.executable, "-m", "pruner.cli"]

SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT s FROM t WHERE id = 60",
    "SELECT s FROM t WHERE id IN (10, 60, 199, 250)",
    "SELECT count(*) AS n FROM t WHERE id = 10",
    "SELECT id FROM t WHERE s IS NULL",
]


def _rows(start: int, count: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    names = [None if i % 37 == 0 else f"s{i}" for i in range(start, start + count)]
    return pa.table({"id": ids, "s": pa.array(names, pa.string())})


def _catalog(where: Path) -> Any:
    where.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("local", uri=f"sqlite:///{where}/catalog.db", warehouse=f"file://{where}")
    catalog.create_namespace("ns")
    return catalog


def _table(where: Path, name: str = "events") -> Any:
    return _catalog(where).create_table(f"ns.{name}", schema=_rows(0, 0).schema)


def _oracle(table: Any, sql: str, snapshot_id: int | None = None) -> Any:
    """pyiceberg's own read of the table, the query run over its rows."""
    connection = duckdb.connect()
    connection.register("rows", table.scan(snapshot_id=snapshot_id).to_arrow())
    return multiset(connection.sql(sql.replace("FROM t", "FROM rows")).arrow().read_all())


def _check(table: Any, step: str, version: int | None = None) -> None:
    """Every query, on DuckDB and DataFusion, pruned and not, given as the pyiceberg Table
    and as its metadata file, equals pyiceberg's own reader."""
    sources: list[Any] = [table, table.metadata_location]
    if version is not None:
        sources = [pruner.open_table(table, version=version)]
    for sql in SQL:
        expected = _oracle(table, sql, version)
        for source in sources:
            for engine in ("duckdb", "datafusion"):
                for prune in (True, False):
                    got = multiset(pruner.query(sql, {"t": source}, engine=engine, prune=prune))
                    assert got == expected, (step, sql, source, engine, prune)


def test_an_iceberg_table_answers_as_its_own_reader_through_its_life(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 200))
    _check(table, "create")
    build_index(table, "id")
    build_index(table, "s")
    table.append(_rows(200, 100))
    _check(table, "append, the new file not indexed")
    update_index(table, "id")
    _check(table, "append, indexed")
    table.overwrite(_rows(50, 150))
    _check(table, "overwrite")
    table.append(_rows(0, 100))
    table.delete("id < 20")
    _check(table, "delete")
    table.overwrite(_rows(60, 1).set_column(1, "s", pa.array(["updated"])), "id = 60")
    _check(table, "overwrite by filter")
    update_index(table, "id")
    _check(table, "indexed again")
    explained = pruner.explain("SELECT s FROM t WHERE id = 60", {"t": table})
    scan = explained.scans[0]
    assert scan.selection.num_rows < scan.rows_total


def test_the_raw_files_would_answer_wrong(tmp_path: Path) -> None:
    """Why the care: the folder's files hold rows the table removed."""
    table = _table(tmp_path)
    table.append(_rows(0, 50))
    table.overwrite(_rows(0, 10))
    files = sorted((Path(table.location().removeprefix("file://")) / "data").glob("*.parquet"))
    assert pa.concat_tables([pa.parquet.read_table(f) for f in files]).num_rows == 60
    assert pruner.query("SELECT count(*) AS n FROM t", {"t": table}).to_pylist() == [{"n": 10}]


def test_duckdb_alone_over_the_planned_files_agrees(tmp_path: Path) -> None:
    """The second judge: DuckDB alone over exactly the files pyiceberg plans."""
    table = _table(tmp_path)
    table.append(_rows(0, 200))
    table.append(_rows(200, 100))
    table.delete("id > 250")
    build_index(table, "id")
    files = ", ".join(f"'{task.file.file_path}'" for task in table.scan().plan_files())
    for sql in SQL:
        alone = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet([{files}])"))
        assert multiset(pruner.query(sql, {"t": table})) == multiset(alone.arrow().read_all())


def test_a_snapshot_reads_as_that_snapshot(tmp_path: Path) -> None:
    """Lance-style: a table opened at a snapshot id reads that snapshot, also held while the
    table moves on; an unknown id is refused."""
    table = _table(tmp_path)
    table.append(_rows(0, 200))
    table.overwrite(_rows(50, 150))
    build_index(table, "id")
    held = pruner.open_table(table)
    table.append(_rows(1_000, 10))
    for snapshot in table.metadata.snapshots:
        if not list(table.scan(snapshot_id=snapshot.snapshot_id).plan_files()):
            # an overwrite's first step: every file removed (no rows, refused as yet)
            with pytest.raises(InvalidParameterError, match="no rows"):
                pruner.open_table(table, version=snapshot.snapshot_id)
            continue
        _check(table, f"snapshot {snapshot.snapshot_id}", snapshot.snapshot_id)
    before = table.metadata.snapshots[-2].snapshot_id
    expected = _oracle(table, "SELECT count(*) AS n FROM t", before)
    assert multiset(pruner.query("SELECT count(*) AS n FROM t", {"t": held})) == expected
    with pytest.raises(InvalidParameterError, match="no snapshot 7"):
        pruner.open_table(table, version=7)


def test_a_folder_reads_the_metadata_its_version_hint_names(tmp_path: Path) -> None:
    """A Hadoop table's folder says which metadata file is current (metadata/
    version-hint.text, as DuckDB's iceberg_scan reads it); a new hint is a new table."""
    table = _table(tmp_path)
    table.append(_rows(0, 100))
    folder = Path(table.location().removeprefix("file://"))
    hint = folder / "metadata" / "version-hint.text"
    current = Path(table.metadata_location).name
    hint.write_text(current)
    sql = "SELECT count(*) AS n FROM t WHERE id < 1000"
    assert pruner.query(sql, {"t": folder}).to_pylist() == [{"n": 100}]
    build_index(folder, "id")
    table.append(_rows(100, 50))
    assert pruner.query(sql, {"t": folder}).to_pylist() == [{"n": 100}]  # the hint's version
    hint.write_text(Path(table.metadata_location).name)
    assert pruner.query(sql, {"t": folder}).to_pylist() == [{"n": 150}]
    assert multiset(pruner.query(SQL[2], {"t": folder})) == _oracle(table, SQL[2])


def test_a_folder_that_does_not_say_its_current_metadata_is_refused(tmp_path: Path) -> None:
    """Only the catalog knows which metadata file is current (a commit that lost its race
    leaves one behind): answers need the metadata file or the Table; a build indexes the
    files of the newest one."""
    table = _table(tmp_path)
    table.append(_rows(0, 100))
    table.append(_rows(100, 100))
    folder = Path(table.location().removeprefix("file://"))
    sql = "SELECT count(*) AS n FROM t WHERE id = 7"
    for call in (
        lambda: pruner.query(sql, {"t": folder}),
        lambda: pruner.explain(sql, {"t": folder}),
        lambda: pruner.lookup(folder, "id", [7]),
        lambda: pruner.open_table(folder),
    ):
        with pytest.raises(InvalidParameterError, match=r"table\.metadata_location") as err:
            call()
        assert str(folder) in str(err.value)
    build_index(folder, "id")
    explained = pruner.explain(sql, {"t": table})
    assert explained.scans[0].selection.num_rows < explained.scans[0].rows_total


def test_appending_plain_files_to_an_iceberg_table_is_refused(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 10))
    folder = Path(table.location().removeprefix("file://"))
    before = sorted(folder.rglob("*"))
    for target in (folder, table.metadata_location):
        with pytest.raises(InvalidParameterError, match=r"table\.append"):
            pruner.append(target, _rows(10, 5))
    assert sorted(folder.rglob("*")) == before


def test_a_table_never_written_is_refused(tmp_path: Path) -> None:
    """Renamed, added and re-added columns read by field id: test_table_columns.py."""
    empty = _catalog(tmp_path).create_table("ns.empty", schema=_rows(0, 0).schema)
    sql = "SELECT count(*) AS n FROM t WHERE id = 3"
    for call in (
        lambda: pruner.query(sql, {"t": empty}),
        lambda: pruner.explain(sql, {"t": empty}),
    ):
        with pytest.raises(InvalidParameterError, match="no rows") as err:
            call()
        assert "pyiceberg" in str(err.value)


def test_the_cli_reads_an_iceberg_table_by_its_metadata_file(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 100))
    table.overwrite(_rows(0, 40))
    folder = Path(table.location().removeprefix("file://"))

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PRUNER, *arguments], capture_output=True, text=True, timeout=120, check=False
        )

    built = run("index", "build", table.metadata_location, "--column", "id")
    assert built.returncode == 0, built.stderr
    assert (folder / "_pruner" / "iceberg-field-1").is_dir()  # by field id
    count = ["query", "SELECT count(*) AS n FROM t", "--format", "json"]
    answered = run(*count, "--table", f"t={table.metadata_location}")
    assert answered.returncode == 0, answered.stderr
    assert '"n": 40' in answered.stdout
    refused = run(*count, "--table", f"t={folder}")
    assert refused.returncode == 2 and "version-hint.text" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""


def test_a_table_of_a_configured_catalog_is_named_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``iceberg:CATALOG.NAMESPACE.TABLE`` loads the table from a catalog configured as
    pyiceberg's ``load_catalog`` reads it (here: PYICEBERG_CATALOG__LAKE__* variables), on
    every entry point; a wrong name, catalog or table says which, with no credential."""
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__URI", f"sqlite:///{tmp_path}/catalog.db")
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", f"file://{tmp_path}")
    catalog = SqlCatalog(
        "lake", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}"
    )
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0, 0).schema)
    table.append(_rows(0, 100))
    name = "iceberg:lake.ns.events"
    build_index(name, "id")
    sql = "SELECT s FROM t WHERE id = 42"
    expected = _oracle(table, sql)
    for engine in ("duckdb", "datafusion"):
        assert multiset(pruner.query(sql, {"t": name}, engine=engine)) == expected
    scan = pruner.explain(sql, {"t": name}).scans[0]
    assert scan.unindexed_fragments == () and scan.table is not None
    assert pruner.open_table(name).pinned is not None
    answered = subprocess.run(
        [*PRUNER, "query", sql, "--table", f"t={name}", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert answered.returncode == 0 and '"s": "s42"' in answered.stdout, answered.stderr
    monkeypatch.setenv("PYICEBERG_CATALOG__LOCKED__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__LOCKED__URI", "http://me:hunter2secret@127.0.0.1:9/")
    for wrong, said in [
        ("iceberg:lake.events", "CATALOG.NAMESPACE.TABLE"),
        ("iceberg:lake.ns.absent", "has no table 'ns.absent'"),
        ("iceberg:absent.ns.events", "cannot load the Iceberg catalog 'absent'"),
        ("iceberg:locked.ns.events", "cannot load the Iceberg catalog 'locked'"),
    ]:
        with pytest.raises(InvalidParameterError, match=said) as err:
            pruner.query(sql, {"t": wrong})
        assert "hunter2secret" not in str(err.value)


@pytest.mark.slow
def test_spark_reads_an_iceberg_table_as_its_own_reader(tmp_path: Path, spark: Any) -> None:
    """Spark cannot load Iceberg's runtime offline; under pruner it reads the live files."""
    table = _table(tmp_path)
    table.append(_rows(0, 200))
    build_index(table, "id")
    table.overwrite(_rows(50, 150))
    table.delete("id > 180")
    for sql in SQL:
        expected = _oracle(table, sql)
        for prune in (True, False):
            got = multiset(pruner.query(sql, {"t": table}, engine="spark", prune=prune))
            assert got == expected, (sql, prune)


def test_a_partitioned_table_answers_as_its_own_reader(tmp_path: Path) -> None:
    """Iceberg writes a partition's source column into its data files (unlike Delta), so a
    table partitioned by a column's values (with a NULL partition) reads as any other."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import NestedField

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "s", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "s_part"))
    table = _catalog(tmp_path).create_table("ns.parts", schema=schema, partition_spec=spec)
    rows = _rows(0, 300)
    kinds = pa.array([f"k{i % 3}" if i % 37 else None for i in range(300)], pa.string())
    table.append(rows.set_column(1, "s", kinds))
    assert len(list(table.scan().plan_files())) == 4
    build_index(table, "id")
    table.delete("id < 20")
    for sql in [*SQL, "SELECT count(*) AS n FROM t WHERE s = 'k1' AND id IN (4, 25, 40)"]:
        expected = _oracle(table, sql)
        for engine in ("duckdb", "datafusion"):
            got = multiset(pruner.query(sql, {"t": table}, engine=engine))
            assert got == expected, (sql, engine)


def test_files_added_without_field_ids_read_by_the_name_mapping(tmp_path: Path) -> None:
    """pyiceberg's add_files adds Parquet files written elsewhere (no field ids): the table's
    name mapping gives their columns' ids, and they read as written files do, a column
    renamed since included (the mapping keeps its old name)."""
    table = _table(tmp_path)
    folder = Path(table.location().removeprefix("file://"))
    (folder / "data").mkdir(parents=True)
    added = []
    for number, start in enumerate((0, 100)):
        path = folder / "data" / f"added-{number}.parquet"
        pa.parquet.write_table(_rows(start, 100), path)
        added.append(str(path))
    table.add_files(added)
    table.append(_rows(200, 50))  # a file pyiceberg writes, with field ids
    assert table.metadata.name_mapping() is not None
    build_index(table, "id")
    _check(table, "added files")
    with table.update_schema() as update:
        update.rename_column("s", "name")
    for sql in ("SELECT count(*) AS n FROM t WHERE name IS NULL", "SELECT * FROM t WHERE id = 7"):
        expected = _oracle(table, sql)
        for engine in ("duckdb", "datafusion"):
            assert multiset(pruner.query(sql, {"t": table}, engine=engine)) == expected


def test_the_files_own_bloom_filters_serve_as_zones(tmp_path: Path) -> None:
    """Iceberg writers may write Parquet's own bloom filters (pyiceberg does not; these files,
    added by add_files, were written by pyarrow with them): with no pruner index they rule
    out the files that cannot hold a key, and the answers are still pyiceberg's."""
    table = _table(tmp_path)
    folder = Path(table.location().removeprefix("file://"))
    (folder / "data").mkdir(parents=True)
    added = []
    for number in range(3):
        path = folder / "data" / f"added-{number}.parquet"
        options = {"id": {"ndv": 100, "fpp": 0.01}}
        pa.parquet.write_table(_rows(number * 100, 100), path, bloom_filter_options=options)
        added.append(str(path))
    table.add_files(added)
    (scan,) = pruner.explain("SELECT s FROM t WHERE id = 177", {"t": table}).scans
    assert "parquet bloom filter" in scan.terms[0].reason
    assert len(scan.selection.fragment_ids()) == 1
    _check(table, "own filters")


def test_a_table_opens_as_it_was_at_a_time(tmp_path: Path) -> None:
    """``asof`` opens the snapshot current at a time, as pyiceberg's
    snapshot_as_of_timestamp finds it; before the first snapshot it is refused."""
    import datetime as dt
    import time

    table = _table(tmp_path)
    before = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    table.append(_rows(0, 200))
    time.sleep(0.05)
    first = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    table.append(_rows(200, 100))
    snapshot = table.snapshot_as_of_timestamp(round(first.timestamp() * 1000))
    count = "SELECT count(*) AS n FROM t"
    for when in (first, first.isoformat()):
        opened = pruner.open_table(table, asof=when)
        assert opened.pinned is not None and opened.pinned.version == snapshot.snapshot_id
        assert multiset(pruner.query(count, {"t": opened})) == _oracle(
            table, count, snapshot.snapshot_id
        )
    with pytest.raises(InvalidParameterError, match="had no snapshot"):
        pruner.open_table(table, asof=before)


@pytest.mark.slow
def test_positional_deletes_leave_their_rows_out_on_every_engine(
    tmp_path: Path, spark: Any
) -> None:
    """Positional delete files (pyiceberg applies them when it reads), naming rows of two of
    the table's data files, with row groups of 50: every engine, pruned or not, answers as
    pyiceberg's reader. A large string column too: such a file's rows reach Spark at the
    file's own types, which Spark takes only as its own (``string``)."""
    from pyiceberg.manifest import DataFileContent

    def rows(start: int, count: int) -> pa.Table:
        found = _rows(start, count)
        return found.append_column("ls", found.column("s").cast(pa.large_string()))

    table = _catalog(tmp_path).create_table("ns.events", schema=rows(0, 0).schema)
    with table.transaction() as transaction:
        transaction.set_properties({"write.parquet.row-group-limit": "50"})
    table.append(rows(0, 200))
    table.append(rows(200, 100))
    by_rows = {task.file.record_count: task.file.file_path for task in table.scan().plan_files()}
    assert pa.parquet.ParquetFile(by_rows[200].removeprefix("file://")).num_row_groups == 4
    positions = {by_rows[200]: [0, 3, 49, 50, 199], by_rows[100]: [10]}
    deletes = Path(table.location().removeprefix("file://")) / "data" / "deletes.parquet"
    rows = [(path, p) for path, ps in positions.items() for p in ps]
    pa.parquet.write_table(
        pa.table(
            {
                "file_path": [path for path, _ in rows],
                "pos": pa.array([p for _, p in rows], pa.int64()),
            }
        ),
        deletes,
    )
    commit_file(table, deletes, DataFileContent.POSITION_DELETES)
    assert table.scan().to_arrow().num_rows == 294
    build_index(table, "id", items=4)
    for sql in SQL:
        expected = _oracle(table, sql)
        for engine in ("duckdb", "datafusion", "spark"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": table}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)


def test_deletion_vectors_leave_their_rows_out(tmp_path: Path) -> None:
    """Deletion vectors (format version 3's deletes: a Puffin file of roaring bitmaps, one
    blob per data file) applied as pyiceberg's reader applies them, by the data file each
    blob names. pyiceberg writes no version 3 table, so the vectors are committed to a
    version 2 one (tests/support/iceberg_dv.py), which pyiceberg reads all the same."""
    from tests.support.iceberg_dv import commit_deletion_vectors

    table = _table(tmp_path)
    table.append(_rows(0, 100))
    table.append(_rows(100, 50))
    build_index(table, "id", items=8)
    files = sorted(
        (task.file.record_count, task.file.file_path) for task in table.scan().plan_files()
    )
    vectors = {files[1][1]: [0, 3, 99], files[0][1]: [10]}
    commit_deletion_vectors(table, vectors, tmp_path / "deletes.puffin")
    assert table.scan().to_arrow().num_rows == 146
    for sql in [
        *SQL,
        "SELECT count(*) AS n FROM t",
        "SELECT id FROM t WHERE id IN (0, 3, 4, 99, 110, 111)",
    ]:
        expected = _oracle(table, sql)
        for engine in ("duckdb", "datafusion"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": table}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)


ICEBERG_TABLES = Path(__file__).resolve().parents[1] / "data" / "iceberg"


@pytest.mark.slow
def test_a_table_spark_wrote_with_deletion_vectors(tmp_path: Path, spark: Any) -> None:
    """Format version 3, written by Spark and Iceberg 1.10 (tests/data/iceberg/README.md):
    five rows, two deleted by deletion vectors in a Puffin file."""
    from pyiceberg.table import StaticTable

    metadata = relocated(
        ICEBERG_TABLES / "iceberg_v3_deletion_vectors",
        tmp_path / "t",
        "hdfs://localhost:20500/test-warehouse/iceberg_v3_deletion_vectors",
    )
    table = StaticTable.from_metadata(str(metadata))
    assert table.metadata.format_version == 3
    assert sorted(table.scan().to_arrow().column("i").to_pylist()) == [1, 3, 5]
    build_index(metadata, "i", items=1)
    for sql in [
        "SELECT count(*) AS n FROM t",
        "SELECT i FROM t WHERE i IN (2, 3, 4)",
        "SELECT i FROM t WHERE i = 4",
    ]:
        expected = _oracle(table, sql)
        for engine in ("duckdb", "datafusion", "spark"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": metadata}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)
    scan = pruner.explain("SELECT i FROM t WHERE i = 3", {"t": metadata}).scans[0]
    assert len(scan.selection.fragment_ids()) == 1
    # its folder's version-hint.text is empty: it names no current metadata file
    with pytest.raises(InvalidParameterError, match="or an empty one"):
        pruner.query("SELECT count(*) AS n FROM t", {"t": metadata.parent.parent})


def test_a_table_flink_wrote_with_equality_deletes_is_refused(tmp_path: Path) -> None:
    """Equality deletes (tests/data/iceberg/README.md), which pyiceberg does not apply
    either: refused with what to do, never answered from the data files."""
    metadata = relocated(
        ICEBERG_TABLES / "iceberg_v2_delete_equality",
        tmp_path / "t",
        "/test-warehouse/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality",
    )
    for call in (
        lambda: pruner.query("SELECT count(*) AS n FROM t", {"t": metadata}),
        lambda: pruner.open_table(metadata),
    ):
        with pytest.raises(InvalidParameterError, match="equality deletes") as err:
            call()
        assert "rewrite_data_files" in str(err.value)


def test_equality_deletes_and_foreign_files_are_refused(tmp_path: Path) -> None:
    """An equality delete file (pyiceberg refuses to plan it), an ORC data file and a data
    file outside the table's folder: each refused with an error that says what and what to
    do."""
    from pyiceberg.manifest import DataFileContent, FileFormat

    def made(name: str) -> Any:
        table = _table(tmp_path / name, name)
        table.append(_rows(0, 10))
        return table

    equality = made("equality")
    deletes = Path(equality.location().removeprefix("file://")) / "data" / "eq.parquet"
    pa.parquet.write_table(pa.table({"id": pa.array([3], pa.int64())}), deletes)
    commit_file(equality, deletes, DataFileContent.EQUALITY_DELETES, equality_ids=[1])

    orc = made("orc")
    other = Path(orc.location().removeprefix("file://")) / "data" / "rows.orc"
    other.write_bytes(b"ORC")
    commit_file(orc, other, DataFileContent.DATA, FileFormat.ORC)

    outside = made("outside")
    elsewhere = tmp_path / "elsewhere.parquet"
    pa.parquet.write_table(_rows(100, 5), elsewhere)
    outside.add_files([str(elsewhere)])

    sql = "SELECT count(*) AS n FROM t WHERE id = 3"
    for table, why in (
        (equality, "cannot be read exactly"),
        (orc, "ORC data file"),
        (outside, "outside its folder"),
    ):
        for call in (
            lambda t=table: pruner.query(sql, {"t": t}),
            lambda t=table: pruner.explain(sql, {"t": t}),
            lambda t=table: pruner.open_table(t),
        ):
            with pytest.raises(InvalidParameterError, match=why) as err:
                call()
            assert any(w in str(err.value) for w in ("pyiceberg", "folder", "rewrite"))
