"""Start-up: what a new process pays before pruner does anything (issue 44).

A command-line call, a new worker or a script pays its imports every time. Each case is a
new process (``subprocess``, from a scratch directory, the checkout's ``pruner`` first on
``PYTHONPATH``), timed side by side with :func:`common.measure`; medians of ``--repeat``:

- the floor, ``python -c "import pyarrow"`` (every pruner process imports it), and the
  baseline, ``python -c "import duckdb, lance"`` (what a user of the engine alone imports);
- ``python -c "import pruner"`` and the console script ``pruner --help``: neither may load
  an engine, pandas or a compiled kernel (tests/end_to_end/test_packaging.py);
- a point lookup, ``pruner query "SELECT * FROM t WHERE id = K" --table t=PATH`` (DuckDB),
  twice: as the first query of its shape (nothing kept in ``PRUNER_CACHE_DIR``: parsed, with
  sqlglot imported) and with its shape kept by an earlier process that looked up another
  key (:mod:`pruner.analysis.stored`),
  against ``python -c "import duckdb, lance; ..."`` running the same SQL over
  ``lance.dataset(PATH)`` (DuckDB pushes ``id = K`` into Lance, which uses the index pruner
  committed): a Lance dataset of ``--rows`` rows, indexed on ``id``, made in a temporary
  directory.

pruner's modules are compiled to bytecode first (``compileall``), as ``pip install``
compiles a wheel's: without it, a process whose environment sets ``PYTHONDONTWRITEBYTECODE``
(this machine's does) compiles every module of pruner from source on every start (~230 ms
measured here), which no installed package does.

``--before REV`` runs the pruner cases on the ``pruner`` package of git revision ``REV`` too
(``git archive``, unpacked in the temporary directory), in the same turns; the command is
then ``python -m pruner.cli`` for both (the console script names an entry point of this
checkout's install, which ``REV`` may lack). Under two minutes
with the defaults. Run it (from the project root)::

    .venv/bin/python bench/startup.py
    .venv/bin/python bench/startup.py --before HEAD    # this checkout against its last commit
"""

from __future__ import annotations

import compileall
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import common
import duckdb
import fixtures
import lance
import pyarrow as pa
from common import ROOT, Report, measure

import pruner

HEAVY = ("pandas", "duckdb", "datafusion", "pyspark", "lance", "numba")
"""What a start-up should not load (tests/end_to_end/test_packaging.py)."""

SCRIPT = Path(sys.executable).with_name("pruner")
"""The console script beside this interpreter (``pip install`` writes it)."""


