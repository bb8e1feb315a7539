"""Credentials given for a store never leave pruner (issue 43, "credentials stay secret").

Every ``pruner`` command that takes ``--storage-option`` and every Python entry point that
takes ``storage_options`` runs against moto's S3 server with a recognisable access key id
and secret key (moto accepts any credentials): successes, their text and JSON output and
progress bars, and failures (a missing key, a wrong column, a bucket that does not exist, an
option misspelt or malformed, an endpoint that does not answer), with ``--debug``
tracebacks; the command also runs in its own process with the credentials in ``AWS_*``
only. Then every place a secret could surface is searched for both strings: all that was
printed (file descriptors 1 and 2, so a Rust library or the JVM writing there is seen too),
every exception's message, repr and traceback (its causes included), the logs, every file
left locally (the test's folder is the working directory and the temporary folder) and
every object in the bucket.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner import storage
from pruner.cli import main
from tests.store.test_entry_points import (
    ITEMS,
    KEYS,
    SQL,
    storage_arguments,
    write_parquet_directory,
)
from tests.support.s3 import S3Server

SECRET = "pruner-canary-SECRET-0f1e2d"
KEY_ID = "AKIACANARY0123"
CANARIES = (SECRET, KEY_ID)


class Witness:
    """What pruner showed: texts by where they were seen; :meth:`leaks` finds the secrets
    in them, in local files and in the bucket's objects."""

    def __init__(self, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture):
        self._capfd = capfd
        self._caplog = caplog
        self.seen: list[tuple[str, str]] = []

    def saw(self, where: str, text: object) -> str:
        self.seen.append((where, str(text)))
        return str(text)

    def printed(self, where: str) -> tuple[str, str]:
        """stdout and stderr since the last call (file descriptors 1 and 2)."""
        out, err = self._capfd.readouterr()
        self.saw(f"{where}: stdout", out)
        self.saw(f"{where}: stderr", err)
        return out, err

    def command(self, *argv: str, status: int | None = 0) -> tuple[str, str]:
        """``pruner ARGV`` in this process; its exit status checked when ``status`` says."""
        try:
            code = main(list(argv))
        except SystemExit as exited:  # argparse's usage errors
            code = int(exited.code or 0)
        out, err = self.printed(f"pruner {argv[:2]}")
        if status is not None:
            assert code == status, f"pruner {' '.join(argv[:3])}... exited {code}: {err}"
        return out, err

    def error(self, where: str, call: Callable[[], object]) -> BaseException:
        """Run ``call``, which must fail; keep its error's message, repr and traceback
        (with every cause and context)."""
        try:
            call()
        except Exception as err:  # what a user's program would catch and log
            self.saw(f"{where}: str", err)
            self.saw(f"{where}: repr", repr(err))
            self.saw(f"{where}: traceback", "".join(traceback.format_exception(err)))
            chained: BaseException | None = err
            while chained is not None:
                self.saw(f"{where}: args", repr(chained.args))
                chained = chained.__cause__ or chained.__context__
            self.printed(where)
            return err
        raise AssertionError(f"{where} was expected to fail")

    def leaks(self, folders: list[Path], s3: S3Server, bucket: str) -> list[str]:
        self.printed("end")
        self.saw("logs", self._caplog.text)
        found = [
            f"{canary!r} in {where}"
            for where, text in self.seen
            for canary in CANARIES
            if canary in text
        ]
        for folder in folders:
            for file in sorted(p for p in folder.rglob("*") if p.is_file()):
                data = file.read_bytes()
                found += [f"{c!r} in {file}" for c in CANARIES if c.encode() in data]
        client = s3.client()
        name = bucket.removeprefix("s3://")
        for key in s3.keys(bucket):
            data = client.get_object(Bucket=name, Key=key)["Body"].read()
            found += [f"{c!r} in {bucket}/{key}" for c in CANARIES if c.encode() in data]
        return found


