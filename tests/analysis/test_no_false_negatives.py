"""Property: every row that satisfies a predicate lies inside pruner's Selection.

Hypothesis generates small tables with the differential harness's strategies
(tests/support/differential.py: every indexed type, nulls, NaN, -0.0, empty strings,
several fragments, tiny zones; Lance with deleted rows, late fragments and compactions, or
Parquet with small row groups) and random predicate trees (=, IN, IS NULL, IS [NOT] DISTINCT FROM,
!=, ranges, LIKE, functions, NOT, AND, OR, coerced literals in DuckDB's spellings). DuckDB
evaluates the WHERE clause on the unpruned data, independently of pruner; a matching row
outside the Selection is a miss, and there must be none.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pruner.explain import explain
from pruner.table import open_table
from tests.support.differential import COLUMN_TYPES, TableSpec, conditions, table_specs
from tests.support.engine_check import read_with_addresses

COLUMNS = [name for name in COLUMN_TYPES if name != "k"]


@st.composite
def tables_and_conditions(draw: st.DrawFn, layout: str) -> tuple[TableSpec, list[str]]:
    columns = draw(st.lists(st.sampled_from(COLUMNS), min_size=3, max_size=8, unique=True))
    spec = draw(table_specs(columns, layout))
    scope = [("", ["k", *columns])]
    return spec, draw(st.lists(conditions(scope, "duckdb"), min_size=4, max_size=8))


@pytest.mark.parametrize("layout", ["parquet", "lance"])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=st.data())
def test_every_matching_row_is_selected(layout: str, case: st.DataObject) -> None:
    spec, where = case.draw(tables_and_conditions(layout))
    directory = Path(tempfile.mkdtemp())
    try:
        path = spec.write(directory / "t")
        opened = {"t": open_table(path)}
        table, fragments, offsets = read_with_addresses(path)
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        rows = table.append_column("__f", pa.array(fragments)).append_column(
            "__o", pa.array(offsets)
        )
        con.register("t_full", rows)
        for condition in where:
            try:
                matches = con.execute(f"SELECT __f, __o FROM t_full WHERE {condition}").fetchnumpy()
            except duckdb.Error:
                continue  # the engine refuses the query whatever pruner does
            query = f"SELECT * FROM t WHERE {condition}"
            selection = explain(query, opened).selections()["t"]
            inside = selection.contains(matches["__f"], matches["__o"])
            missed = int((~inside).sum())
            assert missed == 0, f"{condition}: {missed} matching rows outside the selection"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
