"""Shared fixtures: the Lance-written vectors in ../shared and small Lance datasets."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pruner import costs

COST_MODEL = {
    "WHOLE_FRACTION": costs.WHOLE_FRACTION,
    "PROBE_SKIP_FRACTION": costs.PROBE_SKIP_FRACTION,
    "FILES_SKIP_FRACTION": costs.FILES_SKIP_FRACTION,
    "JOIN_READ_RATIO": costs.JOIN_READ_RATIO,
    "VIEW_SELECT_ROWS": costs.VIEW_SELECT_ROWS,
    "VIEW_SELECT_ROWS_PER_LITERAL": costs.VIEW_SELECT_ROWS_PER_LITERAL,
    "LANCE_WARM_LOOKUPS": costs.LANCE_WARM_LOOKUPS,
    "LANCE_WARM_LOOKUPS_PER_MIB": costs.LANCE_WARM_LOOKUPS_PER_MIB,
    "LANCE_LEFT_FRAGMENTS": costs.LANCE_LEFT_FRAGMENTS,
    "LANCE_OWN_FRAGMENTS": costs.LANCE_OWN_FRAGMENTS,
}
"""pruner's cost model as shipped (pruner.costs)."""

COST_MODEL_OFF = dict.fromkeys(COST_MODEL, math.inf) | {
    "VIEW_SELECT_ROWS": 0,
    "VIEW_SELECT_ROWS_PER_LITERAL": 0,
}
"""The thresholds at which the cost model never chooses: no read whole, every term probed,
every join's keys read, no file read whole that its selection reads in part, no lookup
left to Lance's scanner."""

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VECTORS = SHARED / "vectors" / "lance"

# Lance warns about fork-safety whenever a test process has threads; it is noise here.
warnings.filterwarnings("ignore", message=".*fork.*")


@pytest.fixture(scope="session", autouse=True)
def _pruned_reads() -> Iterator[None]:
    """The cost model's thresholds off in this process: its tables are small, and the model
    would read most of them whole, so the tests of pruned reads (and the differential
    harness) would test whole reads. The tests of the model turn it on (:func:`cost_model`);
    commands run in a new process have it as shipped."""
    for name, value in COST_MODEL_OFF.items():
        setattr(costs, name, value)
    yield
    for name, value in COST_MODEL.items():
        setattr(costs, name, value)


@pytest.fixture(scope="session", autouse=True)
def _analyses_kept_apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The ``pruner`` command's kept analyses (pruner.analysis.stored) in this run's own
    folder, for the commands the tests run in this process and in new ones: none is read
    from the user's cache or left in it."""
    before = os.environ.get("PRUNER_CACHE_DIR")
    os.environ["PRUNER_CACHE_DIR"] = str(tmp_path_factory.mktemp("pruner-cache"))
    yield
    if before is None:
        del os.environ["PRUNER_CACHE_DIR"]
    else:
        os.environ["PRUNER_CACHE_DIR"] = before


@pytest.fixture
def cost_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """pruner's cost model as shipped, for one test."""
    for name, value in COST_MODEL.items():
        monkeypatch.setattr(costs, name, value)


@pytest.fixture(scope="session")
def vectors() -> Path:
    if not VECTORS.is_dir():
        pytest.skip(f"Lance test vectors not found at {VECTORS} (../shared is absent)")
    return VECTORS


@pytest.fixture(scope="session")
def tiny_manifest(vectors: Path) -> dict[str, Any]:
    return json.loads((vectors / "tiny_index_manifest.json").read_text())


@pytest.fixture(scope="session")
def example_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tables pruner/sql_examples/ queries (see pruner.demo.write_example_tables), written
    once."""
    from pruner.demo import write_example_tables

    return write_example_tables(tmp_path_factory.mktemp("examples"), rows=40_000, items=1024)


@pytest.fixture(scope="session")
def s3() -> Any:
    """The run's S3 server: moto's, on 127.0.0.1 (tests/support/s3.py), started on first use."""
    pytest.importorskip("moto")
    from tests.support.s3 import S3Server

    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite() -> Any:
    """The run's Azure Blob Storage server: Azurite, on 127.0.0.1 (tests/support/azure.py),
    started on first use."""
    pytest.importorskip("azure.storage.blob")
    from tests.support.azure import AzuriteServer

    server = AzuriteServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark() -> Any:
    """The one SparkSession of the test run (start-up costs 7-12 s): local[2]."""
    from pruner.adapters.spark import session

    return session("local[2]")
