"""Every entry point reads a table on an object store as it reads a local one (issue 43,
"URIs everywhere").

A Parquet directory is written locally and uploaded to moto's S3 server; then each Python
entry point (``query``, ``explain``, ``find``, ``upsert_plan``, ``lookup``,
``index_status``, ``append``) and each ``pruner`` command takes its ``s3://`` URI, with
Lance-style ``storage_options`` (``--storage-option KEY=VALUE``) or only the standard
``AWS_*`` environment variables. The answers are checked against DuckDB alone over the same
objects, read through obstore's fsspec file system: no pruner code between the store and
the oracle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import storage
from pruner.cli import main
from tests.support.s3 import S3Server, duckdb_over_store, environment

FILES = 4
ROWS_PER_FILE = 1000
ITEMS = 250  # rows per zone: 4 zones per file
KEYS = [5, 1500, 3999, 10**9]  # three in three different files, one in none
WHERE = "id IN (5, 1500, 3999, 1000000000)"
SQL = f"SELECT * FROM t WHERE {WHERE}"


def write_parquet_directory(folder: Path) -> Path:
    """``FILES`` Parquet files of ``ROWS_PER_FILE`` rows each: an int64 ``id`` (file ``i``
    holds ``i*1000 .. i*1000+999``, shuffled) and a string ``s``."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(43)
    for i in range(FILES):
        ids = rng.permutation(np.arange(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
        rows = pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{n}" for n in ids]})
        pq.write_table(rows, folder / f"part-{i}.parquet")
    return folder


def storage_arguments(options: Mapping[str, str]) -> list[str]:
    """``options`` as the ``pruner`` command takes them."""
    return [part for k, v in options.items() for part in ("--storage-option", f"{k}={v}")]


def duckdb_alone(options: Mapping[str, str], uri: str, where: str) -> list[dict[str, Any]]:
    """The rows of the Parquet files under ``uri`` that satisfy ``where``, by id, as DuckDB
    alone reads them: the store registered as obstore's fsspec file system.

    The files are listed by that file system and named to ``read_parquet``: DuckDB's own
    glob of ``s3://.../*.parquet`` asks the file system's ``glob`` with the scheme, to which
    obstore's answers nothing (it globs ``bucket/key/*.parquet``).
    """
    from obstore.fsspec import FsspecStore

    config = {k: v for k, v in options.items() if k != "allow_http"}
    filesystem = FsspecStore("s3", config=config, client_options={"allow_http": True})
    files = sorted(filesystem.glob(uri.removeprefix("s3://") + "/*.parquet"))
    assert files, f"the oracle finds the files under {uri}"
    uris = [f"s3://{name}" for name in files]
    return sorted_rows(duckdb_over_store(dict(options), uris, f"SELECT * FROM t WHERE {where}"))


def sorted_rows(rows: pa.Table | Any) -> list[dict[str, Any]]:
    table = rows if isinstance(rows, pa.Table) else rows.read_all()
    return sorted(table.to_pylist(), key=lambda row: row["id"])


@pytest.fixture
def table_uri(s3: S3Server, bucket: str, tmp_path: Path) -> str:
    """The URI of a Parquet directory on the store (no index yet)."""
    uri = f"{bucket}/lake/events"
    s3.upload(write_parquet_directory(tmp_path / "events"), uri)
    return uri


def test_python_entry_points_answer_as_duckdb_alone(s3: S3Server, table_uri: str) -> None:
    options = s3.options
    expected = duckdb_alone(options, table_uri, WHERE)
    assert [row["id"] for row in expected] == [5, 1500, 3999], "the oracle reads the store"
    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=options)
    assert "_pruner/id/bloomfilter.lance" in s3.keys(table_uri), "the index is on the store"

    got = pruner.query(SQL, {"t": table_uri}, storage_options=options)
    assert sorted_rows(got) == expected, "query over a URI answers as DuckDB alone"
    unpruned = pruner.query(SQL, {"t": table_uri}, prune=False, storage_options=options)
    assert sorted_rows(unpruned) == expected, "an unpruned query reads the same store"

    explanation = pruner.explain(SQL, {"t": table_uri}, storage_options=options)
    (scan,) = explanation.scans
    assert scan.zones_total == FILES * ROWS_PER_FILE // ITEMS, "explain sees every zone"
    assert 3 <= scan.zones_selected < scan.zones_total, (
        f"explain over a URI prunes with the stored index: {explanation}"
    )

    found = pruner.lookup(table_uri, "id", KEYS, storage_options=options)
    for position, key in enumerate(KEYS[:3]):
        fragments = {fragment for fragment, _, _ in found.ranges(position)}
        assert key // ROWS_PER_FILE in fragments, f"lookup of {key} names the file holding it"

    rows = pruner.find(table_uri, "id", KEYS, storage_options=options)
    assert sorted_rows(rows) == expected, "find over a URI answers as DuckDB alone"

    records = pa.table({"id": pa.array([1500, 777_777], pa.int64())})
    plan = pruner.upsert_plan(table_uri, "id", records, storage_options=options)
    assert plan.updates.column("id").to_pylist() == [1500], "1500 is held: an update"
    assert plan.inserts.column("id").to_pylist() == [777_777], "777777 is new: an insert"
    assert 1 in plan.fragments, "the updated key's file is among those to rewrite"

    (row,) = pruner.index_status(table_uri, storage_options=options)
    assert row["column"] == "id" and row["zones"] == scan.zones_total, (
        f"index_status over a URI finds the stored index: {row}"
    )


def test_datafusion_answers_as_duckdb_alone(
    s3: S3Server, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine is the caller's choice; the URI and its options reach DataFusion's own
    object store."""
    options = s3.options
    expected = duckdb_alone(options, table_uri, WHERE)
    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=options)
    got = pruner.query(SQL, {"t": table_uri}, engine="datafusion", storage_options=options)
    assert sorted_rows(got) == expected, "DataFusion over a URI answers as DuckDB alone"
    found = pruner.find(table_uri, "id", KEYS, engine="datafusion", storage_options=options)
    assert sorted_rows(found) == expected, "find on DataFusion over a URI"
    explained = pruner.explain(SQL, {"t": table_uri}, dialect="datafusion", storage_options=options)
    assert explained.scans[0].zones_selected < 16, "explain in DataFusion's dialect prunes"
    query = ["query", SQL, "--table", f"t={table_uri}", "--format", "json"]
    assert main([*query, "--engine", "datafusion", *storage_arguments(options)]) == 0, (
        capsys.readouterr().err
    )
    printed = json.loads(capsys.readouterr().out)
    assert sorted_rows(pa.Table.from_pylist(printed)) == expected, (
        "pruner query --engine datafusion"
    )


def test_the_pruner_command_answers_as_duckdb_alone(
    s3: S3Server, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = storage_arguments(s3.options)
    expected = duckdb_alone(s3.options, table_uri, WHERE)
    build = ["index", "build", table_uri, "--column", "id", "--items", str(ITEMS)]
    assert main([*build, *store]) == 0, capsys.readouterr().err
    assert "id: 16 zones over 4 fragments" in capsys.readouterr().out, "built on the store"

    query = ["query", SQL, "--table", f"t={table_uri}", "--format", "json"]
    assert main([*query, *store]) == 0, capsys.readouterr().err
    shown = capsys.readouterr()
    assert sorted_rows(pa.Table.from_pylist(json.loads(shown.out))) == expected, (
        "pruner query over a URI prints what DuckDB alone answers"
    )
    assert "zones scanned" in shown.err and "/ 16" in shown.err, shown.err

    explain = ["explain", SQL, "--table", f"t={table_uri}", *store]
    assert main([*explain, "--json"]) == 0, capsys.readouterr().err
    (scan,) = json.loads(capsys.readouterr().out)["scans"]
    assert scan["zones_total"] == 16 and 3 <= scan["zones_selected"] < 16, (
        f"pruner explain over a URI prunes with the stored index: {scan}"
    )
    assert main(explain) == 0, capsys.readouterr().err
    assert "id IN" in capsys.readouterr().out, "explain's text names the term"

    lookup = ["lookup", table_uri, *map(str, KEYS), "--column", "id", "--json", *store]
    assert main(lookup) == 0, capsys.readouterr().err
    listed = json.loads(capsys.readouterr().out)
    for entry, key in zip(listed[:3], KEYS, strict=False):
        fragments = {fragment for fragment, _, _ in entry["ranges"]}
        assert key // ROWS_PER_FILE in fragments, f"pruner lookup {key} names its file: {entry}"

    assert main(["index", "list", table_uri, "--json", *store]) == 0, capsys.readouterr().err
    (row,) = json.loads(capsys.readouterr().out)
    assert row["column"] == "id" and row["zones"] == 16, f"index list over a URI: {row}"


def test_aws_environment_variables_need_no_storage_options(
    s3: S3Server, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Endpoint, region, keys and ``allow_http`` from ``AWS_*`` alone: build, query,
    explain, find, lookup and list with no storage option at all."""
    expected = duckdb_alone(s3.options, table_uri, WHERE)
    with environment(s3.environment()):
        build = ["index", "build", table_uri, "--column", "id", "--items", str(ITEMS)]
        assert main(build) == 0, capsys.readouterr().err
        assert "16 zones" in capsys.readouterr().out, "built on the store"
        query = ["query", SQL, "--table", f"t={table_uri}", "--format", "json"]
        assert main(query) == 0, capsys.readouterr().err
        printed = json.loads(capsys.readouterr().out)
        assert sorted_rows(pa.Table.from_pylist(printed)) == expected, (
            "pruner query reaches the store from AWS_*"
        )
        assert sorted_rows(pruner.query(SQL, {"t": table_uri})) == expected, (
            "pruner.query reaches the store from AWS_*"
        )
        assert sorted_rows(pruner.find(table_uri, "id", KEYS)) == expected, (
            "pruner.find reaches the store from AWS_*"
        )
        explanation = pruner.explain(SQL, {"t": table_uri})
        assert explanation.scans[0].zones_selected < 16, "explain uses the index from AWS_*"
        found = pruner.lookup(table_uri, "id", KEYS)
        assert 0 in {fragment for fragment, _, _ in found.ranges(0)}, "lookup from AWS_*"
        status = pruner.index_status(table_uri)
        assert [row["column"] for row in status] == ["id"], "index_status from AWS_*"
        assert main(["index", "list", table_uri, "--json"]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)[0]["state"] == "current", "index list"


def test_an_object_path_and_a_table_pass_through(s3: S3Server, table_uri: str) -> None:
    """A source already located (an ObjectPath with its options, an opened Table) is taken
    as it is: no storage_options are needed again."""
    where = storage.location(table_uri, s3.options)
    pruner.build_index(where, "id", items=ITEMS)
    expected = duckdb_alone(s3.options, table_uri, WHERE)
    assert sorted_rows(pruner.query(SQL, {"t": where})) == expected, "an ObjectPath"
    table = pruner.open_table(table_uri, storage_options=s3.options)
    assert sorted_rows(pruner.find(table, "id", KEYS)) == expected, "an opened Table"
    assert pruner.index_status(table)[0]["column"] == "id", "an opened Table's indexes"


def test_index_state_and_update_on_the_store(
    s3: S3Server, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = storage_arguments(s3.options)
    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=s3.options)
    (row,) = pruner.index_status(table_uri, storage_options=s3.options)
    assert row["state"] == "current", f"a fresh index on the store is current: {row}"
    assert main(["index", "update", table_uri, "--column", "id", *store]) == 0, (
        capsys.readouterr().err
    )
    assert "already current" in capsys.readouterr().out, "nothing to update"


def test_append_to_a_parquet_directory_on_the_store(s3: S3Server, table_uri: str) -> None:
    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=s3.options)
    rows = pa.table({"id": pa.array([50_000], pa.int64()), "s": ["new"]})
    plans = pruner.append(table_uri, rows, storage_options=s3.options)
    assert set(plans) == {"id"}, "the index was updated after the append"
    where = "id = 50000"
    got = pruner.query(
        f"SELECT * FROM t WHERE {where}", {"t": table_uri}, storage_options=s3.options
    )
    assert sorted_rows(got) == duckdb_alone(s3.options, table_uri, where), "the new row is read"


def test_write_to_a_parquet_directory_on_the_store(
    s3: S3Server, table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = storage_arguments(s3.options)
    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=s3.options)
    new = tmp_path / "new.parquet"
    pq.write_table(pa.table({"id": pa.array([50_000], pa.int64()), "s": ["new"]}), new)
    assert main(["write", table_uri, str(new), *store]) == 0, capsys.readouterr().err
    assert "appended 1 rows" in capsys.readouterr().out
    rows = duckdb_alone(s3.options, table_uri, "id = 50000")
    assert [row["id"] for row in rows] == [50_000], "the new file is on the store"


def test_uris_skip_the_local_existence_check(
    s3: S3Server, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URI is not looked up as a local path (the store says whether it is there); a
    ``file://`` URI is a local path, checked as one; an unknown scheme is refused."""
    store = storage_arguments(s3.options)
    assert main(["index", "list", f"{bucket}/absent", *store]) == 2
    error = capsys.readouterr().err
    assert f"{bucket}/absent" in error and "Traceback" not in error, (
        f"the store's answer about a missing table is one clear line: {error}"
    )

    local = write_parquet_directory(tmp_path / "local")
    build = ["index", "build", f"file://{local}", "--column", "id", "--items", str(ITEMS)]
    assert main(build) == 0, capsys.readouterr().err
    assert (local / "_pruner" / "id" / "bloomfilter.lance").exists(), "file:// is local"
    assert main(["index", "list", f"file://{tmp_path}/nope"]) == 2
    assert "does not exist" in capsys.readouterr().err, "a missing file:// path is named"
    assert main(["index", "list", "http://example.com/t"]) == 2
    assert "not http://" in capsys.readouterr().err, "an unknown scheme is refused clearly"
    query = ["query", "SELECT 1 FROM t", "--table", f"t={tmp_path}/nope"]
    assert main(query) == 2
    assert "does not exist" in capsys.readouterr().err, "a missing --table path is named"


def test_a_malformed_storage_option_is_a_usage_error(
    table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (
        ["index", "list", table_uri],
        ["query", "SELECT 1 FROM t", "--table", f"t={table_uri}"],
    ):
        with pytest.raises(SystemExit) as exited:
            main([*command, "--storage-option", "aws_region"])
        assert exited.value.code == 2, "argparse's usage error"
        error = capsys.readouterr().err
        assert "--storage-option" in error and "KEY=VALUE" in error, error


def test_lance_dataset_on_the_store(s3: S3Server, bucket: str) -> None:
    import lance

    uri = f"{bucket}/lake/events.lance"
    ids = np.random.default_rng(1).permutation(4000).astype(np.int64)
    lance.write_dataset(
        pa.table({"id": ids, "s": [f"v{n}" for n in ids]}),
        uri,
        max_rows_per_file=1000,
        storage_options=s3.options,
    )
    pruner.build_index(uri, "id", items=ITEMS, storage_options=s3.options)
    expected = sorted_rows(lance.dataset(uri, storage_options=s3.options).to_table(filter=WHERE))
    got = pruner.query(SQL, {"t": uri}, storage_options=s3.options)
    assert sorted_rows(got) == expected, "a Lance dataset on the store answers as Lance alone"
    assert sorted_rows(pruner.find(uri, "id", KEYS, storage_options=s3.options)) == expected
