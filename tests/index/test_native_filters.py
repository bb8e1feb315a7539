"""Parquet's own bloom filters as zones (pruner.index.native), against DuckDB's
``parquet_bloom_probe`` and the engines alone.

For files written by pyarrow, DuckDB (which writes filters for dictionary-encoded chunks),
DataFusion (COPY with bloom filter options) and Spark (``parquet.bloom.filter.enabled#col``),
pruner's probe of every value in the data and of absent values must keep every row group
DuckDB's probe keeps; damaged filters leave their row group selected."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

import pruner
from pruner import storage
from pruner.adapters.datafusion import sql as datafusion_sql
from pruner.errors import IndexFormatError
from pruner.hashing import hash_array
from pruner.index.native import NativeFilters, hashable, read_header
from pruner.table import open_table
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

DISTINCT = 300  # values per column in the written data (DuckDB writes filters only for
# dictionary-encoded chunks, which it chooses when a chunk repeats its values enough)
ABSENT = 2_500  # absent values probed per column: 10,000 per writer over its 4 columns


def _data(rows: int = 6_000, distinct: int = DISTINCT) -> pa.Table:
    ids = np.random.default_rng(11).permutation(rows) % distinct
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"key-{i}" for i in ids.tolist()]),
            "i16": pa.array(ids, pa.int16()),
            "n": pa.array([None if i % 7 == 0 else int(i) for i in ids.tolist()]),
        }
    )


def _pyarrow(root: Path, _: Any, distinct: int = DISTINCT) -> None:
    table = _data(distinct=distinct)
    options = {c: {"ndv": min(distinct, 1_000), "fpp": 0.05} for c in ("id", "s", "i16", "n")}
    for part in range(2):
        pq.write_table(
            table.slice(part * 3_000, 3_000),
            root / f"part-{part}.parquet",
            row_group_size=1_000,
            bloom_filter_options=options,
        )


def _duckdb(root: Path, _: Any) -> None:
    con = duckdb.connect()
    con.register("data", _data())
    for part in range(2):
        con.execute(
            f"COPY (SELECT * FROM data LIMIT 3000 OFFSET {part * 3000}) TO "
            f"'{root / f'part-{part}.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 1000)"
        )


def _datafusion(root: Path, _: Any) -> None:
    import datafusion

    ctx = datafusion.SessionContext()
    ctx.register_record_batches("data", [_data().to_batches()])
    ctx.sql(
        f"COPY data TO '{root / 'part-0.parquet'}' STORED AS PARQUET OPTIONS "
        "('format.bloom_filter_on_write' 'true', 'format.max_row_group_size' '1500')"
    ).collect()


def _spark(root: Path, spark: Any) -> None:
    # parquet-java writes no filter for a chunk it dictionary-encodes whole, so the data has
    # more distinct values and dictionaries are off.
    frame = spark.createDataFrame(_data(distinct=2_000).to_pandas()).repartition(2)
    writer = (
        frame.write.mode("overwrite")
        .option("parquet.block.size", 16 * 1024)
        .option("parquet.enable.dictionary", "false")
    )
    for column in ("id", "s", "i16", "n"):
        writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
        writer = writer.option(f"parquet.bloom.filter.expected.ndv#{column}", "2000")
    target = root.parent / (root.name + "-spark")
    writer.parquet(str(target))
    for found in sorted(target.glob("*.parquet")):
        shutil.move(found, root / found.name)
    shutil.rmtree(target)


WRITERS: dict[str, Callable[[Path, Any], None]] = {
    "pyarrow": _pyarrow,
    "duckdb": _duckdb,
    "datafusion": _datafusion,
}


def _written(tmp_path_factory: pytest.TempPathFactory, writer: str, spark: Any = None) -> Path:
    root = tmp_path_factory.mktemp(f"native-{writer}") / "t"
    root.mkdir()
    (WRITERS | {"spark": _spark})[writer](root, spark)
    return root


def _duckdb_kept(root: Path, column: str, values: list[Any], sql_type: str) -> np.ndarray:
    """(values, row groups) bool: DuckDB's parquet_bloom_probe keeps the row group (does not
    exclude it), row groups in file path order."""
    files = sorted(p.as_posix() for p in root.glob("*.parquet"))

    def one(chunk: list[Any]) -> list[list[bool]]:
        con = duckdb.connect()
        rows = []
        for value in chunk:
            found = con.execute(
                f"SELECT file_name, row_group_id, bloom_filter_excludes FROM "
                f"parquet_bloom_probe(?, ?, ?::{sql_type}) ORDER BY 1, 2",
                [files, column, value],
            ).fetchall()
            rows.append([not excluded for _, _, excluded in found])
        return rows

    halves = [values[: len(values) // 2], values[len(values) // 2 :]]
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(one, halves))
    return np.array(parts[0] + parts[1], dtype=bool)


def _pruner_kept(root: Path, column: str, values: list[Any]) -> tuple[np.ndarray, NativeFilters]:
    table = open_table(root)
    bound = table.index(column)
    assert bound is not None, "the files' own filters are found"
    index = bound.index
    filters = index.hierarchy
    assert isinstance(filters, NativeFilters)
    arrow_type = table.schema.field(column).type
    hashes, _ = hash_array(hashable(pa.array(values, arrow_type), index.value_type))
    kept = np.array([filters.probe(hashes[i : i + 1]).mask for i in range(len(values))])
    return kept, filters


COLUMNS = [("id", "BIGINT"), ("s", "VARCHAR"), ("i16", "SMALLINT"), ("n", "BIGINT")]


def _agreement(root: Path, column: str, sql_type: str) -> dict[str, int]:
    present = sorted(set(pq.read_table(root, columns=[column]).column(column).to_pylist()) - {None})
    rng = np.random.default_rng(5)
    absent_ints = (rng.choice(30_000, ABSENT, replace=False) + DISTINCT).tolist()
    absent_ints[0] = -1
    if column == "i16":
        absent_ints = [v for v in absent_ints if v < 32_768]
    absent = [f"key-{v}" for v in absent_ints] if column == "s" else absent_ints
    values = present + absent
    ours, filters = _pruner_kept(root, column, values)
    theirs = _duckdb_kept(root, column, values, sql_type)
    assert ours.shape == theirs.shape
    unusable = sorted(filters.problems)
    usable = [z for z in range(ours.shape[1]) if z not in filters.problems]
    # Never narrower than DuckDB's probe: a row group DuckDB keeps, pruner keeps.
    assert not (theirs & ~ours).any(), np.argwhere(theirs & ~ours)[:5]
    # Where both have the filter, the same SBBF answers the same.
    assert (ours[:, usable] == theirs[:, usable]).all()
    # Every present value is kept by some row group that holds it.
    assert ours[: len(present)].any(axis=1).all()
    return {
        "row_groups": ours.shape[1],
        "without_filter": len(unusable),
        "absent_excluded": int((~ours[len(present) :]).sum()),
    }


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_probe_agrees_with_duckdb(tmp_path_factory: pytest.TempPathFactory, writer: str) -> None:
    root = _written(tmp_path_factory, writer)
    checked = 0
    for column, sql_type in COLUMNS:
        table = open_table(root)
        if table.index(column) is None:
            assert writer != "pyarrow", f"pyarrow wrote a filter for {column}"
            continue
        counts = _agreement(root, column, sql_type)
        assert counts["absent_excluded"] > 0
        checked += 1
    assert checked


@pytest.mark.slow
def test_probe_agrees_with_duckdb_on_spark_files(
    tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> None:
    root = _written(tmp_path_factory, "spark", spark)
    assert pq.ParquetFile(next(root.glob("*.parquet"))).metadata.num_row_groups > 1
    for column, sql_type in COLUMNS:
        counts = _agreement(root, column, sql_type)
        assert counts["without_filter"] == 0 and counts["absent_excluded"] > 0


@pytest.fixture(scope="module")
def pyarrow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Unique keys, so a point lookup finds one row group."""
    root = tmp_path_factory.mktemp("native-unique") / "t"
    root.mkdir()
    _pyarrow(root, None, distinct=6_000)
    return root