def unpack(revision: str, into: Path) -> Path:
    """The ``pruner`` package of ``revision``, unpacked under ``into`` (read from git; the
    checkout is left as it is)."""
    archive = subprocess.run(
        ["git", "archive", revision, "pruner"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def process(
    command: list[str], cwd: Path, path: Path | None, kept: Path | None = None
) -> Callable[[object], str]:
    """A case: ``command`` run in a new process from ``cwd``, ``path`` first on
    ``PYTHONPATH``; its answer the standard output. pruner keeps analyses in ``kept``
    (``PRUNER_CACHE_DIR``); without it, in a new empty folder each run."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        environment["PYTHONPATH"] = str(path)

    def run(_: object) -> str:
        environment["PRUNER_CACHE_DIR"] = str(kept or tempfile.mkdtemp(dir=cwd, prefix="kept-"))
        done = subprocess.run(
            command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
        return done.stdout

    return run


def loaded(start: str, cwd: Path, path: Path) -> list[str]:
    """Which of :data:`HEAVY` the start ``start`` (Python code) leaves in ``sys.modules``."""
    probe = f"{start}\nimport json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    answer: list[str] = json.loads(process([sys.executable, "-c", probe], cwd, path)(None))
    return answer


HELP_PROBE = (
    "import contextlib, io, sys\n"
    "sys.argv = ['pruner', '--help']\n"
    "from pruner.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    main()"
)


def main() -> None:
    made = common.parser(__doc__, rows=200_000, fragments=4, repeat=7)
    made.add_argument("--before", metavar="REV", help="also time the pruner of git revision REV")
    args = common.parse(made, duckdb, lance, pa)
    with tempfile.TemporaryDirectory(prefix="pruner-startup-") as scratch:
        work = Path(scratch)
        path = work / "t.lance"
        fixtures.write_lance(fixtures.id_table(args.rows, seed=44), path, args.fragments)
        pruner.build_index(path, "id")
        key = args.rows // 3
        sql = f"SELECT * FROM t WHERE id = {key}"
        alone = (
            f"import duckdb, lance; t = lance.dataset({str(path)!r}); "
            f"print(duckdb.sql({sql!r}).fetchall())"
        )
        versions = {"": ROOT}
        if args.before:
            versions[f" ({args.before})"] = unpack(args.before, work / "before")
        python = [sys.executable, "-c"]
        # the console script imports the entry point the checkout's install named, which an
        # earlier revision may not have: with --before, both run as `python -m pruner.cli`
        script = SCRIPT.exists() and not args.before
        cli = [str(SCRIPT)] if script else [sys.executable, "-m", "pruner.cli"]
        cases = {
            "import pyarrow": process([*python, "import pyarrow"], work, None),
            "import duckdb, lance": process([*python, "import duckdb, lance"], work, None),
            "lookup: DuckDB alone": process([*python, alone], work, None),
        }
        for package in versions.values():
            compileall.compile_dir(package / "pruner", quiet=1)
        for label, package in versions.items():
            cases[f"import pruner{label}"] = process([*python, "import pruner"], work, package)
            cases[f"pruner --help{label}"] = process([*cli, "--help"], work, package)
            query = [*cli, "query", sql, "--table", f"t={path}"]
            cases[f"lookup: pruner query{label}, first of its shape"] = process(
                query, work, package
            )
            # the shape learned from another key, by an earlier process
            kept = work / f"kept{len(cases)}"
            other = [*cli, "query", sql.replace(str(key), str(key + 1)), "--table", f"t={path}"]
            process(other, work, package, kept)(None)
            cases[f"lookup: pruner query{label}, shape kept"] = process(query, work, package, kept)
        print(
            f"{args.rows:,} rows in {args.fragments} fragments, indexed on id; lookup: {sql}; "
            f"{len(cases)} cases, each a new process, {args.repeat} turns"
        )
        got = measure(cases, repeat=args.repeat)
        for name, case in got.items():
            if name.startswith("lookup") and str(key * 3) not in case.answer:
                raise SystemExit(f"{name} did not find id {key}:\n{case.answer}")
        report = Report()
        for label, package in versions.items():
            starts = {"import pruner": "import sys, pruner", "pruner --help": HELP_PROBE}
            for start, code in starts.items():
                found = ", ".join(loaded(code, work, package)) or "none"
                report.note(f"{start}{label} loads {found} of {', '.join(HEAVY)}")

    def ms(name: str) -> float:
        return got[name].median()

    floor, engines, lookup = (
        ms(n) for n in ("import pyarrow", "import duckdb, lance", "lookup: DuckDB alone")
    )
    rows = []
    for name in got:
        against = lookup if name.startswith("lookup") else engines
        rows.append(
            [
                name,
                f"{ms(name):.0f}",
                f"{got[name].best():.0f}",
                f"{ms(name) / floor:.2f}x",
                f"{ms(name) / against:.2f}x",
            ]
        )
    report.table(
        f"A new process: median and best ms of {args.repeat}; ratios of medians (lookups "
        "against DuckDB alone's lookup, the rest against `import duckdb, lance`)",
        ["case", "median ms", "best ms", "/ import pyarrow", "/ baseline"],
        rows,
    )


if __name__ == "__main__":
    main()
