"""Tables that change after their index was built, and the checks every test of a change
makes (tests/index/test_stale.py: stale indexes answer right; tests/index/test_update.py:
an update covers the changes again).

A table holds 3,000 unique ids in three fragments or files of 1,000 rows, indexed in
zones of 100; :func:`check` runs a query on DuckDB and DataFusion pruned and unpruned and
compares it with the engine alone over the raw files (tests/support/engine_check.py, no
pruner code), itself checked against the rows read plainly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import pruner
from pruner.explain import explain
from pruner.index import build_index
from pruner.selection import Selection
from pruner.table import Table, open_table
from tests.support.engine_check import engine_alone

ROWS, PER_FRAGMENT, ITEMS = 3000, 1000, 100
ENGINES = ("duckdb", "datafusion")


def ids(count: int = ROWS, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).permutation(count).astype(np.int64)


def data(values: np.ndarray, tag: str = "old") -> pa.Table:
    return pa.table({"id": values, "tag": pa.array([tag] * len(values))})


def lance_table(directory: Path) -> Path:
    path = directory / "t.lance"
    lance.write_dataset(data(ids()), str(path), max_rows_per_file=PER_FRAGMENT)
    build_index(path, "id", items=ITEMS)
    return path


def write_parquet(table: pa.Table, file: Path) -> None:
    """Plain, uncompressed int64 pages: the file size depends on the row count alone."""
    pq.write_table(table, file, row_group_size=500, compression="none", use_dictionary=False)


def parquet_table(directory: Path) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "t"
    path.mkdir()
    whole = data(ids())
    for number in range(ROWS // PER_FRAGMENT):
        part = whole.slice(number * PER_FRAGMENT, PER_FRAGMENT)
        write_parquet(part, path / f"part-{number}.parquet")
    build_index(path, "id", items=ITEMS)
    return path


def answer(path: Path, values: list[int]) -> list[tuple[Any, ...]]:
    """The rows the test wrote that are still there, read plainly (no pruner, no engine)."""
    if (path / "_versions").is_dir():
        table = lance.dataset(str(path)).to_table(columns=["id", "tag"])
    else:
        table = pa.concat_tables(
            pq.read_table(p, columns=["id", "tag"]) for p in sorted(path.glob("*.parquet"))
        )
    pairs = zip(table.column("id").to_pylist(), table.column("tag").to_pylist(), strict=True)
    return sorted(row for row in pairs if row[0] in values)


def rows(result: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(result.column(c).to_pylist() for c in ("id", "tag")), strict=True))


def check(path: Path, values: list[int]) -> Table:
    """On both engines, the engine alone over the raw files (no pruner code) is the answer,
    and the plain read agrees with it; pruned and unpruned must give it. The opened table."""
    sql = f"SELECT id, tag FROM t WHERE id IN ({', '.join(map(str, values))})"
    plain = answer(path, values)
    assert plain, "the scenario queries rows that exist"
    for engine in ENGINES:
        expected = rows(engine_alone(engine, sql, {"t": path}))
        assert expected == plain, (engine, "the engine alone and the plain read")
        for prune in (True, False):
            result = pruner.query(sql, {"t": path}, engine=engine, prune=prune)
            assert rows(result) == expected, (engine, prune)
    return open_table(path)


def read_whole(table: Table, values: list[int]) -> set[int]:
    """Fragments the selection of ``id IN values`` reads whole."""
    sql = f"SELECT * FROM t WHERE id IN ({', '.join(map(str, values))})"
    selection = explain(sql, {"t": table}).scans[0].selection
    return {
        f
        for f, count in table.fragment_rows.items()
        if count and (selection & Selection.whole({f: count})).num_rows == count
    }


def listed(path: Path, column: str | None = None) -> dict[str, Any]:
    """``pruner index list --json`` (in a new process): the one index, or ``column``'s."""
    result = subprocess.run(
        [sys.executable, "-m", "pruner.cli", "index", "list", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    if column is None:
        (row,) = rows
    else:
        (row,) = [r for r in rows if r["column"] == column]
    return dict(row)


def old_values() -> list[int]:
    drawn = ids()
    return [int(drawn[5]), int(drawn[PER_FRAGMENT + 5]), int(drawn[2 * PER_FRAGMENT + 5])]


def rewrite(file: Path, table: pa.Table, keep_identity: bool) -> None:
    """Replace ``file`` with ``table``, atomically; ``keep_identity``: restore its old size
    (it must match) and modification time, as a copy preserving times would."""
    before = file.stat()
    temporary = file.with_name(".replacing.tmp")
    write_parquet(table, temporary)
    os.replace(temporary, file)
    if keep_identity:
        assert file.stat().st_size == before.st_size, "the scenario needs the same size"
        os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))


def parquet_scenarios() -> dict[str, Callable[[Path], tuple[list[int], set[str]]]]:
    """name -> change the directory; return (values to query, files that must be read whole)."""

    def added(path: Path) -> tuple[list[int], set[str]]:
        pq.write_table(data(np.arange(ROWS, ROWS + 200), "new"), path / "part-9.parquet")
        return [*old_values(), ROWS + 3], {"part-9.parquet"}

    def replaced(path: Path) -> tuple[list[int], set[str]]:
        fresh = data(np.arange(ROWS, ROWS + PER_FRAGMENT), "new")
        rewrite(path / "part-1.parquet", fresh, keep_identity=False)
        return [old_values()[0], ROWS + 11], {"part-1.parquet"}

    def replaced_first(path: Path) -> tuple[list[int], set[str]]:
        # The first file is fragment 0, the id a stale zone's fragment is parked at.
        fresh = data(np.arange(ROWS, ROWS + PER_FRAGMENT), "new")
        rewrite(path / "part-0.parquet", fresh, keep_identity=False)
        return [old_values()[1], ROWS + 11], {"part-0.parquet"}

    def replaced_keeping_size_and_mtime(path: Path) -> tuple[list[int], set[str]]:
        # Other ids of the same count, width and encoding: the same size, and the times are
        # put back; only the footer (statistics) tells the files apart.
        fresh = data(ids()[:PER_FRAGMENT] + 50_000, "old")
        rewrite(path / "part-1.parquet", fresh, keep_identity=True)
        return [old_values()[0], int(ids()[7]) + 50_000], {"part-1.parquet"}

    def removed(path: Path) -> tuple[list[int], set[str]]:
        (path / "part-1.parquet").unlink()
        return [old_values()[0], old_values()[2]], set()

    def renamed(path: Path) -> tuple[list[int], set[str]]:
        (path / "part-1.parquet").rename(path / "part-7.parquet")
        return old_values(), {"part-7.parquet"}

    return {
        f.__name__: f
        for f in (
            added,
            replaced,
            replaced_first,
            replaced_keeping_size_and_mtime,
            removed,
            renamed,
        )
    }


PARQUET_SCENARIOS = parquet_scenarios()
