"""A share of the differential harness on the S3 server (and a smaller one on Azure's,
Azurite): each drawn dataset is written locally, copied to the store byte for byte, and
pruner's answers over the store (pruned and unpruned) must equal the engine alone over the
same bytes (tests/support/differential.py; its oracle reads the local copy, which the
store's objects equal)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from pruner import storage
from pruner.table import open_table
from tests.support.differential import Dataset, Written, compare, datasets, mismatch_report, written
from tests.support.s3 import environment

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*fork-safe")]

QUERIES_PER_DATASET = 8
DATASETS = {"s3": 5, "azurite": 2}  # per engine: 40 cases each on S3, 16 on Azure
# Copied to the store byte for byte: not Iceberg, whose metadata names its files by their
# absolute local paths
LAYOUTS = ("lance", "parquet", "lance", "parquet", "delta")


@pytest.mark.parametrize("store", ["s3", "azurite"])
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_pruning_on_the_store_never_changes_an_answer(
    engine: str, store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server = request.getfixturevalue(store)
    bucket = server.new_bucket()
    count = DATASETS[store]
    counter = iter(range(1_000_000))
    tally: dict[str, int] = {}

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(dataset=datasets(engine, QUERIES_PER_DATASET, LAYOUTS))
    def check(dataset: Dataset) -> None:
        with written(dataset.tables, tmp_path) as local:
            on_store: dict[str, Written] = {}
            for name, table in local.items():
                uri = f"{server.scheme}://{bucket}/{next(counter)}/{table.path.name}"
                server.upload(table.path, uri)
                opened: Any = open_table(storage.location(uri, server.options))
                on_store[name] = Written(table.spec, table.path, opened)
            for query in dataset.queries:
                outcome = compare(engine, query.sql, on_store, query.parameters)
                tally[outcome.kind] = tally.get(outcome.kind, 0) + 1
                assert outcome.kind != "mismatch", mismatch_report(
                    engine, dataset.tables, query, outcome
                )

    # DataFusion's Azure store takes its endpoint from the environment only
    with environment(server.environment()) if store == "azurite" else contextlib.nullcontext():
        check()
    assert sum(tally.values()) == count * QUERIES_PER_DATASET
    assert tally.get("equal", 0) >= sum(tally.values()) // 2, tally
