"""The Spark adapter: every sql_example gives Spark's own answer over the raw files, and the
``pruner`` data source read directly with pushed filters, on one shared SparkSession."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.adapters import spark as spark_adapter
from pruner.demo import engine_sql, read_sql_examples
from pruner.errors import EngineError
from pruner.index import build_index
from tests.support.engine_check import Refused, engine_answer, outcome

EXAMPLES = read_sql_examples()
LAYOUTS = {
    "as_written": {"events": "events", "events_pq": "events_pq", "users": "users"},
    "swapped": {"events": "events_pq", "events_pq": "events", "users": "users_lance"},
}

pytestmark = pytest.mark.slow  # Spark: a session for the run, then ~0.1-1 s a query


def _run(sql: str, tables: dict[str, Any], parameters: Any, prune: bool, spark: Any) -> Any:
    """pruner's answer, or Refused with the exact type of what it raised (the Spark adapter
    wraps no Spark error: a refusal must be Spark's own exception type, unchanged)."""
    return outcome(
        lambda: spark_adapter.query(sql, tables, parameters=parameters, prune=prune, spark=spark)
    )


REFUSED_ON_SPARK = {
    "rounding_string_on_int",
    "cast_column_widening",
    "invalid_date_string",
    "review_table_alias_column_list",
    "review_union_by_name",
    "review_star_replace",
    "review_duplicate_output_names",
    "review_long_decimal_is_double",
    "review_schema_qualified",
    "review_using_sample",
}
"""Exactly the examples Spark refuses on its own over the raw files: a new refusal, or an
example that starts running, fails the test and updates this list."""


def test_the_spark_refusal_list_names_examples_and_no_parameter_example() -> None:
    assert {e.name for e in EXAMPLES} >= REFUSED_ON_SPARK
    assert not REFUSED_ON_SPARK & {e.name for e in EXAMPLES if e.parameters}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_gives_sparks_own_answer(
    example: Any, example_paths: dict[str, Path], spark: Any
) -> None:
    """Spark alone over the raw files (``spark.read.parquet``, the Lance rows read plainly;
    no pruner code) is the answer: pruner unpruned and pruned, each table in either format,
    must give it or raise exactly Spark's exception type. Parameters are Spark's ``?``."""
    sql = engine_sql(example, "spark")
    parameters = list(example.parameters)
    as_written = {name: example_paths[name] for name in LAYOUTS["as_written"]}
    expected = engine_answer("spark", sql, as_written, parameters, spark=spark)
    refused = isinstance(expected, Refused)
    assert refused == (example.name in REFUSED_ON_SPARK), (
        f"{example.name} on spark: {expected if refused else 'ran'}, the list says otherwise"
    )
    assert _run(sql, as_written, parameters, False, spark) == expected, (
        f"{example.name} on spark: unpruned differs from Spark alone"
    )
    for layout, names in LAYOUTS.items():
        tables = {name: example_paths[source] for name, source in names.items()}
        assert _run(sql, tables, parameters, True, spark) == expected, (
            f"{example.name} on spark, {layout}: pruned differs from Spark alone"
        )


@pytest.fixture(scope="module")
def lance_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three fragments of 10,000 rows, ids shuffled, some null, 1,000-row zones."""
    path = tmp_path_factory.mktemp("spark") / "t.lance"
    ids = np.random.default_rng(7).permutation(30_000).astype(np.int64)
    values = pa.array(ids, mask=ids % 997 == 3)
    lance.write_dataset(pa.table({"id": values}), path, max_rows_per_file=10_000)
    build_index(path, "id", items=1_000)
    return path


@pytest.fixture(scope="module")
def parquet_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files of 10,000 rows in row groups of 1,000, ids shuffled, some null."""
    path = tmp_path_factory.mktemp("spark_pq")
    ids = np.random.default_rng(8).permutation(30_000).astype(np.int64)
    for number in range(3):
        part = ids[number * 10_000 : (number + 1) * 10_000]
        column = pa.array(part, mask=part % 997 == 3)
        pq.write_table(pa.table({"id": column}), path / f"p{number}.parquet", row_group_size=1_000)
    build_index(path, "id", items=1_000)
    return path


def _rows_scanned(frame: Any) -> int:
    """Rows the data source handed Spark in ``frame``'s last run (its scan's metric)."""
    plan = frame._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.finalPhysicalPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.length()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numOutputRows"):
            total += metrics.apply("numOutputRows").value()
    return int(total)


CONDITIONS = ["id = 4242", "id IN (17, 4242, 29999)", "id IS NULL"]


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_the_data_source_reads_only_the_selected_zones(
    condition: str, kind: str, lance_table: Path, parquet_table: Path, spark: Any
) -> None:
    path = str(lance_table if kind == "lance" else parquet_table)
    pruned = spark.read.format("pruner").option("pushdown", "true").load(path).where(condition)
    whole = spark.read.format("pruner").option("prune", "false").load(path).where(condition)
    got = sorted(pruned.collect(), key=str)
    assert got == sorted(whole.collect(), key=str)
    assert got, "each condition matches rows"
    scanned, everything = _rows_scanned(pruned), _rows_scanned(whole)
    assert everything == 30_000
    plan = pruner.plan(f"SELECT * FROM t WHERE {condition}", {"t": path}, dialect="spark")
    assert scanned <= plan.rows()[0] < everything, (scanned, plan.rows())


