"""Parquet's own filters on decimal and FIXED_LEN_BYTE_ARRAY columns (pruner.index.native).

A decimal is hashed as its Parquet plain encoding, the unscaled integer: an INT32 or INT64
(DuckDB and Spark store DECIMAL(<=9) / (<=18) so, pyarrow with ``store_decimal_as_integer``)
or big-endian two's complement in a FIXED_LEN_BYTE_ARRAY (pyarrow's default, every writer's
for wide decimals); a fixed-length byte array as its bytes. Judges: DuckDB's
``parquet_bloom_probe`` where it probes (INT32 / INT64 decimals, plain fixed-length bytes;
it does not probe FIXED_LEN_BYTE_ARRAY decimals), the xxHash64 of the bytes the format
specifies (computed here with the ``xxhash`` package and Python's ``int.to_bytes``), and the
engines alone over the files for every answer.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

import pruner
from pruner import sbbf
from pruner.hashing import hash_array
from pruner.index.native import NativeFilters, hashable
from pruner.table import open_table
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

ROWS = 4_000
GROUP = 500
DECIMALS = {"d9": (9, 2), "d18": (18, 3), "d38": (38, 4)}


def _data(rows: int = ROWS, distinct: int | None = None) -> pa.Table:
    """Unique values, or ``distinct`` ones repeated (DuckDB writes filters only for the
    chunks it dictionary-encodes)."""
    rng = np.random.default_rng(17)
    unscaled = rng.integers(-(10**8), 10**8, rows if distinct is None else distinct)
    if distinct is not None:
        unscaled = unscaled[rng.integers(0, distinct, rows)]
    columns: dict[str, pa.Array] = {"id": pa.array(np.arange(rows))}
    for name, (precision, scale) in DECIMALS.items():
        factor = 1 if precision == 9 else 1_000_003
        values = [
            None if i % 97 == 5 else Decimal(int(u) * factor).scaleb(-scale)
            for i, u in enumerate(unscaled)
        ]
        columns[name] = pa.array(values, pa.decimal128(precision, scale))
    fixed = [int(u).to_bytes(16, "big", signed=True) for u in unscaled]
    columns["f"] = pa.array(fixed, pa.binary(16))
    return pa.table(columns)


FILTERED = ["d9", "d18", "d38", "f"]


def _pyarrow(
    root: Path,
    as_integer: bool,
    second_as_integer: bool | None = None,
    columns: list[str] = FILTERED,
) -> None:
    """Two files through pyarrow, decimals stored as integers or fixed-length arrays (the
    second file as ``second_as_integer`` when given)."""
    table = _data()
    options = {c: {"ndv": GROUP, "fpp": 0.01} for c in columns}
    forms = (as_integer, as_integer if second_as_integer is None else second_as_integer)
    for part, as_integer in enumerate(forms):
        pq.write_table(
            table.slice(part * ROWS // 2, ROWS // 2),
            root / f"part-{part}.parquet",
            row_group_size=GROUP,
            bloom_filter_options=options,
            store_decimal_as_integer=as_integer,
        )


def _duckdb(root: Path) -> None:
    con = duckdb.connect()
    con.register("data", _data(distinct=60))
    # DuckDB's row groups are at least 2,048 rows: a file per 500 rows instead.
    for part in range(ROWS // GROUP):
        con.execute(
            f"COPY (SELECT * FROM data ORDER BY id LIMIT {GROUP} OFFSET {part * GROUP}) "
            f"TO '{root / f'part-{part}.parquet'}' (FORMAT parquet)"
        )


WRITERS = ["pyarrow-fixed", "pyarrow-integer", "duckdb"]


@pytest.fixture(scope="module", params=WRITERS)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"decimals-{request.param}") / "t"
    root.mkdir()
    if request.param == "duckdb":
        _duckdb(root)
    else:
        _pyarrow(root, request.param == "pyarrow-integer")
    return root


def _physical(root: Path, column: str) -> tuple[str, int]:
    schema = pq.ParquetFile(sorted(root.glob("*.parquet"))[0]).metadata.schema
    found = schema.column(schema.names.index(column))
    return found.physical_type, found.length


def _spec_bytes(value: Any, physical: str, length: int, scale: int | None) -> bytes:
    """The plain encoding the Parquet format hashes, written from its definition."""
    if scale is None:
        return bytes(value)
    unscaled = int(value.scaleb(scale))
    if physical == "INT32":
        return unscaled.to_bytes(4, "little", signed=True)
    if physical == "INT64":
        return unscaled.to_bytes(8, "little", signed=True)
    return unscaled.to_bytes(length, "big", signed=True)


def _kept(root: Path, column: str, values: list[Any]) -> tuple[np.ndarray, NativeFilters]:
    """(values, row groups): pruner's probe of the files' own filters keeps the row group."""
    table = open_table(root)
    bound = table.index(column)
    if bound is None and root.parent.name.startswith("decimals-duckdb"):
        # DuckDB 2.0 writes no filter for a DECIMAL(38) (HUGEINT) or fixed-length BLOB
        # chunk; what it does write is probed (the test below checks d9 and d18 are).
        assert column in ("d38", "f"), column
        pytest.skip(f"DuckDB wrote no filter for {column}")
    assert bound is not None, f"the files' own filters on {column} are probed"
    filters = bound.index.hierarchy
    assert isinstance(filters, NativeFilters) and not filters.problems
    arrow_type = table.schema.field(column).type
    hashes, _ = hash_array(hashable(pa.array(values, arrow_type), bound.index.value_type))
    return np.array([filters.probe(hashes[i : i + 1]).mask for i in range(len(values))]), filters


def _duckdb_kept(root: Path, column: str, values: list[Any], sql_type: str) -> np.ndarray:
    files = sorted(p.as_posix() for p in root.glob("*.parquet"))
    con = duckdb.connect()
    rows = []
    for value in values:
        found = con.execute(
            "SELECT bloom_filter_excludes FROM parquet_bloom_probe(?, ?, ?::"
            f"{sql_type}) ORDER BY file_name, row_group_id",
            [files, column, value],
        ).fetchall()
        rows.append([not excluded for (excluded,) in found])
    return np.array(rows, bool)


def _absent(column: str, count: int) -> list[Any]:
    rng = np.random.default_rng(29)
    unscaled = rng.integers(10**8, 2 * 10**8, count)  # outside the data's range
    if column == "f":
        return [int(u).to_bytes(16, "big", signed=True) for u in unscaled]
    precision, scale = DECIMALS[column]
    factor = 1 if precision == 9 else 1_000_003
    return [Decimal(int(u) * factor).scaleb(-scale) for u in unscaled]


def _row_groups(root: Path) -> np.ndarray:
    """The row group (numbered across the files in path order) of every row."""
    sizes = [
        metadata.row_group(g).num_rows
        for path in sorted(root.glob("*.parquet"))
        for metadata in [pq.ParquetFile(path).metadata]
        for g in range(metadata.num_row_groups)
    ]
    return np.repeat(np.arange(len(sizes)), sizes)


@pytest.mark.parametrize("column", FILTERED)
def test_probe_is_the_formats_encoding(written: Path, column: str) -> None:
    _check_encoding(written, column)


def _check_encoding(written: Path, column: str) -> None:
    """Every value of the data keeps the row groups that hold it; absent values are ruled
    out of most; the bit the format's own encoding of each value points at is set in every
    kept filter (the hash computed here from the format's definition, not pruner's code);
    and DuckDB's probe, where it probes, keeps nothing pruner drops."""
    data = pq.read_table(written, columns=[column]).column(column).to_pylist()
    present = sorted({v for v in data if v is not None})[:300]
    absent = _absent(column, 1_000)
    ours, filters = _kept(written, column, present + absent)
    groups = _row_groups(written)
    for i, value in enumerate(present):
        holding = np.unique(groups[[j for j, v in enumerate(data) if v == value]])
        assert ours[i, holding].all(), (column, value)
    excluded = int((~ours[len(present) :]).sum())
    assert excluded > 0.9 * ours[len(present) :].size, excluded

    physical, length = _physical(written, column)
    scale = DECIMALS[column][1] if column in DECIMALS else None
    whole = filters.whole_filters()
    checked = present[:50] + absent[:50]
    for i, value in enumerate(checked):
        digest = np.array(
            [xxhash.xxh64_intdigest(_spec_bytes(value, physical, length, scale))], np.uint64
        )
        row = i if i < len(present[:50]) else len(present) + i - len(present[:50])
        for group, bitset in enumerate(whole):
            expected = sbbf.check(np.frombuffer(bitset, np.uint8)[None, :], digest)[0, 0]
            assert bool(ours[row, group]) == bool(expected), (column, value, group)

    sql_type = "BLOB" if column == "f" else "DECIMAL({},{})".format(*DECIMALS[column])
    some = present[:100]
    theirs = _duckdb_kept(written, column, some + absent[:200], sql_type)
    mine = np.concatenate([ours[: len(some)], ours[len(present) : len(present) + 200]])
    if column == "f" or physical in ("INT32", "INT64"):
        # DuckDB probes these: the same SBBF answers the same.
        assert (theirs == mine).all()
    else:
        # DuckDB 2.0 does not probe a decimal stored as a fixed-length array (it keeps
        # every row group); the format's encoding above is the judge there.
        assert theirs.all()


