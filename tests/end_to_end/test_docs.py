"""Every code block of the README and docs/ runs, as a reader would run it.

In a fresh directory holding the tables the docs name (``orders.lance``, ``orders_pq/``,
``new_orders.parquet``,
``events.lance``), each file's blocks run in order:

- ```python blocks run in one namespace per file; a ```text block is output, and each of its
  lines must appear in what the python blocks of that file printed so far;
- ```sh blocks: every ``pruner ...`` line runs through the CLI and must exit 0; ``pip`` and
  ``make`` lines are the install, which CI itself runs (``make test``); any other line fails;
- a block without a language is a record (a log, a command for hours-long runs) and is not run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith(("benchmarks", "mutation"))
)
FILES = [ROOT / "README.md", *DOCS]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe", "ignore::UserWarning")


def _data() -> pa.Table:
    rows = 20_000
    rng = np.random.default_rng(11)
    user_id = rng.permutation(rows).astype(np.int64)
    return pa.table(
        {
            "user_id": user_id,
            "amount": np.round(rng.random(rows) * 100, 2),
            "trace_id": [f"{i:08x}-{i * 7919 % 65536:04x}" for i in range(rows)],
        }
    )


def _tables(directory: Path) -> None:
    data = _data()
    for name in ("orders.lance", "events.lance"):
        lance.write_dataset(data, str(directory / name), max_rows_per_file=5_000)
    folder = directory / "orders_pq"
    folder.mkdir()
    for number in range(4):
        part = data.slice(number * 5_000, 5_000)
        pq.write_table(part, folder / f"part-{number}.parquet", row_group_size=2_500)
    new = data.slice(0, 100)
    new = new.set_column(0, "user_id", pa.array(np.arange(20_000, 20_100, dtype=np.int64)))
    pq.write_table(new, directory / "new_orders.parquet")  # rows to append


def _blocks(path: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(path.read_text())]


def test_the_docs_have_runnable_blocks() -> None:
    """The test below runs something: the pages it promises to run hold code."""
    kinds = [kind for path in FILES for kind, _ in _blocks(path)]
    assert kinds.count("python") >= 8 and kinds.count("sh") >= 6, kinds


def _run_shell(text: str, where: str) -> None:
    from pruner.cli import main

    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0] in ("pip", "make"):
            continue
        assert words[0] == "pruner", f"{where}: a shell line the docs test cannot run: {line}"
        assert main(words[1:]) == 0, f"{where}: {line}"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_code_block_runs(
    path: Path, tmp_path: Path, request: pytest.FixtureRequest, cost_model: None
) -> None:
    """As a reader runs them: with pruner's cost model as shipped."""
    blocks = _blocks(path)
    if not any(kind in ("python", "sh") for kind, _ in blocks):
        pytest.skip("no code block")
    if "spark" in path.name:
        request.getfixturevalue("spark")  # the run's one session; the docs find it active
    _tables(tmp_path)
    store: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if path.name == "object-storage.md":  # its tables on the run's S3 and Azure servers
        from tests.support.s3 import environment

        s3, azurite = request.getfixturevalue("s3"), request.getfixturevalue("azurite")
        s3.client().create_bucket(Bucket="lake")
        with contextlib.suppress(Exception):  # made by an earlier run of this test
            azurite.client().create_container("lake")
        for name in ("orders_pq", "orders.lance"):
            s3.upload(tmp_path / name, f"s3://lake/{name}")
        azurite.upload(tmp_path / "orders_pq", "az://lake/orders_pq")
        store = environment(s3.environment() | azurite.environment())
    namespace: dict[str, Any] = {"__name__": f"docs_{path.stem}"}
    printed = io.StringIO()
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        with store:
            for number, (kind, text) in enumerate(blocks):
                where = f"{path.name} block {number + 1}"
                if kind == "python":
                    with contextlib.redirect_stdout(printed):
                        exec(compile(text, where, "exec"), namespace)
                elif kind == "sh":
                    with contextlib.redirect_stdout(printed):
                        _run_shell(text, where)
                elif kind == "text":
                    for line in text.strip().splitlines():
                        assert line in printed.getvalue(), f"{where}: not printed: {line!r}"
    finally:
        os.chdir(before)
