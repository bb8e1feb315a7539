"""Object keys a URL would read otherwise: ``%``, spaces, ``:`` and ``=`` in a key (a Delta
partition folder ``ts=2024-01-01%2000%3A00%3A00`` holds all of them). DataFusion reads a
file or folder on a store by URL and decodes its path: given the key undecoded, it listed no
file and answered no row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import storage
from tests.support.engine_check import multiset
from tests.support.s3 import S3Server

NAMES = ["d=a%20b/x.parquet", "t=1969-12-31 23:59:59/y.parquet", "plain/z%25.parquet"]


@pytest.mark.parametrize("layout", ["folders", "flat"])
def test_keys_with_url_characters_are_read_as_they_are(
    s3: S3Server, tmp_path: Path, layout: str
) -> None:
    local = tmp_path / "t"
    for number, name in enumerate(NAMES):
        file = local / (name if layout == "folders" else name.replace("/", "_"))
        file.parent.mkdir(parents=True, exist_ok=True)
        ids = pa.array(range(number * 10, number * 10 + 10), pa.int64())
        pq.write_table(pa.table({"id": ids}), file)
    # a stray file DataFusion's listing of the folder would read: each file is read by URL
    (local / "_staging").mkdir()
    pq.write_table(pa.table({"id": pa.array([999], pa.int64())}), local / "_staging" / "s.parquet")
    uri = f"s3://{s3.new_bucket()}/lake/t"
    s3.upload(local, uri)
    table = pruner.open_table(storage.location(uri, s3.options))
    assert table.num_rows == 30
    for sql in ["SELECT count(*) AS n FROM t", "SELECT id FROM t WHERE id IN (3, 15, 29)"]:
        expected = multiset(pruner.query(sql, {"t": local}, engine="duckdb", prune=False))
        for engine in ("duckdb", "datafusion"):
            for prune in (True, False):
                got = multiset(pruner.query(sql, {"t": table}, engine=engine, prune=prune))
                assert got == expected, (sql, engine, prune)
