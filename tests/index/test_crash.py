"""A build or update killed at any point (SIGKILL, in a subprocess) leaves the previous index
or the new one, never an unreadable index or a selection that drops a row; the next run
removes the temporary files the killed one left. A file-size limit makes the write fail
with one clear error and leaves the old index as it was.

The subprocess counts the calls into and returns from pruner's own functions
(``sys.setprofile``) and kills itself at event ``k``; a first run counts them all, and ``k``
is drawn evenly over that count (with the last ones, where files are renamed and Lance
commits, always among them).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow.parquet as pq
import pytest
from lance.file import LanceFileReader

from pruner.index import list_bloom_indexes, load_index, parquet_index_path
from pruner.table import open_table
from tests.support.changes import (
    PARQUET_SCENARIOS,
    ROWS,
    data,
    ids,
    lance_table,
    parquet_table,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POINTS = 10

# Runs `operation` on `path`; with a kill point, SIGKILLs itself at that call into or return
# from a pruner function; prints how many there were when it finishes.
CHILD = """
import os, signal, sys
sys.path.insert(0, {root!r})
import pruner
from pruner.index import build_index, update_index
PRUNER = os.path.dirname(pruner.__file__)
calls = 0
kill_at = {kill_at}
def count(frame, event, arg):
    global calls
    if event in ("call", "return") and frame.f_code.co_filename.startswith(PRUNER):
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
sys.setprofile(count)
if {operation!r} == "build":
    build_index({path!r}, "id", items=100)
else:
    update_index({path!r}, "id")
sys.setprofile(None)
print(calls)
"""


def _run(path: Path, operation: str, kill_at: int = 0) -> subprocess.CompletedProcess[str]:
    code = CHILD.format(root=str(ROOT), kill_at=kill_at, operation=operation, path=str(path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _index_files(path: Path) -> list[Path]:
    if (path / "_versions").is_dir():
        return [s.path for s in list_bloom_indexes(path) if s.column == "id"]
    return [parquet_index_path(path, "id")]


def _state(path: Path) -> list[Any]:
    """The index of ``path`` as stored, decoded: each segment's zones and metadata."""
    state = []
    for file in _index_files(path):
        table = LanceFileReader(str(file)).read_all().to_table()
        metadata = dict(table.schema.metadata or {})
        state.append((table.replace_schema_metadata(None).to_pydict(), metadata))
    return state


def _leftovers(path: Path) -> list[Path]:
    """Anything hidden in the index folders: temporary files and staging folders."""
    root = path / "_indices" if (path / "_versions").is_dir() else path / "_pruner"
    return sorted(p for p in root.rglob(".*"))


def _changed_lance(directory: Path) -> Path:
    path = lance_table(directory)
    lance.write_dataset(data(np.arange(ROWS, ROWS + 500), "new"), str(path), mode="append")
    return path


def _changed_parquet(directory: Path) -> Path:
    path = parquet_table(directory)
    PARQUET_SCENARIOS["added"](path)
    PARQUET_SCENARIOS["replaced"](path)
    return path


def _rows_of(path: Path, values: list[int]) -> set[int]:
    """The row addresses of ``values`` (fragment << 32 | offset), read without pruner."""
    table = open_table(path)
    if table.kind == "lance":
        read = lance.dataset(str(path)).to_table(columns=["id"], with_row_address=True)
        keep = np.isin(read.column("id").to_numpy(), values)
        return set(read.column("_rowaddr").to_numpy()[keep].tolist())
    found = set()
    for fid, file in (table.files or {}).items():
        column = pq.read_table(file.path, columns=["id"]).column("id").to_numpy()
        found |= {(fid << 32) | int(i) for i in np.flatnonzero(np.isin(column, values))}
    return found