@pytest.mark.parametrize(
    "where",
    [
        "id = 77",
        "id IN (5, 1499, 99999)",
        "s = 'key-12'",
        "s IN ('key-1', 'nope')",
        "i16 = 1234",
        "n IS NULL",
        "n = 42 OR id = 3",
        "id = -1",
    ],
)
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_answers_equal_the_engine_alone(pyarrow_dir: Path, where: str, engine: str) -> None:
    sql = f"SELECT id, s, n FROM t WHERE {where}"
    expected = multiset(engine_alone(engine, sql, {"t": pyarrow_dir}))
    assert multiset(pruner.query(sql, {"t": pyarrow_dir}, engine=engine)) == expected


def test_explain_names_the_source(pyarrow_dir: Path) -> None:
    explained = pruner.explain("SELECT id FROM t WHERE id = 77", {"t": pyarrow_dir})
    (scan,) = explained.scans
    assert scan.zones_total == 6 and 1 <= scan.zones_selected < 6
    assert "parquet bloom filter" in scan.terms[0].reason


def test_a_pruner_index_is_used_where_it_exists(pyarrow_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    pruner.build_index(copy, "id", items=250)
    explained = pruner.explain("SELECT id FROM t WHERE id = 77", {"t": copy})
    (scan,) = explained.scans
    assert scan.zones_total == 24  # pruner's zones, finer than the 6 row groups
    assert "parquet bloom filter" not in scan.terms[0].reason


# ------------------------------------------------------------------ damage


def test_header_rules(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": np.arange(4_000)}), path, bloom_filter_options={"id": True})
    size, length = read_header(_first_filter_bytes(path)[0])
    assert size >= 32 and size & (size - 1) == 0 and 10 < length < 40
    for garbage in (b"", b"\x15", b"\xff" * 40, b"\x15\x02\x00"):
        with pytest.raises(IndexFormatError):
            read_header(garbage)


def _first_filter_bytes(path: Path) -> tuple[bytes, int]:
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)
    with open(path, "rb") as handle:
        return os.pread(handle.fileno(), 64, meta.bloom_filter_offset), meta.bloom_filter_offset


def _damage(path: Path, group: int, how: str) -> None:
    meta = pq.ParquetFile(path).metadata.row_group(group).column(0)
    offset, length = meta.bloom_filter_offset, meta.bloom_filter_length
    data = bytearray(path.read_bytes())
    if how == "header":
        data[offset : offset + 4] = b"\x99\x99\x99\x99"
    elif how == "size":  # numBytes + 32: not a power of two
        size, header = read_header(bytes(data[offset : offset + 64]))
        assert data[offset] == 0x15  # field 1, i32
        encoded = _zigzag_varint(size + 32)
        old = _zigzag_varint(size)
        assert len(encoded) == len(old)
        data[offset + 1 : offset + 1 + len(old)] = encoded
    elif how == "algorithm":  # the BLOCK union member renumbered: an unknown algorithm
        raw = bytes(data[offset : offset + 64])
        position = raw.index(b"\x1c\x1c", 1)  # field 2 struct, its field 1 struct
        data[offset + position + 1] = 0x2C  # field 2 of the union
    elif how == "zeros":  # every bit clear: the filter says every value is absent
        size, header = read_header(bytes(data[offset : offset + 64]))
        data[offset + header : offset + header + size] = bytes(size)
    path.write_bytes(bytes(data))
    del length


def _zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 31)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@pytest.mark.parametrize(
    "how", ["header", "size", "algorithm", "truncated", "truncated-little", "length"]
)
def test_a_damaged_filter_leaves_its_row_group_selected(tmp_path: Path, how: str) -> None:
    root = tmp_path / "t"
    root.mkdir()
    path = root / "a.parquet"
    pq.write_table(
        pa.table({"id": np.arange(4_000)}),
        path,
        row_group_size=1_000,
        bloom_filter_options={"id": {"ndv": 1_000, "fpp": 0.01}},
    )
    if how == "truncated":
        # The last row group's filter claims more bytes than the file holds from there.
        meta = pq.ParquetFile(path).metadata
        last = meta.row_group(3).column(0)
        _, header = read_header(_pread(path, last.bloom_filter_offset, 64))
        _check_damage(root, how, _truncating(path, last.bloom_filter_offset + header + 16))
        return
    if how == "truncated-little":
        # Only its last 16 bytes cut: the bitset would run into the footer, whose bytes are
        # no filter's.
        last = pq.ParquetFile(path).metadata.row_group(3).column(0)
        end = last.bloom_filter_offset + last.bloom_filter_length
        _check_damage(root, how, _truncating(path, end - 16))
        return
    if how == "length":
        _check_damage(root, how, lambda: _swap_lengths(path))
        return
    _check_damage(root, how, lambda: _damage(path, 1, how))


