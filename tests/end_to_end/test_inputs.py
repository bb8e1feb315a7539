"""Every entry point takes what users already hold: a relative or absolute path (str or
Path), a ``lance.LanceDataset``, a ``pyarrow.dataset`` of Parquet files, a single Parquet file
and an opened Table, with the same answer on every engine (the engine alone's)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.discover import signature
from pruner.errors import InvalidParameterError
from pruner.index import build_index
from pruner.table import as_table
from tests.support.engine_check import engine_answer, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

SQL = (
    "SELECT o.id, o.amount, c.name FROM orders o JOIN customers c ON o.customer = c.id "
    "WHERE o.id IN (7, 12345)"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    orders = pa.table(
        {
            "id": pa.array(range(20_000), pa.int64()),
            "customer": pa.array([i % 50 for i in range(20_000)], pa.int64()),
            "amount": pa.array([i * 0.5 for i in range(20_000)]),
        }
    )
    lance.write_dataset(orders, str(root / "orders.lance"), max_rows_per_file=5_000)
    build_index(root / "orders.lance", "id", items=1_000)
    (root / "orders_pq").mkdir()
    for i in range(4):
        pq.write_table(orders.slice(i * 5_000, 5_000), root / "orders_pq" / f"{i}.parquet")
    build_index(root / "orders_pq", "id", items=1_000)
    customers = pa.table(
        {"id": pa.array(range(50), pa.int64()), "name": [f"c{i}" for i in range(50)]}
    )
    (root / "customers").mkdir()
    pq.write_table(customers, root / "customers" / "customers.parquet")
    return {
        "root": root,
        "lance": root / "orders.lance",
        "parquet": root / "orders_pq",
        "customers": root / "customers",
        "customers_file": root / "customers" / "customers.parquet",
    }


@pytest.fixture
def in_root(files: dict[str, Path]) -> Iterator[Path]:
    before = Path.cwd()
    os.chdir(files["root"])
    try:
        yield files["root"]
    finally:
        os.chdir(before)


FORMS: dict[str, Callable[[Path], Any]] = {
    "absolute str": lambda p: str(p),
    "relative str": lambda p: os.path.relpath(p),
    "relative Path": lambda p: Path(os.path.relpath(p)),
    "lance or pyarrow dataset": lambda p: (
        lance.dataset(str(p)) if p.suffix == ".lance" else pads.dataset(str(p), format="parquet")
    ),
    "opened Table": lambda p: pruner.open_table(p),
}


@pytest.mark.parametrize("engine", ["duckdb", "datafusion", "spark"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("orders", ["lance", "parquet"])
def test_every_input_form_answers_as_the_engine_alone(
    engine: str,
    form: str,
    orders: str,
    files: dict[str, Path],
    in_root: Path,
    request: pytest.FixtureRequest,
) -> None:
    if engine == "spark" and form not in ("relative str", "lance or pyarrow dataset"):
        pytest.skip("Spark: two forms are enough to show its entry point (it is slow)")
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    tables = {
        "orders": FORMS[form](files[orders]),
        "customers": FORMS[form](files["customers_file"])
        if "dataset" not in form
        else pads.dataset(str(files["customers_file"]), format="parquet"),
    }
    expected = engine_answer(
        engine, SQL, {"orders": files[orders], "customers": files["customers"]}, spark=spark
    )
    got = pruner.query(SQL, tables, engine=engine)
    assert multiset(got) == expected
    assert sum(expected.values()) == 2  # type: ignore[union-attr]


def test_a_single_parquet_file_is_a_table(files: dict[str, Path]) -> None:
    table = pruner.open_table(files["customers_file"])
    assert table.kind == "parquet" and table.num_rows == 50
    assert [f.path for f in (table.files or {}).values()] == [files["customers_file"]]
    assert table.index("id") is None  # no index lives beside a single file: read whole


def test_a_lance_dataset_keeps_its_version(files: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "v.lance"
    lance.write_dataset(pa.table({"id": [1, 2]}), str(path))
    old = lance.dataset(str(path))
    lance.write_dataset(pa.table({"id": [3]}), str(path), mode="append")
    assert pruner.query("SELECT count(*) AS n FROM t", {"t": old}).to_pylist() == [{"n": 2}]
    assert pruner.query("SELECT count(*) AS n FROM t", {"t": path}).to_pylist() == [{"n": 3}]


def test_a_lance_dataset_opened_at_another_version_reads_that_version(tmp_path: Path) -> None:
    """``open_table(dataset, version=N)`` reads version N, not the version the dataset object
    is at: the rows are those of DuckDB alone over ``lance.dataset(path, version=N)``.
    Mutation testing found no test of it (``open_table`` passing no version on: the newest
    rows were read)."""
    import duckdb

    path = tmp_path / "v.lance"
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64())}), str(path))
    lance.write_dataset(pa.table({"id": pa.array([3], pa.int64())}), str(path), mode="append")
    build_index(path, "id", items=1)
    latest = lance.dataset(str(path))
    table = pruner.open_table(latest, version=1)
    con = duckdb.connect()
    con.register("t", lance.dataset(str(path), version=1))
    for sql in ("SELECT id FROM t", "SELECT id FROM t WHERE id IN (2, 3)"):
        expected = multiset(con.sql(sql).to_arrow_table())
        for engine in ("duckdb", "datafusion"):
            assert multiset(pruner.query(sql, {"t": table}, engine=engine)) == expected, sql
    assert sum(multiset(con.sql("SELECT id FROM t").to_arrow_table()).values()) == 2


def test_a_directory_named_like_a_parquet_file_is_a_directory(tmp_path: Path) -> None:
    """Spark writes a table as a directory named ``name.parquet`` holding part files: it
    opens as a directory of Parquet files (a path is one file only when it is a file), and
    pruner answers as DuckDB alone over its files."""
    path = tmp_path / "orders.parquet"
    path.mkdir()
    for part in range(2):
        ids = pa.array(range(part * 10, part * 10 + 10), pa.int64())
        pq.write_table(pa.table({"id": ids}), path / f"part-0000{part}.parquet")
    build_index(path, "id", items=5)
    sql = "SELECT id FROM t WHERE id IN (3, 14, 99)"
    expected = engine_answer("duckdb", sql, {"t": path})
    assert sum(expected.values()) == 2
    for engine in ("duckdb", "datafusion"):
        assert multiset(pruner.query(sql, {"t": path}, engine=engine)) == expected


def test_a_pyarrow_dataset_of_part_of_a_directory_is_refused(files: dict[str, Path]) -> None:
    some = pads.dataset(
        [str(files["parquet"] / "0.parquet"), str(files["parquet"] / "1.parquet")],
        format="parquet",
    )
    with pytest.raises(InvalidParameterError, match="give the directory"):
        pruner.open_table(some)


def _age(directory: Path, seconds: float = 60.0) -> None:
    """Date every file under ``directory`` back, as files written a minute ago."""
    for file in directory.rglob("*"):
        if file.is_file():
            stat = file.stat()
            os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns - int(seconds * 1e9)))


def test_a_path_opens_once_and_sees_an_append(tmp_path: Path) -> None:
    directory = tmp_path / "pq"
    directory.mkdir()
    pq.write_table(pa.table({"id": list(range(100))}), directory / "0.parquet")
    build_index(directory, "id", items=16)
    _age(directory)
    first = as_table(str(directory))
    assert as_table(directory) is first  # the same opened table, indexes and all
    pq.write_table(pa.table({"id": [1000, 1001]}), directory / "1.parquet")
    again = as_table(str(directory))
    assert again is not first and again.num_rows == 102
    got = pruner.query("SELECT id FROM t WHERE id IN (5, 1001)", {"t": str(directory)})
    assert sorted(got.column("id").to_pylist()) == [5, 1001]
    # rewritten in place with the same size and time: another inode, so another table
    _age(directory)
    cached = as_table(directory)
    assert as_table(directory) is cached
    replacement = tmp_path / "replacement.parquet"
    pq.write_table(pa.table({"id": list(range(200, 300))}), replacement)
    before = (directory / "0.parquet").stat()
    os.replace(replacement, directory / "0.parquet")
    os.utime(directory / "0.parquet", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert as_table(directory) is not cached


def test_a_lance_path_opens_once_and_sees_a_new_version(tmp_path: Path) -> None:
    path = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": list(range(100))}), str(path))
    first = as_table(path)
    assert as_table(str(path)) is first
    lance.write_dataset(pa.table({"id": [500]}), str(path), mode="append")
    assert as_table(path) is not first
    got = pruner.query("SELECT count(*) AS n FROM t WHERE id = 500", {"t": str(path)})
    assert got.to_pylist() == [{"n": 1}]


def test_a_just_written_file_is_not_vouched_for(tmp_path: Path) -> None:
    directory = tmp_path / "pq"
    directory.mkdir()
    pq.write_table(pa.table({"id": [1]}), directory / "0.parquet")
    assert signature(directory) is None  # written now: it may change again unseen
    _age(directory)
    assert signature(directory) is not None


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_sql_pruner_cannot_parse_gets_the_engines_own_error(
    engine: str, files: dict[str, Path]
) -> None:
    """pruner's parser refuses it; the engine decides, as without pruner: its own exception,
    pruned or not, the same as the engine alone's."""
    sql = "SELECT * FROM orders WHERE"
    alone = engine_answer(engine, sql, {"orders": files["lance"]})
    for prune in (True, False):
        with pytest.raises(Exception) as raised:
            pruner.query(sql, {"orders": files["lance"]}, engine=engine, prune=prune)
        assert not isinstance(raised.value, pruner.PrunerError)
        assert type(raised.value) is alone.error  # type: ignore[union-attr]


