"""The wheel carries what ``pruner demo`` reads: the example queries are package data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
