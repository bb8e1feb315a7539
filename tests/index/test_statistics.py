"""Row-group min/max statistics rule out zones a bloom probe kept
(:func:`pruner.index.native.ruled_out_by_statistics`), only where they are exact: a zone that
holds a value is never ruled out, and a file changed since the table was opened, a column
without statistics, or a type whose statistics compare otherwise rules nothing out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pruner
from pruner.table import open_table
from tests.support.engine_check import engine_alone, multiset

GROUPS = 8
GROUP_ROWS = 500
# Group g holds g * 1000 .. g * 1000 + 499, shuffled: the ranges leave gaps between groups.
GAP = 3_600  # between group 3 (3,000..3,499) and group 4 (4,000..4,499)


INT64 = pa.int64()


def _write(root: Path, arrow_type: pa.DataType = INT64, statistics: bool = True) -> Path:
    root.mkdir(parents=True)
    rng = np.random.default_rng(3)
    ids = np.concatenate([g * 1_000 + rng.permutation(GROUP_ROWS) for g in range(GROUPS)])
    half = len(ids) // 2
    for number, part in enumerate((ids[:half], ids[half:])):
        data = pa.table({"id": pa.array(part, arrow_type), "v": pa.array(part * 2)})
        pq.write_table(
            data,
            root / f"part-{number}.parquet",
            row_group_size=GROUP_ROWS,
            write_statistics=statistics,
        )
    return root


def _indexed(root: Path) -> Path:
    # A filter sized for a false-positive rate of 0.9: the bloom probe keeps most zones.
    pruner.build_index(root, "id", items=GROUP_ROWS, probability=0.9)
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _indexed(_write(tmp_path_factory.mktemp("stats") / "t"))


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same data and index, the files written without statistics."""
    return _indexed(_write(tmp_path_factory.mktemp("bare") / "t", statistics=False))


def _selected(path: Path | pruner.Table, where: str) -> tuple[int, str]:
    (scan,) = pruner.explain(f"SELECT v FROM t WHERE {where}", {"t": path}).scans
    return scan.zones_selected, scan.terms[0].reason


def _kept_by_filters(path: Path | pruner.Table, candidates: range) -> int:
    """The first of ``candidates`` (absent values) that the bloom filters alone keep some
    zone for (false positives, common at a rate of 0.9)."""
    for value in candidates:
        if _selected(path, f"id = {value}")[0] > 0:
            return value
    raise AssertionError(f"the filters rule out every value of {candidates}")


ABSENT = {
    "gap": range(3_500, 4_000),  # between group 3 (3,000..3,499) and group 4
    "below": range(-500, 0),
    "above": range(10**9, 10**9 + 500),
}


@pytest.mark.parametrize("where", ["gap", "below", "above", "present", "in-list"])
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_statistics_rule_out_what_the_filters_kept(
    indexed: Path, bare: Path, where: str, engine: str
) -> None:
    """With the statistics, at most the groups whose range holds a value; the same data
    written without statistics selects more (the filters alone keep zones there), and both
    answer as the engine alone."""
    if where == "present":
        condition, most = "id = 3017", 1
    elif where == "in-list":
        condition, most = f"id IN (17, 5017, {_kept_by_filters(bare, ABSENT['gap'])})", 2
    else:
        condition, most = f"id = {_kept_by_filters(bare, ABSENT[where])}", 0
    selected, reason = _selected(indexed, condition)
    assert selected <= most, reason
    unruled, bare_reason = _selected(bare, condition)
    assert "min/max" not in bare_reason, bare_reason
    if where != "present":
        assert unruled > selected and "row-group min/max" in reason, (reason, bare_reason)
    for path in (indexed, bare):
        sql = f"SELECT v FROM t WHERE {condition}"
        expected = multiset(engine_alone(engine, sql, {"t": path}))
        assert multiset(pruner.query(sql, {"t": path}, engine=engine)) == expected


