"""The cost model (pruner.costs) only ever widens a read to the whole table: whichever path it
chooses, the answer is the engine alone's; and explain names the choice.

Tables: 6,000 unsorted ids (some NULL) in 3 Lance fragments and in 3 Parquet files of 4 row
groups each, indexed by pruner with 500-row zones, and a small Parquet table ``s`` of 1,000
rows to join them with; the judge is DuckDB (and DataFusion) alone over the same files.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pruner
from pruner import costs, reads
from pruner.adapters import duckdb as duck_adapter
from pruner.adapters import kept, sources
from pruner.adapters.kept import reusable_binding
from pruner.cli import main
from pruner.index import build_index
from pruner.plan import plan
from tests.support.engine_check import duckdb_bound_rows, engine_alone, multiset

ROWS = 6_000
SMALL = 1_000  # rows of s: a join's other side small enough to read its keys (4x fewer)


def _data() -> pa.Table:
    rng = np.random.default_rng(11)
    ids = rng.permutation(ROWS).astype(np.int64)
    nulls = rng.random(ROWS) < 0.02
    return pa.table(
        {
            "id": pa.array(ids, mask=nulls),
            "amount": pa.array(rng.random(ROWS) * 100),
            "tag": pa.array([f"t{i % 7}" for i in range(ROWS)]),
        }
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("costs")
    data = _data()
    lance_path = root / "t.lance"
    lance.write_dataset(data, str(lance_path), max_rows_per_file=ROWS // 3)
    parquet_path = root / "parquet"
    parquet_path.mkdir()
    for part in range(3):
        rows = data.slice(part * (ROWS // 3), ROWS // 3)
        pq.write_table(rows, parquet_path / f"{part}.parquet", row_group_size=ROWS // 12)
    for path in (lance_path, parquet_path):
        build_index(path, "id", items=500)
    small = root / "s"
    small.mkdir()
    rng = np.random.default_rng(5)
    pq.write_table(
        pa.table(
            {
                "id": pa.array(rng.integers(0, ROWS, SMALL), pa.int64()),
                "k": pa.array(np.arange(SMALL), pa.int64()),
            }
        ),
        small / "0.parquet",
    )
    return {"lance": lance_path, "parquet": parquet_path, "s": small}


def _in_list(keys: list[int]) -> str:
    return f"SELECT id, amount FROM t WHERE id IN ({', '.join(map(str, keys))}) ORDER BY id"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["lance", "parquet"]),
    engine=st.sampled_from(["duckdb", "datafusion"]),
    keys=st.lists(st.integers(-5, ROWS + 5), min_size=1, max_size=400, unique=True),
    shape=st.sampled_from(["point", "in", "in or null", "in and tag", "not in", "range", "join"]),
    whole=st.floats(0.0, 1.01),
    skip=st.floats(0.0, 1.01),
    join_ratio=st.floats(0.0, 8.0),
    view_rows=st.sampled_from([0, 500, 1_500, 25_000]),
    per_literal=st.sampled_from([0, 5, 110]),
    files_skip=st.floats(0.0, 1.01),
    read_ahead=st.sampled_from([0, 64 << 20]),
    lance_warm=st.sampled_from([0.0, math.inf]),
    lance_left=st.sampled_from([0, 10**9]),
    lance_own=st.sampled_from([0, 10**9]),
    lance_read=st.sampled_from([0, 1 << 18]),
)
def test_every_choice_answers_as_the_engine_alone(
    tables: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    engine: str,
    keys: list[int],
    shape: str,
    whole: float,
    skip: float,
    join_ratio: float,
    view_rows: int,
    per_literal: int,
    files_skip: float,
    read_ahead: int,
    lance_warm: float,
    lance_left: int,
    lance_own: int,
    lance_read: int,
) -> None:
    """Thresholds drawn anywhere from 'always read whole' to 'never' (and DuckDB's files
    read whole, from none to every file it reads in part, read ahead or not; point lookups
    left to Lance's scanner from the first or never, given the fragments pruner's probe
    selects or all of them, or kept by pruner whatever its fragments; Lance's rows read ahead
    or streamed):
    the answer never changes, only what is read."""
    if engine == "datafusion" and kind == "lance":
        engine = "duckdb"
    listed = ", ".join(map(str, keys))
    sql = {
        "point": f"SELECT id, amount FROM t WHERE id = {keys[0]} AND tag <> 'x' ORDER BY id",
        "in": _in_list(keys),
        "in or null": f"SELECT id FROM t WHERE id IN ({listed}) OR id IS NULL ORDER BY id",
        "in and tag": f"SELECT id, tag FROM t WHERE id IN ({listed}) AND tag = 't3' ORDER BY id",
        "not in": f"SELECT count(*) AS n FROM t WHERE NOT (id IN ({listed}))",
        "range": f"SELECT count(*) AS n FROM t WHERE amount > {keys[0] % 100}",
        "join": (
            f"SELECT t.id, s.k FROM t JOIN s ON t.id = s.id WHERE s.k < {keys[0] % SMALL}"
            + (f" AND t.id IN ({listed})" if len(keys) % 2 else "")
        ),
    }[shape]
    monkeypatch.setattr(costs, "WHOLE_FRACTION", whole)
    monkeypatch.setattr(costs, "PROBE_SKIP_FRACTION", skip)
    monkeypatch.setattr(costs, "JOIN_READ_RATIO", join_ratio)
    monkeypatch.setattr(costs, "VIEW_SELECT_ROWS", view_rows)
    monkeypatch.setattr(costs, "VIEW_SELECT_ROWS_PER_LITERAL", per_literal)
    monkeypatch.setattr(costs, "FILES_SKIP_FRACTION", files_skip)
    monkeypatch.setattr(reads, "DUCKDB_READ_AHEAD_BYTES", read_ahead)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS", lance_warm)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS_PER_MIB", 0.0)
    monkeypatch.setattr(costs, "LANCE_LEFT_FRAGMENTS", lance_left)
    monkeypatch.setattr(costs, "LANCE_OWN_FRAGMENTS", lance_own)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", lance_read)
    named = {"t": tables[kind], "s": tables["s"]}
    expected = engine_alone(engine, sql, named)
    got = pruner.query(sql, named, engine=engine)
    assert multiset(got) == multiset(expected)


def test_a_query_naming_no_indexed_column_is_not_analysed(
    tables: dict[str, Path], cost_model: None
) -> None:
    """No parse, no probe: the plan has no analysis and reads the table whole; explain says
    why; an indexed column named anywhere in the text (even in a string) is analysed."""
    for path in (tables["lance"], tables["parquet"]):
        sql = "SELECT count(*) AS n FROM t WHERE amount > 50"
        prepared = plan(sql, {"t": path}, dialect="duckdb")
        assert prepared.explanation is None and prepared.reads_whole("t")
        explained = pruner.explain(sql, {"t": path})
        assert str(explained).endswith(f"query: {costs.UNANALYSED}")
        assert not explained.to_json()["analysed_by_query"]
        assert "amount > 50: not used" in str(explained)  # analysed all the same
        assert pruner.query(sql, {"t": path}) == engine_alone("duckdb", sql, {"t": path})
        named = "SELECT count(*) AS n FROM t WHERE amount > 50 AND tag <> 'ID'"
        assert plan(named, {"t": path}, dialect="duckdb").explanation is not None
        assert pruner.explain(named, {"t": path}).to_json()["analysed_by_query"]
        joined = "SELECT count(*) AS n FROM t AS a JOIN t AS b ON a.tag = b.tag"
        assert plan(joined, {"t": path}, dialect="duckdb").explanation is not None


def test_explain_names_the_cost_models_choice(tables: dict[str, Path], cost_model: None) -> None:
    """A selection of most of the table is read whole (explain says so, in text and JSON;
    the plan reads it whole); a point lookup is read pruned."""
    ids = _data().column("id").to_pylist()
    # one key in each of the first 7 of the 12 zones (and row groups): probed, as 7 random
    # keys would touch about 46% of them, and 7 of 12 (58%) are selected
    spread = [
        next(ids[r] for r in range(z * 500, z * 500 + 500) if ids[r] is not None) for z in range(7)
    ]
    many = _in_list(spread)
    for path in (tables["lance"], tables["parquet"]):
        found = pruner.explain(many, {"t": path})
        [scan] = found.to_json()["scans"]  # type: ignore[index]
        assert scan["terms"][0]["used_index"], scan
        assert scan["zones_selected"] < scan["zones_total"]
        assert scan["read_whole"] is not None and "cost model" in scan["read_whole"]
        assert "cost model" in str(found)
        assert plan(many, {"t": path}, dialect="duckdb").reads_whole("t")
        assert pruner.query(many, {"t": path}) == engine_alone("duckdb", many, {"t": path})
        one = "SELECT id FROM t WHERE id = 17"
        [scan] = pruner.explain(one, {"t": path}).to_json()["scans"]  # type: ignore[index]
        assert scan["read_whole"] is None
        assert not plan(one, {"t": path}, dialect="duckdb").reads_whole("t")


def test_duckdb_reads_files_whole_that_a_read_of_their_own_would_cost_more(
    tables: dict[str, Path],
    cost_model: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """DuckDB bound to a view of one read per partly read file (past the read-ahead budget,
    here 0): files of 2,000 rows, each leaving out fewer rows than such a read costs, are
    read whole in the view's one read of whole files. The plan binds that wider selection,
    explain names the choice and DuckDB's count of the bound rows equals explain's (and the
    command's summary); another
    engine reads the selection as it is, and every answer is the engine alone's."""
    monkeypatch.setattr(reads, "DUCKDB_READ_AHEAD_BYTES", 0)
    ids = _data().column("id").to_pylist()
    # one key in the first zone (and row group) of each of files 0 and 1
    keys = [next(i for i in ids[z * 2_000 : z * 2_000 + 500] if i is not None) for z in (0, 1)]
    sql = _in_list(keys)
    path = tables["parquet"]
    found = pruner.explain(sql, {"t": path})
    [scan] = found.to_json()["scans"]  # type: ignore[index]
    assert scan["engine_reads"]["rows_read"] == 1_000 and scan["read_whole"] is None
    wider = scan["read_files_whole"]
    assert "2 of the 2 files selected in part are read whole" in wider["reason"], wider
    assert wider["engine_reads"] == {
        "row_groups_read": 8,
        "row_groups_total": 12,
        "rows_read": 4_000,
        "files_read": 2,
        "files_total": 3,
    }
    assert "the engine reads 8 of 12 row groups (4,000 rows) in 2 of 3 files" in str(found)
    prepared = plan(sql, {"t": path}, dialect="duckdb")
    assert prepared.selections["t"] is not None and prepared.selections["t"].num_rows == 4_000
    assert duckdb_bound_rows(prepared) == 4_000
    assert pruner.query(sql, {"t": path}) == engine_alone("duckdb", sql, {"t": path})
    assert main(["query", sql, "--table", f"t={path}", "--format", "csv"]) == 0
    assert "Parquet row groups read 8 / 12 (4,000 rows)" in capsys.readouterr().err
    other = pruner.explain(sql, {"t": path}, dialect="datafusion").to_json()["scans"]
    assert other[0]["read_files_whole"] is None  # type: ignore[index]
    assert plan(sql, {"t": path}, dialect="datafusion").selections["t"].num_rows == 1_000
    got = pruner.query(sql, {"t": path}, engine="datafusion")
    assert multiset(got) == multiset(engine_alone("datafusion", sql, {"t": path}))
    # a key in every file: each read whole is the whole table, read as DuckDB reads it alone
    every = [next(i for i in ids[z * 2_000 : z * 2_000 + 500] if i is not None) for z in (0, 1, 2)]
    [scan] = pruner.explain(_in_list(every), {"t": path}).to_json()["scans"]  # type: ignore[index]
    assert scan["read_whole"] is not None and scan["read_files_whole"] is None, scan
    assert plan(_in_list(every), {"t": path}, dialect="duckdb").reads_whole("t")
    # read ahead (within the budget), the two row groups are read as they are
    monkeypatch.setattr(reads, "DUCKDB_READ_AHEAD_BYTES", 64 << 20)
    [scan] = pruner.explain(sql, {"t": path}).to_json()["scans"]  # type: ignore[index]
    assert scan["read_files_whole"] is None


def test_duckdb_does_not_probe_keys_that_touch_files_it_reads_whole(
    tables: dict[str, Path], cost_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """7 keys, one in each of 7 row groups over the 3 files: 45% of the 12 row groups at
    random, probed on the row groups' count alone; but files holding 94% of the rows, each
    of which DuckDB would read whole (past its read-ahead budget, here 0): not probed for
    DuckDB, and explain says why; probed for DataFusion. Every answer is the engine's."""
    monkeypatch.setattr(reads, "DUCKDB_READ_AHEAD_BYTES", 0)
    ids = [i for i in _data().column("id").to_pylist() if i is not None]
    sql = _in_list([ids[r] for r in range(0, 6_000, 900)][:7])
    path = tables["parquet"]
    [term] = pruner.explain(sql, {"t": path}).to_json()["scans"][0]["terms"]  # type: ignore[index]
    assert not term["used_index"] and "DuckDB reads every file" in term["reason"], term
    assert plan(sql, {"t": path}, dialect="duckdb").reads_whole("t")
    assert pruner.query(sql, {"t": path}) == engine_alone("duckdb", sql, {"t": path})
    found = pruner.explain(sql, {"t": path}, dialect="datafusion").to_json()
    assert found["scans"][0]["terms"][0]["used_index"]  # type: ignore[index]
    got = pruner.query(sql, {"t": path}, engine="datafusion")
    assert multiset(got) == multiset(engine_alone("datafusion", sql, {"t": path}))


def test_a_join_reads_the_other_sides_keys_only_when_they_can_pay(
    tables: dict[str, Path], cost_model: None
) -> None:
    """The keys of s (1,000 rows) are read to prune a scan of t that would read all 6,000
    rows, not one whose own term already selects a 500-row zone; explain says which."""
    ids = [i for i in _data().column("id").to_pylist() if i is not None]
    joined = "SELECT t.id, s.k FROM t JOIN s ON t.id = s.id WHERE s.k < 3"
    own = f"{joined} AND t.id = {ids[0]}"
    for kind in ("lance", "parquet"):
        named = {"t": tables[kind], "s": tables["s"]}
        for sql, read in ((joined, True), (own, False)):
            found = json.loads(pruner.explain(sql, named).to_json_text())
            [scan] = [scan for scan in found["scans"] if scan["name"] == "t"]
            [term] = [t for t in scan["terms"] if "run time" in (t["reason"] or "")]
            assert term["used_index"] is read, term
            assert ("cost model: not read at run time" in term["reason"]) is not read, term
            assert multiset(pruner.query(sql, named)) == multiset(
                engine_alone("duckdb", sql, named)
            )


def test_a_held_lance_table_looked_up_often_leaves_point_lookups_to_lance(
    tables: dict[str, Path], cost_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB over a Lance table held open, too large to read whole ahead: its first point
    lookups are probed by pruner; from the third (the threshold here), a statement of one
    SELECT whose terms are ``=`` of one literal is read whole, bound as for any query (a kept
    cursor serves it), and Lance's scanner probes the index pruner checked; explain says so,
    and the next text of that shape reuses the plan without an analysis. An IN list (of one
    key too), a BETWEEN, an OR,
    a join, a second SELECT, another engine, a Parquet table and a table read whole ahead
    are still probed. Every answer is the engine alone's."""
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS", 3.0)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS_PER_MIB", 0.0)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # a table too large to read ahead
    held = pruner.open_table(tables["lance"])
    ids = [i for i in _data().column("id").to_pylist() if i is not None]

    def check(sql: str, left: bool, dialect: str = "duckdb", table: Any = held) -> None:
        named = {"t": table, "s": tables["s"]}
        prepared = plan(sql, named, dialect=dialect)
        assert prepared.explanation is not None
        found: Any = prepared.explanation.to_json()["scans"]
        terms = [term for scan in found if scan["name"] == "t" for term in scan["terms"]]
        reasons = [term["reason"] or "" for term in terms]
        assert any("left to Lance's scanner" in r for r in reasons) is left, (sql, reasons)
        assert any(term["used_index"] for term in terms) is not left, (sql, reasons)
        if dialect == "duckdb":
            assert prepared.reads_whole("t") is left, sql
            got = duck_adapter.query(sql, named, prepared=prepared)
        else:
            got = pruner.query(sql, named, engine=dialect)
        plain = {"t": table.path, "s": tables["s"]}
        assert multiset(got) == multiset(engine_alone(dialect, sql, plain)), sql

    point = "SELECT id, amount FROM t WHERE id = {}"
    check(point.format(ids[0]), False)
    check(point.format(ids[1]), False)
    check(point.format(ids[2]), True)
    sql = point.format(ids[3])
    prepared = plan(sql, {"t": held}, dialect="duckdb")
    assert prepared.explanation is None, "a text of the same shape reuses the plan unanalysed"
    assert reusable_binding(prepared, sql) == (("t", held, "whole"),)
    source = sources.lance_source(held, prepared.selections["t"])
    assert not isinstance(source, pa.Table)
    assert "ScalarIndexQuery" in source.scanner(filter=pc.field("id") == ids[3]).explain_plan()
    check(f"SELECT id, tag FROM t WHERE id = {ids[4]} AND tag = 't3'", True)
    # the literal on the left: the same, and its next text reuses the plan too
    reversed_point = "SELECT id, amount FROM t WHERE {} = id"
    check(reversed_point.format(ids[4]), True)
    assert plan(reversed_point.format(ids[5]), {"t": held}, dialect="duckdb").explanation is None
    check(f"SELECT id FROM t WHERE id IN ({ids[5]}, {ids[6]})", False)
    # one key written as a list or a range: DuckDB pushes no equality into Lance's scan
    check(f"SELECT id FROM t WHERE id IN ({ids[5]})", False)
    check(f"SELECT id FROM t WHERE id BETWEEN {ids[5]} AND {ids[5]}", False)
    check(f"SELECT id FROM t WHERE id = {ids[5]} OR id = {ids[6]}", False)
    check(f"SELECT t.id, s.k FROM t JOIN s ON t.id = s.id WHERE t.id = {ids[5]}", False)
    check(f"SELECT id FROM t WHERE id = {ids[5]} UNION ALL SELECT id FROM t WHERE id = 3", False)
    check(point.format(ids[5]), False, dialect="datafusion")
    parquet = pruner.open_table(tables["parquet"])
    for _ in range(3):
        check(point.format(ids[6]), False, table=parquet)
    # a table read whole ahead (its rows held in memory) probes no index of Lance's
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 1 << 18)
    check(point.format(ids[7]), False)


def test_a_lance_table_of_many_fragments_keeps_its_lookups(
    tables: dict[str, Path], cost_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held Lance table of at least LANCE_OWN_FRAGMENTS fragments: however often it is
    looked up, pruner probes and reads its point lookups itself, also those of a shape an
    earlier plan left to Lance's scanner (when the table counted fewer fragments than the
    threshold); explain says the index was used. Every answer is DuckDB alone's."""
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS", 1.0)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS_PER_MIB", 0.0)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # a table too large to read ahead
    held = pruner.open_table(tables["lance"])
    fragments = len(held.fragment_rows)
    assert fragments > 1
    ids = [i for i in _data().column("id").to_pylist() if i is not None]

    def left(sql: str) -> bool:
        prepared = plan(sql, {"t": held}, dialect="duckdb")
        got = duck_adapter.query(sql, {"t": held}, prepared=prepared)
        assert multiset(got) == multiset(engine_alone("duckdb", sql, {"t": held.path})), sql
        if prepared.explanation is None:  # a remembered plan, left to Lance
            return prepared.reads_whole("t")
        found: Any = prepared.explanation.to_json()["scans"]
        terms = [term for scan in found for term in scan["terms"]]
        if any("left to Lance's scanner" in (term["reason"] or "") for term in terms):
            assert prepared.reads_whole("t")
            return True
        on_id = [term for term in terms if term["column"] == "id"]
        assert on_id and all(term["used_index"] for term in on_id), (sql, terms)
        assert not prepared.reads_whole("t")
        return False

    monkeypatch.setattr(costs, "LANCE_OWN_FRAGMENTS", fragments + 1)
    assert [left(_POINT.format(key)) for key in ids[:3]] == [True] * 3
    monkeypatch.setattr(costs, "LANCE_OWN_FRAGMENTS", fragments)
    assert [left(_POINT.format(key)) for key in ids[3:8]] == [False] * 5
    assert not left(_BESIDE.format(ids[8]))


