"""Delta Lake and Iceberg tables are never read as plain directories of Parquet files.

A table format's log (Delta's ``_delta_log/``, Iceberg's ``metadata/*.metadata.json``) names
which of its files are live; after an overwrite, a delete or a compaction the removed files
stay on disk until a vacuum. Read as a directory, a Delta table overwritten with 150 rows
counted 450 (every file ever written).

A Delta table is read at a pinned version, from the live files deltalake lists (tables it
cannot read exactly are refused). The judges: DataFusion over deltalake's own ``DeltaTable``
provider, and each engine alone over the live files. Iceberg tables: test_iceberg.py; here,
a folder inside one, and its folder with no version hint (only its catalog knows which
metadata file is current), are refused.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import datafusion
import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.adapters.duckdb_views import parquet_view_sql
from pruner.discover import table_format
from pruner.errors import InvalidParameterError
from pruner.index import build_index, update_index
from tests.support.engine_check import engine_alone, multiset

PRUNER = [sys.executable, "-m", "pruner.cli"]
JSON = ["--format", "json"]

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")


def _rows(start: int, count: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table({"id": ids, "s": pa.array([f"s{i}" for i in range(start, start + count)])})


@pytest.fixture(scope="module")
def delta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 rows appended to by 100, then overwritten with 150: 450 rows of Parquet on disk,
    150 in the table."""
    path = tmp_path_factory.mktemp("delta") / "events"
    deltalake.write_deltalake(path, _rows(0, 200))
    deltalake.write_deltalake(path, _rows(0, 100), mode="append")
    deltalake.write_deltalake(path, _rows(50, 150), mode="overwrite")
    return path


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Iceberg table in a SQLite catalog: 50 rows appended, then overwritten with 10."""
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path_factory.mktemp("iceberg")
    catalog = SqlCatalog(
        "local", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array(range(50), pa.int64())}))
    table.overwrite(pa.table({"id": pa.array(range(10), pa.int64())}))
    return Path(table.location().removeprefix("file://"))


def _oracle(path: Path, sql: str, version: int | None = None) -> Any:
    """DataFusion over deltalake's own table provider (the format's reader)."""
    context = datafusion.SessionContext()
    context.register_table("t", deltalake.DeltaTable(str(path), version=version))
    return multiset(context.sql(sql).to_arrow_table())


def _live(path: Path, version: int | None = None) -> list[str]:
    return deltalake.DeltaTable(str(path), version=version).file_uris()


def test_a_plain_read_of_these_tables_is_wrong(delta: Path, iceberg: Path) -> None:
    """Why the care: the engine alone over every file answers from removed rows."""
    live = _live(delta)
    assert len(live) < len(list(delta.glob("*.parquet")))
    assert pq.read_table(live).num_rows == 150
    assert pq.read_table(sorted(delta.glob("*.parquet"))).num_rows == 450
    assert pq.read_table(sorted((iceberg / "data").glob("*.parquet"))).num_rows == 60


SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT s FROM t WHERE id = 60",
    "SELECT s FROM t WHERE id IN (10, 60, 199, 250)",
    "SELECT count(*) AS n FROM t WHERE id = 10",  # only in removed files
]


def _check(path: Path, step: str, version: int | None = None) -> None:
    """Every query, on DuckDB and DataFusion, pruned and not, equals the format's reader."""
    source: Any = path if version is None else pruner.open_table(path, version=version)
    for sql in SQL:
        expected = _oracle(path, sql, version)
        for engine in ("duckdb", "datafusion"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": source}, engine=engine, prune=prune))
                assert got == expected, (step, sql, engine, prune)


def test_a_delta_table_answers_as_its_own_reader_through_its_life(tmp_path: Path) -> None:
    path = tmp_path / "events"
    deltalake.write_deltalake(path, _rows(0, 200))
    _check(path, "create")
    build_index(path, "id")
    deltalake.write_deltalake(path, _rows(200, 100), mode="append")
    _check(path, "append, the new file not indexed")
    update_index(path, "id")
    _check(path, "append, indexed")
    deltalake.write_deltalake(path, _rows(50, 150), mode="overwrite")
    _check(path, "overwrite")
    deltalake.write_deltalake(path, _rows(0, 100), mode="append")
    table = deltalake.DeltaTable(str(path))
    table.delete("id < 20")
    _check(path, "delete")
    deltalake.DeltaTable(str(path)).update({"s": "'updated'"}, predicate="id = 60")
    _check(path, "update")
    update_index(path, "id")
    _check(path, "update, indexed")
    deltalake.DeltaTable(str(path)).optimize.compact()
    _check(path, "compact")
    deltalake.DeltaTable(str(path)).create_checkpoint()
    _check(path, "checkpoint")
    deltalake.DeltaTable(str(path)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    _check(path, "vacuum")
    explained = pruner.explain("SELECT s FROM t WHERE id = 60", {"t": path})
    scan = explained.scans[0]
    assert scan.selection.num_rows < scan.rows_total or scan.fragments_total == 1


def test_a_version_reads_as_that_version(tmp_path: Path) -> None:
    """Lance-style: a table opened at a version reads that version, also held while the
    table moves on."""
    path = tmp_path / "events"
    deltalake.write_deltalake(path, _rows(0, 200))
    deltalake.write_deltalake(path, _rows(50, 150), mode="overwrite")
    build_index(path, "id")
    held = pruner.open_table(path, version=0)
    deltalake.write_deltalake(path, _rows(1_000, 10), mode="append")
    for version in (0, 1, 2):
        _check(path, f"version {version}", version)
    expected = _oracle(path, "SELECT count(*) AS n FROM t", 0)
    assert multiset(pruner.query("SELECT count(*) AS n FROM t", {"t": held})) == expected
    with pytest.raises(InvalidParameterError, match="version 7"):
        pruner.open_table(path, version=7)


def test_duckdb_alone_over_the_live_files_agrees(delta: Path) -> None:
    """The second judge: DuckDB alone over exactly the live files."""
    files = ", ".join(f"'{uri}'" for uri in _live(delta))
    for sql in SQL:
        alone = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet([{files}])"))
        assert multiset(pruner.query(sql, {"t": delta})) == multiset(alone.arrow().read_all())


@pytest.mark.slow
def test_spark_reads_a_delta_table_as_its_own_reader(tmp_path: Path, spark: Any) -> None:
    """Spark cannot load Delta's connector offline; under pruner it reads the live files."""
    path = tmp_path / "events"
    deltalake.write_deltalake(path, _rows(0, 200))
    build_index(path, "id")
    deltalake.write_deltalake(path, _rows(50, 150), mode="overwrite")
    deltalake.DeltaTable(str(path)).delete("id > 180")
    for sql in SQL:
        expected = _oracle(path, sql)
        for prune in (True, False):
            got = multiset(pruner.query(sql, {"t": path}, engine="spark", prune=prune))
            assert got == expected, (sql, prune)


def _refused(call: Any, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match) as err:
        call()
    assert "Traceback" not in str(err.value)


def test_what_pruner_cannot_read_exactly_is_refused(tmp_path: Path) -> None:
    """An emptied table (no live file) here; column mapping's refusals:
    test_table_columns.py."""
    emptied = tmp_path / "emptied"
    deltalake.write_deltalake(emptied, _rows(0, 10))
    deltalake.DeltaTable(str(emptied)).delete()
    sql = "SELECT count(*) AS n FROM t WHERE id = 3"
    _refused(lambda: pruner.query(sql, {"t": emptied}), "no rows")
    _refused(lambda: pruner.explain(sql, {"t": emptied}), "no rows")


def test_appending_plain_files_to_a_delta_table_is_refused(tmp_path: Path) -> None:
    """A Parquet file written into the folder is no row of the table: append through the
    format's writer instead."""
    path = tmp_path / "events"
    deltalake.write_deltalake(path, _rows(0, 10))
    _refused(lambda: pruner.append(path, _rows(10, 5)), "write_deltalake")
    assert deltalake.DeltaTable(str(path)).version() == 0
    assert len(list(path.glob("*.parquet"))) == 1


def _iceberg_refused(call: Any, where: Path) -> None:
    with pytest.raises(InvalidParameterError, match="an Iceberg table") as err:
        call()
    message = str(err.value)
    assert str(where) in message and "removed" in message, message


def test_a_folder_inside_a_table_is_refused(delta: Path, iceberg: Path) -> None:
    data = iceberg / "data"
    assert table_format(data) == ("iceberg", iceberg)
    _iceberg_refused(lambda: pruner.query("SELECT count(*) FROM t", {"t": data}), data)
    partition = delta / "day=1"
    partition.mkdir()
    try:
        pq.write_table(pa.table({"id": [1]}), partition / "part.parquet")
        with pytest.raises(InvalidParameterError, match=r"inside .*a Delta Lake table"):
            pruner.open_table(partition)
    finally:
        (partition / "part.parquet").unlink()
        partition.rmdir()


def test_the_cli_reads_a_delta_table_and_refuses_an_unhinted_iceberg_folder(
    delta: Path, iceberg: Path
) -> None:
    def run(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PRUNER, "query", "SELECT count(*) AS n FROM t", "--table", f"t={path}", *JSON],
            capture_output=True,
            text=True,
            timeout=120,
        )

    answered = run(delta)
    assert answered.returncode == 0, answered.stderr
    assert '"n": 150' in answered.stdout
    refused = run(iceberg)
    assert refused.returncode == 2 and "Iceberg table" in refused.stderr
    assert "version-hint.text" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""


def test_a_plain_directory_with_a_metadata_folder_is_still_parquet(tmp_path: Path) -> None:
    """A folder named metadata without Iceberg's metadata files, or a _delta_log file that
    is not a folder, does not make a table format."""
    root = tmp_path / "t"
    (root / "metadata").mkdir(parents=True)
    (root / "metadata" / "notes.json").write_text("{}")
    (root / "_delta_log").write_text("not a folder")
    pq.write_table(pa.table({"id": pa.array([1, 2, 2], pa.int64())}), root / "a.parquet")
    assert table_format(root) is None
    sql = "SELECT count(*) AS n FROM t WHERE id = 2"
    assert pruner.query(sql, {"t": root}).to_pylist() == [{"n": 2}]
    assert engine_alone("duckdb", sql, {"t": root}).to_pylist() == [{"n": 2}]


def test_datafusion_never_lists_a_delta_tables_folder(tmp_path: Path) -> None:
    """A Delta writer puts its data files in the folder before it commits them. DataFusion
    lists a registered folder when it runs the query, so a folder read as a listing would
    include a file no commit names yet; pruner reads a Delta table's files by name."""
    from pruner.adapters.datafusion import sql as datafusion_sql

    path = tmp_path / "events"
    deltalake.write_deltalake(path, _rows(0, 100))
    context = datafusion.SessionContext()
    frame = datafusion_sql(context, "SELECT count(*) AS n FROM t", {"t": path}, prune=False)
    pq.write_table(_rows(100, 50), path / "part-uncommitted.parquet")  # a writer mid-commit
    assert frame.to_arrow_table().to_pylist() == [{"n": 100}]
    assert _oracle(path, "SELECT count(*) AS n FROM t") == multiset(
        pa.table({"n": pa.array([100], pa.int64())})
    )


def test_a_delta_tables_own_bloom_filters_serve_as_zones(tmp_path: Path) -> None:
    """deltalake writes Parquet's own bloom filters where asked: with no pruner index, they
    rule out the files and row groups that cannot hold a key, and the answers are still
    Delta's own."""
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties

    bloom = ColumnProperties(bloom_filter_properties=BloomFilterProperties(True, 0.01, 300))
    properties = WriterProperties(column_properties={"id": bloom})
    path = tmp_path / "events"
    for start in range(0, 600, 200):
        deltalake.write_deltalake(
            path, _rows(start, 200), mode="append", writer_properties=properties
        )
    deltalake.DeltaTable(str(path)).delete("id >= 500")
    explained = pruner.explain("SELECT s FROM t WHERE id = 77", {"t": path})
    (scan,) = explained.scans
    assert scan.zones_selected < scan.zones_total
    assert "parquet bloom filter" in scan.terms[0].reason
    for sql in SQL:
        expected = _oracle(path, sql)
        for engine in ("duckdb", "datafusion"):
            assert multiset(pruner.query(sql, {"t": path}, engine=engine)) == expected, sql


def _between_commits() -> dt.datetime:
    """A time after the commits so far and before the next (clocks tick in milliseconds)."""
    time.sleep(0.05)
    when = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    return when


def test_a_table_opens_as_it_was_at_a_time(tmp_path: Path) -> None:
    """``asof`` (Lance's name) opens the version current at a time, on Lance and Delta, given
    as an aware datetime, a naive one (UTC) or ISO text; the CLI's --asof and --version say
    the same per table."""
    path = tmp_path / "events"
    dataset = tmp_path / "events.lance"
    deltalake.write_deltalake(path, _rows(0, 200))
    lance.write_dataset(_rows(0, 200), str(dataset))
    first = _between_commits()
    deltalake.write_deltalake(path, _rows(200, 100), mode="append")
    lance.write_dataset(_rows(200, 100), str(dataset), mode="append")
    count = "SELECT count(*) AS n FROM t"
    for source in (path, dataset):
        for when in (first, first.replace(tzinfo=None), first.isoformat()):
            opened = pruner.open_table(source, asof=when)
            assert pruner.query(count, {"t": opened}).to_pylist() == [{"n": 200}], (source, when)
        now = pruner.open_table(source, asof=dt.datetime.now(dt.UTC))
        assert pruner.query(count, {"t": now}).to_pylist() == [{"n": 300}]
    assert _oracle(path, count, 0) == multiset(pa.table({"n": pa.array([200], pa.int64())}))
    _refused(lambda: pruner.open_table(dataset, asof="2000-01-01T00:00:00"), "no version at")
    _refused(lambda: pruner.open_table(path, 0, asof=first), "not both")
    _refused(lambda: pruner.open_table(path, asof="yesterday"), "ISO 8601")
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(_rows(0, 10), plain / "a.parquet")
    _refused(lambda: pruner.open_table(plain, version=1), "has no versions")
    _refused(lambda: pruner.open_table(plain, asof=first), "has no versions")

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PRUNER, *arguments], capture_output=True, text=True, timeout=120, check=False
        )

    for at in (["--version", "t=0"], ["--asof", f"t={first.isoformat()}"]):
        answered = run("query", count, "--table", f"t={path}", *at, *JSON)
        assert answered.returncode == 0, answered.stderr
        assert '"n": 200' in answered.stdout, (at, answered.stdout)
    build_index(path, "id")
    for at, found in ((["--version", "0"], False), ([], True)):
        looked = run("lookup", str(path), "250", "--column", "id", *at)
        assert looked.returncode == 0, looked.stderr
        assert ("no rows" not in looked.stdout) is found, (at, looked.stdout)
    wrong = run("query", count, "--table", f"t={path}", "--version", "u=0")
    assert wrong.returncode == 2 and "no --table u=PATH" in wrong.stderr


