"""The golden examples in pruner/sql_examples/: per-scan selections, and answers pruning never
changes.

expected.json pins, for every example, each scan's predicate, zone and row counts and the
story of every term. Independently of the golden file, every example runs on DuckDB over the
unpruned tables and over the tables cut down to pruner's selections: the answers must be
equal as multisets (the promise: a selection is never too narrow).
Regenerate the golden file after a deliberate change: PRUNER_UPDATE_GOLDEN=1 pytest ...
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pruner.demo import EXAMPLE_INDEXES, read_sql_examples
from pruner.explain import explain
from pruner.table import open_tables
from tests.support.engine_check import read_with_addresses, restrict, run_duckdb

EXPECTED = Path(__file__).resolve().parents[2] / "pruner" / "sql_examples" / "expected.json"
EXAMPLES = read_sql_examples()


@pytest.fixture(scope="module")
def example_tables(example_paths: dict[str, Path]) -> dict[str, Any]:
    paths = {name: example_paths[name] for name in EXAMPLE_INDEXES}
    opened = open_tables(paths)
    data = {name: read_with_addresses(path) for name, path in paths.items()}
    return {"tables": opened, "data": data}


def _summary(explanation: Any) -> list[dict[str, Any]]:
    return [
        {
            "table": scan["name"],
            "alias": scan["alias"],
            "predicate": scan["predicate"],
            "zones": f"{scan['zones_selected']}/{scan['zones_total']}",
            "rows": f"{scan['rows_selected']}/{scan['rows_total']}",
            "terms": [
                f"{t['term']} -> "
                + (f"index, {t['zones_selected']} zones" if t["used_index"] else "not used")
                + (f": {t['reason']}" if t["reason"] else "")
                for t in scan["terms"]
            ],
        }
        for scan in explanation.to_json()["scans"]
    ]


def test_there_are_enough_examples_in_every_dialect() -> None:
    dialects = [example.dialect for example in EXAMPLES]
    assert len(EXAMPLES) >= 60
    assert {"duckdb", "spark", "datafusion"} <= set(dialects)
    assert len({e.name for e in EXAMPLES}) == len(EXAMPLES), "example names must be unique"


def test_selections_match_the_golden_file(example_tables: dict[str, Any]) -> None:
    actual = {
        example.name: _summary(
            explain(
                example.sql,
                example_tables["tables"],
                dialect=example.dialect,
                parameters=example.parameters,
            )
        )
        for example in EXAMPLES
    }
    if os.environ.get("PRUNER_UPDATE_GOLDEN"):
        EXPECTED.write_text(json.dumps(actual, indent=1) + "\n")
    expected = json.loads(EXPECTED.read_text())
    assert sorted(actual) == sorted(expected), "examples and golden file disagree on names"
    for name in actual:
        assert actual[name] == expected[name], f"{name}: selection changed"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_pruning_never_changes_the_answer(example: Any, example_tables: dict[str, Any]) -> None:
    parameters = list(example.parameters)
    explanation = explain(
        example.sql, example_tables["tables"], dialect=example.dialect, parameters=parameters
    )
    data = example_tables["data"]
    whole = {name: table for name, (table, _, _) in data.items()}
    pruned = dict(whole)
    for name, selection in explanation.selections().items():
        table, fragments, offsets = data[name]
        pruned[name] = restrict(table, fragments, offsets, selection)
    try:
        expected = run_duckdb(example.sql, example.dialect, whole, parameters)
    except duckdb.Error as err:  # the engine refuses the query: so must it, pruned
        with pytest.raises(type(err)):
            run_duckdb(example.sql, example.dialect, pruned, parameters)
        return
    assert run_duckdb(example.sql, example.dialect, pruned, parameters) == expected
