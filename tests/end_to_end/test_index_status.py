"""``pruner.index_status``: for Python, exactly what ``pruner index list PATH --json`` prints,
of current, stale and compound-key indexes of Lance datasets and Parquet directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import pruner
from pruner.index import build_index


def listed(path: Path) -> list[dict[str, Any]]:
    """``pruner index list PATH --json``, run as a user runs it."""
    command = [sys.executable, "-m", "pruner.cli", "index", "list", str(path), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def rows(start: int, count: int) -> pa.Table:
    ids = np.random.default_rng(start).permutation(count).astype(np.int64) + start
    return pa.table({"id": ids, "s": ids.astype(str)})


def test_lance_status_is_what_index_list_prints(tmp_path: Path) -> None:
    path = tmp_path / "t.lance"
    lance.write_dataset(rows(0, 3_000), str(path), max_rows_per_file=1_000)
    build_index(path, "id", items=250)
    build_index(path, ["id", "s"], items=250)
    current = pruner.index_status(path)
    assert current == listed(path)
    assert [row["state"] for row in current] == ["current", "current"]
    assert current[1]["key"] == ["id", "s"] and current[1]["update"] == {}
    assert current[0]["advice"] == "" and current[0]["update"]["words"] == "nothing to do"

    lance.write_dataset(rows(3_000, 500), str(path), mode="append")
    lance.dataset(str(path)).delete("id < 10")
    stale = pruner.index_status(str(path))
    assert stale == listed(path)
    assert stale == pruner.index_status(pruner.open_table(path))
    column, key = stale
    assert column["column"] == "id" and column["state"] == "stale"
    assert column["why"] == "1 fragment not indexed"
    assert column["fragments_indexed"] == 3 and column["fragments_total"] == 4
    assert column["rows_deleted"] == 10 and key["rows_deleted"] == 10
    assert column["update"]["fragments_to_add"] == 1
    assert column["advice"].endswith(f"pruner index update {path} --column id")
    assert key["state"] == "stale" and key["why"] == "1 fragment not indexed"
    assert key["advice"].endswith(f"pruner index update {path} --key id,s")


def test_parquet_status_is_what_index_list_prints(tmp_path: Path) -> None:
    directory = tmp_path / "pq"
    directory.mkdir()
    for number in range(2):
        pq.write_table(rows(number * 1_000, 1_000), directory / f"{number}.parquet")
    build_index(directory, "id", items=200)
    build_index(directory, "s", items=200)
    build_index(directory, ["s", "id"], items=200)
    current = pruner.index_status(directory)
    assert current == listed(directory)
    assert [row["state"] for row in current] == ["current"] * 3
    assert [row.get("key") for row in current] == [None, None, ["s", "id"]]

    pq.write_table(rows(5_000, 300), directory / "2.parquet")
    stale = pruner.index_status(directory)
    assert stale == listed(directory)
    assert [row["state"] for row in stale] == ["stale"] * 3
    assert {row["why"] for row in stale} == {"1 file not indexed"}
    assert {row["rows_total"] for row in stale} == {2_300}
    words = stale[0]["update"]["words"]
    assert words == "add 1 fragments; keep 2 as they are", words


def test_no_index_is_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "t.lance"
    lance.write_dataset(rows(0, 100), str(path))
    assert pruner.index_status(path) == listed(path) == []
