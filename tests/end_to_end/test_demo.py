"""``pruner demo``'s verdict: every group of example queries with its median, worst and best
speed-up over DuckDB alone (a loss is never hidden behind a median), and the cold examples,
each answered as DuckDB alone answers it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console

from pruner.demo import (
    COLD_EXAMPLES,
    EXAMPLE_INDEXES,
    GROUPS,
    DemoRun,
    read_sql_examples,
    run_cold,
    run_example,
    summary,
)
from pruner.table import open_tables

BY_NAME = {example.name: example for example in read_sql_examples()}
ONE_PER_GROUP = {
    "point_lookup": "lookups, Lance",
    "parquet_point_lookup": "lookups, Parquet",
    "in_list": "IN lists",
    "inner_join": "joins",
    "not_equals": "cannot prune",
    "range_only": "cannot prune",
}


def _text(table: Any) -> str:
    console = Console(record=True, width=400)
    console.print(table)
    return console.export_text()


def test_each_example_falls_in_its_group_and_the_worst_is_shown(
    example_paths: dict[str, Path],
) -> None:
    tables = open_tables({name: example_paths[name] for name in EXAMPLE_INDEXES})
    runs = [run_example(BY_NAME[name], tables, repeat=1) for name in ONE_PER_GROUP]
    assert all(run.outcome == "equal" for run in runs), [run.outcome for run in runs]
    assert {run.example.name: run.group for run in runs} == ONE_PER_GROUP
    assert set(ONE_PER_GROUP.values()) == set(GROUPS)
    # Make one query of "cannot prune" twice as slow as DuckDB alone, the other 4x as fast:
    # the median hides the loss, the worst column must show it.
    slow, fast = (run for run in runs if run.group == "cannot prune")
    runs = [
        *(run for run in runs if run.group != "cannot prune"),
        dataclasses.replace(slow, pruned_seconds=0.2, alone_seconds=0.1),
        dataclasses.replace(fast, pruned_seconds=0.1, alone_seconds=0.4),
    ]
    text = _text(summary(runs, {}))
    (line,) = [row for row in text.splitlines() if row.strip().startswith("cannot prune, warm")]
    assert line.split()[3:7] == ["2", "2.25x", "0.50x", "4.00x"], line
    for group in GROUPS:
        assert f"{group}, warm" in text
    for run in runs:
        assert isinstance(run, DemoRun) and run.speedup > 0


def test_cold_examples_answer_as_duckdb_alone(example_paths: dict[str, Path]) -> None:
    for name, table in COLD_EXAMPLES.items():
        pruned, alone = run_cold(BY_NAME[name], table, example_paths[table], repeat=1)
        assert pruned > 0 and alone > 0
    text = _text(summary([], {"point_lookup": (0.01, 0.05)}))
    assert "point_lookup, cold" in text and "5.00x" in text
