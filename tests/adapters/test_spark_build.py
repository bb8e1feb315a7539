"""The Spark build of the zone index gives exactly the local build's index, stored the same way.

Every test that runs a Spark job uses the session-wide ``spark`` fixture (local[2]); the
first job of a run also pays for starting Spark's Python workers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lance.file import LanceFileReader

from pruner.adapters.spark import build as spark_build
from pruner.adapters.spark.build import ZONE_ROWS_SCHEMA, ZoneJob, fragment_rows, run_job
from pruner.cli import main
from pruner.errors import EngineError, InvalidParameterError
from pruner.index import (
    ZoneIndex,
    build_index,
    build_lance_index,
    build_parquet_index,
    list_bloom_indexes,
    load_index,
    parquet_index_path,
)
from pruner.index.hierarchy import companion_path
from pruner.status import index_status
from tests.support.index_check import assert_same_index
from tests.support.lance_data import write_random_dataset

COLUMNS = {"i64": pa.int64(), "utf8": pa.string()}
ITEMS, PROBABILITY = 300, 0.01


@pytest.fixture(scope="module")
def lance_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four fragments with nulls and deleted rows; fragment 2 has no deletions."""
    path = tmp_path_factory.mktemp("spark_build") / "random.lance"
    write_random_dataset(path, 6_000, 1_500, seed=11, columns=COLUMNS, delete_fraction=0.0)
    ds = lance.dataset(str(path))
    ds.delete("row % 17 = 3 AND (row < 3000 OR row >= 4500)")
    ds.delete("row >= 700 AND row < 900")  # a whole zone's worth in fragment 0
    return path


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files (one in a subfolder) of several row groups, with nulls in ``utf8``."""
    rng = np.random.default_rng(12)
    root = tmp_path_factory.mktemp("spark_build") / "parquet"
    (root / "day=2").mkdir(parents=True)
    for i, name in enumerate(["a.parquet", "b.parquet", "day=2/c.parquet"]):
        ids = rng.permutation(2_000).astype(np.int64) + i * 2_000
        text = pa.array([None if v % 11 == 0 else f"t{v}" for v in ids], pa.string())
        pq.write_table(pa.table({"i64": ids, "utf8": text}), root / name, row_group_size=650)
    return root


def copy_of(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / path.name
    shutil.copytree(path, target)
    return target


def raw_metadata(index_file: Path) -> dict[bytes, bytes]:
    return dict(LanceFileReader(str(index_file)).read_all().to_table().schema.metadata)


def committed_file(path: Path, column: str) -> Path:
    (info,) = [i for i in list_bloom_indexes(path) if i.column == column]
    return info.path


@pytest.mark.slow  # the first Spark job of a run starts the Python workers (5-10 s)
def test_lance_spark_build_equals_the_local_build(spark: Any, lance_path: Path) -> None:
    from pruner.adapters.spark.build import build_zone_index_spark

    ds = lance.dataset(str(lance_path))
    fragments = ds.get_fragments()
    assert len(fragments) == 4
    assert sum(f.metadata.deletion_file is not None for f in fragments) == 3
    for column in COLUMNS:
        local = build_lance_index(lance_path, column, items=ITEMS, probability=PROBABILITY)
        built = build_zone_index_spark(
            lance_path, column, items=ITEMS, probability=PROBABILITY, spark=spark
        )
        assert_same_index(built, local, column)
        assert built.filter_data.shape == local.filter_data.shape, column
        assert local.has_null.any() and local.null_rows, column
        assert (local.zone_length > ITEMS).any(), f"{column}: a zone spans deleted rows"


def test_parquet_spark_build_equals_the_local_build(spark: Any, parquet_path: Path) -> None:
    from pruner.adapters.spark.build import build_zone_index_spark

    for column in COLUMNS:
        local = build_parquet_index(parquet_path, column, items=ITEMS, probability=PROBABILITY)
        built = build_zone_index_spark(
            parquet_path, column, items=ITEMS, probability=PROBABILITY, spark=spark
        )
        assert_same_index(built, local, column)
        assert built.files == local.files, column
    assert len(set(local.fragment_id.tolist())) == 3
    assert len(local.zone_start) > 3 * 2_000 // ITEMS, "zones are cut at row groups"


def test_stored_lance_index_is_the_same_and_lance_uses_it(
    spark: Any, lance_path: Path, tmp_path: Path
) -> None:
    local_path = copy_of(lance_path, tmp_path / "local")
    spark_path = copy_of(lance_path, tmp_path / "spark")
    for column in COLUMNS:
        build_index(local_path, column, items=ITEMS, probability=PROBABILITY)
        build_index(spark_path, column, items=ITEMS, probability=PROBABILITY, engine="spark")
        assert_same_index(load_index(spark_path, column), load_index(local_path, column), column)
        assert raw_metadata(committed_file(spark_path, column)) == raw_metadata(
            committed_file(local_path, column)
        ), column
        companions = [
            _companion(companion_path(committed_file(p, column))) for p in (local_path, spark_path)
        ]
        assert companions[0] == companions[1], column
    ds = lance.dataset(str(spark_path))
    live = ds.to_table(columns=["i64", "utf8"])
    ids = live.column("i64").drop_null().to_pylist()
    texts = live.column("utf8").drop_null().to_pylist()
    predicates = [
        f"i64 = {ids[0]}",
        f"i64 IN ({ids[10]}, {ids[-1]}, 12345)",
        "i64 = 12345",
        f"utf8 = '{texts[5]}'",
        "utf8 = 'absent'",
        "utf8 IS NULL",
    ]
    assert "BloomFilter" in ds.scanner(filter=predicates[0]).explain_plan()
    for predicate in predicates:
        indexed = ds.to_table(filter=predicate).sort_by("row")
        unindexed = ds.scanner(filter=predicate, use_scalar_index=False).to_table().sort_by("row")
        assert indexed.equals(unindexed), predicate
    assert ds.to_table(filter=predicates[0]).num_rows >= 1
    assert ds.to_table(filter=predicates[3]).num_rows >= 1


def test_stored_parquet_index_is_the_same(spark: Any, parquet_path: Path, tmp_path: Path) -> None:
    local_path = copy_of(parquet_path, tmp_path / "local")
    spark_path = copy_of(parquet_path, tmp_path / "spark")
    for column in COLUMNS:
        local = build_index(local_path, column, items=ITEMS, probability=PROBABILITY)
        built = build_index(
            spark_path, column, items=ITEMS, probability=PROBABILITY, engine="spark", spark=spark
        )
        assert_same_index(built, local, column)
        stored_local = raw_metadata(parquet_index_path(local_path, column))
        stored_spark = raw_metadata(parquet_index_path(spark_path, column))
        # The file list records each file's mtime, which copytree keeps.
        assert stored_spark == stored_local, column
        assert_same_index(load_index(spark_path, column), load_index(local_path, column), column)
        # the hierarchy companion too: each task made its fragment's share
        companions = [
            _companion(companion_path(parquet_index_path(p, column)))
            for p in (local_path, spark_path)
        ]
        assert companions[0] == companions[1], column


def _companion(path: Path) -> tuple[dict[str, Any], bytes]:
    """A companion's header and body, but the fingerprint of the index file it names (the
    tail of its bytes, which differ from write to write: see below)."""
    data = path.read_bytes()
    size = int.from_bytes(data[8:12], "little")
    header = json.loads(data[20 : 20 + size])
    header.pop("index_file_tail")
    assert len(data) > 20 + size
    return header, data[20 + size :]


@pytest.mark.parametrize("jobs", ["one job", "a job per fragment"])
def test_the_spark_build_writes_the_local_builds_companion(
    spark: Any, parquet_path: Path, tmp_path: Path, jobs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built over the same files, the companion is the local build's, byte for byte but the
    fingerprint of the index file it names: Lance's writer orders an index file's metadata
    map anew on each write, so no two builds (two local ones neither) write the same index
    file bytes. A build whose results would pass what one job returns runs a job per group
    of fragments (here: per fragment), with the same result."""
    if jobs != "one job":
        monkeypatch.setattr(spark_build, "JOB_RESULT_BYTES", 1)
    path = copy_of(parquet_path, tmp_path / "t")
    for column in COLUMNS:
        build_index(path, column, items=ITEMS, probability=PROBABILITY)
        local = _companion(companion_path(parquet_index_path(path, column)))
        build_index(path, column, items=ITEMS, probability=PROBABILITY, engine="spark", spark=spark)
        assert _companion(companion_path(parquet_index_path(path, column))) == local, column
    assert {row["hierarchy"] for row in index_status(path)} == {"in use"}


