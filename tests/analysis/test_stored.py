"""Analyses kept between processes (pruner.analysis.stored): a later process answers a text
of a kept shape without analysing it, exactly as the text alone; an entry that is damaged,
of another key or of other code is a miss, never an answer; the folder stays bounded; the
``pruner`` command keeps its analyses, and its next run of the shape imports no sqlglot."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest

from pruner.analysis import stored
from pruner.analysis.model import Analysis
from pruner.analysis.stored import Store
from pruner.analysis.templates import Templates
from pruner.analyzer import analyses_kept_in, analyze_uncached, templates

SCHEMAS = (("t", pa.schema([("id", pa.int64()), ("s", pa.string())])),)


def _counting() -> tuple[Templates, list[str]]:
    """A new process's cache, and the texts it analysed itself."""
    calls: list[str] = []

    def analyse(sql: str, dialect: str, schemas: tuple[tuple[str, pa.Schema], ...]) -> Analysis:
        calls.append(sql)
        return analyze_uncached(sql, dialect, schemas)

    return Templates(analyse), calls


def _later(folder: Path, sql: str) -> tuple[Analysis, list[str]]:
    cache, calls = _counting()
    cache.store = Store(folder)
    return cache.analysis(sql, "duckdb", SCHEMAS), calls


def test_a_kept_shape_is_not_analysed_again(tmp_path: Path) -> None:
    first = "SELECT * FROM t WHERE id = 7 AND s IN ('a', 'b')"
    analysis, calls = _later(tmp_path, first)
    assert analysis == analyze_uncached(first, "duckdb", SCHEMAS)
    assert len(calls) == 2  # the text and its sentinel twin
    assert len(list(tmp_path.iterdir())) == 1
    second = "SELECT * FROM t WHERE id = 9 AND s IN ('c', 'd')"
    analysis, calls = _later(tmp_path, second)
    assert calls == [] and analysis == analyze_uncached(second, "duckdb", SCHEMAS)
    # equal literals: the template's condition fails, the text is analysed
    merged = "SELECT * FROM t WHERE id = 9 AND s IN ('c', 'c')"
    analysis, calls = _later(tmp_path, merged)
    assert calls == [merged] and analysis == analyze_uncached(merged, "duckdb", SCHEMAS)


def test_a_text_without_slots_is_kept_by_its_text(tmp_path: Path) -> None:
    sql = "SELECT * FROM t WHERE s IS NULL"
    assert _later(tmp_path, sql)[1] == [sql]
    analysis, calls = _later(tmp_path, sql)
    assert calls == [] and analysis == analyze_uncached(sql, "duckdb", SCHEMAS)
    other = "SELECT * FROM t WHERE s IS NOT NULL"
    assert _later(tmp_path, other)[1] == [other]


@pytest.mark.parametrize("position", [0, 5, 20, 40, 60, -30, -1])
def test_a_damaged_entry_is_analysed_again(tmp_path: Path, position: int) -> None:
    """Any byte of an entry changed (its mark, checksum, key or value): a miss, the text
    analysed as it is, and the entry written again."""
    _later(tmp_path, "SELECT * FROM t WHERE id = 7")
    [entry] = tmp_path.iterdir()
    data = bytearray(entry.read_bytes())
    data[position] ^= 0x01
    entry.write_bytes(bytes(data))
    sql = "SELECT * FROM t WHERE id = 8"
    analysis, calls = _later(tmp_path, sql)
    assert calls and analysis == analyze_uncached(sql, "duckdb", SCHEMAS)
    assert _later(tmp_path, "SELECT * FROM t WHERE id = 10")[1] == [], "written again"


def test_an_entry_of_another_key_or_other_code_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = "SELECT * FROM t WHERE id = 7"
    strings = "SELECT * FROM t WHERE s = 'x'"
    _later(tmp_path / "a", ids)
    _later(tmp_path / "b", strings)
    [of_ids] = (tmp_path / "a").iterdir()
    [of_strings] = (tmp_path / "b").iterdir()
    of_strings.write_bytes(of_ids.read_bytes())  # the id template under the string key
    sql = "SELECT * FROM t WHERE s = 'y'"
    analysis, calls = _later(tmp_path / "b", sql)
    assert calls and analysis == analyze_uncached(sql, "duckdb", SCHEMAS)
    # another pruner (an edit, a reinstall): every entry is another key
    monkeypatch.setattr(stored, "_code", "another pruner")
    assert _later(tmp_path / "a", "SELECT * FROM t WHERE id = 8")[1]