def _spark_files(root: Path, spark: Any) -> None:
    """Spark stores DECIMAL(9,2) as INT32, (18,3) as INT64, (38,4) as a 16-byte array."""
    schema = "id long, " + ", ".join(f"{c} decimal{t}" for c, t in DECIMALS.items())
    rows = _data().drop_columns(["f"]).to_pylist()
    frame = spark.createDataFrame([tuple(r.values()) for r in rows], schema).repartition(2)
    writer = frame.write.mode("overwrite").option("parquet.block.size", 16 * 1024)
    writer = writer.option("parquet.enable.dictionary", "false")
    for column in DECIMALS:
        writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
        writer = writer.option(f"parquet.bloom.filter.expected.ndv#{column}", str(ROWS))
    target = root.parent / "spark-out"
    writer.parquet(str(target))
    for found in sorted(target.glob("*.parquet")):
        shutil.move(found, root / found.name)


def _datafusion_files(root: Path) -> None:
    """DataFusion (arrow-rs) stores decimals as INT32 / INT64 / a fixed-length array by
    precision, as Spark does."""
    import datafusion

    ctx = datafusion.SessionContext()
    ctx.register_record_batches("data", [_data().to_batches()])
    ctx.sql(
        f"COPY data TO '{root / 'part-0.parquet'}' STORED AS PARQUET OPTIONS "
        f"('format.bloom_filter_on_write' 'true', 'format.max_row_group_size' '{GROUP}')"
    ).collect()


