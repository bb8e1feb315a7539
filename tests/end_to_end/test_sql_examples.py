"""The golden examples in pruner/sql_examples/: per-scan selections, and answers judged by
the engine alone.

expected.json pins, for every example, each scan's predicate, zone and row counts and the
story of every term. Independently of the golden file, every example's expected answer is
DuckDB's over the raw files with no pruner code (tests/support/engine_check.py): DuckDB over
the tables cut down to pruner's selections must give it, and so must pruner's own unpruned
query (a second check); a query DuckDB refuses must be refused with the same exception type.
An OR example must have each side match rows the other side does not, so that an OR that
loses a side changes the answer (it did not: ``amount = 5.0`` matched nothing).
Regenerate the golden file after a deliberate change: PRUNER_UPDATE_GOLDEN=1 pytest ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

import pruner
from pruner.analysis.parsing import DIALECTS
from pruner.demo import EXAMPLE_INDEXES, engine_sql, read_sql_examples
from pruner.explain import explain
from pruner.table import open_tables
from tests.support.engine_check import (
    Refused,
    engine_alone,
    engine_answer,
    outcome,
    read_with_addresses,
    restrict,
    run_duckdb,
)

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "pruner" / "sql_examples" / "expected.json"
EXAMPLES = read_sql_examples()


@pytest.fixture(scope="module")
def example_tables(example_paths: dict[str, Path]) -> dict[str, Any]:
    paths = {name: example_paths[name] for name in EXAMPLE_INDEXES}
    opened = open_tables(paths)
    data = {name: read_with_addresses(path) for name, path in paths.items()}
    return {"paths": paths, "tables": opened, "data": data}


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
    """DuckDB alone over the raw files is the answer; DuckDB over the rows of pruner's
    selections, and pruner's unpruned query, must both give it (or both raise exactly the
    exception type DuckDB alone raised)."""
    sql = engine_sql(example, "duckdb")
    parameters = list(example.parameters)
    expected = engine_answer("duckdb", sql, example_tables["paths"], parameters)
    explanation = explain(
        example.sql, example_tables["tables"], dialect=example.dialect, parameters=parameters
    )
    data = example_tables["data"]
    pruned = {name: table for name, (table, _, _) in data.items()}
    for name, selection in explanation.selections().items():
        table, fragments, offsets = data[name]
        pruned[name] = restrict(table, fragments, offsets, selection)
    assert outcome(lambda: _arrow(sql, pruned, parameters)) == expected, "the selected rows"
    unpruned = outcome(
        lambda: pruner.query(
            sql, example_tables["paths"], engine="duckdb", parameters=parameters, prune=False
        )
    )
    assert unpruned == expected, "pruner's unpruned query"


def _arrow(sql: str, tables: dict[str, Any], parameters: list[Any]) -> Any:
    """DuckDB over the given Arrow tables, as a pyarrow Table (for :func:`outcome`)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, table in tables.items():
        con.register(name, table)
    return (con.sql(sql, params=parameters) if parameters else con.sql(sql)).to_arrow_table()


# ------------------------------------------------------------- no vacuous OR example


def _scan_of(node: exp.Expression, tree: exp.Expression) -> exp.Table:
    """The one table scan the OR ``node`` speaks of: the only scan of the statement, or the
    one its columns' qualifier names."""
    scans = list(tree.find_all(exp.Table))
    qualifiers = {column.table for column in node.find_all(exp.Column)}
    if qualifiers == {""} and len({s.name for s in scans}) == 1:
        return scans[0]
    named = [s for s in scans if qualifiers == {s.alias_or_name}]
    assert len(named) == 1, f"{node.sql()}: an OR example names one table scan"
    return named[0]


def or_side_counts(example: Any, tables: dict[str, Path]) -> list[tuple[str, int, int]]:
    """For every OR of the example: (the OR, rows only its left side matches, rows only its
    right side matches) on its table, counted by DuckDB alone over the raw files."""
    tree = sqlglot.parse_one(example.sql, read=DIALECTS[example.dialect])
    counts = []
    for node in tree.find_all(exp.Or):
        scan = _scan_of(node, tree)
        left, right = node.left, node.right
        only: list[int] = []
        for side, other in ((left, right), (right, left)):
            condition = exp.and_(
                exp.paren(side.copy()),
                exp.not_(exp.func("coalesce", exp.paren(other.copy()), exp.false())),
            )
            query = exp.select("count(*)").from_(scan.copy()).where(condition)
            sql = query.sql(dialect="duckdb")
            only.append(engine_alone("duckdb", sql, tables).column(0)[0].as_py())
        counts.append((node.sql(dialect=DIALECTS[example.dialect]), *only))
    return counts


OR_EXAMPLES = [
    e for e in EXAMPLES if sqlglot.parse_one(e.sql, read=DIALECTS[e.dialect]).find(exp.Or)
]


def test_there_are_or_examples() -> None:
    assert len(OR_EXAMPLES) >= 8, [e.name for e in OR_EXAMPLES]


@pytest.mark.parametrize("example", OR_EXAMPLES, ids=[e.name for e in OR_EXAMPLES])
def test_each_side_of_an_or_matches_rows_the_other_does_not(
    example: Any, example_tables: dict[str, Any]
) -> None:
    """An OR that lost a side would give another answer: each side matches at least one row
    of the example data that the other side does not (DuckDB alone). An example DuckDB
    refuses outright has no answer to keep honest."""
    paths = example_tables["paths"]
    answer = engine_answer("duckdb", engine_sql(example, "duckdb"), paths, example.parameters)
    if isinstance(answer, Refused):
        assert example.name == "invalid_date_string", answer
        return
    for condition, left_only, right_only in or_side_counts(example, paths):
        assert left_only >= 1 and right_only >= 1, (
            f"{example.name}: in {condition}, rows only the left side matches: {left_only}, "
            f"only the right: {right_only}"
        )


# ------------------------------------------------------- the oracle is pruner-free

_ORACLE_RUN = """
import sys, pathlib
import lance, pyarrow as pa, pyarrow.parquet as pq
from tests.support import engine_check
root = pathlib.Path(sys.argv[1])
data = pa.table({"k": [1, 2, 3]})
lance.write_dataset(data, str(root / "t.lance"))
(root / "p").mkdir()
pq.write_table(data, root / "p" / "a.parquet")
for engine in ("duckdb", "datafusion"):
    for name in ("t.lance", "p"):
        got = engine_check.engine_alone(engine, "SELECT sum(k) AS s FROM t", {"t": root / name})
        assert got.column(0).to_pylist() == [6], (engine, name, got)
loaded = sorted(m for m in sys.modules if m == "pruner" or m.startswith("pruner."))
print("pruner modules:", loaded)
"""


def test_the_oracle_runs_no_pruner_code(tmp_path: Path) -> None:
    """The oracle path imports no pruner module (checked in a fresh process), so pruner
    cannot make its own expected answer."""
    run = subprocess.run(
        [sys.executable, "-c", _ORACLE_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "pruner modules: []" in run.stdout, run.stdout


def test_run_duckdb_over_whole_tables_is_the_oracles_answer(
    example_tables: dict[str, Any],
) -> None:
    """The Arrow copies the selections are cut from hold exactly the raw files' rows."""
    whole = {name: table for name, (table, _, _) in example_tables["data"].items()}
    for name in whole:
        sql = f"SELECT * FROM {name}"
        assert run_duckdb(sql, whole, []) == engine_answer(
            "duckdb", sql, example_tables["paths"]
        ), name