_POINT = "SELECT id, amount FROM t WHERE id = {}"
_BESIDE = "SELECT id, tag FROM t WHERE id = {} AND tag = 't3'"


def _held_in_fragments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, pruner.Table, list[int], int]:
    """A Lance table of 6 fragments and one appended after its index was built, a row
    deleted, held open and looked up until its lookups of :data:`_POINT` and :data:`_BESIDE`
    are left to Lance's scanner, given the fragments pruner's probe selects (from 4
    fragments): its path, the table, a key of each of the first 6 fragments, the key
    deleted."""
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS", 3.0)
    monkeypatch.setattr(costs, "LANCE_WARM_LOOKUPS_PER_MIB", 0.0)
    monkeypatch.setattr(costs, "LANCE_LEFT_FRAGMENTS", 4)
    monkeypatch.setattr(reads, "LANCE_READ_AHEAD_VALUES", 0)  # a table too large to read ahead
    data, per = _data(), ROWS // 6
    path = tmp_path / "t.lance"
    lance.write_dataset(data, str(path), max_rows_per_file=per)
    build_index(path, "id", items=500)
    extra = pa.table({"id": pa.array([ROWS + 1], pa.int64()), "amount": [1.0], "tag": ["t9"]})
    lance.write_dataset(extra, str(path), mode="append")
    ids = data.column("id").to_pylist()
    deleted = next(i for i in ids[per : 2 * per] if i is not None)
    lance.dataset(str(path)).delete(f"id = {deleted}")
    held = pruner.open_table(path)
    for key in ids[3:6]:  # probed by pruner, then left to Lance (either shape)
        duck_adapter.query(_POINT.format(key), {"t": held})
        duck_adapter.query(_BESIDE.format(key), {"t": held})
    firsts = [next(i for i in ids[f * per : (f + 1) * per] if i is not None) for f in range(6)]
    return path, held, firsts, deleted