def _pread(path: Path, offset: int, count: int) -> bytes:
    with open(path, "rb") as handle:
        return os.pread(handle.fileno(), count, offset)


def _truncating(path: Path, keep: int) -> Callable[[], None]:
    """A file whose footer is intact but whose last filter is cut short: the filter's bytes
    past ``keep`` are removed and the footer moved up (its offsets still point past)."""

    def run() -> None:
        data = path.read_bytes()
        footer_length = int.from_bytes(data[-8:-4], "little")
        footer = data[-(footer_length + 8) :]
        path.write_bytes(data[:keep] + footer)

    return run


def _swap_lengths(path: Path) -> None:
    """Row group 1's recorded filter length made wrong by rewriting the footer: pyarrow has no
    API for that, so the file is rewritten with a smaller filter in group 1 only is not
    possible either; instead its header's numBytes is changed to another power of two, which
    then disagrees with the recorded length."""
    meta = pq.ParquetFile(path).metadata.row_group(1).column(0)
    offset = meta.bloom_filter_offset
    data = bytearray(path.read_bytes())
    size, _ = read_header(bytes(data[offset : offset + 64]))
    old, new = _zigzag_varint(size), _zigzag_varint(size // 2)
    assert len(old) == len(new)
    data[offset + 1 : offset + 1 + len(old)] = new
    path.write_bytes(bytes(data))


def _check_damage(root: Path, how: str, damage: Callable[[], None]) -> None:
    present = [5, 1_005, 2_005, 3_005]  # one per row group
    damage()
    table = open_table(root)
    bound = table.index("id")
    assert bound is not None
    filters = bound.index.hierarchy
    assert isinstance(filters, NativeFilters)
    assert filters.problems, how
    assert filters.damaged == sorted(filters.problems), "a filter the file has, refused"
    data = pq.read_table(root)  # the rows, read without any filter
    # The last selects every row group: each file is read whole by the engine's own reader.
    for wanted in [[value] for value in [*present, -7]] + [present]:
        sql = f"SELECT id FROM t WHERE id IN ({', '.join(map(str, wanted))})"
        truth = Counter((v,) for v in data.column("id").to_pylist() if v in wanted)
        explained = pruner.explain(sql, {"t": root}, check=False)
        # The filters keep every damaged row group (row-group statistics may still rule
        # one out: they prove no row of it holds the value).
        hashes, _ = hash_array(pa.array(sorted(wanted), pa.int64()))
        assert filters.probe(hashes).mask[list(filters.problems)].all(), how
        reason = explained.scans[0].terms[0].reason
        assert "row groups read whole" in reason and "damaged filter" in reason, reason
        # Neither pruner nor the engine under it trusts the damaged filter: the answer is
        # the rows in the file, whether the engine alone fails, misreads it, or not.
        for engine in ("duckdb", "datafusion"):
            got = multiset(pruner.query(sql, {"t": root}, engine=engine))
            assert got == truth, (engine, how, sql)
        context = SessionContext()  # a caller's own, which reads filters
        got = multiset(datafusion_sql(context, sql, {"t": root}).to_arrow_table())
        assert got == truth, ("datafusion, the caller's context", how, sql)
        unpruned = multiset(pruner.query(sql, {"t": root}, engine="datafusion", prune=False))
        assert unpruned == truth, ("datafusion, unpruned", how, sql)


def _damaged_file(root: Path, how: str) -> Path:
    root.mkdir()
    path = root / "a.parquet"
    pq.write_table(
        pa.table({"id": np.arange(4_000), "s": np.arange(4_000).astype(str)}),
        path,
        row_group_size=1_000,
        bloom_filter_options={"id": {"ndv": 1_000, "fpp": 0.01}},
    )
    if how == "length":
        _swap_lengths(path)
    else:
        _damage(path, 1, how)
    return path


def test_duckdb_alone_fails_on_a_damaged_header(tmp_path: Path) -> None:
    """Canary: DuckDB 2.0 alone raises on a filter header it cannot decode, whenever its
    scan reads that row group's filter; pruner reads such files without letting DuckDB
    probe their filters (duckdb.parquet_view_sql) and answers the rows."""
    root = tmp_path / "t"
    _damaged_file(root, "header")
    sql = "SELECT id FROM t WHERE id IN (5, 1005, 2005, 3005)"
    with pytest.raises(duckdb.Error):
        engine_alone("duckdb", sql, {"t": root})
    assert sorted(pruner.query(sql, {"t": root}).column("id").to_pylist()) == [
        5,
        1_005,
        2_005,
        3_005,
    ]


def test_filters_all_damaged_are_named_in_explain(tmp_path: Path) -> None:
    """Every filter of the column refused: explain says so, not that there is no index."""
    root = tmp_path / "t"
    path = _damaged_file(root, "algorithm")
    for group in (0, 2, 3):
        _damage(path, group, "algorithm")
    explained = pruner.explain("SELECT s FROM t WHERE id = 7", {"t": root}, check=False)
    reason = explained.scans[0].terms[0].reason
    assert "4 of 4 row groups read whole; 4 damaged filters refused" in reason, reason
    # Row-group min/max statistics still rule out the three groups whose range lacks 7.
    assert explained.scans[0].zones_selected == 1
    assert pruner.query("SELECT s FROM t WHERE id = 7", {"t": root}).to_pylist() == [{"s": "7"}]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["size", "length", "header", "truncated"])