@pytest.mark.slow
def test_spark_and_datafusion_files_are_probed_in_their_encoding(
    tmp_path: Path, spark: Any
) -> None:
    stored = {}
    for name, write in (("spark", _spark_files), ("datafusion", _datafusion_files)):
        root = tmp_path / name / "t"
        root.mkdir(parents=True)
        write(root, spark) if name == "spark" else write(root)  # type: ignore[call-arg]
        assert len(_row_groups(root)) == ROWS
        columns = list(DECIMALS) if name == "spark" else FILTERED
        for column in columns:
            stored[(name, column)] = _physical(root, column)[0]
            _check_encoding(root, column)
    assert stored[("spark", "d9")] == stored[("datafusion", "d9")] == "INT32"
    assert stored[("spark", "d18")] == stored[("datafusion", "d18")] == "INT64"
    assert stored[("spark", "d38")] == stored[("datafusion", "d38")] == "FIXED_LEN_BYTE_ARRAY"


WHERES = [
    ("duckdb", "d9 = {d9}"),
    ("duckdb", "d9 IN ({d9}, 123456.78, -0.01)"),
    ("duckdb", "d18 = {d18} OR d38 = {d38}"),
    ("duckdb", "d9 = 1.251"),  # more places than the column: no row
    ("duckdb", "d9 = 12345678"),  # out of range of DECIMAL(9,2): no row
    ("duckdb", "d38 = 7"),
    ("duckdb", "d9 IS NULL"),
    ("spark", "d9 = {d9}"),
    ("spark", "d38 IN ({d38}, 1.5)"),
    ("duckdb", "f = X'{f}'"),
    ("duckdb", "f IN (x'{f}', X'00000000000000000000000000000000')"),
    ("spark", "f = X'{f}'"),
    ("datafusion", "f = X'{f}'"),
    ("datafusion", "d9 = {d9}"),  # DataFusion reads 1.25 as a DOUBLE: not pruned
    ("datafusion", "d18 = 5"),
]