def test_a_lookup_left_to_lance_reads_the_fragments_pruners_probe_selects(
    tmp_path: Path, cost_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held table of at least LANCE_LEFT_FRAGMENTS fragments (4 here): its lookups left to
    Lance's scanner are given only the fragments pruner's probe of the key selects, with one
    appended after the index build (which the index does not cover), on one kept cursor
    whose dataset each lookup points at its own fragments; Lance probes its index within
    them. Keys of one fragment after another, an appended, a deleted and an absent key, and
    a key beside another condition, answer as DuckDB alone."""
    path, held, firsts, deleted = _held_in_fragments(tmp_path, monkeypatch)
    last = max(held.fragment_rows)  # the appended fragment
    sqls = [_POINT.format(key) for key in firsts + firsts[::-1] + [ROWS + 1, deleted, ROWS + 50]]
    sqls += [_BESIDE.format(key) for key in firsts]
    connection = duck_adapter.shared_connection()
    for sql in sqls:
        prepared = plan(sql, {"t": held}, dialect="duckdb")
        assert prepared.explanation is None and prepared.lance_probes == {"t"}, sql
        fragments = prepared.selections["t"].fragment_ids()  # type: ignore[union-attr]
        assert last in fragments and len(fragments) < len(held.fragment_rows), (sql, fragments)
        assert reusable_binding(prepared, sql) == (("t", held, "lance"),)
        got = duck_adapter.query(sql, {"t": held}, prepared=prepared)
        assert multiset(got) == multiset(engine_alone("duckdb", sql, {"t": path})), sql
    idle = kept.kept_cursors(connection).idle
    [pointed] = [p for bindings, _, p in idle if bindings == (("t", held, "lance"),)]
    condition = pc.field("id") == firsts[1]
    assert "ScalarIndexQuery" in pointed["t"].scanner(filter=condition).explain_plan()


def test_lookups_left_to_lance_from_many_threads_answer_as_duckdb_alone(
    tmp_path: Path, cost_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads looking up keys of different fragments of one held table at once, through the
    shared connection: each lookup takes a kept cursor for itself (or binds a new one)
    before pointing its dataset at the lookup's fragments, so no lookup reads another's."""
    path, held, firsts, deleted = _held_in_fragments(tmp_path, monkeypatch)
    sqls = [_POINT.format(key) for key in firsts if key != deleted] * 8
    expected = {sql: multiset(engine_alone("duckdb", sql, {"t": path})) for sql in set(sqls)}
    assert all(expected.values())

    def answer(sql: str) -> bool:
        return multiset(pruner.query(sql, {"t": held})) == expected[sql]

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(answer, sqls))
    assert plan(sqls[0], {"t": held}, dialect="duckdb").lance_probes == {"t"}