SPARK_TABLES = Path(__file__).resolve().parents[1] / "data" / "delta"


DV_SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT value FROM t WHERE value IN (0, 1, 9, 10, 777)",
    "SELECT sum(value) AS s FROM t WHERE value = 9 OR value = 5 OR value = 2999",
    "SELECT count(*) AS n FROM t WHERE value < 20",
]


@pytest.mark.slow
def test_deletion_vectors_leave_their_rows_out_on_every_engine(tmp_path: Path, spark: Any) -> None:
    """Spark's table with a deletion vector (rows 0 and 9 of its file deleted;
    tests/data/delta/README.md), appended to by deltalake in row groups of 100: every
    engine, pruned or not, answers as deltalake's own reader (8 + 2,990 rows), never from
    the file's 10."""
    import shutil

    from deltalake import WriterProperties

    path = tmp_path / "dv"
    shutil.copytree(SPARK_TABLES / "table-with-dv-small", path)
    assert pq.read_table(_live(path)).num_rows == 10
    more = pa.table({"value": pa.array(range(10, 3000), pa.int32())})
    deltalake.write_deltalake(
        path, more, mode="append", writer_properties=WriterProperties(max_row_group_size=100)
    )
    build_index(path, "value", items=4)
    explained = pruner.explain(DV_SQL[1], {"t": path})
    assert explained.scans[0].selection.num_rows < explained.scans[0].rows_total
    for sql in DV_SQL:
        expected = _oracle(path, sql)
        for engine in ("duckdb", "datafusion", "spark"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": path}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)
    assert pruner.query(DV_SQL[0], {"t": path}).to_pylist() == [{"n": 2998}]


def test_deleted_rows_are_left_out_across_row_groups_and_files(tmp_path: Path) -> None:
    """The mechanism a deletion vector drives, on a table of several files of several row
    groups: rows set as deleted (as deltalake's vectors give them: positions in a file) are
    left out of the view DuckDB reads, of the rows read ahead, of DataFusion's reads,
    pruned or not; judged by DuckDB alone over the files with those rows removed. A range
    of deleted rows (three row groups' worth, two of them whole) reaches DuckDB as the spans
    of rows kept, not as a list of every deleted row."""
    root = tmp_path / "t"
    root.mkdir()
    gone = {
        "a.parquet": [0, 99, 100, 250, 499],
        "b.parquet": list(range(120, 400)),
        "c.parquet": [7],
    }
    kept = []
    for number, name in enumerate(("a.parquet", "b.parquet", "c.parquet")):
        ids = pa.array(range(number * 500, number * 500 + 500), pa.int64())
        rows = pa.table({"id": ids, "s": pa.array([f"s{i}" for i in ids.to_pylist()])})
        pq.write_table(rows, root / name, row_group_size=100)
        keep = [i not in gone.get(name, []) for i in range(500)]
        kept.append(rows.filter(pa.array(keep)))
    build_index(root, "id", items=8)
    for file in root.rglob("*"):  # older than a racy file, which a held Table reopens
        if file.is_file():
            os.utime(file, (time.time() - 60, time.time() - 60))
    truth = duckdb.connect()
    truth.register("rows", pa.concat_tables(kept))
    import numpy as np

    for sql in [
        "SELECT count(*) AS n FROM t",
        "SELECT s FROM t WHERE id IN (0, 1, 99, 100, 101, 250, 499, 500, 1007, 1008)",
        "SELECT id FROM t WHERE id = 250 OR id = 251",
        "SELECT id FROM t WHERE id IN (619, 620, 700, 899, 900)",
    ]:
        expected = multiset(truth.sql(sql.replace("FROM t", "FROM rows")).arrow().read_all())
        for engine in ("duckdb", "datafusion"):
            for prune in (True, False):
                table = pruner.open_table(root)
                table.deleted = {n: np.array(rows, np.int64) for n, rows in gone.items()}
                got = multiset(pruner.query(sql, {"t": table}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)
    table = pruner.open_table(root)
    table.deleted = {n: np.array(rows, np.int64) for n, rows in gone.items()}
    view = parquet_view_sql(table, table.whole())
    assert "BETWEEN 400 AND 499" in view and "399" not in view and len(view) < 3000
