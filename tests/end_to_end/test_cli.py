"""The ``pruner`` command, run as a user runs it, and the core's independence of engines."""

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
import pytest

from pruner.cli import main

PRUNER = [sys.executable, "-m", "pruner.cli"]


def run(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRUNER, *args], capture_output=True, text=True, timeout=timeout)


def test_index_build_and_list(tmp_path: Path) -> None:
    path = tmp_path / "t.lance"
    ids = np.random.default_rng(0).permutation(5000).astype(np.int64)
    lance.write_dataset(
        pa.table({"id": ids, "s": ids.astype(str)}), str(path), max_rows_per_file=2000
    )
    built = run("index", "build", str(path), "--column", "id", "--column", "s", "--items", "500")
    assert built.returncode == 0, built.stderr
    assert "id: 10 zones over 3 fragments" in built.stdout
    listed = run("index", "list", str(path), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["column"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {"id", "s"}
    assert rows["id"]["zones"] == 10 and rows["id"]["items"] == 500


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = run("index", "build", str(tmp_path / "nope"), "--column", "id")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), str(path))
    bad_column = run("index", "build", str(path), "--column", "idd")
    assert bad_column.returncode == 2, bad_column.stderr
    assert "column 'idd' is not in" in bad_column.stderr
    assert len(bad_column.stderr.strip().splitlines()) <= 2, bad_column.stderr


