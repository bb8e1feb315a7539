"""Zone indexes over a directory of Parquet files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pruner.errors import IndexNotFoundError, InvalidParameterError
from pruner.hashing import hash_array
from pruner.index import (
    build_index,
    build_parquet_index,
    load_index,
    parquet_index_path,
    read_index_file,
)
from pruner.zones import lance_fragment_zones, parquet_file_zones


def test_zones_never_straddle_a_row_group() -> None:
    zones = parquet_file_zones([10, 3, 25], 8)
    spans = list(zip(zones.zone_start.tolist(), zones.zone_length.tolist(), strict=True))
    assert spans == [(0, 8), (8, 2), (10, 3), (13, 8), (21, 8), (29, 8), (37, 1)]
    assert zones.first_row.tolist() == [0, 8, 10, 13, 21, 29, 37, 38]


def test_lance_zones_span_deleted_rows() -> None:
    zones = lance_fragment_zones(np.array([3, 4, 9, 10, 11, 20]), 4)
    assert zones.zone_start.tolist() == [3, 11]
    assert zones.zone_length.tolist() == [8, 10], "span includes the deleted rows 5-8"


@pytest.fixture
def parquet_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(9)
    root = tmp_path / "events"
    (root / "day=2").mkdir(parents=True)
    for i, sub in enumerate(["a.parquet", "b.parquet", "day=2/c.parquet"]):
        ids = rng.permutation(3000).astype(np.int64) + i * 3000
        keys = pa.array([None if v % 13 == 0 else f"k{v}" for v in ids], pa.string())
        pq.write_table(pa.table({"id": ids, "key": keys}), root / sub, row_group_size=700)
    return root


def test_build_store_and_load(parquet_dir: Path) -> None:
    index = build_index(parquet_dir, "id", items=256, probability=0.01)
    stored = parquet_index_path(parquet_dir, "id")
    assert stored.is_file() and stored.parent.parent.name == "_pruner"
    assert not list(parquet_dir.glob("*.parquet")) or all(
        "_pruner" not in p.parts for p in parquet_dir.rglob("*.parquet")
    ), "nothing pruner writes matches a *.parquet glob"
    loaded = load_index(parquet_dir, "id")
    assert loaded.zone_start.tolist() == index.zone_start.tolist()
    assert [f.path for f in loaded.files or []] == ["a.parquet", "b.parquet", "day=2/c.parquet"]
    assert [f.rows for f in loaded.files or []] == [3000, 3000, 3000]
    # every zone lies inside one row group of 700 rows
    starts, lengths = loaded.zone_start.astype(int), loaded.zone_length.astype(int)
    assert ((starts // 700) == ((starts + lengths - 1) // 700)).all()


def test_every_value_probes_present_in_its_zone(parquet_dir: Path) -> None:
    index = build_parquet_index(parquet_dir, "key", items=256, probability=0.01)
    by_id = {f.fragment_id: f for f in index.files or []}
    for zone in range(index.num_zones):
        file = by_id[int(index.fragment_id[zone])]
        start, length = int(index.zone_start[zone]), int(index.zone_length[zone])
        values = pq.read_table(parquet_dir / file.path).column("key").slice(start, length)
        hashes, valid = hash_array(values)
        present = hashes if valid is None else hashes[valid]
        assert index.might_contain(present)[:, zone].all(), f"false negative in zone {zone}"
        assert bool(index.has_null[zone]) == (values.null_count > 0)


def test_fragment_ids_are_stable_across_rebuilds(parquet_dir: Path) -> None:
    build_index(parquet_dir, "id", items=256, probability=0.01)
    first = {f.path: f.fragment_id for f in load_index(parquet_dir, "id").files or []}
    os.remove(parquet_dir / "a.parquet")
    pq.write_table(
        pa.table({"id": pa.array([1, 2], pa.int64()), "key": ["x", "y"]}),
        parquet_dir / "0new.parquet",
    )
    build_index(parquet_dir, "id", items=256, probability=0.01)
    second = {f.path: f.fragment_id for f in load_index(parquet_dir, "id").files or []}
    assert second["b.parquet"] == first["b.parquet"]
    assert second["day=2/c.parquet"] == first["day=2/c.parquet"]
    assert second["0new.parquet"] == max(first.values()) + 1, "a new file gets a fresh id"


def test_index_records_file_identity(parquet_dir: Path) -> None:
    build_index(parquet_dir, "id", items=256, probability=0.01)
    index = read_index_file(parquet_index_path(parquet_dir, "id"))
    assert index.column == "id"
    for file in index.files or []:
        stat = (parquet_dir / file.path).stat()
        assert (file.identity.size, file.identity.mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def test_missing_index_and_bad_input_are_clear(parquet_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="pruner index build"):
        load_index(parquet_dir, "key")
    with pytest.raises(InvalidParameterError, match=r"no \*\.parquet files"):
        build_parquet_index(
            tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path, "id"
        )
    with pytest.raises(InvalidParameterError, match="column 'nope'"):
        build_parquet_index(parquet_dir, "nope")


def test_column_names_that_are_not_path_safe(tmp_path: Path) -> None:
    root = tmp_path / "odd"
    root.mkdir()
    column = "we/ird col'ümn"
    pq.write_table(pa.table({column: pa.array([1, 2, 3], pa.int32())}), root / "x.parquet")
    build_index(root, column, items=2, probability=0.01)
    assert parquet_index_path(root, column).parent.parent == root / "_pruner"
    assert load_index(root, column).num_zones == 2


def test_a_failed_rebuild_leaves_the_old_index_whole(parquet_dir: Path) -> None:
    build_index(parquet_dir, "id", items=256, probability=0.01)
    before = load_index(parquet_dir, "id")
    # A new file without the column makes the next build fail once its file is open.
    pq.write_table(pa.table({"other": [1, 2]}), parquet_dir / "zz.parquet")
    with pytest.raises(InvalidParameterError, match="column 'id' is not in Parquet file"):
        build_index(parquet_dir, "id", items=256, probability=0.01)
    after = load_index(parquet_dir, "id")
    assert after.zone_start.tolist() == before.zone_start.tolist()
    assert [f.path for f in after.files or []] == [f.path for f in before.files or []]
    leftovers = sorted(p.name for p in parquet_index_path(parquet_dir, "id").parent.iterdir())
    expected = ["bloomfilter.hierarchy", "bloomfilter.lance"]
    assert leftovers == expected, "no temporary file is left behind"


def test_a_failed_first_build_leaves_nothing(parquet_dir: Path) -> None:
    pq.write_table(pa.table({"other": [1, 2]}), parquet_dir / "zz.parquet")
    with pytest.raises(InvalidParameterError):
        build_index(parquet_dir, "key", items=256, probability=0.01)
    assert not parquet_index_path(parquet_dir, "key").parent.exists()


def test_files_that_disagree_on_the_column_type_are_refused(parquet_dir: Path) -> None:
    """int32 in one file and int64 in another hash the same value differently: refuse."""
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32())}), parquet_dir / "zz.parquet")
    with pytest.raises(InvalidParameterError, match=r"is int32 in .*zz\.parquet but int64"):
        build_parquet_index(parquet_dir, "id", items=256, probability=0.01)


def test_a_file_of_another_type_added_after_the_build_is_never_probed(parquet_dir: Path) -> None:
    """The index hashed int64; an int32 file sorted first would make probes hash 4 bytes."""
    from pruner.explain import explain

    build_index(parquet_dir, "id", items=256)
    pq.write_table(pa.table({"id": pa.array([7], pa.int32())}), parquet_dir / "0.parquet")
    (scan,) = explain("SELECT * FROM t WHERE id = 7", {"t": parquet_dir}).scans
    assert scan.selection.num_rows == scan.rows_total, "id may be anywhere: read everything"
    assert "disagree on the type of id" in scan.terms[0].reason


def test_read_footer_gives_the_identity_file_identity_gives(tmp_path: Path) -> None:
    """A table reads each footer once (read_footer); its identity must be file_identity's,
    which the index records, for small and large footers and for files without one; and
    the inode it was read from (which a held table checks: Table.files_unchanged)."""
    from pruner.discover import file_identity, read_footer

    small = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), small)
    wide = tmp_path / "wide.parquet"  # a footer beyond the first read's guess
    pq.write_table(pa.table({f"c{i}": list(range(50)) for i in range(600)}), wide)
    short = tmp_path / "short.parquet"
    short.write_bytes(b"PAR1")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"x" * 100 + (10_000).to_bytes(4, "little") + b"PAR1")
    for path in (small, wide, short, bad):
        identity, footer, inode = read_footer(path)
        assert identity == file_identity(path), path.name
        assert inode == path.stat().st_ino
        if path in (small, wide):
            assert footer is not None and footer.endswith(b"PAR1")
            parsed = pq.read_metadata(pa.BufferReader(b"PAR1" + footer))
            assert parsed.num_rows == pq.read_metadata(path).num_rows
        else:
            assert footer is None
    assert len(read_footer(wide)[1] or b"") > 16 * 1024, "the second read is exercised"


def test_an_object_is_known_by_its_etag_not_the_precision_of_its_time() -> None:
    """On a store a file's identity is its size and ETag: a LIST and a GET may give its time
    at different precisions (GCS: milliseconds listed, seconds in Last-Modified), which must
    not make an indexed object look changed; a local file (no ETag) is still known by its
    time, and another ETag is another object whatever the time."""
    from pruner import storage
    from pruner.discover import FileIdentity, ParquetFile

    recorded = FileIdentity(100, 1_700_000_000_000_000_000, 7, '"abc"')
    listed = FileIdentity(100, 1_700_000_000_123_000_000, 7, '"abc"')
    assert listed.matches(recorded)
    assert not FileIdentity(100, recorded.mtime_ns, 7, '"abd"').matches(recorded)
    assert not FileIdentity(101, recorded.mtime_ns, 7, '"abc"').matches(recorded)
    local = FileIdentity(100, 1_700_000_000_000_000_000, 7)
    assert not FileIdentity(100, 1_700_000_000_123_000_000, 7).matches(local)
    assert FileIdentity(100, local.mtime_ns, 7).matches(local)
    metadata = pq.read_metadata(pa.BufferReader(_one_file_bytes()))
    opened = ParquetFile(storage.location("s3://b/t/x.parquet"), "x.parquet", recorded, 3, metadata)
    assert opened.unchanged(storage.Stat(100, listed.mtime_ns, etag='"abc"'))
    assert not opened.unchanged(storage.Stat(100, recorded.mtime_ns, etag='"abd"'))


def _one_file_bytes() -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1, 2, 3]}), sink)
    return sink.getvalue().to_pybytes()
