"""The footers an index build keeps beside a Parquet table's indexes on a store
(``_pruner/@footers.arrow``, pruner.index.footers): opening the table reads that one object
instead of a footer per file, and a footer is taken from it only for an object the LIST shows
as it was when kept. Every answer is judged by DuckDB alone over the same objects."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import storage
from pruner.index import update_index
from pruner.index.footers import FOOTERS_NAME, footers_path
from pruner.storage import reads
from tests.support.engine_check import multiset
from tests.support.s3 import S3Server, duckdb_over_store

FILES, ROWS = 6, 3_000


def _table(seed: int, start: int = 0, rows: int = ROWS) -> pa.Table:
    ids = np.random.default_rng(seed).permutation(rows).astype(np.int64) + start
    return pa.table({"id": ids, "v": ids * 3})


def _write(table: pa.Table, where: Path, row_group_size: int = 1_000) -> None:
    """Plain pages, no statistics: a file's size depends on its rows alone."""
    options: dict[str, Any] = {"compression": "none", "use_dictionary": False}
    pq.write_table(table, where, row_group_size=row_group_size, write_statistics=False, **options)


def _on_store(s3: S3Server, local: Path) -> tuple[storage.ObjectPath, str]:
    local.mkdir()
    for i in range(FILES):
        _write(_table(i, i * ROWS), local / f"part-{i}.parquet")
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(local, uri)
    location = storage.location(uri, s3.options)
    assert isinstance(location, storage.ObjectPath)
    return location, uri


def _alone(s3: S3Server, uri: str, sql: str) -> Any:
    files = [f"{uri}/{k}" for k in s3.keys(uri) if k.endswith(".parquet") and "_pruner" not in k]
    return multiset(duckdb_over_store(s3.options, files, sql))


class _FooterReads:
    """Records every read of a ``.parquet`` object's footer: a suffix-range GET, or a read
    ahead of its tail while the table opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        call, fetch = reads._call, storage.RangeFile._fetch

        def recorded(path: storage.ObjectPath, operation: Any, *args: Any, **kwargs: Any) -> Any:
            if "suffix" in str(kwargs.get("options", "")) and path.name.endswith(".parquet"):
                self.names.append(path.name)
            return call(path, operation, *args, **kwargs)

        def recorded_fetch(self_: storage.RangeFile, ranges: Any, gap: Any = None) -> Any:
            ahead = "read-ahead" in threading.current_thread().name
            if ahead and self_.path.name.endswith(".parquet"):
                self.names.append(self_.path.name)
            return fetch(self_, ranges, gap)

        monkeypatch.setattr(reads, "_call", recorded)
        monkeypatch.setattr(storage.RangeFile, "_fetch", recorded_fetch)


def _cold_query(location: storage.ObjectPath, sql: str) -> tuple[Any, pruner.Table]:
    """``sql`` over a table opened as a new process opens it (nothing kept in memory)."""
    storage.forget_read_ahead()
    table = pruner.open_table(location)
    return multiset(pruner.query(sql, {"t": table})), table


def test_opening_reads_the_kept_footers_not_each_files(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location, uri = _on_store(s3, tmp_path / "t")
    pruner.build_index(location, "id")
    assert f"_pruner/{FOOTERS_NAME}" in s3.keys(uri)
    footers = _FooterReads(monkeypatch)
    before = storage.requests.snapshot()[0]
    for sql in ("SELECT * FROM t WHERE id = -3", "SELECT v FROM t WHERE id = 4321"):
        answer, table = _cold_query(location, sql)
        assert answer == _alone(s3, uri, sql), sql
        assert len(table.files or {}) == FILES
    assert footers.names == [], "no footer read from a file"
    # each opening: a LIST, the table-format checks of the parents, the kept footers, the
    # companion's head and fingerprint ahead; each query: a LIST and the companion's units
    # (and for the present key its row group): far fewer than a footer per file
    assert storage.requests.snapshot()[0] - before <= 2 * (1 + 4 + 1 + 2 + 1 + 6 + 1)


def test_a_replaced_or_added_object_has_its_own_footer_read(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files written again after the build (one with other keys at the same size: only its
    ETag tells; one with another row count) and a file added: their footers come from the
    objects, every other from the kept ones; no answer is read through an old footer, and no
    old zones answer for the new keys."""
    location, uri = _on_store(s3, tmp_path / "t")
    pruner.build_index(location, "id")
    same_size = tmp_path / "same-size.parquet"
    _write(_table(1, 50_000), same_size)
    assert same_size.stat().st_size == (tmp_path / "t" / "part-1.parquet").stat().st_size
    s3.upload(same_size, uri + "/part-1.parquet")
    replaced = tmp_path / "replaced.parquet"
    _write(_table(50, 100_000, 1_700), replaced, row_group_size=500)
    s3.upload(replaced, uri + "/part-2.parquet")
    added = tmp_path / "added.parquet"
    _write(_table(51, 200_000, 900), added)
    s3.upload(added, uri + "/part-9.parquet")
    footers = _FooterReads(monkeypatch)
    sql = "SELECT id, v FROM t WHERE id IN (3, 4000, 50017, 100007, 100500, 200001, 555555)"
    answer, table = _cold_query(location, sql)
    assert answer == _alone(s3, uri, sql)
    assert len(answer) == 5  # 4000 was in part-1 as built
    assert sorted(footers.names) == ["part-1.parquet", "part-2.parquet", "part-9.parquet"]
    rows = {f.relative: f.rows for f in (table.files or {}).values()}
    assert rows["part-2.parquet"] == 1_700 and rows["part-9.parquet"] == 900
    # an update keeps the footers of the files as they are now
    update_index(location, "id")
    footers.names.clear()
    answer, _ = _cold_query(location, sql)
    assert answer == _alone(s3, uri, sql) and footers.names == []