def test_spark_under_pruner_never_reads_a_damaged_filter(
    tmp_path: Path, spark: Any, how: str
) -> None:
    """Spark alone (parquet-mr) trusts a filter whose header disagrees with its length and
    loses the row group's rows; under pruner it reads no filter of the files (pruner's own
    probe already refused the damaged one): the answer is the rows in the file."""
    root = tmp_path / "t"
    path = _damaged_file(root, "header" if how == "truncated" else how)
    if how == "truncated":
        path.unlink()
        _damaged_file(tmp_path / "u", "size")
        last = pq.ParquetFile(tmp_path / "u" / "a.parquet").metadata.row_group(3).column(0)
        shutil.copy(tmp_path / "u" / "a.parquet", path)
        _, header = read_header(_pread(path, last.bloom_filter_offset, 64))
        _truncating(path, last.bloom_filter_offset + header + 16)()
    data = pq.read_table(root)
    for wanted in ([1_005], [3_005], [5, 1_005, 2_005, 3_005]):
        sql = f"SELECT id FROM t WHERE id IN ({', '.join(map(str, wanted))})"
        truth = Counter((v,) for v in data.column("id").to_pylist() if v in wanted)
        for prune in (True, False):
            got = multiset(pruner.query(sql, {"t": root}, engine="spark", prune=prune))
            assert got == truth, (how, sql, prune)
    if how in ("size", "length"):  # canary: Spark alone loses row 1,005
        alone = engine_alone("spark", "SELECT id FROM t WHERE id = 1005", {"t": root}, spark=spark)
        assert alone.num_rows == 0, "Spark reads damaged filters right now: say so in the docs"


def test_a_zeroed_bitset_is_not_detectable_and_is_the_writers_word(tmp_path: Path) -> None:
    """A bitset of zeros passes every check the format allows (no checksum): it says no
    value is there. pruner, like DuckDB's own probe, believes it; DuckDB's probe is the judge
    that both read the file the same way."""
    root = tmp_path / "t"
    root.mkdir()
    path = root / "a.parquet"
    pq.write_table(
        pa.table({"id": np.arange(4_000)}),
        path,
        row_group_size=1_000,
        bloom_filter_options={"id": True},
    )
    _damage(path, 1, "zeros")
    ours, _ = _pruner_kept(root, "id", [1_005])
    theirs = _duckdb_kept(root, "id", [1_005, 1_005], "BIGINT")[:1]
    assert ours.tolist() == theirs.tolist()
    assert not ours[0][1], "the zeroed filter rules its row group out, for both"


@pytest.mark.parametrize("kept", [False, True])
def test_a_file_changed_after_opening_is_read_whole(
    pyarrow_dir: Path, tmp_path: Path, kept: bool
) -> None:
    """Probed block by block, or from the bitsets a table kept open holds (stacked once
    all are kept), a file whose time or size changed since has its row groups selected."""
    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    table = open_table(copy)
    bound = table.index("id")
    assert bound is not None
    filters = bound.index.hierarchy
    assert isinstance(filters, NativeFilters)
    if kept:  # 20 absent values: every bitset read whole, kept and stacked
        many, _ = hash_array(pa.array(range(-40, -20), pa.int64()))
        filters.probe(many)
        assert filters._stacks is not None
    first = sorted(copy.glob("*.parquet"))[0]
    os.utime(first, ns=(1, 1))
    hashes, _ = hash_array(pa.array([-7], pa.int64()))
    mask = filters.probe(hashes).mask
    zones_of_first = bound.index.fragment_id == 0
    assert mask[zones_of_first].all() and not mask[~zones_of_first].any()
    first.unlink()  # gone: read whole too (the engine then says it is missing)
    assert filters.probe(hashes).mask[zones_of_first].all()


