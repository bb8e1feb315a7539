"""Row-value IN lists, ``(a, b) IN ((1, 'x'), ...)``, against the engines alone over the raw files.

Written for the survivors of a mutation run of ``Resolver._tuple_in``
(docs/mutation.md): a row-value IN over a subquery read as an empty list of rows (FALSE:
the table pruned to nothing), as was one over a column (DuckDB's "contains" of an unnamed
struct), a NULL field of a row, a field compared with an expression
or naming no column of the table. DuckDB alone says what each query means; pruner must give
each engine's own answer on DuckDB and DataFusion (or its error, where DataFusion alone refuses
the query) with the single-column and the compound indexes in place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.index import build_index
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tuple_in")
    rows = 8_000
    a = np.random.default_rng(5).permutation(rows)
    b = [None if x % 50 == 7 else f"x{x}" for x in a]
    t = pa.table({"a": pa.array(a, pa.int64()), "b": pa.array(b, pa.string())})
    u = pa.table({"a": pa.array([3, 4, 5, 7], pa.int64()), "b": ["x3", "x4", "x5", None]})
    paths = {"t": root / "t", "u": root / "u"}
    for folder in paths.values():
        folder.mkdir()
    for number, start in enumerate(range(0, rows, 2_000)):
        pq.write_table(t.slice(start, 2_000), paths["t"] / f"p{number}.parquet", row_group_size=500)
    pq.write_table(u, paths["u"] / "p.parquet")
    build_index(paths["t"], "a", items=256)
    build_index(paths["t"], "b", items=256)
    build_index(paths["t"], ["a", "b"], items=256)
    return paths


QUERIES = [
    # the subquery: its rows are not a list of constants (read as none, t pruned to nothing)
    ("SELECT a, b FROM t WHERE (a, b) IN (SELECT a, b FROM u)", 3),
    ("SELECT a, b FROM t WHERE (a, b) IN (SELECT a, b FROM u) OR a = 10", 4),
    # IN a column, not a list: DuckDB 2.0 reads it as "contains" over an unnamed struct
    (
        "WITH r AS (SELECT row(row(3, 'x3'), row(4, 'x4')) AS s) "
        "SELECT t.a, t.b FROM t, r WHERE (t.a, t.b) IN s",
        2,
    ),
    ("WITH r AS (SELECT row(3, 4) AS s) SELECT t.a, t.b FROM t, r WHERE t.a IN s", 2),
    # a NULL field: DuckDB matches the row (7, NULL) of t, where b is NULL
    ("SELECT a, b FROM t WHERE (a, b) IN ((5, 'x5'), (7, NULL))", 2),
    ("SELECT a, b FROM t WHERE (b, a) IN ((NULL, 57), ('x9', 9))", 2),
    # a field compared with an expression, a field that is an expression
    ("SELECT a, b FROM t WHERE (a, b) IN ((5, 'x' || '5'), (9, 'x9'))", 2),
    ("SELECT a, b FROM t WHERE (a + 0, b) IN ((5, 'x5'), (9, 'x9'))", 2),
    # a field whose cast changes values (pruner cannot use it: the other field prunes)
    ("SELECT a, b FROM t WHERE (CAST(a AS SMALLINT), b) IN ((5, 'x5'), (9, 'x9'))", 2),
    # a field of the other table, before and after this table's
    ("SELECT t.a, t.b FROM t JOIN u ON t.a = u.a WHERE (u.b, t.a) IN (('x3', 3), ('x4', 4))", 2),
    ("SELECT t.a, u.b FROM t JOIN u ON t.a = u.a WHERE (t.a, u.b) IN ((3, 'x3'), (5, 'x5'))", 2),
]


@pytest.mark.parametrize(("sql", "count"), QUERIES)
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_row_value_in_answers_as_the_engine_alone(
    tables: dict[str, Path], sql: str, count: int, engine: str
) -> None:
    assert engine_alone("duckdb", sql, tables).num_rows == count  # it means what it says
    try:
        alone = engine_alone(engine, sql, tables)
    except Exception as err:  # DataFusion 55 refuses a subquery or expression in a tuple
        with pytest.raises(type(err)):
            pruner.query(sql, tables, engine=engine)
        return
    assert multiset(pruner.query(sql, tables, engine=engine)) == multiset(alone)


def test_a_null_field_reads_as_is_null_of_its_column() -> None:
    """A NULL field reads as IS NULL of its column (the engines compare the rows as
    structs), the other fields as null-safe equalities: the row-value IN still prunes."""
    from pruner.analyzer import analyze

    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    analysis = analyze("SELECT * FROM t WHERE (a, b) IN ((7, NULL))", {"t": schema})
    (scan,) = analysis.scans
    assert str(scan.predicate) == "a IS NOT DISTINCT FROM 7 AND b IS NULL", scan.predicate