def test_explain_reads_sql_pruner_cannot_parse_whole(tmp_path: Path) -> None:
    """SQL DuckDB accepts and sqlglot cannot parse (a TIMESTAMPTZ_NS literal, from DuckDB's
    bloom filter tests): explain says the table is read whole and why, as query reads it;
    SQL the engine refuses still raises the engine's own error in explain."""
    import subprocess
    import sys

    import duckdb

    root = tmp_path / "t"
    root.mkdir()
    duckdb.sql(
        "COPY (SELECT range::BIGINT AS id, TIMESTAMPTZ '2000-01-01 00:00:00+00' "
        "+ to_seconds(range) AS ts_tz_ns FROM range(2000)) "
        f"TO '{root / 'a.parquet'}' (FORMAT parquet)"
    )
    sql = "SELECT count(*) AS n FROM t WHERE ts_tz_ns = TIMESTAMPTZ_NS '2000-01-01 00:16:41+00'"
    explained = pruner.explain(sql, {"t": root, "other": root})
    assert [s.scan.table for s in explained.scans] == ["t"], "only the table the SQL names"
    scan = explained.scans[0]
    assert scan.selection.num_rows == scan.rows_total == 2_000
    assert "could not parse the SQL" in scan.terms[0].reason
    assert "read whole" in scan.terms[0].reason
    assert pruner.query(sql, {"t": root}).to_pylist() == [{"n": 1}]
    assert engine_answer("duckdb", sql, {"t": root}) == {(1,): 1}
    result = subprocess.run(
        [sys.executable, "-m", "pruner.cli", "explain", sql, "--table", f"t={root}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "read whole" in result.stdout
    with pytest.raises(duckdb.Error):
        pruner.explain("SELECT * FROM t WHERE", {"t": root})
