"""Binding's cache of bound literals (pruner.binding._Binder.literals): tests that kill the
mutants of its cache-hit path, which no other test reached (docs/mutation.md).

The same (column, literals) bound twice in one predicate reuses the first binding's
coercion and hashes, but each leaf keeps its own text (explain reports each term as
written), and the answer is DuckDB's own.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.binding import bind
from pruner.errors import PrunerError
from pruner.expressions import BoundLiterals, Equals, In, Literal, Or, leaves
from pruner.index import build_index
from pruner.literals import coerce_all


def test_a_repeated_literal_is_bound_once_with_its_own_leaf() -> None:
    schema = pa.schema([("id", pa.int64())])
    first = Equals("id", Literal.number("5"))
    second = In("id", (Literal.number("5"),))  # same column, same literals: one cache key
    third = Equals("id", Literal.number("5"))
    bound = bind(Or((first, second, third)), schema)
    parts = leaves(bound)
    assert all(isinstance(part, BoundLiterals) for part in parts)
    assert [part.leaf for part in parts] == [first, second, third]  # type: ignore[union-attr]
    assert [str(part) for part in parts] == ["id = 5", "id IN (5)", "id = 5"]
    hashes = [part.hashes for part in parts]  # type: ignore[union-attr]
    assert all(h is not None and np.array_equal(h, hashes[0]) for h in hashes)


def test_repeated_terms_answer_as_duckdb_alone(tmp_path: Path) -> None:
    ids = np.arange(2000, dtype=np.int64)
    table = pa.table({"id": ids, "g": pa.array(ids % 7, pa.int64())})
    path = tmp_path / "t"
    path.mkdir()
    for number in range(4):
        part = table.slice(number * 500, 500)
        pq.write_table(part, path / f"part-{number}.parquet", row_group_size=100)
    build_index(path, "id", items=128)
    sql = "SELECT id FROM t WHERE (id = 1234 AND g = 2) OR (id IN (1234) AND g = 2) OR id = 77"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}/*.parquet')")
    alone = sorted(con.execute(sql).fetchnumpy()["id"].tolist())
    assert alone == [77, 1234]
    assert sorted(pruner.query(sql, {"t": str(path)}).column("id").to_pylist()) == alone
    explained = pruner.explain(sql, {"t": str(path)})
    # both id = 1234 terms are reported, each from the one binding (the analyzer writes
    # IN (1234) as = 1234)
    assert str(explained).count("id = 1234: bloom index, 1 zones") == 2


def test_a_column_the_table_lacks_is_bound_to_nothing_with_its_leaf() -> None:
    schema = pa.schema([("id", pa.int64())])
    leaf = Equals("other", Literal.number("5"))
    bound = bind(leaf, schema)
    assert isinstance(bound, BoundLiterals)
    assert bound.leaf == leaf and bound.column == "other" and str(bound) == "other = 5"
    assert bound.hashes is None and not bound.no_match  # cannot prune: selects everything
    assert "no column other" in bound.reason


def test_binding_coerces_as_the_query_dialect_compares(tmp_path: Path) -> None:
    """DataFusion reads 9007199254740993.0 as a DOUBLE (9007199254740992.0) and compares the
    int64 column in DOUBLE: it matches 9007199254740992 as well. Bound with DuckDB's rule (an
    exact DECIMAL) the probe would be 9007199254740993 alone and miss that row, so binding must
    pass the query's dialect to the coercion."""
    import datafusion

    big = 2**53
    ids = np.arange(1000, dtype=np.int64)
    ids[100] = big  # zone of rows 0..99 vs 100..199: the two values in different zones
    ids[900] = big + 1
    table = pa.table({"i": ids, "k": np.arange(1000, dtype=np.int64)})
    path = tmp_path / "t"
    path.mkdir()
    pq.write_table(table, path / "part-0.parquet", row_group_size=100)
    build_index(path, "i", items=128)
    sql = f"SELECT k FROM t WHERE i = {big + 1}.0"
    ctx = datafusion.SessionContext()
    ctx.register_parquet("t", str(path))
    alone = sorted(ctx.sql(sql).to_arrow_table().column("k").to_pylist())
    assert alone == [100, 900]
    pruned = pruner.query(sql, {"t": str(path)}, engine="datafusion")
    assert sorted(pruned.column("k").to_pylist()) == alone
    # and at the binding step: DataFusion's literal is not one integer, DuckDB's is
    schema = pa.schema([("i", pa.int64())])
    leaf = Equals("i", Literal.number(f"{big + 1}.0"))
    assert bind(leaf, schema, "datafusion").hashes is None  # type: ignore[attr-defined]
    assert bind(leaf, schema, "duckdb").hashes is not None  # type: ignore[attr-defined]


def test_a_hashing_error_is_kept_for_evaluation_with_its_leaf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hash_array failing is not an answer: the bound leaf keeps the error (evaluation raises
    it if the column has an index), its leaf and the coercion's note."""
    import pruner.binding

    failure = PrunerError("cannot hash this")

    def failing(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(pruner.binding, "hash_array", failing)
    unindexed = bind(
        In("f", (Literal.number("5"), Literal.number("300"))),
        pa.schema([("f", pa.int8())]),
        hash_type=lambda column: None,
    )
    assert isinstance(unindexed, BoundLiterals) and unindexed.unindexed  # never hashed
    assert unindexed.reason == "300 is out of range of int8"
    leaf = In("f", (Literal.number("5"), Literal.number("300")))  # 300: out of int8's range
    schema = pa.schema([("f", pa.int8())])
    bound = bind(leaf, schema)
    assert isinstance(bound, BoundLiterals)
    assert bound.leaf == leaf and bound.hashes is None and bound.error is failure
    assert not bound.no_match and not bound.unindexed
    assert bound.reason == coerce_all(leaf.values, pa.int8()).reason != ""