@pytest.mark.parametrize("operation", ["update", "build"])
@pytest.mark.parametrize("make", [_changed_lance, _changed_parquet], ids=["lance", "parquet"])
def test_a_killed_write_leaves_the_old_index_or_the_new_one(
    make: Callable[[Path], Path], operation: str, tmp_path: Path
) -> None:
    from pruner.explain import explain

    original = make(tmp_path / "original")
    old = _state(original)
    finished = tmp_path / "finished"
    shutil.copytree(original, finished, copy_function=shutil.copy2)
    done = _run(finished, operation)
    assert done.returncode == 0, done.stderr
    total = int(done.stdout.split()[-1])
    new = _state(finished)
    assert new != old
    values = [int(ids()[5]), int(ids()[1005]), ROWS + 3]
    points = sorted({*np.linspace(1, total, POINTS).astype(int).tolist(), total - 1, total})
    outcomes = set()
    for kill_at in points:
        path = tmp_path / f"killed-{kill_at}"
        shutil.copytree(original, path, copy_function=shutil.copy2)
        killed = _run(path, operation, kill_at)
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr)
        if _leftovers(path):
            outcomes.add("left files")
        state = _state(path)
        assert state in (old, new), f"killed at call {kill_at} of {total}"
        outcomes.add("new" if state == new else "old")
        load_index(path, "id")  # readable
        table = open_table(path)
        selection = (
            explain(f"SELECT * FROM t WHERE id IN ({', '.join(map(str, values))})", {"t": table})
            .scans[0]
            .selection
        )
        rows = np.array(sorted(_rows_of(path, values)), np.int64)
        assert len(rows) == len(values)
        assert selection.contains(rows >> 32, rows & 0xFFFFFFFF).all(), kill_at
        # The next run finishes the work and removes what the killed one left.
        again = _run(path, operation)
        assert again.returncode == 0, again.stderr
        assert _state(path) == new or operation == "build"
        assert _leftovers(path) == [], kill_at
    assert outcomes == {"old", "new", "left files"}, "kills before, during and after the write"


def test_a_file_size_limit_fails_with_one_error_and_keeps_the_old_index(tmp_path: Path) -> None:
    path = _changed_parquet(tmp_path)
    old = _state(path)
    size = parquet_index_path(path, "id").stat().st_size
    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(ROOT)!r})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({size // 2}, {size // 2}))
from pruner.cli import main
sys.exit(main(["index", "update", {str(path)!r}, "--column", "id"]))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("pruner: error: ") and "File too large" in line, line
    assert _state(path) == old
    assert _leftovers(path) == []


def _without_write(path: Path, writable: bool) -> None:
    """Take the write bits off (or put them back on) every file and folder of ``path``."""
    for item in [path, *path.rglob("*")]:
        mode = item.stat().st_mode
        item.chmod(mode | 0o200 if writable else mode & ~0o222)


@pytest.mark.parametrize("make", [_changed_lance, _changed_parquet], ids=["lance", "parquet"])
def test_a_read_only_table_fails_with_one_error_and_keeps_the_old_index(
    make: Callable[[Path], Path], tmp_path: Path
) -> None:
    """``pruner index update`` on a table whose folders are read-only (as root, the test runs
    it without the capabilities that let root write anyway)."""
    path = make(tmp_path)
    old, values = _state(path), [int(ids()[5]), ROWS + 7]
    command = [sys.executable, "-m", "pruner.cli", "index", "update", str(path), "--column", "id"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) drops root's right to write anywhere"
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    _without_write(path, writable=False)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    finally:
        _without_write(path, writable=True)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("pruner: error: Permission denied ("), line
    assert "check their permissions" in line and "the old one is still in use" in line, line
    assert _state(path) == old
    assert _leftovers(path) == []
    from pruner.explain import explain

    sql = f"SELECT id FROM t WHERE id IN ({values[0]}, {values[1]})"
    selection = explain(sql, {"t": open_table(path)}).scans[0].selection
    rows = np.array(sorted(_rows_of(path, values)), np.int64)
    assert len(rows) >= len(values), "rows of the old data and appended ones"
    assert selection.contains(rows >> 32, rows & 0xFFFFFFFF).all()