def test_kept_bitsets_of_several_sizes_outlive_a_changed_file(tmp_path: Path) -> None:
    """Kept bitsets are stacked by size; when every zone of one size belongs to a file
    changed since opening, the zones of the other sizes are still probed. Kills a mutation
    run's survivor that stopped at the first size with no zone to probe (the other sizes'
    zones then never matched: file 1's row of 1,500 pruned away)."""
    from pruner.index.native import write_parquet

    root = tmp_path / "t"
    root.mkdir()
    ids = pa.array(np.arange(3_000), pa.int64())
    data = pa.table({"id": ids, "n": ids})
    write_parquet(data.slice(0, 1_024), root / "a.parquet", ["id"], items=256)  # small filters
    write_parquet(data.slice(1_024), root / "b.parquet", ["id"], items=2_048)  # larger ones
    table = open_table(root)
    bound = table.index("id")
    assert bound is not None
    filters = bound.index.hierarchy
    assert isinstance(filters, NativeFilters)
    usable_in_b = bound.index.fragment_id[filters._usable] == 1
    assert filters._blocks[usable_in_b].min() > filters._blocks[~usable_in_b].max(), "b last"
    many, _ = hash_array(pa.array(range(-40, -20), pa.int64()))
    filters.probe(many)
    assert filters._stacks is not None and len(filters._stacks) >= 2
    os.utime(root / "a.parquet", ns=(1, 1))  # the small bitsets' only file: none left fresh
    hashes, _ = hash_array(pa.array([1_500], pa.int64()))
    mask = filters.probe(hashes).mask
    in_b = bound.index.fragment_id == 1
    assert mask[~in_b].all(), "the changed file is read whole"
    assert mask[in_b].any(), "the row group holding 1,500 is selected"
    sql = "SELECT n FROM t WHERE id = 1500"
    pruned = pruner.query(sql, {"t": table})
    assert pruned.column("n").to_pylist() == [1_500]
    assert multiset(pruned) == multiset(engine_alone("duckdb", sql, {"t": root}))


def test_files_without_filters_are_read_whole(pyarrow_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    pq.write_table(
        pa.table(
            {"id": [77, 9], "s": ["a", "b"], "i16": pa.array([1, 2], pa.int16()), "n": [None, 1]}
        ),
        copy / "zz-plain.parquet",
    )
    sql = "SELECT id, s FROM t WHERE id = 77"
    expected = multiset(engine_alone("duckdb", sql, {"t": copy}))
    assert multiset(pruner.query(sql, {"t": copy})) == expected
    explained = pruner.explain(sql, {"t": copy}, check=False)
    assert "1 of 7 row groups read whole" in explained.scans[0].terms[0].reason


def test_datafusion_alone_trusts_a_truncated_filter(tmp_path: Path) -> None:
    """Canary for an engine bug, not pruner's: DataFusion 55 alone (register_parquet) probes a
    bloom filter whose bitset the file cuts short and loses the row it rules out; pruner
    reads such a row group whole and answers right (test above). When this fails, DataFusion
    has fixed it: drop the exception in _check_damage."""
    root = tmp_path / "t"
    root.mkdir()
    path = root / "a.parquet"
    pq.write_table(
        pa.table({"id": np.arange(4_000)}),
        path,
        row_group_size=1_000,
        bloom_filter_options={"id": {"ndv": 1_000, "fpp": 0.01}},
    )
    last = pq.ParquetFile(path).metadata.row_group(3).column(0)
    _, header = read_header(_pread(path, last.bloom_filter_offset, 64))
    _truncating(path, last.bloom_filter_offset + header + 16)()
    sql = "SELECT id FROM t WHERE id = 3005"
    assert pq.read_table(root).column("id").to_pylist().count(3005) == 1
    assert engine_alone("datafusion", sql, {"t": root}).num_rows == 0
    assert pruner.query(sql, {"t": root}, engine="datafusion").num_rows == 1


@pytest.mark.parametrize("read_ahead", [True, False])
def test_a_callers_context_scans_a_truncated_filter_s_file_without_its_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_ahead: bool
) -> None:
    """On a caller's own context (bloom filters read, DataFusion's default), a file pruner
    has DataFusion scan itself (the selection too large to read ahead) is registered with
    the filters off (only then is the setting read and turned off, for the registration),
    and the context's setting is back on after. Either way the answer is the file's rows
    (DataFusion alone loses the row: test above)."""
    from pruner import reads

    root = tmp_path / "t"
    root.mkdir()
    for name, first in (("a", 0), ("b", 4_000)):
        pq.write_table(
            pa.table({"id": np.arange(first, first + 4_000)}),
            root / f"{name}.parquet",
            row_group_size=1_000,
            bloom_filter_options={"id": {"ndv": 1_000, "fpp": 0.01}},
        )
    path = root / "a.parquet"
    last = pq.ParquetFile(path).metadata.row_group(3).column(0)
    _, header = read_header(_pread(path, last.bloom_filter_offset, 64))
    _truncating(path, last.bloom_filter_offset + header + 16)()
    if not read_ahead:
        monkeypatch.setattr(reads, "PARQUET_READ_AHEAD_BYTES", 0)
    context = SessionContext()
    setting = "SHOW datafusion.execution.parquet.bloom_filter_on_read"
    for sql in ("SELECT id FROM t WHERE id = 3005", "SELECT id FROM t WHERE id IN (3005, 3006)"):
        got = datafusion_sql(context, sql, {"t": root}).to_arrow_table()
        assert sorted(got.column("id").to_pylist()) == [v for v in (3005, 3006) if str(v) in sql]
        assert context.sql(setting).to_pylist()[0]["value"] == "true"


def test_a_filter_without_a_recorded_length_is_read_from_its_header(tmp_path: Path) -> None:
    """Writers may leave ``bloom_filter_length`` out (older parquet-java did); the header then
    says how long the bitset is. The metadata object here is the file's own, with only the
    length taken away."""
    from types import SimpleNamespace

    from pruner.discover import read_footer
    from pruner.index.native import _locate

    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": np.arange(4_000)}), path, bloom_filter_options={"id": True})
    real = pq.ParquetFile(path).metadata.row_group(0).column(0)
    identity, _, _ = read_footer(path)
    file = SimpleNamespace(path=path, identity=identity, metadata=pq.ParquetFile(path).metadata)
    without = SimpleNamespace(
        bloom_filter_offset=real.bloom_filter_offset, bloom_filter_length=None
    )
    with storage.RangeFile(path) as handle:
        known, problem = _locate(handle, file, real)  # type: ignore[arg-type]
        assert problem is None and known is not None
        found, problem = _locate(handle, file, without)  # type: ignore[arg-type]
    assert problem is None and found == known
    assert found.bitset - real.bloom_filter_offset + found.size == real.bloom_filter_length


