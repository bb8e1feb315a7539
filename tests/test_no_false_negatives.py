"""Property: every row that satisfies a predicate lies inside pruner's Selection.

Hypothesis generates small tables (several column types, nulls, NaN, -0.0, empty strings,
several fragments, tiny zones; Lance with deleted rows or Parquet with small row groups)
and random predicate trees (=, IN, IS NULL, <=>, !=, ranges, NOT, AND, OR, coerced
literals). DuckDB evaluates the WHERE clause on the unpruned data, independently of pruner;
a matching row outside the Selection is a miss, and there must be none.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pruner.explain import explain
from pruner.index import build_index
from pruner.table import open_table
from tests.engine_check import read_with_addresses

COLUMN_TYPES: dict[str, pa.DataType] = {
    "i8": pa.int8(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u16": pa.uint16(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "s": pa.string(),
    "d": pa.date32(),
    "ts": pa.timestamp("us"),
    "tz": pa.timestamp("ms", tz="UTC"),
}

_EPOCH = dt.date(1970, 1, 1)


def _value(name: str) -> st.SearchStrategy[Any]:
    kind = COLUMN_TYPES[name]
    if pa.types.is_integer(kind):
        low, high = (-3, 3) if name == "i8" else (0, 6) if name == "u16" else (-5, 40)
        return st.integers(low, high)
    if pa.types.is_floating(kind):
        return st.sampled_from([0.0, -0.0, 1.5, 2.0, -3.25, math.nan, math.inf, 0.1, 7.0])
    if pa.types.is_string(kind):
        return st.sampled_from(["", "a", "b", "it's", "ü", "a b", "zz", "5"])
    if pa.types.is_date(kind):
        return st.integers(0, 4).map(lambda d: _EPOCH + dt.timedelta(days=d))
    return st.integers(0, 4).map(
        lambda s: dt.datetime(2024, 1, 1, 0, 0, s, 500_000 if s == 3 else 0)
    )


@st.composite
def tables(draw: st.DrawFn) -> dict[str, list[Any]]:
    rows = draw(st.integers(1, 120))
    return {
        name: draw(st.lists(st.one_of(st.none(), _value(name)), min_size=rows, max_size=rows))
        for name in COLUMN_TYPES
    }


def _sql_literal(name: str, value: Any, style: int) -> str:
    """``value`` spelled as SQL, in one of several styles the analyzer must coerce."""
    if value is None:
        return "NULL"
    kind = COLUMN_TYPES[name]
    if pa.types.is_integer(kind):
        return [str(value), f"'{value}'", f"{value}.0", f"CAST({value} AS BIGINT)"][style % 4]
    if pa.types.is_floating(kind):
        if math.isnan(value):
            return "'NaN'::DOUBLE"
        if math.isinf(value):
            return "'inf'::DOUBLE"
        return [repr(value), f"CAST({value!r} AS DOUBLE)", f"'{value!r}'"][style % 3]
    if pa.types.is_string(kind):
        return "'" + value.replace("'", "''") + "'"
    if pa.types.is_date(kind):
        return [f"DATE '{value}'", f"'{value}'", f"TIMESTAMP '{value} 00:00:00'"][style % 3]
    text = value.isoformat(sep=" ")
    if kind.tz is not None:
        return [f"TIMESTAMPTZ '{text}+00'", f"'{text}+00:00'", f"'{text}'"][style % 3]
    return [f"TIMESTAMP '{text}'", f"'{text}'"][style % 2]


@st.composite
def conditions(draw: st.DrawFn, depth: int = 0) -> str:
    if depth < 3 and draw(st.integers(0, 2)) == 0:
        operator = draw(st.sampled_from(["AND", "OR", "NOT"]))
        if operator == "NOT":
            return f"NOT ({draw(conditions(depth + 1))})"
        parts = draw(st.lists(conditions(depth + 1), min_size=2, max_size=3))
        return "(" + f" {operator} ".join(parts) + ")"
    name = draw(st.sampled_from(sorted(COLUMN_TYPES)))
    literal = st.builds(
        _sql_literal, st.just(name), st.one_of(st.none(), _value(name)), st.integers(0, 3)
    )
    shape = draw(st.integers(0, 7))
    if shape == 0:
        return f"{name} IS NULL"
    if shape == 1:
        return f"{name} IS NOT NULL"
    if shape == 2:
        values = draw(st.lists(literal, min_size=1, max_size=4))
        return f"{name} IN ({', '.join(values)})"
    if shape == 3:
        return f"{draw(literal)} = {name}"
    if shape == 4:
        return f"{name} IS NOT DISTINCT FROM {draw(literal)}"
    if shape == 5:
        return f"{name} != {draw(literal)}"
    if shape == 6 and name in ("i32", "i64", "f64"):
        return f"{name} > {draw(literal)}"
    return f"{name} = {draw(literal)}"


def _write(data: dict[str, list[Any]], layout: str, seed: int, directory: Path) -> Path:
    table = pa.table({n: pa.array(v, COLUMN_TYPES[n]) for n, v in data.items()})
    rng = np.random.default_rng(seed)
    per_fragment = max(1, -(-table.num_rows // 3))
    if layout == "lance":
        path = directory / "t.lance"
        dataset = lance.write_dataset(table, str(path), max_rows_per_file=per_fragment)
        dataset.delete("i8 = 2 OR u16 = 1")  # fragments with deleted rows
    else:
        path = directory / "t"
        path.mkdir()
        for number, start in enumerate(range(0, table.num_rows, per_fragment)):
            pq.write_table(
                table.slice(start, per_fragment),
                path / f"part-{number}.parquet",
                row_group_size=max(1, int(rng.integers(3, 20))),
            )
    for name in COLUMN_TYPES:
        if name != "f32" or seed % 2:  # leave one column unindexed now and then
            build_index(path, name, items=int(rng.integers(2, 12)))
    return path


@pytest.mark.parametrize("layout", ["parquet", "lance"])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=tables(), where=st.lists(conditions(), min_size=4, max_size=8), seed=st.integers(0, 99))
def test_every_matching_row_is_selected(
    layout: str, data: dict[str, list[Any]], where: list[str], seed: int
) -> None:
    directory = Path(tempfile.mkdtemp())
    try:
        path = _write(data, layout, seed, directory)
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