def test_cli_engine_spark(
    spark: Any, lance_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_of(lance_path, tmp_path)
    args = ["index", "build", str(path), "--column", "i64", "--items", str(ITEMS)]
    assert main([*args, "--probability", str(PROBABILITY), "--engine", "spark"]) == 0
    assert "i64: " in capsys.readouterr().out
    local = build_lance_index(lance_path, "i64", items=ITEMS, probability=PROBABILITY)
    assert_same_index(load_index(path, "i64"), local, "cli")
    with pytest.raises(SystemExit):
        main([*args, "--engine", "dask"])
    assert "invalid choice: 'dask'" in capsys.readouterr().err


def test_unknown_engine_and_bad_column_are_clear_errors(spark: Any, lance_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="unknown index build engine 'dask'"):
        build_index(lance_path, "i64", engine="dask")
    with pytest.raises(InvalidParameterError, match="column 'nope' is not in"):
        build_index(lance_path, "nope", engine="spark")
    assert [i.column for i in list_bloom_indexes(lance_path)] == []


def test_a_failed_task_is_an_engine_error(spark: Any, tmp_path: Path) -> None:
    job = ZoneJob("i64", ITEMS, 512, [(0, str(tmp_path / "gone.parquet"))], None)
    with pytest.raises(EngineError, match=r"Spark index build failed: .*gone\.parquet"):
        run_job(spark, job)


def local_zone_rows(job: ZoneJob) -> pa.Table:
    """What the Spark job collects, computed here by calling the task function directly."""
    positions = pa.record_batch([pa.array(range(len(job.fragments)), pa.int64())], names=["id"])
    return pa.Table.from_batches(list(job(iter([positions]))), ZONE_ROWS_SCHEMA)


def test_zone_rows_come_back_in_the_local_order_whatever_order_spark_returns(
    parquet_path: Path,
) -> None:
    """No Spark: the task function and the driver's reassembly, with rows shuffled."""
    local = build_parquet_index(parquet_path, "utf8", items=ITEMS, probability=PROBABILITY)
    assert local.files is not None
    fragments = [(f.fragment_id, str(parquet_path / f.path)) for f in reversed(local.files)]
    job = ZoneJob("utf8", ITEMS, local.filter_data.shape[1], fragments, None)
    table = local_zone_rows(job)
    shuffled = table.take(pa.array(np.random.default_rng(3).permutation(table.num_rows)))
    order = [f.fragment_id for f in local.files]
    rows = [f.rows for f in local.files]
    parts = fragment_rows(shuffled, order, rows, job.num_bytes)
    assert [p.fragment_id for p in parts] == order
    rebuilt = ZoneIndex(
        "utf8",
        ITEMS,
        PROBABILITY,
        np.concatenate([p.zone_fragment_id for p in parts]),
        np.concatenate([p.zone_start for p in parts]),
        np.concatenate([p.zone_length for p in parts]),
        np.concatenate([p.has_null for p in parts]),
        np.concatenate([p.filters for p in parts]),
        {p.fragment_id: p.null_offsets for p in parts if p.null_offsets is not None},
    )
    assert_same_index(rebuilt, local, "shuffled")
    with pytest.raises(EngineError, match="the data changed during the build"):
        fragment_rows(shuffled, order, [rows[0] + 1, *rows[1:]], job.num_bytes)
