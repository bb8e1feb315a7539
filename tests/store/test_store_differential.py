"""A share of the differential harness on the S3 server: each drawn dataset is written
locally, copied to the store byte for byte, and pruner's answers over the store (pruned and
unpruned) must equal the engine alone over the same bytes (tests/support/differential.py;
its oracle reads the local copy, which the store's objects equal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from pruner import storage
from pruner.table import open_table
from tests.support.differential import Dataset, Written, compare, datasets, mismatch_report, written
from tests.support.s3 import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*fork-safe")]

QUERIES_PER_DATASET = 8
DATASETS = 5  # per engine: 40 cases each on the store
# Copied to the store byte for byte: not Iceberg, whose metadata names its files by their
# absolute local paths
LAYOUTS = ("lance", "parquet", "lance", "parquet", "delta")


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_pruning_on_the_store_never_changes_an_answer(
    engine: str, s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    counter = iter(range(1_000_000))
    tally: dict[str, int] = {}

    @settings(
        max_examples=DATASETS,
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
                uri = f"s3://{bucket}/{next(counter)}/{table.path.name}"
                s3.upload(table.path, uri)
                opened: Any = open_table(storage.location(uri, s3.options))
                on_store[name] = Written(table.spec, table.path, opened)
            for query in dataset.queries:
                outcome = compare(engine, query.sql, on_store, query.parameters)
                tally[outcome.kind] = tally.get(outcome.kind, 0) + 1
                assert outcome.kind != "mismatch", mismatch_report(
                    engine, dataset.tables, query, outcome
                )

    check()
    assert sum(tally.values()) == DATASETS * QUERIES_PER_DATASET
    assert tally.get("equal", 0) >= sum(tally.values()) // 2, tally