def _where(template: str, root: Path) -> str:
    row = pq.read_table(root).slice(2_777, 1).to_pylist()[0]
    return template.format(
        d9=row["d9"], d18=row["d18"], d38=row["d38"], f=bytes(row["f"]).hex().upper()
    )


# Each predicate on DuckDB and DataFusion where it is in their dialect (DuckDB's plain SQL
# is DataFusion's too).
ENGINE_CASES = [
    (engine, dialect, where)
    for dialect, where in WHERES
    for engine in ("duckdb", "datafusion")
    if dialect in ("duckdb", engine)
]


@pytest.mark.parametrize(("engine", "dialect", "where"), ENGINE_CASES)
def test_answers_equal_the_engine_alone(
    written: Path, engine: str, dialect: str, where: str
) -> None:
    _answers_as_alone(written, engine, dialect, where)


def _answers_as_alone(root: Path, engine: str, dialect: str, where: str) -> Any:
    """pruner on ``engine`` answers as the engine alone; a value of the data prunes (in
    DuckDB's dialect, where the files' values are unique); the scan explain gives."""
    sql = f"SELECT id, d9, d38 FROM t WHERE {_where(where, root)}"
    expected = multiset(engine_alone(engine, sql, {"t": root}))
    explained = pruner.explain(sql, {"t": root}, dialect=engine)
    assert multiset(pruner.query(sql, {"t": root}, engine=engine)) == expected
    (scan,) = explained.scans
    unique = "decimals-duckdb" not in root.parent.name  # else every file holds it
    if "{" in where and engine == dialect == "duckdb" and unique:
        assert scan.zones_selected < scan.zones_total, scan.terms[0].reason
    return scan


def test_spark_answers_equal_spark_alone(written: Path, spark: Any) -> None:
    for dialect, where in WHERES:
        if dialect == "datafusion":
            continue
        sql = f"SELECT id, d9, d38 FROM t WHERE {_where(where, written)}"
        expected = multiset(engine_alone("spark", sql, {"t": written}, spark=spark))
        got = pruner.query(sql, {"t": written}, engine="spark")
        assert multiset(got) == expected, sql


def test_a_parameter_of_bytes_prunes_a_fixed_length_column(written: Path) -> None:
    sql = "SELECT id FROM t WHERE f = ?"
    (absent,) = _absent("f", 1)
    (scan,) = pruner.explain(sql, {"t": written}, parameters=[absent]).scans
    assert scan.zones_selected < scan.zones_total, scan.terms[0].reason
    value = pq.read_table(written, columns=["f"]).column("f")[1_234].as_py()
    for key in (value, absent):
        expected = multiset(engine_alone("duckdb", sql, {"t": written}, [key]))
        assert multiset(pruner.query(sql, {"t": written}, parameters=[key])) == expected


def test_files_storing_a_decimal_differently_are_read_whole(tmp_path: Path) -> None:
    """One file stores DECIMAL(9,2) as INT32, the other as a fixed-length array: the
    second file's row groups are read whole, never probed in the first one's encoding."""
    root = tmp_path / "t"
    root.mkdir()
    _pyarrow(root, True, second_as_integer=False, columns=["d9"])
    value = _data().column("d9")[3_100].as_py()  # in the second file
    sql = f"SELECT id FROM t WHERE d9 = {value}"
    (scan,) = pruner.explain(sql, {"t": root}).scans
    second = sum(length for fragment, _, length in scan.selection.ranges() if fragment == 1)
    assert second == ROWS // 2, scan.terms[0].reason  # read whole
    expected = multiset(engine_alone("duckdb", sql, {"t": root}))
    assert multiset(pruner.query(sql, {"t": root})) == expected


@pytest.mark.parametrize(
    ("values", "target", "expected"),
    [
        ([Decimal("-1.25"), None, Decimal("3.50")], pa.int32(), [-125, None, 350]),
        ([Decimal("-1.25")], pa.binary(4), [b"\xff\xff\xff\x83"]),
        ([Decimal("0.00")], pa.binary(1), [b"\x00"]),
        ([Decimal("-99999999.99")], pa.int64(), [-9999999999]),
    ],
)
def test_hashable_gives_the_unscaled_integer(
    values: list[Any], target: pa.DataType, expected: list[Any]
) -> None:
    array = pa.array(values, pa.decimal128(10, 2))
    assert hashable(array, target).to_pylist() == expected