def test_a_long_in_list_is_not_probed(tables: dict[str, Path], cost_model: None) -> None:
    """300 keys over 12 row groups (or 15 zones) would select them all: the term is not
    hashed nor probed, and explain says why."""
    keys = list(range(0, 3_000, 10))
    sql = _in_list(keys)
    for path in (tables["lance"], tables["parquet"]):
        found = json.loads(pruner.explain(sql, {"t": path}).to_json_text())
        [term] = found["scans"][0]["terms"]
        assert not term["used_index"] and "not probed" in term["reason"], term
        assert pruner.query(sql, {"t": path}) == engine_alone("duckdb", sql, {"t": path})
    assert costs.probe_reason(_opened(tables["parquet"]), "id", 1) is None


def test_a_query_whose_only_term_is_a_list_too_long_to_probe_is_not_analysed(
    tables: dict[str, Path], cost_model: None
) -> None:
    """A list of 600 (or 60) distinct keys over 12 row groups (or zones) prunes nothing: the
    query is not parsed, it reads whole, and explain says why. Beside a term that can prune, or as
    600 copies of one key, the list is analysed as before; every answer is the engine's."""
    ids = [i for i in _data().column("id").to_pylist() if i is not None]
    long = ids[:600]
    cases = {
        "alone": (_in_list(long), False),
        "60 keys": (_in_list(ids[:60]), False),
        "beside a term": (_in_list(long).replace(" ORDER", f" AND id = {ids[3]} ORDER"), True),
        "one key repeated": (_in_list([ids[5]] * 600), True),
        "in a NOT": (
            f"SELECT count(*) AS n FROM t WHERE NOT (id IN ({', '.join(map(str, long))}))",
            True,
        ),
    }
    for path in (tables["lance"], tables["parquet"]):
        for name, (sql, analysed) in cases.items():
            assert len(sql) >= costs.LONG_SQL, name
            prepared = plan(sql, {"t": path}, dialect="duckdb")
            assert (prepared.explanation is not None) is analysed, name
            if not analysed:
                assert prepared.reads_whole("t")
                assert str(pruner.explain(sql, {"t": path})).endswith(f"query: {costs.UNANALYSED}")
            got = pruner.query(sql, {"t": path})
            assert multiset(got) == multiset(engine_alone("duckdb", sql, {"t": path})), name