def _rewrite_kept(s3: S3Server, location: storage.ObjectPath, change: Any) -> None:
    """Put the kept footers object back changed by ``change`` (its bytes -> new bytes)."""
    target = footers_path(location)
    bucket, key = target.bucket, target.key
    client = s3.client()
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.put_object(Bucket=bucket, Key=key, Body=change(body))


def _flip_a_footer_byte(body: bytes) -> bytes:
    """The same object with one byte in the middle of the first file's footer changed (its
    hash left as recorded): an entry whose bytes were damaged."""
    table = pa.ipc.open_file(pa.BufferReader(body)).read_all()
    footers = table.column("footer").to_pylist()
    first = bytearray(footers[0])
    first[len(first) // 2] ^= 0x40
    footers[0] = bytes(first)
    table = table.set_column(4, "footer", pa.array(footers, pa.binary()))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


DAMAGES = {
    "garbage": lambda body: bytes(len(body)),
    "truncated": lambda body: body[: len(body) // 2],
    "empty": lambda body: b"",
    "a footer's bytes": _flip_a_footer_byte,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_kept_footers_cost_requests_never_a_row(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    location, uri = _on_store(s3, tmp_path / "t")
    pruner.build_index(location, "id")
    _rewrite_kept(s3, location, DAMAGES[damage])
    footers = _FooterReads(monkeypatch)
    for engine in ("duckdb", "datafusion"):
        sql = "SELECT * FROM t WHERE id IN (17, 3001, 9999, 17999)"
        storage.forget_read_ahead()
        table = pruner.open_table(location)
        assert multiset(pruner.query(sql, {"t": table}, engine=engine)) == _alone(s3, uri, sql)
    expected = ["part-0.parquet"] if damage == "a footer's bytes" else None
    if expected is not None:
        assert sorted(set(footers.names)) == expected, "only the damaged entry is read"
    else:
        assert sorted(set(footers.names)) == [f"part-{i}.parquet" for i in range(FILES)]


def test_no_footers_are_kept_locally(tmp_path: Path) -> None:
    local = tmp_path / "t"
    local.mkdir()
    pq.write_table(_table(1), local / "part-0.parquet")
    pruner.build_index(local, "id")
    assert not (local / "_pruner" / FOOTERS_NAME).exists()
    assert sorted(p.name for p in (local / "_pruner").iterdir()) == ["id"]