def test_a_decimal_too_wide_for_the_stored_width_is_refused() -> None:
    """A value the stored width cannot hold raises, and the caller prunes nothing."""
    array = pa.array([Decimal("99999999999.99")], pa.decimal128(18, 2))
    with pytest.raises(pa.ArrowInvalid):
        hashable(array, pa.int32())
    with pytest.raises(pa.ArrowInvalid):
        hashable(array, pa.binary(2))


@pytest.mark.parametrize("as_integer", [False, True])
def test_an_index_made_from_decimal_filters(tmp_path: Path, as_integer: bool) -> None:
    """`pruner index build --from-parquet-filters` on decimal and fixed-length columns
    records the stored encoding (``fixed_size_binary[4]`` for DECIMAL(9,2) in a 4-byte
    array, int32 as an INT32) and reads it back; its probes select what probing the files
    does, and pruner answers as DuckDB alone."""
    from pruner.cli import main
    from pruner.index import load_index

    root = tmp_path / "t"
    root.mkdir()
    _pyarrow(root, as_integer)
    on_files = root.parent / "files"
    shutil.copytree(root, on_files)
    for column in ("d9", "f"):
        command = ["index", "build", str(root), "--column", column, "--from-parquet-filters"]
        assert main(command) == 0
    assert load_index(root, "d9").value_type == (pa.int32() if as_integer else pa.binary(4))
    assert load_index(root, "f").value_type == pa.large_binary()  # its bytes
    for where in _index_wheres(root):
        sql = f"SELECT id, d9 FROM t WHERE {where}"
        stored = pruner.explain(sql, {"t": root}).scans[0]
        assert "parquet bloom filter" not in stored.terms[0].reason  # the index, not the files
        files = pruner.explain(sql, {"t": on_files}).scans[0]
        assert stored.zones_selected == files.zones_selected < stored.zones_total, where
        expected = multiset(engine_alone("duckdb", sql, {"t": root}))
        assert multiset(pruner.query(sql, {"t": root})) == expected


def _index_wheres(root: Path) -> list[str]:
    row = pq.read_table(root).slice(1_111, 1).to_pylist()[0]
    return [f"d9 = {row['d9']}", f"d9 IN ({row['d9']}, 0.01)", "d9 = 1.234"]


def test_a_decimal_is_never_hashed_as_another_type() -> None:
    """Parquet stores a decimal as INT32, INT64 or fixed-length bytes only: asked for
    anything else, the conversion refuses (the caller prunes nothing) instead of casting."""
    array = pa.array([Decimal("1.25")], pa.decimal128(9, 2))
    for other in (pa.large_binary(), pa.int16(), pa.float64()):
        with pytest.raises(pa.ArrowInvalid):
            hashable(array, other)


@pytest.mark.parametrize("target", [pa.int32(), pa.int64(), pa.binary(5)], ids=str)
def test_hashable_of_a_slice_is_hashable_of_its_values(target: pa.DataType) -> None:
    values = [Decimal("7.77"), Decimal("-1.25"), None, Decimal("3.50"), Decimal("-0.01")]
    array = pa.array(values, pa.decimal128(9, 2))
    for start in range(len(values)):
        fresh = pa.array(values[start:], pa.decimal128(9, 2))
        assert hashable(array.slice(start), target).equals(hashable(fresh, target))


# pruner's own index (`pruner index build DIR --column C`) of these columns: hashed in the
# encoding Parquet's writers give the column's type, whatever form each file stores it in.
OWN_ENCODING = {"d9": ("INT32", 0), "d18": ("INT64", 0), "d38": ("FIXED_LEN_BYTE_ARRAY", 16)}
OWN_TYPES = {"d9": pa.int32(), "d18": pa.int64(), "d38": pa.binary(16), "f": pa.large_binary()}


