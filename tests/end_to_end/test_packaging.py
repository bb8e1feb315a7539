"""The wheel carries what ``pruner demo`` reads: the example queries are package data. A
start-up (``import pruner``, ``pruner --help``) loads no engine, pandas or compiled
kernel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pruner
from pruner.demo import read_sql_examples

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = sorted(
    p.relative_to(REPOSITORY).as_posix() for p in (REPOSITORY / "pruner" / "sql_examples").iterdir()
)


def _build_wheel(tmp_path: Path) -> Path:
    """A wheel of this checkout's sources, copied first (no stale ``build/`` can leak in, and
    nothing is written into the checkout): with the running environment's setuptools when it
    can build one, else in pip's isolated build environment (setuptools and wheel from the
    configured package index)."""
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(
        REPOSITORY / "pruner", source / "pruner", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPOSITORY / name, source / name)
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out)]
    attempts = [[*base, "--no-build-isolation", str(source)], [*base, str(source)]]
    errors = []
    for command in attempts:
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        wheels = sorted(out.glob("pruner_index-*.whl"))
        if done.returncode == 0 and wheels:
            return wheels[0]
        errors.append(f"$ {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    pytest.fail("could not build a wheel:\n" + "\n".join(errors))


@pytest.mark.slow
def test_installed_wheel_finds_the_demo_queries(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pruner/sql_examples/queries.sql" in EXAMPLE_FILES
    assert set(EXAMPLE_FILES) <= names

    # Installed non-editable into a folder of its own; the dependencies come from this
    # environment's site-packages, which follow PYTHONPATH on sys.path.
    site = tmp_path / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q"),
            *("--target", str(site), str(wheel)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pruner; from pruner.demo import read_sql_examples; "
            "print(pruner.__file__); print(len(read_sql_examples()))",
        ],
        cwd=outside,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    location, count = done.stdout.split()
    assert Path(location).is_relative_to(site)
    assert int(count) == len(read_sql_examples()) > 0


# What a start-up must not load until it is used (issue 44): the engines, pandas (which
# pyarrow imports the first time it converts Python values, pa.array or pa.scalar, when
# pandas is installed), and the compiled kernels.
HEAVY = ("pandas", "duckdb", "datafusion", "pyspark", "lance", "numba")

STARTS = {
    "import pruner": "import pruner",
    "pruner --help": (
        "sys.argv = ['pruner', '--help']\n"
        "from pruner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, done.code\n"
        "assert out.getvalue().startswith('usage: pruner'), out.getvalue()\n"
    ),
    "python -m pruner.cli --help": (
        "import runpy\n"
        "sys.argv = ['pruner', '--help']\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        runpy.run_module('pruner.cli', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, done.code\n"
        "assert out.getvalue().startswith('usage: pruner'), out.getvalue()\n"
    ),
}


@pytest.mark.parametrize("start", STARTS)
def test_start_up_loads_no_engine_pandas_or_kernel(start: str) -> None:
    code = (
        "import contextlib, io, json, sys\n"
        f"{STARTS[start]}\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [], f"{start} loaded them"


def test_every_public_name_loads_on_first_use_and_stays_itself() -> None:
    # pruner's names load lazily (pruner/__init__.py); a submodule named as one of them
    # (pruner.explain, pruner.plan, pruner.lookup, pruner.append), imported after, must not
    # put the module where the function was.
    code = (
        "import importlib, inspect, json, pruner\n"
        "first = {n: getattr(pruner, n) for n in pruner.__all__}\n"
        "for n in ('explain', 'plan', 'lookup', 'append', 'engines', 'index'):\n"
        "    importlib.import_module('pruner.' + n)\n"
        "print(json.dumps({n: [inspect.ismodule(getattr(pruner, n)),"
        " getattr(pruner, n) is first[n]] for n in pruner.__all__}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert sorted(found) == sorted(pruner.__all__) and len(found) > 20
    assert {n: v for n, v in found.items() if v != [False, True]} == {}, "a name changed"