@pytest.fixture
def canary(s3: S3Server) -> dict[str, str]:
    """Storage options whose credentials are recognisable wherever they surface."""
    return {**s3.options, "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test's working directory and temporary folder: every file pruner leaves
    locally is under it."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder


@pytest.fixture
def witness(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Witness:
    caplog.set_level(logging.WARNING)
    caplog.set_level(logging.DEBUG, logger="pruner")
    return Witness(capfd, caplog)


@pytest.fixture
def table_uri(s3: S3Server, bucket: str, tmp_path: Path) -> str:
    uri = f"{bucket}/lake/events"
    s3.upload(write_parquet_directory(tmp_path / "events"), uri)
    return uri


def test_the_witness_finds_a_secret_wherever_it_is(
    s3: S3Server, bucket: str, scratch: Path, witness: Witness
) -> None:
    """The search itself: a secret printed, written to file descriptor 2 below Python, in
    an exception's cause, in a file left behind or in an object is found."""
    print(f"key {KEY_ID}")
    os.write(2, SECRET.encode())
    witness.printed("printed")
    cause = ValueError(f"options {SECRET}")
    witness.error("error", lambda: _raise(RuntimeError("refused"), cause))
    (scratch / "left.txt").write_text(KEY_ID)
    s3.client().put_object(Bucket=bucket.removeprefix("s3://"), Key="o", Body=SECRET.encode())
    leaks = witness.leaks([scratch], s3, bucket)
    for expected in (
        f"{KEY_ID!r} in printed: stdout",
        f"{SECRET!r} in printed: stderr",
        f"{SECRET!r} in error: traceback",
        f"{SECRET!r} in error: args",
        f"{KEY_ID!r} in {scratch / 'left.txt'}",
        f"{SECRET!r} in {bucket}/o",
    ):
        assert expected in leaks, f"the witness misses {expected}: it found {leaks}"


def _raise(err: Exception, cause: Exception) -> None:
    raise err from cause


def test_location_never_prints_its_options(canary: dict[str, str]) -> None:
    where = storage.location("s3://bucket/lake/events", canary)
    for shown in (repr(where), str(where), repr(where / "part-0.parquet"), repr(where.parent)):
        assert not any(c in shown for c in CANARIES), f"an ObjectPath shows its options: {shown}"
    assert where.options["aws_secret_access_key"] == SECRET, "yet it carries them"
    assert pickle.loads(pickle.dumps(where)).options == where.options, (
        "pickled (for a Spark task) with them"
    )


def test_the_pruner_command_never_shows_the_secrets(
    s3: S3Server,
    bucket: str,
    table_uri: str,
    canary: dict[str, str],
    scratch: Path,
    tmp_path: Path,
    witness: Witness,
) -> None:
    store = storage_arguments(canary)
    table = f"t={table_uri}"
    witness.command("index", "build", table_uri, "--column", "id", "--items", str(ITEMS), *store)
    witness.command("index", "update", table_uri, "--column", "id", *store)
    witness.command("index", "list", table_uri, *store)
    witness.command("index", "list", table_uri, "--json", *store)
    for form in ("table", "csv", "json"):
        witness.command("query", SQL, "--table", table, "--format", form, *store)
    witness.command("query", SQL, "--table", table, "--engine", "datafusion", *store)
    witness.command("query", SQL, "--table", table, "--no-prune", *store)
    witness.command("explain", SQL, "--table", table, *store)
    explained, _ = witness.command("explain", SQL, "--table", table, "--json", *store)
    assert json.loads(explained)["scans"], "explain --json printed the scans"
    witness.command("explain", SQL, "--table", table, "--dialect", "datafusion", *store)
    witness.command("lookup", table_uri, *map(str, KEYS), "--column", "id", *store)
    witness.command("lookup", table_uri, *map(str, KEYS), "--column", "id", "--json", *store)
    new = tmp_path / "new.parquet"
    pq.write_table(pa.table({"id": pa.array([50_000], pa.int64()), "s": ["new"]}), new)
    witness.command("write", table_uri, str(new), *store)

    # failures, with their tracebacks
    missing = f"t={bucket}/lake/absent"
    no_bucket = "t=s3://no-such-bucket-canary/lake/events"
    for argv in (
        ["query", SQL, "--table", missing],
        ["query", "SELECT * FROM t WHERE idd = 5", "--table", table],
        ["query", "SELECT * FROM t WHERE idd = 5", "--table", table, "--engine", "datafusion"],
        ["query", SQL, "--table", no_bucket],
        ["explain", "SELECT * FROM t WHERE idd = 5", "--table", table],
        ["explain", SQL, "--table", missing, "--json"],
        ["index", "build", table_uri, "--column", "idd"],
        ["index", "build", f"{bucket}/lake/absent", "--column", "id"],
        ["index", "update", table_uri, "--column", "s"],
        ["index", "list", no_bucket.removeprefix("t=")],
        ["lookup", table_uri, "5", "--column", "s"],
        ["write", f"{bucket}/lake/absent", str(new)],
    ):
        for debug in ([], ["--debug"]):
            witness.command(*debug, *argv, *store, status=2)
    # an option misspelt (its value a secret), the endpoint unreachable
    misspelt = [*store, "--storage-option", f"aws_secret_acces_key={SECRET}"]
    witness.command("--debug", "index", "list", table_uri, *misspelt, status=2)
    unreachable = {**canary, "aws_endpoint": "http://127.0.0.1:9"}
    witness.command(
        "--debug", "index", "list", table_uri, *storage_arguments(unreachable), status=2
    )
    # a value with no KEY=: argparse's error must not repeat it
    _, usage = witness.command(
        "index",
        "list",
        table_uri,
        "--storage-option",
        f"aws_secret_access_key:{SECRET}",
        status=2,
    )
    assert "--storage-option" in usage, usage
    # the command as a user runs it, in its own process, credentials in AWS_* only
    environment = {
        **os.environ,
        **s3.environment(),
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "TMPDIR": str(scratch),
    }
    pruner_command = [sys.executable, "-m", "pruner.cli", "--debug"]
    for argv, status in (
        (["query", SQL, "--table", table], 0),
        (["explain", SQL, "--table", table, "--json"], 0),
        (["query", SQL, "--table", missing], 2),
        (["query", "SELECT * FROM t WHERE idd = 5", "--table", table], 2),
        (["index", "list", no_bucket.removeprefix("t=")], 2),
    ):
        run = subprocess.run(
            [*pruner_command, *argv], capture_output=True, text=True, timeout=120, env=environment
        )
        assert run.returncode == status, f"pruner {argv[0]} exited {run.returncode}: {run.stderr}"
        witness.saw(f"python -m pruner.cli {argv[:1]}: stdout", run.stdout)
        witness.saw(f"python -m pruner.cli {argv[:1]}: stderr", run.stderr)

    leaks = witness.leaks([scratch, tmp_path], s3, bucket)
    assert not leaks, "a credential surfaced:\n" + "\n".join(leaks)


def test_progress_bars_never_show_the_secrets(
    s3: S3Server,
    bucket: str,
    table_uri: str,
    canary: dict[str, str],
    scratch: Path,
    tmp_path: Path,
    witness: Witness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = storage_arguments(canary)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws its progress bars, as on a terminal
    build = ["index", "build", table_uri, "--column", "id", "--items", str(ITEMS), *store]
    _, progress = witness.command(*build)
    assert "indexing id" in progress, f"the progress bar is drawn (and searched): {progress}"
    _, progress = witness.command("index", "update", table_uri, "--column", "id", *store)
    assert "updating id" in progress, f"the progress bar is drawn (and searched): {progress}"
    leaks = witness.leaks([scratch, tmp_path], s3, bucket)
    assert not leaks, "a credential surfaced:\n" + "\n".join(leaks)


def test_the_python_api_never_shows_the_secrets(
    s3: S3Server,
    bucket: str,
    table_uri: str,
    canary: dict[str, str],
    scratch: Path,
    tmp_path: Path,
    witness: Witness,
) -> None:
    options = canary
    tables = {"t": table_uri}
    witness.saw(
        "build_index", pruner.build_index(table_uri, "id", items=ITEMS, storage_options=options)
    )
    table = pruner.open_table(table_uri, storage_options=options)
    witness.saw("open_table repr", repr(table))
    witness.saw("table.path", table.path)
    witness.saw("query", pruner.query(SQL, tables, storage_options=options))
    witness.saw(
        "query datafusion", pruner.query(SQL, tables, engine="datafusion", storage_options=options)
    )
    explanation = pruner.explain(SQL, tables, storage_options=options)
    witness.saw("explain str", explanation)
    witness.saw("explain repr", repr(explanation))
    witness.saw("explain json", explanation.to_json_text())
    located = {"t": storage.location(table_uri, options)}
    witness.saw("plan repr", repr(pruner.plan(SQL, located, dialect="duckdb")))
    found = pruner.lookup(table_uri, "id", KEYS, storage_options=options)
    witness.saw("lookup repr", repr(found))
    witness.saw("lookup json", json.dumps(found.to_json()))
    witness.saw("find", pruner.find(table_uri, "id", KEYS, storage_options=options).to_pylist())
    records = pa.table({"id": pa.array([1500, 777_777], pa.int64())})
    witness.saw(
        "upsert_plan", repr(pruner.upsert_plan(table_uri, "id", records, storage_options=options))
    )
    witness.saw("index_status", json.dumps(pruner.index_status(table_uri, storage_options=options)))
    rows = pa.table({"id": pa.array([50_000], pa.int64()), "s": ["new"]})
    witness.saw("append", repr(pruner.append(table_uri, rows, storage_options=options)))
    witness.printed("successes")

    absent = f"{bucket}/lake/absent"
    no_bucket = "s3://no-such-bucket-canary/lake/events"
    wrong = "SELECT * FROM t WHERE idd = 5"
    witness.error(
        "query missing", lambda: pruner.query(SQL, {"t": absent}, storage_options=options)
    )
    witness.error(
        "query wrong column", lambda: pruner.query(wrong, tables, storage_options=options)
    )
    witness.error(
        "datafusion wrong column",
        lambda: pruner.query(wrong, tables, engine="datafusion", storage_options=options),
    )
    witness.error(
        "query no bucket", lambda: pruner.query(SQL, {"t": no_bucket}, storage_options=options)
    )
    witness.error(
        "explain wrong column", lambda: pruner.explain(wrong, tables, storage_options=options)
    )
    witness.error(
        "find no index", lambda: pruner.find(table_uri, "s", ["v5"], storage_options=options)
    )
    witness.error(
        "lookup wrong column", lambda: pruner.lookup(table_uri, "idd", [5], storage_options=options)
    )
    witness.error(
        "index_status missing", lambda: pruner.index_status(absent, storage_options=options)
    )
    witness.error("append missing", lambda: pruner.append(absent, rows, storage_options=options))
    witness.error(
        "append wrong schema",
        lambda: pruner.append(table_uri, pa.table({"x": [1]}), storage_options=options),
    )
    witness.error(
        "misspelt option",
        lambda: pruner.query(
            SQL, tables, storage_options={**options, "aws_secret_acces_key": SECRET}
        ),
    )
    witness.error(
        "unreachable endpoint",
        lambda: pruner.index_status(
            table_uri, storage_options={**options, "aws_endpoint": "http://127.0.0.1:9"}
        ),
    )

    leaks = witness.leaks([scratch, tmp_path], s3, bucket)
    assert not leaks, "a credential surfaced:\n" + "\n".join(leaks)


def test_spark_never_shows_the_secrets(
    s3: S3Server,
    bucket: str,
    table_uri: str,
    canary: dict[str, str],
    scratch: Path,
    tmp_path: Path,
    witness: Witness,
    spark: Any,
) -> None:
    """Spark carries the options to its Python workers in an option its plans redact."""
    from pruner.adapters.spark import queries

    pruner.build_index(table_uri, "id", items=ITEMS, storage_options=canary)
    witness.saw(
        "query spark", pruner.query(SQL, {"t": table_uri}, engine="spark", storage_options=canary)
    )
    frame = queries.sql(spark, SQL, {"t": storage.location(table_uri, canary)})
    frame.explain(extended=True)
    plans, _ = witness.printed("spark explain")
    assert "== Physical Plan ==" in plans, f"Spark printed its plans (searched): {plans}"
    witness.error(
        "spark wrong column",
        lambda: pruner.query(
            "SELECT * FROM t WHERE idd = 5",
            {"t": table_uri},
            engine="spark",
            storage_options=canary,
        ),
    )
    leaks = witness.leaks([scratch, tmp_path], s3, bucket)
    assert not leaks, "a credential surfaced:\n" + "\n".join(leaks)