def test_core_imports_without_any_engine() -> None:
    code = (
        "import sys\n"
        "for name in ('duckdb', 'datafusion', 'pyspark'):\n"
        "    sys.modules[name] = None\n"
        "import pruner, pruner.index, pruner.cli, pruner.adapters, pruner.plan, pruner.engines\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_explain_prints_text_and_json(tmp_path: Path) -> None:
    from pruner.demo import write_example_tables

    paths = write_example_tables(tmp_path, rows=4000, items=256)
    table = f"events={paths['events']}"
    text = run("explain", "SELECT * FROM events WHERE user_id = 42", "--table", table)
    assert text.returncode == 0, text.stderr
    assert "user_id = 42: bloom index" in text.stdout
    raw = run(
        "explain",
        "SELECT * FROM events WHERE user_id = ? OR amount > 1",
        "--table",
        table,
        "--param",
        "42",
        "--json",
    )
    scan = json.loads(raw.stdout)["scans"][0]
    assert {
        "name",
        "zones_total",
        "zones_selected",
        "rows_total",
        "rows_selected",
        "ranges",
        "terms",
    } <= set(scan)
    assert scan["zones_selected"] == scan["zones_total"], "OR with a range cannot prune"
    assert any("OR with a term that cannot prune" in t["reason"] for t in scan["terms"])


def test_explain_errors_are_one_line(tmp_path: Path) -> None:
    bad_sql = run("explain", "SELECT * FROM t WHERE (", "--table", f"t={tmp_path}")
    missing = run("explain", "SELECT 1", "--table", f"t={tmp_path / 'nope'}")
    malformed = run("explain", "SELECT 1", "--table", "t")
    for result in (bad_sql, missing, malformed):
        assert result.returncode == 2
        assert result.stderr.startswith("pruner: error:") and result.stderr.count("\n") == 1


def _events(tmp_path: Path) -> Path:
    path = tmp_path / "e.lance"
    ids = np.random.default_rng(1).permutation(20_000).astype(np.int64)
    lance.write_dataset(pa.table({"id": ids, "v": ids * 2}), str(path), max_rows_per_file=5_000)
    assert run("index", "build", str(path), "--column", "id", "--items", "1000").returncode == 0
    return path


def test_query_prints_the_result_and_what_it_scanned(tmp_path: Path) -> None:
    path = _events(tmp_path)
    sql = "SELECT id, v FROM e WHERE id IN (7, 11) ORDER BY id"
    for engine in ("duckdb", "datafusion"):
        out = run("query", sql, "--table", f"e={path}", "--engine", engine, "--format", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == [{"id": 7, "v": 14}, {"id": 11, "v": 22}]
        assert "zones scanned 2 / 20" in out.stderr, out.stderr
    csv = run("query", sql, "--table", f"e={path}", "--format", "csv", "--no-prune")
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines() == ['"id","v"', "7,14", "11,22"]
    assert "not pruned: read all 20,000 rows" in csv.stderr
    # a table: DuckDB's own box when DuckDB ran it (types under the names), rich's otherwise
    table = run("query", sql, "--table", f"e={path}")
    assert table.returncode == 0, table.stderr
    lines = [line.strip("│ ") for line in table.stdout.splitlines()]
    assert lines[2].split() == ["int64", "│", "int64"], table.stdout
    assert [line.split() for line in lines[4:6]] == [["7", "│", "14"], ["11", "│", "22"]]
    other = run("query", sql, "--table", f"e={path}", "--engine", "datafusion")
    assert other.returncode == 0 and "┃ id" in other.stdout and "│ 11 │ 22 │" in other.stdout


def test_the_collector_is_paused_for_one_shot_commands_and_restored_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    import pruner.cli.commands as commands
    import pruner.engines as engines

    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": np.arange(3000, dtype=np.int64)}), str(path))
    seen: dict[str, bool] = {}
    build, timed = commands.build_index, engines.timed_query

    def recorded(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen[name] = gc.isenabled()
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(commands, "build_index", recorded("build", build))
    monkeypatch.setattr(engines, "timed_query", recorded("query", timed))
    assert gc.isenabled()
    assert main(["index", "build", str(path), "--column", "id"]) == 0
    assert seen == {"build": True} and gc.isenabled()  # works through data: collects
    assert main(["query", "SELECT * FROM t WHERE id = 7", "--table", f"t={path}"]) == 0
    assert seen["query"] is False and gc.isenabled()  # one-shot: paused, then resumed
    assert "7" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert gc.isenabled()
    assert main(["query", "SELECT nope FROM t", "--table", f"t={path}"]) == 2
    assert gc.isenabled()
    gc.disable()  # a caller's paused collector stays paused, even through a build
    try:
        assert main(["index", "build", str(path), "--column", "id"]) == 0
        assert seen["build"] is False and not gc.isenabled()
    finally:
        gc.enable()


def test_the_command_freezes_what_is_left_before_it_exits_and_main_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    from pruner.cli import command

    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": np.arange(3000, dtype=np.int64)}), str(path))
    query = ["query", "SELECT * FROM t WHERE id = 7", "--table", f"t={path}"]
    enabled = gc.isenabled()  # command() pauses the collector until its exit: restored below
    gc.unfreeze()
    try:
        assert main(query) == 0  # a caller's process goes on: its objects stay collectable
        assert gc.get_freeze_count() == 0
        wrong = ["query", "SELECT nope FROM t", "--table", f"t={path}"]
        for argv, status in ((query, 0), (wrong, 2)):
            monkeypatch.setattr(sys, "argv", ["pruner", *argv])
            with pytest.raises(SystemExit) as exited:
                command()
            assert exited.value.code == status  # the status is the command's, as before
            assert gc.get_freeze_count() > 0  # the exit walks none of them
            gc.unfreeze()
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
    out = capsys.readouterr()
    assert out.out.count(" 7 │") == 2 and "pruner: error:" in out.err


def test_duckdbs_database_opened_while_planning_leaves_no_thread_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading
    import time

    import duckdb

    import pruner.adapters.duckdb as duck

    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": np.arange(3000, dtype=np.int64)}), str(path))
    connect = duckdb.connect

    def slow_connect(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        time.sleep(0.3)  # DuckDB's database still opening when the planning fails or ends
        return connect(*args, **kwargs)

    monkeypatch.setattr(duck.duckdb, "connect", slow_connect)
    before = {t.ident for t in threading.enumerate()}
    for table, status in (("t", 2), (f"t={path}", 0)):  # "t": refused before any query
        monkeypatch.setattr(duck, "_shared", None)  # opened anew, as in a new process
        assert main(["query", "SELECT * FROM t WHERE id = 7", "--table", table]) == status
        assert {t.ident for t in threading.enumerate()} == before, table
    out = capsys.readouterr()
    assert "7" in out.out and "pruner: error:" in out.err


def test_query_errors_are_one_line(tmp_path: Path) -> None:
    path = _events(tmp_path)
    cases = {
        "SELECT * FROM nope": "nope",
        # pruner's parser refuses it too, but the engine's own error is the one shown
        "SELECT * FROM e WHERE": "duckdb: Parser Error",
        "SELECT * FROM e": "does not exist",
    }
    for sql, message in cases.items():
        target = f"e={tmp_path / 'missing'}" if message == "does not exist" else f"e={path}"
        out = run("query", sql, "--table", target)
        assert out.returncode == 2, (sql, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    engine = run("query", "SELECT 1", "--engine", "postgres")
    assert engine.returncode == 2 and "postgres" in engine.stderr


@pytest.mark.slow
def test_query_on_spark(tmp_path: Path) -> None:
    """The command starts its own local Spark session (~10 s alone; a minute or more when the
    machine is busy with a second JVM, hence the long timeout)."""
    path = _events(tmp_path)
    sql = "SELECT id, v FROM e WHERE id IN (7, 11) ORDER BY id"
    out = run(
        "query", sql, "--table", f"e={path}", "--engine", "spark", "--format", "json", timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"id": 7, "v": 14}, {"id": 11, "v": 22}]
    assert "zones scanned 2 / 20" in out.stderr, out.stderr


def test_errors_are_one_line_and_debug_adds_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), str(path))
    argv = ["query", "SELECT * FROM missing_table", "--table", f"t={path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "missing_table" in err
    assert main(["--debug", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("pruner: error:")


def test_index_list_says_why_stale_and_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "pq"
    directory.mkdir()
    pq.write_table(pa.table({"id": list(range(1_000))}), directory / "0.parquet")
    assert main(["index", "build", str(directory), "--column", "id", "--items", "100"]) == 0
    pq.write_table(pa.table({"id": [5_000]}), directory / "1.parquet")
    capsys.readouterr()
    assert main(["index", "list", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "stale (1 file not indexed)" in out
    assert "1 file not indexed" in out and "an update would add 1 fragments" in out
    assert f"pruner index update {directory} --column id" in out
    assert max(len(line) for line in out.splitlines()) <= 160  # piped: one line per row
    assert main(["index", "list", str(directory), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["state"] == "stale" and row["why"] == "1 file not indexed"


@pytest.mark.parametrize("dialect", ["duckdb", "datafusion"])
def test_explain_refuses_what_the_engine_refuses(
    tmp_path: Path, dialect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"user_id": [1, 2, 3]}), str(path))
    base = ["explain", "--dialect", dialect, "--table", f"t={path}"]
    assert main([*base[:1], "SELECT * FROM t WHERE usr_id = 5", *base[1:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pruner: error: {dialect}:") and "usr_id" in err
    assert main([*base[:1], "SELECT * FROM t WHERE user_id = 5", *base[1:]]) == 0


@pytest.mark.parametrize("dialect", ["duckdb", "datafusion"])
def test_python_explain_raises_the_engines_own_error(tmp_path: Path, dialect: str) -> None:
    """pruner.explain has the dialect's engine plan the SQL: a misspelt column raises the
    engine's own exception, the same type as the engine alone raises (and as query)."""
    import pruner
    from tests.support.engine_check import engine_alone

    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"user_id": [1, 2, 3]}), str(path))
    wrong = "SELECT * FROM t WHERE usr_id = 5"
    with pytest.raises(Exception) as alone:
        engine_alone(dialect, wrong, {"t": path})
    with pytest.raises(type(alone.value), match="usr_id"):
        pruner.explain(wrong, {"t": path}, dialect=dialect)
    with pytest.raises(type(alone.value)):
        pruner.query(wrong, {"t": path}, engine=dialect)
    explained = pruner.explain(wrong, {"t": path}, dialect=dialect, check=False)
    assert "usr_id" in str(explained)  # pruner's own view, unchecked
    assert pruner.explain("SELECT * FROM t WHERE user_id = 5", {"t": path}, dialect=dialect)


def test_query_csv_of_view_types_and_row_groups_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DataFusion returns strings of Parquet as string_view, which pyarrow's CSV writer
    refuses; the summary says how many row groups the engine reads (one line, unwrapped)."""
    directory = tmp_path / "pq"
    directory.mkdir()
    data = pa.table(
        {
            "id": pa.array(range(2_000), pa.int64()),
            "s": pa.array([f"v{i}" for i in range(2_000)], pa.string_view()),
        }
    )
    pq.write_table(data, directory / "0.parquet", row_group_size=1_000)
    assert main(["index", "build", str(directory), "--column", "id", "--items", "500"]) == 0
    capsys.readouterr()
    sql = "SELECT id, s FROM t WHERE id = 1500"
    for engine in ("duckdb", "datafusion"):
        argv = ["query", sql, "--table", f"t={directory}", "--engine", engine, "--format", "csv"]
        assert main(argv) == 0
        captured = capsys.readouterr()
        assert captured.out.splitlines()[-1] == '1500,"v1500"'
        assert "Parquet row groups read 1 / 2 (1,000 rows)" in captured.err
        assert len(captured.err.strip().splitlines()) == 1


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_query_csv_writes_binary_as_duckdb_does(tmp_path: Path, engine: str) -> None:
    """Bytes that are not UTF-8 (every byte value, an empty value, a NULL) are written as
    DuckDB's own COPY ... (FORMAT csv) writes them; pyarrow's CSV writer refused them
    (ArrowInvalid: Invalid UTF8 payload), pruned or not."""
    import csv
    import io

    import duckdb

    root = tmp_path / "t"
    root.mkdir()
    values = [bytes(range(256)), b'a\\b,"c\n', b"", None, bytes([0xFF, 0xFE])]
    data = pa.table({"id": list(range(len(values))), "b": pa.array(values, pa.binary())})
    pq.write_table(data, root / "a.parquet", bloom_filter_options={"id": True})
    target = tmp_path / "duckdb.csv"
    duckdb.sql(
        f"COPY (SELECT b FROM read_parquet('{root}/*.parquet') ORDER BY id) TO '{target}' "
        "(FORMAT csv)"
    )
    expected = list(csv.reader(io.StringIO(target.read_text())))
    for flags in ([], ["--no-prune"]):
        result = run(
            "query",
            "SELECT b FROM t ORDER BY id",
            "--table",
            f"t={root}",
            "--format",
            "csv",
            "--engine",
            engine,
            *flags,
        )
        assert result.returncode == 0, result.stderr
        assert list(csv.reader(io.StringIO(result.stdout))) == expected, flags