def test_write_parquet_sizes_filters_like_zones(tmp_path: Path) -> None:
    """pruner.write_parquet: row groups of ``items`` rows, a filter on each named column; the
    engines alone and pruner read the same rows, and DuckDB's own probe agrees."""
    root = tmp_path / "t"
    root.mkdir()
    ids = np.random.default_rng(3).permutation(10_000)
    data = pa.table({"id": ids, "s": [f"v{i}" for i in ids.tolist()], "flag": ids % 2 == 0})
    pruner.write_parquet(data, root / "a.parquet", ["id", "s"], items=2_000)
    meta = pq.ParquetFile(root / "a.parquet").metadata
    assert meta.num_row_groups == 5
    assert all(meta.row_group(g).column(0).bloom_filter_offset for g in range(5))
    assert meta.row_group(0).column(2).bloom_filter_offset is None
    explained = pruner.explain("SELECT id FROM t WHERE s = 'v77'", {"t": root})
    assert explained.scans[0].zones_selected == 1
    for sql in ("SELECT id FROM t WHERE s = 'v77'", "SELECT id FROM t WHERE id IN (1, 9999)"):
        assert multiset(pruner.query(sql, {"t": root})) == multiset(
            engine_alone("duckdb", sql, {"t": root})
        )
    with pytest.raises(pruner.UnsupportedTypeError):
        pruner.write_parquet(data, root / "b.parquet", ["flag"])
    with pytest.raises(pruner.InvalidParameterError):
        pruner.write_parquet(data, root / "b.parquet", ["nope"])


def test_an_index_made_from_the_files_filters(pyarrow_dir: Path, tmp_path: Path) -> None:
    """`pruner index build --from-parquet-filters`: one zone per row group, the files' own
    bitsets, no data read; it records Parquet's encoding (int16 hashed as int32), selects
    what probing the files does, and answers as the engines alone."""
    from pruner.cli import main
    from pruner.index import load_index

    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    for column in ("id", "s", "i16"):
        assert (
            main(["index", "build", str(copy), "--column", column, "--from-parquet-filters"]) == 0
        )
    index = load_index(copy, "i16")
    assert index.value_encoding == "parquet" and index.value_type == pa.int32()
    assert load_index(copy, "id").value_type is None  # int64: Lance's bytes too
    assert index.num_zones == 6 and index.files is not None
    for where in ("id = 77", "s IN ('key-5', 'key-59')", "i16 = 1234", "i16 = 4321", "id = -1"):
        sql = f"SELECT id, s FROM t WHERE {where}"
        on_files = pruner.explain(sql, {"t": pyarrow_dir}, check=False).scans[0]
        stored = pruner.explain(sql, {"t": copy}, check=False).scans[0]
        assert "parquet bloom filter" not in stored.terms[0].reason  # the index, not the files
        assert stored.zones_selected == on_files.zones_selected, where
        for engine in ("duckdb", "datafusion"):
            expected = multiset(engine_alone(engine, sql, {"t": copy}))
            assert multiset(pruner.query(sql, {"t": copy}, engine=engine)) == expected


def test_building_from_filters_refuses_what_has_none(tmp_path: Path, pyarrow_dir: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), plain / "a.parquet")
    with pytest.raises(pruner.InvalidParameterError, match="no file under"):
        pruner.build_index(plain, "id", from_parquet_filters=True)
    with pytest.raises(pruner.InvalidParameterError, match="not in"):
        pruner.build_index(pyarrow_dir, "nope", from_parquet_filters=True)


# ------------------------------------------------------------------ types, kept bitsets, header


TYPE_ROWS = 2_000


def _typed_columns() -> dict[str, pa.Array]:
    ids = np.random.default_rng(3).permutation(TYPE_ROWS)
    i64 = ids.astype(np.int64)
    return {
        "i8": pa.array((ids % 120).astype(np.int8)),
        "u8": pa.array((ids % 250).astype(np.uint8)),
        "i16": pa.array(ids.astype(np.int16)),
        "u16": pa.array(ids.astype(np.uint16) + 60_000),
        "i32": pa.array(ids.astype(np.int32) - 1_000),
        "u32": pa.array(ids.astype(np.uint32) + 3_000_000_000),
        "i64": pa.array(i64 * 10_000_000_019),
        "u64": pa.array(ids.astype(np.uint64) + np.uint64(1 << 63)),
        "f32": pa.array(ids.astype(np.float32) / 4 - 100),
        "f64": pa.array(ids.astype(np.float64) / 3),
        "d32": pa.array(ids.astype(np.int32) - 500).cast(pa.date32()),
        "t32": pa.array((ids * 1_000).astype(np.int32)).cast(pa.time32("ms")),
        "t64us": pa.array(i64 * 1_000_003).cast(pa.time64("us")),
        "t64ns": pa.array(i64 * 1_000_007_000).cast(pa.time64("ns")),  # whole us: exact in Python
        "ts_ms": pa.array(i64 * 86_400_007).cast(pa.timestamp("ms")),
        "ts_us": pa.array(i64 * 86_400_000_007).cast(pa.timestamp("us", "UTC")),
        "ts_ns": pa.array(i64 * 86_400_000_007_000).cast(pa.timestamp("ns")),
        "s": pa.array([f"k{i}" for i in ids.tolist()]),
        "ls": pa.array([f"k{i}" for i in ids.tolist()], pa.large_string()),
        "b": pa.array([f"k{i}".encode() for i in ids.tolist()]),
        "lb": pa.array([f"k{i}".encode() for i in ids.tolist()], pa.large_binary()),
        "fsb": pa.array([i.to_bytes(4, "little") for i in ids.tolist()], pa.binary(4)),
        "dec": pa.array(i64, pa.int64()).cast(pa.decimal128(19, 0)),
        "st": pa.array([{"a": i} for i in ids.tolist()]),
    }


