"""Lance datasets and Parquet directories on Azure Blob Storage (``az://``, Azurite on
127.0.0.1: tests/support/azure.py): built there, queried there by DuckDB and DataFusion, and
judged by the engines alone over the same blobs (DuckDB through obstore's fsspec file
system, DataFusion through its own ``MicrosoftAzure`` store, Lance's own scanner).

Azure differs from S3 where pruner leans on the store: it has no suffix range (a footer's
read needs the blob's size first), and DataFusion's store takes its endpoint from the
environment only."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import pruner
from pruner import storage
from tests.store.test_store_tables import (
    GROUP,
    QUERIES,
    _data,
    _duckdb_alone,
    _parquet_dir,
    _upload_file,
)
from tests.support.azure import ACCOUNT, KEY, AzuriteServer
from tests.support.engine_check import multiset
from tests.support.s3 import environment


def _datafusion_alone(azurite: AzuriteServer, sql: str, uri: str) -> pa.Table:
    """DataFusion alone, as its users reach Azure: ``MicrosoftAzure`` with the account and
    key, the endpoint in ``AZURE_STORAGE_ENDPOINT``."""
    import datafusion
    from datafusion.object_store import MicrosoftAzure

    container = uri.removeprefix("az://").split("/", 1)[0]
    with environment(azurite.environment()):
        context = datafusion.SessionContext()
        store = MicrosoftAzure(container, account=ACCOUNT, access_key=KEY, allow_http=True)
        context.register_object_store("az://", store, container)
        context.register_parquet("t", uri + "/")
        return context.sql(sql).to_arrow_table()


@pytest.fixture(scope="module")
def parquet_table(
    azurite: AzuriteServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, storage.ObjectPath]]:
    """A Parquet directory on Azure, indexed there on ``id`` and ``name``."""
    local = _parquet_dir(tmp_path_factory.mktemp("parquet"), _data())
    uri = f"az://{azurite.new_bucket()}/lake/t"
    azurite.upload(local, uri)
    location = storage.location(uri, azurite.options)
    assert isinstance(location, storage.ObjectPath)
    pruner.build_index(location, "id")
    pruner.build_index(location, "name")
    yield uri, location


def test_a_tail_is_read_without_a_suffix_range(azurite: AzuriteServer, tmp_path: Path) -> None:
    """Azure answers no ``bytes=-N``: the tail is read from the size, stated by a HEAD or a
    listing; a blob replaced after the listing is stated again, never read as the old one."""
    uri = f"az://{azurite.new_bucket()}/d"
    first, second = np.random.default_rng(1).bytes(300_000), b"x" * 90_000
    (tmp_path / "blob").write_bytes(first)
    azurite.upload(tmp_path / "blob", uri + "/blob")
    path = storage.location(uri + "/blob", azurite.options)
    tail, stat = storage.read_tail(path, 65_536)
    assert tail == first[-65_536:] and stat.size == len(first) and stat.etag
    folder = storage.location(uri, azurite.options)
    assert isinstance(folder, storage.ObjectPath)
    listed = storage.listing(folder)
    (tmp_path / "blob").write_bytes(second)
    azurite.upload(tmp_path / "blob", uri + "/blob")  # replaced after the listing
    with storage.listed(listed):
        tail, stat = storage.read_tail(path, 65_536)
    assert tail == second[-65_536:] and stat.size == len(second)


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_parquet_on_azure_answers_as_the_engines_alone(
    parquet_table: tuple[str, storage.ObjectPath], azurite: AzuriteServer, engine: str, sql: str
) -> None:
    uri, location = parquet_table
    alone = multiset(_duckdb_alone(azurite, sql, uri))
    assert multiset(_datafusion_alone(azurite, sql, uri)) == alone, "the two judges agree"
    with environment(azurite.environment()):
        answer = pruner.query(sql, {"t": location}, engine=engine)
    assert multiset(answer) == alone


def test_parquet_on_azure_on_spark(
    parquet_table: tuple[str, storage.ObjectPath], azurite: AzuriteServer, spark: Any
) -> None:
    """Spark reads no az:// offline (hadoop-azure is not in pyspark): pruner's data source
    reads the blobs for it, each task through pruner's storage layer."""
    uri, location = parquet_table
    for sql in QUERIES:
        alone = multiset(_duckdb_alone(azurite, sql, uri))
        assert multiset(pruner.query(sql, {"t": location}, engine="spark")) == alone, sql


def test_the_index_lives_on_azure_and_prunes(
    parquet_table: tuple[str, storage.ObjectPath], azurite: AzuriteServer
) -> None:
    uri, location = parquet_table
    names = azurite.keys(uri)
    assert "_pruner/id/bloomfilter.lance" in names and "_pruner/@footers.arrow" in names
    selection = pruner.explain("SELECT * FROM t WHERE id = 1234", {"t": location}).selections()
    table = pruner.open_table(location)
    assert selection["t"].num_rows <= GROUP < table.whole().num_rows


