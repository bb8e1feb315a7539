"""Wrong answers that mutation testing found no test for (docs/mutation.md).

Each test runs a query through pruner on DuckDB over real files with a zone bloom index and
compares the answer with DuckDB ALONE over the same raw files (read_parquet, or the Lance
dataset read whole by pylance), not with pruner's own ``prune=False``. Each one fails when
the code it names is mutated as described (checked by hand, and by ``make mutate``).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.index import build_index
from pruner.literals import Literal, coerce


def _parquet_dir(path: Path, table: pa.Table, *, files: int = 4, row_group: int = 64) -> Path:
    path.mkdir()
    step = -(-table.num_rows // files)
    for number in range(files):
        part = table.slice(number * step, step)
        pq.write_table(part, path / f"part-{number}.parquet", row_group_size=row_group)
    return path


def _sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted(zip(*columns, strict=True), key=repr)


def _duckdb_alone(sql: str, sources: dict[str, str], parameters: list[Any]) -> pa.Table:
    """DuckDB's own answer over the raw files: each table name is a read_parquet view."""
    con = duckdb.connect()
    for name, path in sources.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    return con.execute(sql, parameters).to_arrow_table()


@pytest.fixture
def outer_join_tables(tmp_path: Path) -> dict[str, Path]:
    """a: ids 0..999; b: ids 500..1499 with an indexed, never-NULL column v; a.id indexed."""
    a = pa.table({"id": pa.array(range(1000), pa.int64())})
    b_ids = np.arange(500, 1500, dtype=np.int64)
    b = pa.table({"id": b_ids, "v": pa.array(b_ids * 7 + 3, pa.int64())})
    paths = {
        "a": _parquet_dir(tmp_path / "a", a),
        "b": _parquet_dir(tmp_path / "b", b),
    }
    build_index(paths["a"], "id", items=64)
    build_index(paths["b"], "v", items=64)
    return paths


def _check(sql: str, paths: dict[str, Path], parameters: list[Any]) -> pa.Table:
    pruned = pruner.query(sql, {k: str(v) for k, v in paths.items()}, parameters=parameters)
    alone = _duckdb_alone(sql, {k: str(v) for k, v in paths.items()}, parameters)
    assert _sorted_rows(pruned) == _sorted_rows(alone)
    return alone


def test_null_safe_equals_parameter_on_null_extended_side(
    outer_join_tables: dict[str, Path],
) -> None:
    """``b.v IS NOT DISTINCT FROM ?`` (``<=>``; DuckDB's own ``<=>`` is a list distance)
    bound to NULL is ``b.v IS NULL``: TRUE on every row the LEFT JOIN null-extends. It must
    not prune b (the outer-join null check's Equals case: a null-safe equality with a
    parameter can be TRUE on NULLs)."""
    sql = "SELECT a.id, b.v FROM a LEFT JOIN b ON a.id = b.id WHERE b.v IS NOT DISTINCT FROM ?"
    alone = _check(sql, outer_join_tables, [None])
    assert alone.num_rows == 500  # a's ids 0..499 have no b row
    # bound to a value, it is an ordinary equality and prunes b as before
    alone = _check(sql, outer_join_tables, [700 * 7 + 3])
    assert alone.column("id").to_pylist() == [700]
    # under an OR with a term that alone would prune b
    sql = (
        "SELECT a.id FROM a LEFT JOIN b ON a.id = b.id"
        " WHERE b.v IS NOT DISTINCT FROM ? OR b.v = 3503"
    )
    assert _check(sql, outer_join_tables, [None]).num_rows == 501


def test_right_join_null_extends_its_left_side(outer_join_tables: dict[str, Path]) -> None:
    """In ``a RIGHT JOIN b`` a is the null-extended side: ``a.id IS NULL`` keeps exactly the
    b rows without a match, so it must not prune a to its (no) NULL ids."""
    sql = "SELECT b.id FROM a RIGHT JOIN b ON a.id = b.id WHERE a.id IS NULL"
    alone = _check(sql, outer_join_tables, [])
    assert sorted(alone.column("id").to_pylist()) == list(range(1000, 1500))
    # the same with the tables the other way round (LEFT JOIN), for contrast
    sql = "SELECT b.id FROM b LEFT JOIN a ON a.id = b.id WHERE a.id IS NULL"
    assert _check(sql, outer_join_tables, []).num_rows == 500


def _bits(value: float, arrow_type: pa.DataType) -> bytes:
    return struct.pack("<f" if arrow_type == pa.float32() else "<d", value)


@pytest.mark.parametrize("arrow_type", [pa.float32(), pa.float64()])
def test_zero_probes_both_zero_bit_patterns(arrow_type: pa.DataType) -> None:
    """``= 0`` must probe +0.0 and -0.0 (SQL: equal; the index: different bits), for float32
    as for float64. Compared as bit patterns: ``0.0 == -0.0`` in Python."""
    values = coerce(Literal.number("0"), arrow_type).values
    assert values is not None
    assert sorted(_bits(v, arrow_type) for v in values) == sorted(
        [_bits(0.0, arrow_type), _bits(-0.0, arrow_type)]
    )


@pytest.mark.parametrize("layout", ["parquet", "lance"])
@pytest.mark.parametrize("arrow_type", [pa.float32(), pa.float64()])
def test_float_zero_finds_negative_zero(
    tmp_path: Path, layout: str, arrow_type: pa.DataType
) -> None:
    """A float column holding -0.0 (and no +0.0): ``f = 0`` and ``f IN (0, 2)`` find it."""
    floats = [1.5, 2.5, 3.5, -0.0, 4.5, 5.5]
    table = pa.table(
        {"k": pa.array(range(len(floats)), pa.int64()), "f": pa.array(floats, arrow_type)}
    )
    path = tmp_path / "t"
    if layout == "parquet":
        _parquet_dir(path, table, files=1)
        raw = pq.read_table(path).select(["k", "f"])
    else:
        lance.write_dataset(table, path)
        raw = lance.dataset(str(path)).to_table()
    build_index(path, "f", items=64)
    con = duckdb.connect()
    con.register("t", raw)
    for sql in ("SELECT k FROM t WHERE f = 0", "SELECT k FROM t WHERE f IN (0, 2.5)"):
        alone = con.execute(sql).to_arrow_table().column("k").to_pylist()
        assert 3 in alone
        pruned = pruner.query(sql, {"t": str(path)}).column("k").to_pylist()
        assert sorted(pruned) == sorted(alone), sql


@pytest.mark.parametrize("name", ["a", "A"])
def test_a_table_function_naming_a_table_in_any_case_reads_it_whole(
    outer_join_tables: dict[str, Path], name: str
) -> None:
    """DuckDB resolves ``query_table('A')`` and the table named in ``query('... FROM A')``
    to ``a`` whatever their case: pruner must bind ``a`` whole for them, though the other
    reference to ``a`` prunes to one id (Analyzer.unanalysed: a case-sensitive match of the
    name in the function's text bound ``a`` pruned, and counted 1 row of 1,000)."""
    sources = {"a": str(outer_join_tables["a"])}
    for function in (f"query_table('{name}')", f"query('SELECT * FROM {name}')"):
        sql = (
            "SELECT 'one' AS k, count(*) AS n FROM a WHERE id = 7 "
            f"UNION ALL SELECT 'all', count(*) FROM {function}"
        )
        expected = _sorted_rows(_duckdb_alone(sql, sources, []))
        assert expected == [("all", 1000), ("one", 1)]
        got = pruner.query(sql, {"a": outer_join_tables["a"]}, engine="duckdb")
        assert _sorted_rows(got) == expected, function
