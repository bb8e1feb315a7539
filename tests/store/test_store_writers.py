"""Writers on a store: killed midway, or two at once. A store has no rename, so pruner
writes an index file locally and makes it the object in one PUT: the store holds the old
object or the new one, never part of one, whenever the writer dies."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import storage
from tests.support.engine_check import multiset
from tests.support.s3 import S3Server

REPO = Path(__file__).resolve().parents[2]

_BUILD = """
import sys
import pruner
from pruner import storage
location = storage.location(sys.argv[1])
while True:
    pruner.build_index(location, "id")
    pruner.build_index(location, "name")
"""


def _table(tmp: Path, rows: int = 60_000, files: int = 6) -> Path:
    rng = np.random.default_rng(11)
    ids = rng.permutation(rows).astype(np.int64)
    data = pa.table({"id": ids, "name": [f"n{i % 5000}" for i in ids], "v": np.arange(rows)})
    per = rows // files
    for i in range(files):
        pq.write_table(data.slice(i * per, per), tmp / f"part-{i}.parquet", row_group_size=2_000)
    return tmp


@pytest.mark.slow
def test_a_writer_killed_at_any_point_leaves_a_readable_correct_index(
    s3: S3Server, tmp_path: Path
) -> None:
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_table(tmp_path), uri)
    location = storage.location(uri, s3.options)
    pruner.build_index(location, "id")
    sql = "SELECT id, v FROM t WHERE id IN (5, 17, 59999) OR name = 'n42'"
    expected = multiset(pruner.query(sql, {"t": location}, prune=False))
    environment = os.environ | s3.environment() | {"PYTHONPATH": str(REPO)}
    rng = np.random.default_rng(3)
    seen_states = set()
    for point in range(10):
        writer = subprocess.Popen(
            [sys.executable, "-c", _BUILD, uri],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(float(rng.uniform(1.5, 6.0)))  # start-up takes ~1.5 s, a build less
        writer.kill()
        writer.wait()
        keys = tuple(k for k in s3.keys(uri) if k.startswith("_pruner/"))
        seen_states.add(keys)
        assert not any(".tmp" in key for key in keys), "no temporary object on the store"
        answer = multiset(pruner.query(sql, {"t": location}))
        assert answer == expected, f"kill point {point}: keys {keys}"
        explanation = pruner.explain("SELECT * FROM t WHERE id = 5", {"t": location})
        assert explanation.scans[0].terms[0].used_index, f"kill point {point}: index unreadable"
    assert any(any("name" in k for k in keys) for keys in seen_states), (
        "some writer got as far as the second index (the kill points span a build)"
    )


def test_two_builds_at_once_leave_one_whole_index(s3: S3Server, tmp_path: Path) -> None:
    """Two builds of the same index race: each PUT replaces the object whole, so a reader
    sees one build's index or the other's, both complete and correct."""
    uri = f"s3://{s3.new_bucket()}/t"
    s3.upload(_table(tmp_path, rows=20_000, files=4), uri)
    location = storage.location(uri, s3.options)
    errors: list[BaseException] = []

    def build() -> None:
        try:
            pruner.build_index(location, "id")
        except BaseException as err:  # collected: the test fails on any
            errors.append(err)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    sql = "SELECT id, v FROM t WHERE id IN (1, 19999)"
    expected = multiset(pruner.query(sql, {"t": location}, prune=False))
    assert multiset(pruner.query(sql, {"t": location})) == expected
    assert pruner.explain(sql, {"t": location}).scans[0].terms[0].used_index