def test_datafusion_is_refused_an_endpoint_it_cannot_be_given(
    azurite: AzuriteServer, tmp_path: Path
) -> None:
    """Without ``AZURE_STORAGE_ENDPOINT``, DataFusion's store would go to the account's
    public endpoint, not the one in the options: refused, saying what to do."""
    uri = f"az://{azurite.new_bucket()}/t"
    azurite.upload(_parquet_dir(tmp_path / "t", _data(5, 2_000), 2), uri)
    location = storage.location(uri, azurite.options)
    with pytest.raises(pruner.PrunerError, match="AZURE_STORAGE_ENDPOINT"):
        pruner.query("SELECT count(*) FROM t", {"t": location}, engine="datafusion")
    with environment(azurite.environment()):
        answer = pruner.query("SELECT count(*) AS n FROM t", {"t": location}, engine="datafusion")
    assert answer.to_pylist() == [{"n": 2_000}]


def test_a_replaced_added_or_removed_blob_is_never_answered_from_old_zones(
    azurite: AzuriteServer, tmp_path: Path
) -> None:
    uri = f"az://{azurite.new_bucket()}/t"
    rows, files = 8_000, 4
    azurite.upload(_parquet_dir(tmp_path / "t", _data(1, rows), files), uri)
    location = storage.location(uri, azurite.options)
    pruner.build_index(location, "id")
    held = pruner.open_table(location)
    probe = "SELECT id, v FROM t WHERE id IN (3, 11, 5000, 77777, 88888, 99999)"

    def check(what: str) -> None:
        alone = multiset(_duckdb_alone(azurite, probe, uri))
        assert multiset(pruner.query(probe, {"t": location})) == alone, f"{what}: opened again"
        assert multiset(pruner.query(probe, {"t": held})) == alone, f"{what}: held table"
        with environment(azurite.environment()):
            frame = pruner.query(probe, {"t": location}, engine="datafusion")
        assert multiset(frame) == alone, f"{what}: DataFusion"

    check("as built")
    per = rows // files
    # the same name and number of rows, other keys: only the ETag tells
    replacement = _data(2, per).set_column(0, "id", pa.array(np.arange(per) + 77_000))
    _upload_file(azurite, replacement, uri + "/part-1.parquet", tmp_path)
    check("part-1 replaced")
    extra = _data(3, 500).set_column(0, "id", pa.array(np.arange(500, dtype=np.int64) + 88_000))
    _upload_file(azurite, extra, uri + "/part-9.parquet", tmp_path)
    check("part-9 added")
    container = uri.removeprefix("az://").split("/")[0]
    azurite.client().get_container_client(container).delete_blob("t/part-0.parquet")
    check("part-0 removed")


def test_lance_on_azure(azurite: AzuriteServer) -> None:
    """A Lance dataset written to Azure: pruner's index is committed there, Lance uses it,
    and pruner's answers equal DuckDB alone over lance.dataset(uri)."""
    import duckdb
    import lance

    uri = f"az://{azurite.new_bucket()}/ds.lance"
    options = azurite.options
    lance.write_dataset(_data(6), uri, max_rows_per_file=10_000, storage_options=options)
    location = storage.location(uri, options)
    pruner.build_index(location, "id")
    dataset = lance.dataset(uri, storage_options=options)
    assert [i["type"] for i in dataset.list_indices()] == ["BloomFilter"]
    assert dataset.to_table(filter="id = 1234").num_rows == 1, "Lance's scanner on our index"
    for sql in QUERIES:
        con = duckdb.connect()
        con.register("t", lance.dataset(uri, storage_options=options))
        alone = multiset(con.sql(sql).to_arrow_table())
        for engine in ("duckdb", "datafusion"):
            answer = multiset(pruner.query(sql, {"t": location}, engine=engine))
            assert answer == alone, f"{engine}: {sql}"


def test_two_builds_at_once_on_azure_leave_one_whole_index(
    azurite: AzuriteServer, tmp_path: Path
) -> None:
    """Azure's conditional writes (If-None-Match, If-Match on the ETag): two builds of one
    index at once each finish or are told another writer won, and the index left answers."""
    uri = f"az://{azurite.new_bucket()}/t"
    azurite.upload(_parquet_dir(tmp_path / "t", _data(9, 8_000)), uri)
    location = storage.location(uri, azurite.options)
    outcomes: list[object] = []

    def build() -> None:
        try:
            pruner.build_index(location, "id")
            outcomes.append("built")
        except storage.ChangedUnderneath as err:
            outcomes.append(err)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "built" in outcomes, outcomes
    sql = "SELECT id, v FROM t WHERE id IN (4, 4000, 7999)"
    alone = multiset(_duckdb_alone(azurite, sql, uri))
    assert multiset(pruner.query(sql, {"t": location})) == alone
    assert pruner.explain(sql, {"t": location}).selections()["t"].num_rows < 8_000
