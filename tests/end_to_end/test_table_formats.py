"""Delta Lake and Iceberg tables are never read as plain directories of Parquet files.

A table format's log (Delta's ``_delta_log/``, Iceberg's ``metadata/*.metadata.json``) names
which of its files are live; after an overwrite, a delete or a compaction the removed files
stay on disk until a vacuum. Read as a directory, a Delta table overwritten with 150 rows
counted 450 (every file ever written). Until pruner reads these formats, every entry point
refuses them with an error that says what the directory is and what to do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.discover import table_format
from pruner.errors import InvalidParameterError
from pruner.index import build_index
from tests.support.engine_check import engine_alone

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")


@pytest.fixture(scope="module")
def delta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 rows appended to by 100, then overwritten with 150: 450 rows of Parquet on disk,
    150 in the table."""
    path = tmp_path_factory.mktemp("delta") / "events"
    ids = pa.array(range(200), pa.int64())
    deltalake.write_deltalake(path, pa.table({"id": ids}))
    deltalake.write_deltalake(path, pa.table({"id": ids.slice(0, 100)}), mode="append")
    deltalake.write_deltalake(path, pa.table({"id": ids.slice(50, 150)}), mode="overwrite")
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


def test_a_plain_read_of_these_tables_is_wrong(delta: Path, iceberg: Path) -> None:
    """Why the refusal exists: the engine alone over every file answers from removed rows."""
    live = deltalake.DeltaTable(str(delta)).file_uris()
    assert len(live) < len(list(delta.glob("*.parquet")))
    assert pq.read_table(live).num_rows == 150
    assert pq.read_table(sorted(delta.glob("*.parquet"))).num_rows == 450
    assert pq.read_table(sorted((iceberg / "data").glob("*.parquet"))).num_rows == 60


def _refused(call: object, where: Path, kind: str) -> None:
    assert callable(call)
    with pytest.raises(InvalidParameterError, match=f"{kind} table") as err:
        call()
    message = str(err.value)
    assert str(where) in message and "removed" in message, message


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_every_python_entry_point_refuses_the_table(delta: Path, iceberg: Path, fmt: str) -> None:
    root = delta if fmt == "delta" else iceberg
    kind = "a Delta Lake" if fmt == "delta" else "an Iceberg"
    sql = "SELECT count(*) AS n FROM t WHERE id = 7"
    for engine in ("duckdb", "datafusion"):
        _refused(lambda e=engine: pruner.query(sql, {"t": root}, engine=e), root, kind)
    _refused(lambda: pruner.query(sql, {"t": root}, prune=False), root, kind)
    _refused(lambda: pruner.explain(sql, {"t": root}), root, kind)
    _refused(lambda: build_index(root, "id"), root, kind)
    _refused(lambda: pruner.lookup(root, "id", [7]), root, kind)
    _refused(lambda: pruner.append(root, pa.table({"id": [1]})), root, kind)
    _refused(lambda: pruner.open_table(root), root, kind)


def test_a_folder_inside_the_table_is_refused_too(delta: Path, iceberg: Path) -> None:
    data = iceberg / "data"
    assert table_format(data) == ("iceberg", iceberg)
    _refused(lambda: pruner.query("SELECT count(*) FROM t", {"t": data}), data, "an Iceberg")
    partition = delta / "day=1"
    partition.mkdir()
    try:
        pq.write_table(pa.table({"id": [1]}), partition / "part.parquet")
        _refused(lambda: pruner.open_table(partition), partition, "a Delta Lake")
    finally:
        (partition / "part.parquet").unlink()
        partition.rmdir()


def test_the_cli_refuses_with_status_2(delta: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pruner.cli",
            "query",
            "SELECT count(*) FROM t",
            "--table",
            f"t={delta}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Delta Lake table" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


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