@pytest.fixture(scope="module")
def own_index(written: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``written`` with pruner's own index on each column (the files' filters stay,
    unused: a pruner index is used where it exists)."""
    root = tmp_path_factory.mktemp(f"own-{written.parent.name}") / "t"
    shutil.copytree(written, root)
    for column in FILTERED:
        pruner.build_index(root, column, items=GROUP)
    return root


def _check_own_index(root: Path, column: str) -> None:
    """Every zone's filter holds the format's encoding of each of its rows' values (hashed
    here from the format's definition, not by pruner), and absent values are ruled out of
    most zones."""
    from pruner.index import load_index

    index = load_index(root, column)
    paths = {file.fragment_id: root / file.path for file in index.files or []}
    physical, length = OWN_ENCODING.get(column, ("", 0))
    scale = DECIMALS[column][1] if column in DECIMALS else None

    def digests(values: list[Any]) -> np.ndarray:
        spec = [_spec_bytes(v, physical, length, scale) for v in values if v is not None]
        return np.array([xxhash.xxh64_intdigest(b) for b in spec], np.uint64)

    filters = np.asarray(index.filter_data)
    absent = digests(_absent(column, 200))
    ruled_out = 0
    for zone, (fragment, start, rows) in enumerate(
        zip(index.fragment_id, index.zone_start, index.zone_length, strict=True)
    ):
        values = pq.read_table(paths[int(fragment)], columns=[column]).column(column)
        held = digests(values.slice(int(start), int(rows)).to_pylist())
        assert sbbf.check(filters[zone : zone + 1], held).all(), (column, zone)
        ruled_out += int((~sbbf.check(filters[zone : zone + 1], absent)).sum())
    assert ruled_out > 0.9 * len(absent) * len(filters), ruled_out


@pytest.mark.parametrize("column", FILTERED)
def test_pruners_own_index_hashes_the_formats_encoding(own_index: Path, column: str) -> None:
    from pruner.index import load_index

    stored = pq.read_schema(sorted(own_index.glob("*.parquet"))[0]).field(column).type
    expected = OWN_TYPES[column] if stored != pa.binary() else None  # DuckDB: a BLOB
    assert load_index(own_index, column).value_type == expected
    bound = open_table(own_index).index(column)
    assert bound is not None and bound.index.hierarchy is not None  # through the companion
    assert bound.index.value_type == expected
    _check_own_index(own_index, column)


@pytest.mark.parametrize(("engine", "dialect", "where"), ENGINE_CASES)
def test_answers_on_pruners_own_index_equal_the_engine_alone(
    own_index: Path, engine: str, dialect: str, where: str
) -> None:
    scan = _answers_as_alone(own_index, engine, dialect, where)
    assert all("parquet bloom filter" not in term.reason for term in scan.terms)


def test_an_update_of_a_decimal_index_hashes_new_files_alike(tmp_path: Path) -> None:
    """Files added in the other storage form are indexed by `pruner index update` in the
    index's encoding; the kept zones and the new ones answer as DuckDB alone."""
    from pruner.index import update_index

    root = tmp_path / "t"
    root.mkdir()
    _pyarrow(root, False)
    for column in ("d38", "d9"):
        pruner.build_index(root, column, items=GROUP)
    later = _data().slice(0, GROUP)
    later = later.set_column(0, "id", pa.array(np.arange(ROWS, ROWS + GROUP)))
    pq.write_table(later, root / "part-9.parquet", store_decimal_as_integer=True)
    for column in ("d38", "d9"):
        index, plan = update_index(root, column)
        assert plan.summary()["fragments_to_add"] == 1 and index.value_type == OWN_TYPES[column]
        _check_own_index(root, column)
    value = later.column("d38")[7].as_py()
    sql = f"SELECT id, d38 FROM t WHERE d38 = {value}"
    (scan,) = pruner.explain(sql, {"t": root}).scans
    assert scan.zones_selected < scan.zones_total
    expected = multiset(engine_alone("duckdb", sql, {"t": root}))
    assert multiset(pruner.query(sql, {"t": root})) == expected and len(expected) == 2


@pytest.mark.slow
def test_spark_builds_the_same_decimal_index(tmp_path: Path, spark: Any) -> None:
    from pruner.index import load_index

    roots = {}
    for engine in ("local", "spark"):
        roots[engine] = tmp_path / engine / "t"
        roots[engine].mkdir(parents=True)
        _pyarrow(roots[engine], engine == "spark")  # the other storage form, too
    for column in FILTERED:
        built = {
            engine: pruner.build_index(root, column, items=GROUP, engine=engine, spark=spark)
            for engine, root in roots.items()
        }
        assert built["local"].value_type == built["spark"].value_type == OWN_TYPES[column]
        local, spark_built = (load_index(roots[e], column) for e in ("local", "spark"))
        assert np.array_equal(np.asarray(local.filter_data), np.asarray(spark_built.filter_data))
        _check_own_index(roots["spark"], column)