def _opened(path: Path) -> Any:
    return pruner.open_table(path)


def test_a_kept_cursor_never_answers_from_an_older_table(tmp_path: Path, cost_model: None) -> None:
    """DuckDB cursors bound to whole tables are kept for the next such query: a file added
    to the directory opens the table anew and binds a new cursor; a statement that changes
    what a cursor holds (DDL) never leaves its cursor for another query."""
    ids = pa.array(range(100), pa.int64())
    pq.write_table(pa.table({"id": ids, "v": ids}), tmp_path / "0.parquet")
    build_index(tmp_path, "id")
    sql = "SELECT count(*) AS n, sum(v) AS s FROM t WHERE v >= 0"
    for _ in range(2):
        assert pruner.query(sql, {"t": tmp_path}) == engine_alone("duckdb", sql, {"t": tmp_path})
    more = pa.array(range(100, 130), pa.int64())
    pq.write_table(pa.table({"id": more, "v": more}), tmp_path / "1.parquet")
    answer = pruner.query(sql, {"t": tmp_path})
    assert answer.to_pylist() == [{"n": 130, "s": sum(range(130))}]
    assert answer == engine_alone("duckdb", sql, {"t": tmp_path})
    pruner.query("CREATE TEMP TABLE copied AS SELECT * FROM t", {"t": tmp_path})
    with pytest.raises(Exception, match="copied"):
        pruner.query("SELECT count(*) FROM copied", {"t": tmp_path})
    cursors = kept.kept_cursors(duck_adapter.shared_connection())
    assert cursors.idle and len(cursors.idle) <= cursors.LIMIT


