"""Lance datasets and Parquet directories on a real S3 server (moto's, on 127.0.0.1): built
there, queried there by the three engines, and judged by the engines alone over the same
objects (DuckDB through obstore's fsspec file system, DataFusion through its own object
store, Lance's own scanner), never by pruner's own unpruned path alone."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import discover, storage
from pruner.index import update_index
from pruner.index.hierarchy import read as hierarchy_read
from pruner.index.hierarchy import units as hierarchy_units
from tests.support.azure import AzuriteServer
from tests.support.engine_check import multiset
from tests.support.s3 import S3Server, duckdb_over_store

ROWS, FILES, GROUP = 40_000, 4, 2_000


def _data(seed: int = 0, rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64)
    names = pa.array([f"user-{i}" if i % 97 else None for i in ids])
    return pa.table({"id": ids, "name": names, "v": np.arange(rows, dtype=np.int64)})


def _parquet_dir(local: Path, table: pa.Table, files: int = FILES) -> Path:
    local.mkdir(parents=True, exist_ok=True)
    per = table.num_rows // files
    for i in range(files):
        pq.write_table(table.slice(i * per, per), local / f"part-{i}.parquet", row_group_size=GROUP)
    return local


def _duckdb_alone(s3: S3Server | AzuriteServer, sql: str, uri: str) -> pa.Table:
    """DuckDB alone over the Parquet objects under ``uri`` (on S3 or Azure): obstore's fsspec
    file system registered, as a DuckDB user without httpfs reads a store. The files are listed, not
    globbed: obstore 0.12's fsspec ``glob`` finds nothing for a pattern with its
    ``s3://`` (DuckDB hands it the pattern as written)."""
    files = [
        f"{uri}/{key}"
        for key in s3.keys(uri)
        if key.endswith(".parquet") and not key.startswith(("_", "."))
    ]
    return duckdb_over_store(s3.options, files, sql)


def _datafusion_alone(s3: S3Server, sql: str, uri: str) -> pa.Table:
    import datafusion
    from datafusion.object_store import AmazonS3

    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    context = datafusion.SessionContext()
    store = AmazonS3(
        bucket_name=bucket,
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing",
        endpoint=s3.endpoint,
        allow_http=True,
    )
    context.register_object_store("s3://", store, bucket)
    context.register_parquet("t", uri + "/")
    return context.sql(sql).to_arrow_table()


QUERIES = [
    "SELECT * FROM t WHERE id = 1234",
    "SELECT * FROM t WHERE id IN (7, 19999, 39999, 123456)",
    "SELECT count(*) AS n FROM t WHERE id = 987654",
    "SELECT count(*) AS n FROM t WHERE name IS NULL",
    "SELECT count(*) AS n, sum(v) AS s FROM t",
    "SELECT id, v FROM t WHERE id = 5 OR name = 'user-77'",
]