# The Arrow type pruner hashes each column's values as (Parquet's plain encoding: narrow
# integers as INT32, strings and binaries as their bytes, a decimal as its unscaled integer
# in the stored width), or None where it does not probe the file's filter (nested columns).
PLAIN_AS: dict[str, pa.DataType | None] = {
    "i8": pa.int32(),
    "u8": pa.int32(),
    "i16": pa.int32(),
    "u16": pa.int32(),
    "i32": pa.int32(),
    "u32": pa.uint32(),
    "i64": pa.int64(),
    "u64": pa.uint64(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "d32": pa.date32(),
    "t32": pa.time32("ms"),
    "t64us": pa.time64("us"),
    "t64ns": pa.time64("ns"),
    "ts_ms": pa.timestamp("ms"),
    "ts_us": pa.timestamp("us", "UTC"),
    "ts_ns": pa.timestamp("ns"),
    "s": pa.large_binary(),
    "ls": pa.large_binary(),
    "b": pa.large_binary(),
    "lb": pa.large_binary(),
    "fsb": pa.large_binary(),
    "dec": pa.binary(9),  # DECIMAL(19, 0): its unscaled integer in 9 big-endian bytes
    "st": None,
}


@pytest.fixture(scope="module")
def typed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("native-types") / "t"
    root.mkdir()
    table = pa.table(_typed_columns())
    options = {c: {"ndv": 500, "fpp": 0.01} for c in table.schema.names if c != "st"}
    options["st.a"] = {"ndv": 500, "fpp": 0.01}
    pq.write_table(table, root / "a.parquet", row_group_size=500, bloom_filter_options=options)
    return root


def test_every_column_type_is_probed_in_its_plain_encoding(typed_dir: Path) -> None:
    """Each filter pyarrow writes is probed as the bytes Parquet hashed, or not at all."""
    table = open_table(typed_dir)
    got = {}
    for column in PLAIN_AS:
        bound = table.index(column)
        got[column] = None if bound is None else bound.index.value_type
    assert got == PLAIN_AS


@pytest.mark.parametrize("column", [c for c, t in PLAIN_AS.items() if t is not None])
def test_a_present_value_keeps_its_row_group_for_every_type(typed_dir: Path, column: str) -> None:
    """A point lookup bound as a parameter (the query path: literal coercion, then the
    column's Parquet encoding) keeps the row group holding the value; DuckDB alone over the
    file is the judge of the answer."""
    data = pq.read_table(typed_dir, columns=[column]).column(column).to_pylist()
    sql = f"SELECT count(*) AS n FROM t WHERE {column} = ?"
    excluded = 0
    for row in (3, 700, 1_222, 1_999):
        value = data[row]
        explained = pruner.explain(sql, {"t": typed_dir}, parameters=[value], check=False)
        (scan,) = explained.scans
        ranges = scan.selection.ranges()
        covered = any(start <= row < start + length for _, start, length in ranges)
        assert covered, (column, value, scan.terms[0].reason)
        excluded += scan.zones_total - scan.zones_selected
    if column not in ("i8", "u8"):  # those hold every value in every row group
        assert excluded > 0, "the filters rule row groups out"
    value = data[1_222]
    alone = multiset(engine_alone("duckdb", sql, {"t": typed_dir}, [value]))
    assert multiset(pruner.query(sql, {"t": typed_dir}, parameters=[value])) == alone


def _header(num_bytes: int, *, algorithm: bool = True, hashing: bool = True) -> bytes:
    """A BloomFilterHeader as a writer encodes it (thriftpy2, compact protocol)."""
    from thriftpy2.protocol.compact import TCompactProtocolFactory
    from thriftpy2.utils import serialize

    from pruner.index.native import _thrift

    _THRIFT = _thrift()
    header = _THRIFT.BloomFilterHeader(
        numBytes=num_bytes,
        algorithm=_THRIFT.BloomFilterAlgorithm(
            BLOCK=_THRIFT.SplitBlockAlgorithm() if algorithm else None
        ),
        hash=_THRIFT.BloomFilterHash(XXHASH=_THRIFT.XxHash() if hashing else None),
        compression=_THRIFT.BloomFilterCompression(UNCOMPRESSED=_THRIFT.Uncompressed()),
    )
    return bytes(serialize(header, TCompactProtocolFactory()))


@pytest.mark.parametrize("num_bytes", [32, 64, 4096, 1 << 27])
def test_a_header_of_exactly_its_bytes_decodes(num_bytes: int) -> None:
    raw = _header(num_bytes)
    assert read_header(raw) == (num_bytes, len(raw))
    assert read_header(raw + b"\x00" * 40) == (num_bytes, len(raw))
    with pytest.raises(IndexFormatError, match="cut short"):
        read_header(raw[:-1])


@pytest.mark.parametrize("num_bytes", [0, 16, 31, 48, 96, 4096 + 32, 1 << 28, -64])
def test_a_size_the_format_does_not_allow_is_refused(num_bytes: int) -> None:
    with pytest.raises(IndexFormatError, match="power of two"):
        read_header(_header(num_bytes))


@pytest.mark.parametrize("missing", ["algorithm", "hash"])
def test_an_unknown_algorithm_or_hash_is_refused(missing: str) -> None:
    raw = _header(64, algorithm=missing != "algorithm", hashing=missing != "hash")
    with pytest.raises(IndexFormatError, match=f"unknown {missing}"):
        read_header(raw)


def _usable_filters(root: Path, column: str = "id") -> NativeFilters:
    bound = open_table(root).index(column)
    assert bound is not None
    filters = bound.index.hierarchy
    assert isinstance(filters, NativeFilters)
    return filters


def test_kept_bitsets_select_what_the_blocks_select(
    pyarrow_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table kept open reads each filter whole once (from its 8th probe, or at once for a
    probe of 16 values or more) and probes it in memory: the same zones as block reads."""
    from pruner.index.native import filters as native

    values = [*range(0, 6_000, 97), -1, 6_001, 99_999, 123_456]
    hashes, _ = hash_array(pa.array(values, pa.int64()))
    lists = [hashes[i : i + 20] for i in range(0, len(hashes), 20)]
    monkeypatch.setattr(native, "_KEEP_AFTER", 10**9)
    monkeypatch.setattr(native, "_WHOLE_AT", 10**9)
    blocks = _usable_filters(pyarrow_dir)
    by_blocks = [blocks.probe(hashes[i : i + 1]).mask for i in range(len(values))]
    lists_by_blocks = [blocks.probe(h).mask for h in lists]
    assert not blocks._whole, "nothing kept while below both thresholds"
    monkeypatch.undo()
    kept = _usable_filters(pyarrow_dir)
    by_kept = [kept.probe(hashes[i : i + 1]).mask for i in range(len(values))]
    assert len(kept._whole) == len(kept._usable), "from the 8th probe on, every bitset is kept"
    assert [m.tolist() for m in by_kept] == [m.tolist() for m in by_blocks]
    at_once = _usable_filters(pyarrow_dir)
    assert [at_once.probe(h).mask.tolist() for h in lists] == [m.tolist() for m in lists_by_blocks]
    assert len(at_once._whole) == len(at_once._usable), "a 20-value probe keeps them at once"
    for i, h in enumerate(lists):  # a list's zones are the union of its values' zones
        singles = np.array(by_blocks[i * 20 : i * 20 + len(h)]).any(axis=0)
        assert lists_by_blocks[i].tolist() == singles.tolist()
    present = [v for v in values if 0 <= v < 6_000]
    assert all(m.any() for m in by_kept[: len(present)])
    assert sum(int(m.sum()) for m in by_kept) < len(values) * len(by_kept[0])


def test_a_bitset_cut_short_after_opening_leaves_its_row_group_selected(
    pyarrow_dir: Path, tmp_path: Path
) -> None:
    """The open-time checks keep every bitset inside its file, and a file that changes size
    is read whole; should a read still come back short (the checks raced), that row group
    proves nothing, kept or not. Simulated by pointing one row group's bitset at the end of
    its file."""
    from pruner.index.native import _Chunk

    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    for probes in (1, 20):
        filters = _usable_filters(copy)
        first = filters.chunks[0]
        assert first is not None
        end = first.file.identity.size  # every read there comes back empty
        filters.chunks[0] = _Chunk(first.file, end, first.size)
        filters.__init__(filters.chunks, filters.problems)  # type: ignore[misc]
        values = list(range(6_000, 6_000 + probes))  # absent: every usable zone rules them out
        hashes, _ = hash_array(pa.array(values, pa.int64()))
        mask = filters.probe(hashes).mask
        assert mask[0], probes
        assert not mask[1:].all(), probes


def test_is_null_reads_the_row_groups_without_a_filter(pyarrow_dir: Path, tmp_path: Path) -> None:
    """A file without filters (a null id in it) beside files with them: IS NULL keeps it."""
    copy = tmp_path / "t"
    shutil.copytree(pyarrow_dir, copy)
    pq.write_table(
        pa.table(
            {
                "id": pa.array([None, 9], pa.int64()),
                "s": ["a", "b"],
                "i16": pa.array([1, 2], pa.int16()),
                "n": [None, 1],
            }
        ),
        copy / "zz-plain.parquet",
    )
    sql = "SELECT s FROM t WHERE id IS NULL"
    expected = multiset(engine_alone("duckdb", sql, {"t": copy}))
    assert expected == Counter({("a",): 1})
    for engine in ("duckdb", "datafusion"):
        assert multiset(pruner.query(sql, {"t": copy}, engine=engine)) == expected


def test_write_parquet_sizes_filters_like_pruner_zones(tmp_path: Path) -> None:
    from pruner import sbbf
    from pruner.errors import InvalidParameterError
    from pruner.index.native import write_parquet

    table = pa.table({"id": np.arange(3_000), "s": [f"k{i}" for i in range(3_000)]})
    path = tmp_path / "a.parquet"
    write_parquet(table, path, ["id", "s"], items=1_000, probability=0.01, compression="zstd")
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 3
    for column in range(2):
        chunk = meta.row_group(1).column(column)
        assert chunk.compression == "ZSTD"
        size, _ = read_header(_pread(path, chunk.bloom_filter_offset, 64))
        assert size == sbbf.optimal_num_bytes(1_000, 0.01)
    write_parquet(pa.table({"id": np.arange(9_000)}), path, ["id"])  # the defaults
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [8_192, 808]
    size, _ = read_header(_pread(path, meta.row_group(0).column(0).bloom_filter_offset, 64))
    assert size == sbbf.optimal_num_bytes(8_192, 0.00057)
    for items, probability in ((0, 0.01), (-1, 0.01), (10, 0.0), (10, 1.0), (10, 1.5)):
        with pytest.raises(InvalidParameterError, match="items must be positive"):
            write_parquet(table, path, ["id"], items=items, probability=probability)
    with pytest.raises(InvalidParameterError, match="its columns are id, s"):
        write_parquet(table, path, ["nope"])