def test_an_unpruned_cursor_never_serves_a_pruned_query(
    tables: dict[str, Path], cost_model: None
) -> None:
    """prune=False binds a Lance table with no index at all (Lance's own included); a query
    the cost model reads whole binds it as a whole Selection (Lance may use its indexes).
    Each kind of cursor serves only queries of its kind (an unpruned cursor once served the
    demo's is_null, whose scan it made 4x slower)."""
    table = pruner.open_table(tables["lance"])
    sql = "SELECT count(*) AS n FROM t WHERE amount > 50"
    bare = reusable_binding(plan(sql, {"t": table}, dialect="duckdb", prune=False), sql)
    whole = reusable_binding(plan(sql, {"t": table}, dialect="duckdb"), sql)
    assert bare is not None and whole is not None
    cursors = kept.KeptCursors()
    cursor = duck_adapter.shared_connection().cursor()
    cursors.keep(bare, cursor, {})
    assert cursors.take(whole) is None, "a pruned query took the unpruned cursor"
    assert cursors.take(bare) == (cursor, {})
    for prune in (False, True, False):
        got = pruner.query(sql, {"t": table}, prune=prune)
        assert got == engine_alone("duckdb", sql, {"t": tables["lance"]})


def test_an_empty_binding_serves_only_queries_that_select_nothing(
    tables: dict[str, Path], cost_model: None
) -> None:
    """A lookup of an absent key binds its table empty, the same for every such query, and
    keeps the cursor; neither a lookup that finds rows nor a query of the whole table ever
    takes it."""
    present = next(i for i in _data().column("id").to_pylist() if i is not None)
    for kind in ("lance", "parquet"):
        table = pruner.open_table(tables[kind])
        absent = "SELECT count(*) AS n, min(amount) AS a FROM t WHERE id = -7"
        found = f"SELECT count(*) AS n, min(amount) AS a FROM t WHERE id = {present}"
        empty = reusable_binding(plan(absent, {"t": table}, dialect="duckdb"), absent)
        assert empty is not None and [how for _, _, how in empty] == ["empty"]
        assert reusable_binding(plan(found, {"t": table}, dialect="duckdb"), found) is None
        whole = "SELECT count(*) AS n, min(amount) AS a FROM t WHERE amount >= 0"
        for sql in (absent, found, whole, absent, whole, found):
            expected = engine_alone("duckdb", sql, {"t": tables[kind]})
            assert pruner.query(sql, {"t": table}) == expected
        assert pruner.query(absent, {"t": table}).to_pylist() == [{"n": 0, "a": None}]
        assert pruner.query(found, {"t": table}).to_pylist()[0]["n"] == 1