@pytest.fixture(scope="module")
def parquet_table(
    s3: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[storage.ObjectPath]:
    """A Parquet directory on the store, indexed there on ``id`` and ``name``."""
    local = _parquet_dir(tmp_path_factory.mktemp("parquet"), _data())
    uri = f"s3://{s3.new_bucket()}/lake/t"
    s3.upload(local, uri)
    location = storage.location(uri, s3.options)
    assert isinstance(location, storage.ObjectPath)
    pruner.build_index(location, "id")
    pruner.build_index(location, "name")
    yield location


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_parquet_on_the_store_answers_as_the_engines_alone(
    s3: S3Server, parquet_table: storage.ObjectPath, engine: str, sql: str
) -> None:
    uri = str(parquet_table)
    alone = multiset(_duckdb_alone(s3, sql, uri))
    assert multiset(_datafusion_alone(s3, sql, uri)) == alone, "the two judges agree"
    pruned = pruner.query(sql, {"t": parquet_table}, engine=engine)
    assert multiset(pruned) == alone, f"{engine} through pruner, pruned"
    whole = pruner.query(sql, {"t": parquet_table}, engine=engine, prune=False)
    assert multiset(whole) == alone, f"{engine} through pruner, unpruned"


def test_parquet_on_the_store_on_spark(
    s3: S3Server, parquet_table: storage.ObjectPath, spark: Any
) -> None:
    """Spark cannot read s3a:// offline: pruner's data source reads the store for it."""
    for sql in QUERIES:
        alone = multiset(_duckdb_alone(s3, sql, str(parquet_table)))
        assert multiset(pruner.query(sql, {"t": parquet_table}, engine="spark")) == alone, sql


def test_the_index_lives_on_the_store_and_prunes(
    s3: S3Server, parquet_table: storage.ObjectPath
) -> None:
    keys = s3.keys(str(parquet_table))
    assert "_pruner/id/bloomfilter.lance" in keys and "_pruner/id/bloomfilter.hierarchy" in keys
    assert not any(key.endswith(".tmp") for key in keys), "no temporary file reaches the store"
    explanation = pruner.explain("SELECT * FROM t WHERE id = 1234", {"t": parquet_table})
    selection = explanation.selections()["t"]
    assert selection.num_rows <= 2 * GROUP, "one key is in one zone (or two, by chance)"


def test_an_absent_key_reads_no_data_object(
    s3: S3Server, parquet_table: storage.ObjectPath
) -> None:
    before = storage.requests.snapshot()
    table = pruner.open_table(parquet_table)
    result = pruner.query("SELECT * FROM t WHERE id = -5", {"t": table})
    count, read = (a - b for a, b in zip(storage.requests.snapshot(), before, strict=True))
    assert result.num_rows == 0
    data_bytes = sum(f.identity.size for f in (table.files or {}).values())
    footers = 16 * 1024 * len(table.files or {})
    # the heads of both companions (id and name: opening reads them ahead, not knowing the
    # query) and the key's units; no data object
    heads = 2 * 128 * 1024
    assert read - footers - heads <= 64 * 1024, f"{read} B read cold (data {data_bytes})"
    assert read < data_bytes
    # opening: a LIST beside Lance's attempt to open a dataset there, the parent folders'
    # table-format checks (3), a footer per file, and both companions' heads and their
    # index files' fingerprints read ahead (4); the query: a LIST (files as opened?), then
    # the companion's three levels' units for the key with their checksums, side by side in
    # one round trip (up to 6 requests)
    files = len(table.files or {})
    assert count <= 2 + 3 + files + 4 + 1 + 6, f"{count} requests for an absent key, cold"
    # a second probe of the held table: its companion is read whole in the background
    assert pruner.query("SELECT * FROM t WHERE id = -7", {"t": table}).num_rows == 0
    hierarchy_read._WARMERS.submit(lambda: None).result()
    before = storage.requests.snapshot()
    result = pruner.query("SELECT * FROM t WHERE id = -9", {"t": table})
    count, read = (a - b for a, b in zip(storage.requests.snapshot(), before, strict=True))
    # warm: one LIST (are the files as opened?); the companion is probed in memory
    assert result.num_rows == 0 and count == 1 and read == 0, (count, read)


def test_a_probe_reads_every_level_of_the_companion_in_one_round_trip(
    parquet_table: storage.ObjectPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a store the companion's dataset chunk, fragment row and zone row of a key are all
    known from its hash once the head is read: they go out in one batch of requests side by
    side, not a batch a level (the test records the batches; it cannot time them)."""
    batches: list[list[tuple[int, int]]] = []
    read_ranges = storage.RangeFile.read_ranges

    def recorded(
        self: storage.RangeFile, ranges: list[tuple[int, int]], gap: int | None = None
    ) -> list[bytes]:
        warming = "warm" in threading.current_thread().name  # the held table's warm-up
        if str(self.path).endswith("bloomfilter.hierarchy") and not warming:
            batches.append(list(ranges))
        return read_ranges(self, ranges, gap)

    monkeypatch.setattr(storage.RangeFile, "read_ranges", recorded)
    table = pruner.open_table(parquet_table)
    present = int(_data().column("id")[123].as_py())
    answer = pruner.query(f"SELECT * FROM t WHERE id = {present}", {"t": table})
    assert answer.column("id").to_pylist() == [present]
    head, *units = batches
    assert head == [(0, 128 * 1024)] and len(units) == 1, batches
    assert len(units[0]) >= 6, "three levels' units and their checksums"
    # an absent key, probed first by a table of its own (a held table's second probe warms
    # its companion up, and may take another held table's images meanwhile: SHARED)
    batches.clear()
    answer = pruner.query("SELECT * FROM t WHERE id = -11", {"t": pruner.open_table(parquet_table)})
    head, *units = batches
    assert answer.num_rows == 0 and head == [(0, 128 * 1024)] and len(units) == 1, batches


def test_opening_a_table_starts_its_companion_heads_on_their_way(
    parquet_table: storage.ObjectPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The companion heads of a table on a store are read in the background as soon as its
    listing is known (while the opening reads footers or Lance's manifest): the query's
    probe then reads only the key's units from the store."""
    fetched: list[tuple[str, list[tuple[int, int]]]] = []
    fetch = storage.RangeFile._fetch

    def recorded(
        self: storage.RangeFile, ranges: list[tuple[int, int]], gap: int | None = None
    ) -> list[bytes]:
        if str(self.path).endswith("id/bloomfilter.hierarchy"):
            fetched.append((threading.current_thread().name, list(ranges)))
        return fetch(self, ranges, gap)

    monkeypatch.setattr(storage.RangeFile, "_fetch", recorded)
    storage.forget_read_ahead()
    table = pruner.open_table(parquet_table)
    answer = pruner.query("SELECT v FROM t WHERE id = 321", {"t": table})
    assert answer.num_rows == 1
    ahead = [ranges for thread, ranges in fetched if thread.startswith("pruner-read-ahead")]
    asked = [ranges for thread, ranges in fetched if not thread.startswith("pruner-read-ahead")]
    assert ahead == [[(0, 128 * 1024)]], fetched
    assert len(asked) == 1 and (0, 128 * 1024) not in asked[0], "only the key's units"


def test_a_held_table_probes_from_memory_once_its_companion_is_warm(
    s3: S3Server, parquet_table: storage.ObjectPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table held across queries reads its companion whole in the background after its
    second probe; from then on a probe asks the store nothing, and the answers stay the
    engine's alone."""
    asked: list[list[tuple[int, int]]] = []
    fetch = storage.RangeFile._fetch

    def recorded(
        self: storage.RangeFile, ranges: list[tuple[int, int]], gap: int | None = None
    ) -> list[bytes]:
        thread = threading.current_thread().name
        if str(self.path).endswith("id/bloomfilter.hierarchy") and "warm" not in thread:
            asked.append(list(ranges))
        return fetch(self, ranges, gap)

    monkeypatch.setattr(storage.RangeFile, "_fetch", recorded)
    table = pruner.open_table(parquet_table)
    ids = _data().column("id").to_pylist()
    for key in ids[:2]:
        assert pruner.query(f"SELECT id FROM t WHERE id = {key}", {"t": table}).num_rows == 1
    hierarchy_read._WARMERS.submit(lambda: None).result()  # the warm-up has run
    asked.clear()
    for key in [*ids[100:110], -3, ROWS + 5]:
        sql = f"SELECT id, v FROM t WHERE id = {key}"
        expected = multiset(_duckdb_alone(s3, sql, str(parquet_table)))
        assert multiset(pruner.query(sql, {"t": table})) == expected, sql
    assert asked == [], "a warm companion is probed in memory"


def test_tables_held_on_one_index_share_its_warm_companion(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tables held on the same objects: the second's warm-up takes the first's images
    (no read of the companion, its bytes counted once), so a budget that holds one copy and
    not two keeps both warm."""
    whole_reads: list[str] = []
    fetch = storage.RangeFile._fetch

    def recorded(
        self: storage.RangeFile, ranges: list[tuple[int, int]], gap: int | None = None
    ) -> list[bytes]:
        if str(self.path).endswith("id/bloomfilter.hierarchy"):
            whole_reads.append(threading.current_thread().name)
        return fetch(self, ranges, gap)

    uri = f"s3://{s3.new_bucket()}/shared"
    s3.upload(_parquet_dir(tmp_path / "shared", _data(8)), uri)
    parquet_table = storage.location(uri, s3.options)
    pruner.build_index(parquet_table, "id")
    ids = _data(8).column("id").to_pylist()
    gc.collect()
    before = hierarchy_units._kept_bytes
    tables = [pruner.open_table(parquet_table) for _ in range(2)]
    for table in tables:
        for key in ids[:2]:  # the second probe warms the companion up
            pruner.query(f"SELECT id FROM t WHERE id = {key}", {"t": table})
        hierarchy_read._WARMERS.submit(lambda: None).result()
        if table is tables[0]:
            one_copy = hierarchy_units._kept_bytes - before
            assert one_copy > 0
            monkeypatch.setattr(hierarchy_units, "_KEEP_BYTES", before + one_copy * 3 // 2)
            monkeypatch.setattr(storage.RangeFile, "_fetch", recorded)
    assert not any("warm" in thread for thread in whole_reads), "the second took the first's"
    assert hierarchy_units._kept_bytes - before <= one_copy * 5 // 4, "counted once"
    whole_reads.clear()
    for key in [*ids[100:104], -3]:
        sql = f"SELECT id, v FROM t WHERE id = {key}"
        expected = multiset(_duckdb_alone(s3, sql, uri))
        for table in tables:
            assert multiset(pruner.query(sql, {"t": table})) == expected, sql
    assert whole_reads == [], "both tables probe in memory"


def test_footers_are_read_ahead_and_a_selected_whole_file_in_one_read(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a Parquet table on a store reads its footers from the listing on, in the
    background, so no footer waits for a suffix GET of its own; a point lookup whose zone is
    a whole file (one row group) is read ahead by pruner in one batch, not by the engine's
    own requests one after another; the answers are DuckDB's alone."""
    from pruner.storage import reads

    local = tmp_path / "one-group"
    local.mkdir()
    data = _data(5, 8_000)
    for i in range(4):
        pq.write_table(data.slice(i * 2_000, 2_000), local / f"part-{i}.parquet")
    uri = f"s3://{s3.new_bucket()}/lake/g"
    s3.upload(local, uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    suffix_reads: list[str] = []
    data_reads: list[str] = []
    call, fetch = reads._call, storage.RangeFile._fetch

    def recorded_call(path: storage.ObjectPath, operation: Any, *args: Any, **kwargs: Any) -> Any:
        if "suffix" in str(kwargs.get("options", "")) and path.name.endswith(".parquet"):
            suffix_reads.append(path.name)
        return call(path, operation, *args, **kwargs)

    def recorded_fetch(
        self: storage.RangeFile, ranges: list[tuple[int, int]], gap: int | None = None
    ) -> list[bytes]:
        if self.path.name.endswith(".parquet") and "ahead" not in threading.current_thread().name:
            data_reads.append(self.path.name)
        return fetch(self, ranges, gap)

    monkeypatch.setattr(reads, "_call", recorded_call)
    monkeypatch.setattr(storage.RangeFile, "_fetch", recorded_fetch)
    storage.forget_read_ahead()
    table = pruner.open_table(location)
    assert len(table.files or {}) == 4 and suffix_reads == [], suffix_reads
    key = int(data.column("id")[4_321].as_py())
    for engine in ("duckdb", "datafusion"):
        data_reads.clear()
        sql = f"SELECT * FROM t WHERE id = {key}"
        answer = pruner.query(sql, {"t": table}, engine=engine)
        assert multiset(answer) == multiset(_duckdb_alone(s3, sql, uri)), engine
        assert data_reads == ["part-2.parquet"], (engine, data_reads)


def test_opening_asks_the_folders_above_while_it_reads_the_heads(
    parquet_table: storage.ObjectPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a folder above a Parquet folder is a Delta or Iceberg table is asked in the
    background once the folder's listing is known (beside the heads and footers), and the
    opening takes that answer instead of asking again in a round trip of its own."""
    taken: list[object] = []
    asked_ahead = discover._asked_ahead

    def recorded(directory: storage.Location) -> object:
        found = asked_ahead(directory)
        taken.append("asked again" if found is None else found.result())
        return found

    monkeypatch.setattr(discover, "_asked_ahead", recorded)
    pruner.open_table(parquet_table)
    assert taken == [None], "one answer, asked ahead: no table format"
    assert discover.table_format(parquet_table) is None


def test_a_folder_inside_a_delta_table_on_the_store_is_refused(
    s3: S3Server, tmp_path: Path
) -> None:
    """The answer asked ahead is the one asked in place: a Parquet folder under a Delta
    table's folder on the store is refused, naming the table."""
    uri = f"s3://{s3.new_bucket()}/d"
    s3.upload(_parquet_dir(tmp_path / "part", _data(12, 2_000), 2), uri + "/day=1")
    (tmp_path / "log.json").write_text('{"commitInfo": {}}\n')
    s3.upload(tmp_path / "log.json", uri + "/_delta_log/00000000000000000000.json")
    with pytest.raises(pruner.PrunerError, match=r"inside .*a Delta Lake table"):
        pruner.open_table(storage.location(uri + "/day=1", s3.options))


def test_a_build_on_the_store_asks_the_folder_once_and_no_head_per_file(
    s3: S3Server, tmp_path: Path
) -> None:
    local = _parquet_dir(tmp_path / "b", _data(3))
    uri = f"s3://{s3.new_bucket()}/lake/b"
    s3.upload(local, uri)
    location = storage.location(uri, s3.options)
    before = storage.requests.snapshot()[0]
    index = pruner.build_index(location, "id")
    count = storage.requests.snapshot()[0] - before
    # a LIST of the folder and up to 5 format checks (Lance's versions; Delta's and
    # Iceberg's markers here and above), then a footer and a read per file and two PUTs
    # (index, companion), then a LIST and a PUT for the footers kept beside them
    # (pruner.index.footers): no HEAD per file, no LIST per question (27 requests before)
    assert count <= 6 + 2 * FILES + 2 + 2, count
    assert index.num_rows == ROWS
    table = pruner.open_table(location)
    answer = pruner.query("SELECT v FROM t WHERE id = 77", {"t": table})
    assert answer.num_rows == 1


def _upload_file(s3: S3Server | AzuriteServer, table: pa.Table, uri: str, tmp: Path) -> None:
    local = tmp / f"upload-{np.random.default_rng().integers(1 << 30)}.parquet"
    pq.write_table(table, local, row_group_size=GROUP)
    s3.upload(local, uri)


def test_a_replaced_added_or_removed_object_is_never_answered_from_old_zones(
    s3: S3Server, tmp_path: Path
) -> None:
    """Each change to the store after the index was built: the table held and the table
    opened again both answer as DuckDB alone over the objects now."""
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(1)), uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    held = pruner.open_table(location)
    probe = "SELECT id, v FROM t WHERE id IN (3, 11, 25000, 77777, 88888, 99999)"

    def check(what: str) -> None:
        alone = multiset(_duckdb_alone(s3, probe, uri))
        assert multiset(pruner.query(probe, {"t": location})) == alone, f"{what}: opened again"
        assert multiset(pruner.query(probe, {"t": held})) == alone, f"{what}: held table"
        frame = pruner.query(probe, {"t": location}, engine="datafusion")
        assert multiset(frame) == alone, f"{what}: DataFusion"

    check("as built")
    # Replaced: the same name and the same number of rows, other keys (a same-size
    # rewrite is what only the ETag tells apart).
    replacement = _data(2, ROWS // FILES)
    replacement = replacement.set_column(
        0, "id", pa.array(np.arange(ROWS // FILES, dtype=np.int64) + 70_000)
    )
    _upload_file(s3, replacement, uri + "/part-1.parquet", tmp_path)
    check("part-1 replaced")
    # Added
    extra = _data(3, 2_000).set_column(0, "id", pa.array(np.arange(2_000, dtype=np.int64) + 88_000))
    _upload_file(s3, extra, uri + "/part-9.parquet", tmp_path)
    check("part-9 added")
    # Removed
    s3.client().delete_object(
        Bucket=uri.removeprefix("s3://").split("/")[0], Key="t/part-0.parquet"
    )
    check("part-0 removed")


def test_an_index_built_before_a_replacement_is_not_used_for_the_new_object(
    s3: S3Server, tmp_path: Path
) -> None:
    """The index records each file's ETag: explain reads the replaced file whole."""
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(4)), uri)
    location = storage.location(uri, s3.options)
    index = pruner.build_index(location, "id")
    assert all(f.identity.etag for f in index.files or []), "the index records each ETag"
    # the same rows written again another way (another ETag, another footer)
    rewritten = tmp_path / "rewritten.parquet"
    pq.write_table(pq.read_table(tmp_path / "t" / "part-2.parquet"), rewritten, compression="zstd")
    s3.upload(rewritten, uri + "/part-2.parquet")
    explanation = pruner.explain("SELECT * FROM t WHERE id = 1", {"t": location})
    table = pruner.open_table(location)
    part2 = next(fid for fid, f in (table.files or {}).items() if f.relative == "part-2.parquet")
    kept = set(explanation.selections()["t"].fragment_ids())
    assert part2 in kept, "the rewritten object's zones are stale: it is read whole"


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_index_object_never_drops_a_row(
    s3: S3Server, tmp_path: Path, damage: str
) -> None:
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(5)), uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    bucket = uri.removeprefix("s3://").split("/")[0]
    client = s3.client()
    for key in ("t/_pruner/id/bloomfilter.lance", "t/_pruner/id/bloomfilter.hierarchy"):
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        damaged = {
            "truncated": body[: len(body) // 2],
            "garbage": bytes(len(body)),
            "empty": b"",
        }[damage]
        client.put_object(Bucket=bucket, Key=key, Body=damaged)
    sql = "SELECT id, v FROM t WHERE id IN (1, 2, 30000)"
    alone = multiset(_duckdb_alone(s3, sql, uri))
    try:
        answer = multiset(pruner.query(sql, {"t": location}))
    except pruner.PrunerError as err:  # a clear refusal is allowed; a wrong answer is not
        assert "bloomfilter" in str(err) or "index" in str(err), err
        return
    assert answer == alone


def test_lance_on_the_store(s3: S3Server) -> None:
    """A Lance dataset written to the store: pruner's index is committed there, Lance itself
    lists and uses it, and pruner's answers equal DuckDB alone over lance.dataset(uri) and
    Lance's own scanner."""
    import duckdb
    import lance

    uri = f"s3://{s3.new_bucket()}/ds.lance"
    lance.write_dataset(_data(6), uri, max_rows_per_file=10_000, storage_options=s3.options)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    dataset = lance.dataset(uri, storage_options=s3.options)
    assert [i["type"] for i in dataset.list_indices()] == ["BloomFilter"]
    assert dataset.to_table(filter="id = 1234").num_rows == 1, "Lance's scanner on our index"
    for sql in QUERIES:
        con = duckdb.connect()
        con.register("t", lance.dataset(uri, storage_options=s3.options))
        alone = multiset(con.sql(sql).to_arrow_table())
        for engine in ("duckdb", "datafusion"):
            answer = multiset(pruner.query(sql, {"t": location}, engine=engine))
            assert answer == alone, f"{engine}: {sql}"


def test_a_lance_dataset_opened_by_the_user_keeps_its_options(s3: S3Server) -> None:
    import lance

    uri = f"s3://{s3.new_bucket()}/ds.lance"
    lance.write_dataset(_data(7, 5_000), uri, storage_options=s3.options)
    pruner.build_index(storage.location(uri, s3.options), "id")
    dataset = lance.dataset(uri, storage_options=s3.options)
    table = pruner.open_table(dataset)
    assert isinstance(table.path, storage.ObjectPath)
    assert pruner.query("SELECT count(*) AS n FROM t WHERE id = 3", {"t": dataset}).to_pylist() == [
        {"n": 1}
    ]


def test_an_update_after_an_append_on_the_store(s3: S3Server, tmp_path: Path) -> None:
    """A file added to the store is indexed by an update, which keeps the other files'
    zones; the update's PUT is conditional on the index it read."""
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(8)), uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    extra = pa.table({"id": pa.array([500_001], pa.int64()), "name": ["x"], "v": [1]})
    _upload_file(s3, extra, uri + "/part-7.parquet", tmp_path)
    _, plan = pruner.index.update_index(location, "id")
    assert plan.to_index() and len(plan.to_index()) == 1, "only the new file is read"
    answer = pruner.query("SELECT v FROM t WHERE id = 500001", {"t": location})
    assert answer.to_pylist() == [{"v": 1}]


def test_two_updates_at_once_one_wins_the_other_is_told(s3: S3Server, tmp_path: Path) -> None:
    """Compare-and-swap on the index's ETag: an update whose index changed under it fails
    with a clear error instead of overwriting the other's work."""
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(9)), uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    _upload_file(
        s3,
        pa.table({"id": pa.array([600_000], pa.int64()), "name": ["y"], "v": [2]}),
        uri + "/part-8.parquet",
        tmp_path,
    )
    from pruner.index.update import plan_update

    plan = plan_update(location, "id")  # read the index (and its ETag) as writer A
    pruner.index.update_index(location, "id")  # writer B lands first
    with pytest.raises(storage.ChangedUnderneath, match="another writer"):
        pruner.index.apply_update(plan)
    answer = pruner.query("SELECT v FROM t WHERE id = 600000", {"t": location})
    assert answer.to_pylist() == [{"v": 2}], "B's index stands, and answers"


def test_explain_reports_what_planning_read_of_the_store(
    parquet_table: storage.ObjectPath, tmp_path: Path
) -> None:
    explanation = pruner.explain("SELECT * FROM t WHERE id = 77", {"t": parquet_table})
    assert explanation.store_reads is not None and explanation.store_reads[0] >= 1
    assert "object store:" in str(explanation)
    payload = explanation.to_json()
    assert payload["store_requests"] == explanation.store_reads[0]
    assert payload["store_bytes_read"] == explanation.store_reads[1]
    local = _parquet_dir(tmp_path / "local", _data(10, 4_000))
    assert pruner.explain("SELECT * FROM t WHERE id = 1", {"t": local}).store_reads is None


def test_the_spark_build_writes_to_the_store(s3: S3Server, tmp_path: Path, spark: Any) -> None:
    """Executors read their fragments from the store (the location pickles with its
    options) and the driver writes the index there: the same zones as the local build."""
    import lance

    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_parquet_dir(tmp_path / "t", _data(12, 8_000), files=2), uri)
    location = storage.location(uri, s3.options)
    local = pruner.build_index(location, "id")
    distributed = pruner.build_index(location, "id", engine="spark", spark=spark)
    assert np.array_equal(np.asarray(local.filter_data), np.asarray(distributed.filter_data))
    stored = pruner.load_index(location, "id")
    assert np.array_equal(np.asarray(stored.filter_data), np.asarray(local.filter_data))
    dataset_uri = f"s3://{s3.new_bucket()}/ds.lance"
    lance.write_dataset(
        _data(13, 8_000), dataset_uri, max_rows_per_file=4_000, storage_options=s3.options
    )
    dataset = storage.location(dataset_uri, s3.options)
    built = pruner.build_index(dataset, "id", engine="spark", spark=spark)
    assert len(np.unique(built.fragment_id)) == 2
    answer = pruner.query("SELECT v FROM t WHERE id = 3", {"t": dataset}).to_pylist()
    assert len(answer) == 1


def test_append_to_a_lance_dataset_on_the_store(s3: S3Server) -> None:
    """pruner.append writes the rows with the dataset's options and updates its index."""
    import lance

    uri = f"s3://{s3.new_bucket()}/ds.lance"
    lance.write_dataset(_data(14, 4_000), uri, storage_options=s3.options)
    pruner.build_index(uri, "id", storage_options=s3.options)
    rows = pa.table({"id": pa.array([900_001], pa.int64()), "name": ["z"], "v": [9]})
    plans = pruner.append(uri, rows, storage_options=s3.options)
    assert set(plans) == {"id"}
    found = pruner.query(
        "SELECT v FROM t WHERE id = 900001", {"t": uri}, storage_options=s3.options
    )
    assert found.to_pylist() == [{"v": 9}]
    assert lance.dataset(uri, storage_options=s3.options).count_rows() == 4_001


def _delta_rows(start: int, count: int) -> pa.Table:
    ids = np.random.default_rng(start).permutation(np.arange(start, start + count))
    return pa.table({"id": ids.astype(np.int64), "s": [f"s{i}" for i in ids]})


DELTA_SQL = [
    "SELECT count(*) AS n FROM t",
    "SELECT s FROM t WHERE id = 60",
    "SELECT s FROM t WHERE id IN (10, 60, 199, 250)",
    "SELECT count(*) AS n FROM t WHERE id = 10",  # only in removed files, after the overwrite
]


def test_a_delta_table_on_the_store_answers_as_its_own_reader(s3: S3Server) -> None:
    """A Delta Lake table written to the store by deltalake: pruner reads the live files of
    its version there (never the removed ones), indexes them there, and answers as
    DuckDB alone over deltalake's own read of the table, on DuckDB and DataFusion, pruned
    or not, through appends, an overwrite and a delete, and at an older version."""
    import deltalake
    import duckdb

    uri = f"s3://{s3.new_bucket()}/lake/events"
    options = s3.options
    writing = {**options, "aws_conditional_put": "etag"}  # deltalake's safe commits on S3
    location = storage.location(uri, options)

    def check(step: str, version: int | None = None) -> None:
        source: Any = location
        if version is not None:
            source = pruner.open_table(location, version=version)
        own = deltalake.DeltaTable(uri, version=version, storage_options=options)
        rows = own.to_pyarrow_table()  # deltalake's reader (exact: no column mapping or DVs)
        for sql in DELTA_SQL:
            con = duckdb.connect()
            con.register("t", rows)
            expected = multiset(con.sql(sql).to_arrow_table())
            for engine in ("duckdb", "datafusion"):
                for prune in (True, False):
                    got = pruner.query(sql, {"t": source}, engine=engine, prune=prune)
                    assert multiset(got) == expected, (step, sql, engine, prune)

    deltalake.write_deltalake(uri, _delta_rows(0, 200), storage_options=writing)
    pruner.build_index(location, "id")
    deltalake.write_deltalake(uri, _delta_rows(200, 100), mode="append", storage_options=writing)
    check("append, the new file not indexed")
    update_index(location, "id")
    deltalake.write_deltalake(uri, _delta_rows(50, 150), mode="overwrite", storage_options=writing)
    deltalake.DeltaTable(uri, storage_options=writing).delete("id < 60")
    check("overwrite and delete")
    check("version 1", version=1)
    update_index(location, "id")
    check("overwrite and delete, indexed")
    explained = pruner.explain("SELECT s FROM t WHERE id = 60", {"t": location})
    assert explained.scans[0].unindexed_fragments == (), "the live file is indexed"
    keys = s3.keys(uri)
    assert any(key.startswith("_pruner/id/") for key in keys), "the index is on the store"
