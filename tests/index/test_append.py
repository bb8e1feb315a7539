"""``pruner.append`` and ``pruner write``: new rows into a Lance dataset or a Parquet
directory, and every pruner index of the table covering them in the same call. Answers
equal the engine alone over the raw files (tests/support/changes.py ``check``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.parquet as pq
import pytest

import pruner
from pruner.cli import main
from pruner.errors import InvalidParameterError
from pruner.explain import explain
from pruner.index import build_index
from pruner.index.keys import Key
from pruner.table import open_table
from tests.support.changes import (
    ROWS,
    check,
    data,
    lance_table,
    listed,
    old_values,
    parquet_table,
    read_whole,
)
from tests.support.engine_check import engine_alone


@pytest.mark.parametrize("make", [lance_table, parquet_table], ids=["lance", "parquet"])
def test_append_indexes_the_new_rows(make: Callable[[Path], Path], tmp_path: Path) -> None:
    path = make(tmp_path)
    build_index(path, "tag", items=100)
    new = data(np.arange(ROWS, ROWS + 700), "new")
    plans = pruner.append(path, new)
    assert sorted(plans) == ["id", "tag"]
    assert all(len(plan.add) == 1 and len(plan.kept) == 3 for plan in plans.values())
    status = listed(path, column="id")
    assert status["state"] == "current" and status["rows_total"] == ROWS + 700
    assert status["rows_indexed"] == status["rows_total"]
    values = [*old_values(), ROWS + 5, ROWS + 650]
    table = check(path, values)
    assert read_whole(table, values) == set()


@pytest.mark.parametrize("make", [lance_table, parquet_table], ids=["lance", "parquet"])
def test_append_updates_compound_keys(make: Callable[[Path], Path], tmp_path: Path) -> None:
    path = make(tmp_path)
    build_index(path, ["id", "tag"], items=100)
    new = data(np.arange(ROWS, ROWS + 700), "new")
    plans = pruner.append(path, new)
    assert sorted(plans) == ["(id, tag)", "id"]
    plan = plans["(id, tag)"]  # only the new fragment is read
    assert not plan.whole and len(plan.add) == 1 and len(plan.kept) == 3
    bound = open_table(path).key_index(Key(("id", "tag")))
    assert not isinstance(bound, str), bound
    assert bound.uncovered.num_rows == 0 and bound.index.items == 100
    sql = f"SELECT id, tag FROM t WHERE id = {ROWS + 650} AND tag = 'new'"
    report = explain(sql, {"t": path})
    assert "compound index (id, tag)" in str(report)
    expected = engine_alone("duckdb", sql, {"t": path})
    assert expected.num_rows == 1
    assert pruner.query(sql, {"t": path}).to_pylist() == expected.to_pylist()
    # the key's selection reads the new rows' zone, not the new fragment whole
    assert report.scans[0].selection.num_rows <= 100


def test_append_reorders_columns_and_refuses_rows_that_do_not_fit(tmp_path: Path) -> None:
    path = parquet_table(tmp_path)
    reordered = data(np.arange(ROWS, ROWS + 10), "new").select(["tag", "id"])
    pruner.append(path, reordered)
    assert pq.read_table(sorted(path.glob("part-*.parquet"))[-1]).schema.names == ["id", "tag"]
    check(path, [ROWS + 3])
    with pytest.raises(
        InvalidParameterError, match=r"do not fit Parquet directory .* [(]id: int64"
    ):
        pruner.append(path, pa.table({"id": pa.array([1], pa.int32()), "tag": ["x"]}))
    lance_path = lance_table(tmp_path / "l")
    with pytest.raises(InvalidParameterError, match="do not fit Lance dataset"):
        pruner.append(lance_path, {"id": [1]})
    with pytest.raises(InvalidParameterError, match="is not a Lance dataset or a directory"):
        pruner.append(tmp_path / "nothing", {"id": [1]})


def test_a_table_without_indexes_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "plain.lance"
    lance.write_dataset(data(np.arange(10)), str(path))
    assert pruner.append(path, data(np.arange(10, 20))) == {}
    assert lance.dataset(str(path)).count_rows() == 20


@pytest.mark.parametrize("form", ["csv", "parquet", "arrow"])
def test_cli_write_appends_a_file_and_updates_the_indexes(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = lance_table(tmp_path)
    rows = data(np.arange(ROWS, ROWS + 300), "cli")
    source = tmp_path / f"new.{form}"
    if form == "csv":
        csv.write_csv(rows, source)
    elif form == "parquet":
        pq.write_table(rows, source)
    else:
        with pa.OSFile(str(source), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as out:
            out.write_table(rows)
    capsys.readouterr()
    assert main(["write", str(path), str(source)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"appended 300 rows to {path}")
    assert "id: added 1 fragments; kept 3 as they were" in out
    assert listed(path)["state"] == "current"
    check(path, [ROWS + 1, old_values()[0]])


def test_cli_write_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = lance_table(tmp_path)
    odd = tmp_path / "rows.txt"
    odd.write_text("id\n1\n")
    assert main(["write", str(path), str(odd)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass --format parquet, csv or arrow" in err
    assert main(["write", str(path), str(odd), "--format", "csv"]) == 2
    assert "do not fit Lance dataset" in capsys.readouterr().err