def test_datafusion_keeps_whole_parquet_views_only_for_their_table(tmp_path: Path) -> None:
    """pruner's shared DataFusion context keeps a Parquet table read whole registered for
    the next query over the same Table; a file added opens the table anew (answered as
    DataFusion alone), and a query naming a table it was not given never sees a kept one."""
    from pruner.adapters import datafusion as df_adapter

    ids = pa.array(range(100), pa.int64())
    pq.write_table(pa.table({"id": ids, "v": ids}), tmp_path / "0.parquet")
    sql = "SELECT count(*) AS n, sum(v) AS s FROM t WHERE v >= 0"
    for _ in range(2):
        got = pruner.query(sql, {"t": tmp_path}, engine="datafusion")
        assert multiset(got) == multiset(engine_alone("datafusion", sql, {"t": tmp_path}))
    context = df_adapter._shared_context(True)  # one table, no outer join: INNER_SETTINGS
    assert list(kept.kept_views[context].views) == ['"t"']
    more = pa.array(range(100, 130), pa.int64())
    pq.write_table(pa.table({"id": more, "v": more}), tmp_path / "1.parquet")
    got = pruner.query(sql, {"t": tmp_path}, engine="datafusion")
    assert got.to_pylist() == [{"n": 130, "s": sum(range(130))}]
    other = sql.replace("FROM t", "FROM u")
    assert pruner.query(other, {"u": tmp_path}, engine="datafusion") == got
    with pytest.raises(Exception, match="t"):
        pruner.query(sql, {"u": tmp_path}, engine="datafusion")