def test_the_fingerprint_follows_pruner_s_files(tmp_path: Path) -> None:
    """An edit of any of pruner's files changes the key of every entry (a new process)."""
    shutil.copytree(Path(stored.__file__).parents[1], tmp_path / "pruner")
    code = "from pruner.analysis import stored; print(stored._code_fingerprint())"

    def fingerprint() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
        )
        return done.stdout

    first = fingerprint()
    assert fingerprint() == first
    edited = tmp_path / "pruner" / "expressions.py"
    edited.write_text(edited.read_text() + "\n# an edit\n")
    assert fingerprint() != first


def test_the_folder_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored, "MAX_ENTRIES", 8)
    for n in range(20):
        _later(tmp_path, f"SELECT * FROM t WHERE id = 1 AND s IS NULL AND id <> {n} OR s = 'q{n}'")
        assert len(list(tmp_path.iterdir())) <= 8


def test_a_folder_that_cannot_be_written_keeps_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_bytes(b"")  # a file where the folder would be
    sql = "SELECT * FROM t WHERE id = 7"
    analysis, calls = _later(blocked / "analyses", sql)
    assert calls and analysis == analyze_uncached(sql, "duckdb", SCHEMAS)


def test_kept_in_restores_the_store(tmp_path: Path) -> None:
    before = templates.store
    with analyses_kept_in(tmp_path):
        assert templates.store is not None and templates.store.directory == tmp_path
    with analyses_kept_in(None):
        assert templates.store is None
    assert templates.store is before


def _environment(kept: str, home: Path) -> dict[str, str]:
    root = str(Path(stored.__file__).parents[2])
    return {
        **os.environ,
        "PRUNER_CACHE_DIR": kept,
        "PYTHONPATH": root,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
    }


LOOKUP = (
    "import json, sys\n"
    "from pruner.cli import main\n"
    "main(['query', sys.argv[1], '--table', 't=' + sys.argv[2], '--format', 'json'])\n"
    "print(json.dumps(sorted(m for m in ('sqlglot', 'rich') if m in sys.modules)))\n"
)


def _lookup(sql: str, path: Path, kept: str) -> tuple[list[object], list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", LOOKUP, sql, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_environment(kept, path.parent / "home"),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *result, loaded = done.stdout.strip().splitlines()
    return json.loads("\n".join(result)), json.loads(loaded)


def test_the_command_s_next_run_of_a_shape_imports_no_sqlglot(tmp_path: Path) -> None:
    """``pruner query`` keeps its analysis in PRUNER_CACHE_DIR: a new process looking up
    another key of the shape answers as DuckDB alone without importing sqlglot (nor rich);
    with PRUNER_CACHE_DIR empty nothing is kept."""
    import pruner

    path = tmp_path / "t.lance"
    ids = np.random.default_rng(3).permutation(40_000).astype(np.int64)
    table = pa.table({"id": ids, "s": [f"s{i % 97}" for i in ids]})
    lance.write_dataset(table, str(path), max_rows_per_file=10_000)
    pruner.build_index(path, "id")
    kept = tmp_path / "kept"
    shape = "SELECT id, s FROM t WHERE id = {} ORDER BY id"
    _, loaded = _lookup(shape.format(11), path, str(kept))
    assert loaded == ["sqlglot"] and len(list((kept / "analyses").iterdir())) == 1
    con = duckdb.connect()
    con.register("t", lance.dataset(str(path)))
    for key in (12, 39_999, 40_000):
        got, loaded = _lookup(shape.format(key), path, str(kept))
        alone = con.execute(shape.format(key)).to_arrow_table().to_pylist()
        assert got == alone and loaded == [], key
    (tmp_path / "home").mkdir()
    got, loaded = _lookup(shape.format(5), path, "")
    assert loaded == ["sqlglot"] and list((tmp_path / "home").iterdir()) == []


def test_an_entry_builds_nothing_but_an_analysis(tmp_path: Path) -> None:
    """An entry rewritten with a valid checksum to name a class an analysis does not hold
    (or to hold a list) reads as a miss: only the analysis's own dataclasses are built."""
    _later(tmp_path, "SELECT * FROM t WHERE id = 7")
    [entry] = tmp_path.iterdir()
    data = entry.read_bytes()
    head = len(stored._MAGIC) + 32
    for old, new in ((b'"d": "Equals"', b'"d": "Popen"'), (b'{"t": [', b"[[")):
        body = data[head:].replace(old, new, 1)
        assert body != data[head:]
        entry.write_bytes(stored._MAGIC + hashlib.sha256(body).digest() + body)
        sql = "SELECT * FROM t WHERE id = 8"
        analysis, calls = _later(tmp_path, sql)
        assert calls and analysis == analyze_uncached(sql, "duckdb", SCHEMAS)
        entry.write_bytes(data)
