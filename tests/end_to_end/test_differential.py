"""Differential test: on DuckDB, DataFusion and Spark, pruner's answer, pruned and
unpruned, is the engine's own over the raw files without pruner (the oracle; see
tests/support/differential.py for what is generated, what a case is and how each engine
reads the files alone).

CI runs ``CI_CASES`` cases per engine (``CI_CASES_SPARK`` on Spark), derandomized (the
same cases every run). ``make fuzz`` sets ``PRUNER_FUZZ_CASES`` (split across the engines
by ``FUZZ_SHARE``, Spark being ~20x slower per query) and draws new cases each run. Either
way the per-engine counts of cases, mismatches, refused cases (the oracle and both pruner
runs raised) and known-bug cases (an engine failure listed in
tests/support/differential.py, checked against the engine on in-memory copies) are printed
at the end. Spark's oracle runs on a
``newSession()`` of the run's one session, one per dataset.

A mismatch fails the test with Hypothesis's shrunk example: the assertion message holds
the data, how it was written and the SQL as a test to paste.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from pruner.engines import ENGINES
from tests.support.differential import Dataset, compare, datasets, mismatch_report, written

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*fork-safe")]

QUERIES_PER_DATASET = 8
CI_CASES = 304  # 38 datasets of 8 queries per engine
# Spark's cases cost ten times DuckDB's (0.6 s against 0.06 s a case): fewer of them in CI,
# where the test suite must stay under 25 minutes on 2 cores (make fuzz draws more)
CI_CASES_SPARK = 160  # 20 datasets
FUZZ_SHARE = {"duckdb": 0.4, "datafusion": 0.4, "spark": 0.2}
FUZZ_CASES = int(os.environ.get("PRUNER_FUZZ_CASES", "0"))

# Spark settings for the differential test only (restored after): on tables of a few dozen
# rows, code generation, adaptive planning and 4 shuffle partitions cost more than the
# queries (-25% per case, measured); none of them changes an answer.
SPARK_SETTINGS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}

TALLY: dict[str, Counter[str]] = {engine: Counter() for engine in ENGINES}
SECONDS: dict[str, float] = dict.fromkeys(ENGINES, 0.0)


def target_cases(engine: str) -> int:
    if FUZZ_CASES:
        return round(FUZZ_CASES * FUZZ_SHARE[engine])
    return CI_CASES_SPARK if engine == "spark" else CI_CASES


@pytest.fixture(scope="module", autouse=True)
def report_counts(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print the per-engine counts after the module's tests (also without ``-s``)."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    mode = f"fuzz, {FUZZ_CASES} cases asked" if FUZZ_CASES else "CI, derandomized"
    lines = [f"differential harness ({mode}):"]
    for engine in (e for e in ENGINES if TALLY[e]["ran"]):
        counts = TALLY[engine]
        lines.append(
            f"  {engine:10s} cases {counts['cases']:6d}  mismatches {counts['mismatch']:4d}  "
            f"refused {counts['refused']:5d}  known-bug {counts['known']:4d}  "
            f"datasets {counts['datasets']:5d}  "
            f"{SECONDS[engine]:7.1f} s"
        )
    capture: Any = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # pytest captures fixture teardown too
        if reporter is not None:
            reporter.ensure_newline()
        for line in lines:
            if reporter is not None:
                reporter.write_line(line)
            else:  # pragma: no cover - without the terminal plugin
                print(line)


@pytest.mark.parametrize("engine", ENGINES)
def test_pruning_never_changes_an_answer(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if engine == "spark":
        spark = request.getfixturevalue("spark")  # the run's one session, local[2]
        saved = {key: spark.conf.get(key, None) for key in SPARK_SETTINGS}
        for key, value in SPARK_SETTINGS.items():
            spark.conf.set(key, value)
        request.addfinalizer(lambda: _restore(spark, saved))
    TALLY[engine]["ran"] = 1
    examples = math.ceil(target_cases(engine) / QUERIES_PER_DATASET)

    @settings(
        max_examples=examples,
        derandomize=not FUZZ_CASES,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(dataset=datasets(engine, QUERIES_PER_DATASET))
    def check(dataset: Dataset) -> None:
        TALLY[engine]["datasets"] += 1
        with written(dataset.tables, tmp_path) as tables:
            for query in dataset.queries:
                outcome = compare(engine, query.sql, tables, query.parameters)
                TALLY[engine]["cases"] += 1
                TALLY[engine][outcome.kind] += 1
                assert outcome.kind != "mismatch", mismatch_report(
                    engine, dataset.tables, query, outcome
                )

    started = time.perf_counter()
    try:
        check()
    finally:
        SECONDS[engine] += time.perf_counter() - started


def _restore(spark: Any, saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def test_every_engine_ran_its_cases() -> None:
    """Guards the test above against passing with few cases (every engine must run its
    share) or with most of them refused by the engines."""
    ran = [engine for engine in ENGINES if TALLY[engine]["ran"]]
    if not ran:
        pytest.skip("runs only after the differential test")
    for engine in ran:
        counts: Any = TALLY[engine]
        assert counts["cases"] >= min(300, target_cases(engine)), (engine, dict(counts))
        assert counts["refused"] <= counts["cases"] // 5, (engine, dict(counts))
