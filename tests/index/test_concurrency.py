"""Concurrency: queries while an index is rebuilt see the old index or the new one, never a
partial one, and two builds at once leave one whole index.

Builders run in other processes (as a second user would), started with ``spawn``: Lance is
not fork-safe.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.explain import explain
from pruner.index import build_index, list_bloom_indexes, load_index, parquet_index_path

ROWS, PER_FRAGMENT = 40_000, 10_000
ITEMS = (500, 2000)  # the two indexes builders alternate between
CONTEXT = multiprocessing.get_context("spawn")


def _ids() -> np.ndarray:
    return np.random.default_rng(11).permutation(ROWS).astype(np.int64)


def _make(layout: str, directory: Path) -> Path:
    data = pa.table({"id": _ids(), "pos": np.arange(ROWS)})
    if layout == "lance":
        path = directory / "t.lance"
        lance.write_dataset(data, str(path), max_rows_per_file=PER_FRAGMENT)
    else:
        path = directory / "t"
        path.mkdir()
        for number in range(ROWS // PER_FRAGMENT):
            part = data.slice(number * PER_FRAGMENT, PER_FRAGMENT)
            pq.write_table(part, path / f"part-{number}.parquet", row_group_size=2000)
    build_index(path, "id", items=ITEMS[0])
    return path


def _rebuild(path: str, times: int) -> int:
    """Rebuild the index ``times`` times, alternating its zone size; return the count."""
    for number in range(times):
        build_index(path, "id", items=ITEMS[number % 2])
    return times


def _zone_counts() -> set[int]:
    return {ROWS // items for items in ITEMS}


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["lance", "parquet"])
def test_queries_during_rebuilds_see_a_whole_index(layout: str, tmp_path: Path) -> None:
    path = _make(layout, tmp_path)
    ids = _ids()
    with CONTEXT.Pool(1) as pool:
        builder = pool.apply_async(_rebuild, (str(path), 40))
        queries, seen = 0, set()
        while not builder.ready() or queries < 5:
            value = int(ids[(queries * 7919) % ROWS])
            sql = f"SELECT pos FROM t WHERE id = {value}"
            (scan,) = explain(sql, {"t": path}).scans
            assert scan.terms[0].used_index, scan.terms[0].reason  # never unreadable or missing
            assert scan.zones_total in _zone_counts(), "a whole index, old or new"
            seen.add(scan.zones_total)
            assert scan.zones_selected < scan.zones_total
            result = pruner.query(sql, {"t": path}, engine="duckdb")
            assert result.column("pos").to_pylist() == [int(np.flatnonzero(ids == value)[0])]
            queries += 1
        assert builder.get(timeout=300) == 40
    assert seen == _zone_counts(), "the queries ran while the index changed under them"


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["lance", "parquet"])
def test_two_builds_at_once_leave_one_whole_index(layout: str, tmp_path: Path) -> None:
    path = _make(layout, tmp_path)
    with CONTEXT.Pool(2) as pool:
        builds = [pool.apply_async(_rebuild, (str(path), 3)) for _ in range(2)]
        assert [b.get(timeout=300) for b in builds] == [3, 3], "both builds succeed"
    index = load_index(path, "id")
    assert index.num_zones in _zone_counts()
    assert index.num_rows == ROWS and index.damaged is not None and not index.damaged.any()
    if layout == "lance":
        (segment,) = list_bloom_indexes(path)
        assert segment.fragment_ids == frozenset(range(ROWS // PER_FRAGMENT))
    else:
        leftovers = sorted(p.name for p in parquet_index_path(path, "id").parent.iterdir())
        expected = ["bloomfilter.hierarchy", "bloomfilter.lance"]
        assert leftovers == expected, "no temporary file is left behind"
    value = int(_ids()[123])
    result = pruner.query(f"SELECT pos FROM t WHERE id = {value}", {"t": path})
    assert result.column("pos").to_pylist() == [123]


def test_a_build_that_loses_the_commit_race_retries_on_the_newest_version(
    tmp_path: Path,
) -> None:
    """A build reads version v; another build commits v+1 first; Lance refuses the late
    commit as a conflict, and it is retried on v+1: the last build's index is the one."""
    from pruner.index import build_lance_index, commit_lance_index

    path = _make("lance", tmp_path)
    late = lance.dataset(str(path))
    index = build_lance_index(late, "id", items=ITEMS[1])
    build_index(path, "id", items=ITEMS[0])  # the other build commits first
    uuid = commit_lance_index(late, index)
    (segment,) = list_bloom_indexes(path)
    assert segment.uuid == uuid
    assert load_index(path, "id").num_zones == ROWS // ITEMS[1]