def _covered(scan: object, group: int) -> bool:
    """Is the first row of row group ``group`` (two files of four groups) selected?"""
    fragment, row = divmod(group, GROUPS // 2)
    selection = scan.selection  # type: ignore[attr-defined]
    where = np.array([fragment], np.int64), np.array([row * GROUP_ROWS], np.int64)
    return bool(selection.contains(*where).all())


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.integers(-2_000, GROUPS * 1_000 + 2_000), min_size=1, max_size=6))
def test_a_zone_holding_a_value_is_never_ruled_out(indexed: Path, values: list[int]) -> None:
    """Every row group holding a present value stays selected, and the answer is DuckDB's
    alone."""
    sql = f"SELECT v FROM t WHERE id IN ({', '.join(map(str, values))})"
    (scan,) = pruner.explain(sql, {"t": indexed}).scans
    for value in values:
        if 0 <= value < GROUPS * 1_000 and value % 1_000 < GROUP_ROWS:
            assert _covered(scan, value // 1_000), value
    expected = multiset(engine_alone("duckdb", sql, {"t": indexed}))
    assert multiset(pruner.query(sql, {"t": indexed})) == expected


@pytest.mark.parametrize("edge", ["min", "max"])
def test_a_value_at_a_groups_min_or_max_keeps_it(indexed: Path, edge: str) -> None:
    """The bounds are inclusive: each group's smallest (or largest) value selects it."""
    values = [g * 1_000 + (0 if edge == "min" else GROUP_ROWS - 1) for g in range(GROUPS)]
    sql = f"SELECT v FROM t WHERE id IN ({', '.join(map(str, values))})"
    (scan,) = pruner.explain(sql, {"t": indexed}).scans
    assert all(_covered(scan, g) for g in range(GROUPS))
    assert pruner.query(sql, {"t": indexed}).num_rows == GROUPS


@pytest.mark.parametrize(
    "arrow_type", [pa.uint32(), pa.uint64(), pa.float64()], ids=["uint32", "uint64", "float64"]
)
def test_types_whose_statistics_are_not_used(tmp_path: Path, arrow_type: pa.DataType) -> None:
    """Unsigned and floating columns keep what the filters keep."""
    path = _indexed(_write(tmp_path / "t", arrow_type))
    value = _kept_by_filters(path, ABSENT["gap"])
    selected, reason = _selected(path, f"id = {value}")
    assert selected > 0 and "min/max" not in reason, reason


def test_a_file_changed_after_opening_rules_nothing_out(
    indexed: Path, bare: Path, tmp_path: Path
) -> None:
    """The statistics are those of the footer read when the table was opened: for a file
    whose size or time changed since, they rule nothing out."""
    value = _kept_by_filters(bare, ABSENT["below"])
    copy = tmp_path / "t"
    shutil.copytree(indexed, copy)
    table = open_table(copy)
    before, _ = _selected(table, f"id = {value}")
    assert before == 0
    for file in copy.glob("*.parquet"):
        os.utime(file, ns=(1, 1))
    after, reason = _selected(table, f"id = {value}")
    assert after > 0 and "min/max" not in reason, reason


def test_statistics_of_a_file_changed_during_a_query_rule_nothing_out(
    indexed: Path, bare: Path, tmp_path: Path
) -> None:
    """A query checks its tables' files before it runs (a changed one is opened again); a
    file changed after that check, while the query evaluates, still has its statistics
    refused: ``TableIndex.ruled_out`` checks each file it rules on."""
    value = _kept_by_filters(bare, ABSENT["below"])
    copy = tmp_path / "t"
    shutil.copytree(indexed, copy)
    bound = open_table(copy).index("id")
    assert bound is not None
    everything = np.ones(bound.index.num_zones, bool)
    assert bound.ruled_out(everything, [value]).any()
    for file in copy.glob("*.parquet"):
        os.utime(file, ns=(1, 1))
    assert not bound.ruled_out(everything, [value]).any()
