"""The Arrow types modern writers put in Parquet schemas: ``string_view`` / ``binary_view``
(Polars, DataFusion, tpchgen-cli), dictionary-encoded strings and integers, ``large_string``.

pruner's own index over Parquet accepts every type whose values it hashes exactly (a view or
dictionary value hashes as its plain value); a Lance dataset keeps Lance's type list. Every
answer is compared with the engine alone over the raw files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

import pruner
from pruner.hashing import hash_array
from pruner.index import build_index
from tests.support.engine_check import engine_alone, multiset

pytestmark = pytest.mark.filterwarnings("ignore:.*fork-safe")

ROWS = 24_000


def _columns(ids: np.ndarray) -> dict[str, pa.Array]:
    text = [f"key-{i}" if i % 97 else None for i in ids.tolist()]
    return {
        "id": pa.array(ids),
        "sv": pa.array(text).cast(pa.string_view()),
        "bv": pa.array([None if t is None else t.encode() for t in text]).cast(pa.binary_view()),
        "ls": pa.array(text, pa.large_string()),
        "ds": pa.array([f"d{i % 300}" for i in ids.tolist()]).dictionary_encode(),
        "di": pa.array((ids % 500).astype(np.int64)).dictionary_encode(),
    }


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("types") / "t"
    root.mkdir()
    ids = np.random.default_rng(7).permutation(ROWS)
    table = pa.table(_columns(ids))
    for part in range(3):
        pq.write_table(
            table.slice(part * 8_000, 8_000), root / f"part-{part}.parquet", row_group_size=4_000
        )
    for column in ("sv", "bv", "ls", "ds", "di"):
        build_index(root, column, items=1_000)
    return root


def test_the_files_carry_the_types() -> None:
    """The writer keeps the types (else the test below would test plain strings)."""
    schema = pa.table(_columns(np.arange(4))).schema
    assert schema.field("sv").type == pa.string_view()
    assert schema.field("bv").type == pa.binary_view()
    assert pa.types.is_dictionary(schema.field("ds").type)


@pytest.mark.parametrize(
    "array",
    [
        pa.array(["a", "bb", None, ""]).cast(pa.string_view()),
        pa.array([b"a", b"bb", None, b""]).cast(pa.binary_view()),
        pa.array(["a", "bb", None, ""]).dictionary_encode(),
        pa.array(["a", "bb", None, "a"], pa.large_string()),
    ],
)
def test_view_and_dictionary_values_hash_as_their_bytes(array: pa.Array) -> None:
    hashes, valid = hash_array(array)
    assert valid is not None and valid.tolist() == [v is not None for v in array.to_pylist()]
    for value, digest, ok in zip(array.to_pylist(), hashes.tolist(), valid.tolist(), strict=True):
        if ok:
            raw = value if isinstance(value, bytes) else value.encode()
            assert digest == xxhash.xxh64_intdigest(raw)


def test_a_null_in_a_dictionary_is_a_null() -> None:
    """A null may sit in the dictionary itself rather than in the indices."""
    array = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0]), pa.array(["x", None]))
    _, valid = hash_array(array)
    assert valid is not None and valid.tolist() == [True, False, True]


@pytest.mark.parametrize(
    "where",
    [
        "sv = 'key-77'",
        "sv IN ('key-77', 'key-5000', 'absent')",
        "sv IS NULL",
        "bv = 'key-77'",
        "ls = 'key-23001'",
        "ds = 'd17'",
        "ds IN ('d1', 'd299', 'd300')",
        "di = 42",
        "di IN (7, 499, 500)",
        "sv = 'absent' OR ds = 'd5'",
    ],
)
@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_answers_equal_the_engine_alone(directory: Path, where: str, engine: str) -> None:
    sql = f"SELECT id FROM t WHERE {where}"
    expected = multiset(engine_alone(engine, sql, {"t": directory}))
    assert expected or "absent" in where or "500" in where
    assert multiset(pruner.query(sql, {"t": directory}, engine=engine)) == expected


@pytest.mark.parametrize("column", ["sv", "bv", "ls", "ds"])
def test_a_point_lookup_prunes(directory: Path, column: str) -> None:
    value = "'d17'" if column == "ds" else "'key-77'"
    explained = pruner.explain(f"SELECT id FROM t WHERE {column} = {value}", {"t": directory})
    (scan,) = explained.scans
    assert scan.zones_total == 24
    assert 1 <= scan.zones_selected < scan.zones_total


def test_files_storing_strings_as_view_and_plain_share_an_index(tmp_path: Path) -> None:
    """One file written with string_view and one with string: the bytes hashed are the same,
    so one index covers both (the engines read the mixed directory as one table)."""
    ids = np.arange(6_000)
    text = pa.array([f"k{i}" for i in ids])
    pq.write_table(
        pa.table({"id": ids[:3000], "s": text[:3000].cast(pa.string_view())}),
        tmp_path / "a.parquet",
    )
    pq.write_table(pa.table({"id": ids[3000:], "s": text[3000:]}), tmp_path / "b.parquet")
    build_index(tmp_path, "s", items=500)
    for where in ("s = 'k10'", "s = 'k4000'", "s IN ('k10', 'k5999')"):
        sql = f"SELECT id FROM t WHERE {where}"
        expected = multiset(engine_alone("duckdb", sql, {"t": tmp_path}))
        assert expected
        assert multiset(pruner.query(sql, {"t": tmp_path})) == expected