def test_a_reused_data_frame_gives_every_query_the_whole_table(
    lance_table: Path, spark: Any
) -> None:
    """Spark 4.3 hands a loaded DataFrame's last pushdown result to its later scans: the
    default (pushdown off) stays right; with pushdown on, the stale zones show (if Spark
    stops doing this, this test fails: then pushdown can be on by default)."""
    frame = spark.read.format("pruner").load(str(lance_table))
    assert [r.id for r in frame.where("id = 4242").collect()] == [4242]
    assert frame.count() == 30_000
    pushed = spark.read.format("pruner").option("pushdown", "true").load(str(lance_table))
    assert [r.id for r in pushed.where("id = 4242").collect()] == [4242]
    assert pushed.count() < 30_000, "Spark no longer leaks pushdown state: revisit the default"


def test_the_data_source_reads_everything_for_an_or(lance_table: Path, spark: Any) -> None:
    """Spark pushes no OR (so the source cannot prune), yet the answer stays right; the SQL
    path prunes it."""
    frame = spark.read.format("pruner").option("pushdown", "true").load(str(lance_table))
    frame = frame.where("id = 5 OR id = 6")
    assert sorted(r.id for r in frame.collect()) == [5, 6]
    assert _rows_scanned(frame) == 30_000
    sql = "SELECT id FROM t WHERE id = 5 OR id = 6"
    prepared = pruner.plan(sql, {"t": lance_table}, dialect="spark")
    assert prepared.rows()[0] <= 2_000
    result = pruner.query(sql, {"t": lance_table}, engine="spark", prepared=prepared)
    assert sorted(result.column("id").to_pylist()) == [5, 6]


@pytest.mark.parametrize("kind", ["lance", "parquet"])
def test_an_empty_selection_on_spark_keeps_the_schema(
    kind: str, lance_table: Path, parquet_table: Path, spark: Any
) -> None:
    path = lance_table if kind == "lance" else parquet_table
    sql = "SELECT * FROM t WHERE id = 1000000000"
    assert pruner.plan(sql, {"t": path}, dialect="spark").rows()[0] == 0
    result = pruner.query(sql, {"t": path}, engine="spark")
    assert result.num_rows == 0
    assert result.schema.names == ["id"]
    count = pruner.query(
        "SELECT count(*) AS n FROM t WHERE id = 1000000000", {"t": path}, engine="spark"
    )
    assert count.to_pylist() == [{"n": 0}]


def test_the_callers_session_is_left_alone(lance_table: Path, spark: Any) -> None:
    spark.sql("CREATE OR REPLACE TEMP VIEW t AS SELECT 42L AS id")
    frame = spark_adapter.sql(
        spark, "SELECT count(*) AS n FROM t WHERE id = 4242", {"t": lance_table}
    )
    assert frame.collect()[0].n == 1
    assert [r.id for r in spark.sql("SELECT id FROM t").collect()] == [42]
    spark.catalog.dropTempView("t")


def test_asking_for_another_master_never_stops_the_active_session(spark: Any) -> None:
    """Spark runs one SparkContext per process: pruner refuses instead of stopping the
    caller's session (which it did when the master differed)."""
    from pruner.adapters.spark import session

    with pytest.raises(EngineError, match="already active"):
        session("local[1]")
    assert session() is spark
    assert spark.range(5).count() == 5, "the caller's session still runs"


def test_spark_parameters_bind_like_literals(lance_table: Path, spark: Any) -> None:
    result = pruner.query(
        "SELECT count(*) AS n FROM t WHERE id = ?",
        {"t": lance_table},
        engine="spark",
        parameters=[4242],
    )
    assert result.to_pylist() == [{"n": 1}]


def test_a_data_source_without_a_path_is_a_clear_error(spark: Any) -> None:
    with pytest.raises(Exception, match="needs a path"):
        spark.read.format("pruner").load().collect()


def test_no_java_is_a_clear_error(tmp_path: Path) -> None:
    """Without Java on PATH or JAVA_HOME, the session is refused before Spark tries."""
    code = (
        "from pruner.adapters.spark import session\n"
        "from pruner.errors import EngineError\n"
        "try:\n"
        "    session()\n"
        "except EngineError as err:\n"
        "    print(err)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java there
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert "Spark needs Java 17" in out.stdout, out.stdout + out.stderr


def test_stable_row_ids_with_deletions_lose_no_row(tmp_path: Path, spark: Any) -> None:
    """After a compaction, row ids and row addresses differ; an allowlist (matched against
    row ids) on a fragment with deletions would drop matches, so it is never used there."""
    path = tmp_path / "stable.lance"
    ids = np.random.default_rng(5).permutation(12_000).astype(np.int64)
    lance.write_dataset(
        pa.table({"id": ids}), path, max_rows_per_file=3_000, enable_stable_row_ids=True
    )
    dataset = lance.dataset(path)
    dataset.optimize.compact_files(target_rows_per_fragment=6_000)
    lance.dataset(path).delete("id % 7 = 0")
    build_index(path, "id", items=1_000)
    wanted = [int(v) for v in ids[[1, 5_000, 6_500, 11_000]] if v % 7]
    sql = f"SELECT id FROM t WHERE id IN ({', '.join(map(str, wanted))})"
    result = pruner.query(sql, {"t": path}, engine="spark")
    assert sorted(result.column("id").to_pylist()) == sorted(wanted)


def test_the_data_source_refuses_a_relative_path(spark: Any) -> None:
    """Spark opens a Python data source in its worker, whose working directory is not the
    caller's: a relative path is refused with the advice to pass an absolute one."""
    with pytest.raises(Exception, match="absolute path"):
        spark.read.format("pruner").load("t.lance").count()
