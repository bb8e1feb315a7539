"""The build's loops compiled two ways (pruner.kernels): ahead of time by numba.pycc, and
just in time by Numba; the same results, and the compiled module run only on what fits it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
import xxhash

from pruner import kernels, sbbf
from pruner.index import build_lance_index, list_bloom_indexes, read_index_file
from tests.support.index_check import assert_same_index

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The loops compiled ahead of time into a folder of the test's own (about 5 s)."""
    path = kernels.compile_ahead(tmp_path_factory.mktemp("loops"))
    spec = importlib.util.spec_from_file_location(path.name.split(".")[0], path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _arguments(name: str, rng: np.random.Generator) -> tuple[Any, ...]:
    """Random arguments of the compiled ``name``, as a build passes them."""
    hashes = rng.integers(0, 2**64, 5_000, dtype=np.uint64)
    salt = sbbf.SALT.astype(np.uint64)
    if name.startswith("xxh64_fixed_"):
        width = int(name.rsplit("_", 1)[1])
        dtype = np.dtype(f"u{width}")
        values = rng.integers(0, np.iinfo(dtype).max, 3_000, dtype=dtype, endpoint=True)
        return values, width, np.zeros(3_000, np.uint64)
    if name.startswith("xxh64_bytes_"):
        lengths = rng.integers(0, 70, 400)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        offsets = offsets.astype(np.int32 if name.endswith("32") else np.int64)
        words = rng.integers(0, 2**64, int(offsets[-1]) // 8 + 2, dtype=np.uint64)
        return offsets, words, np.zeros(400, np.uint64)
    if name == "insert_words":
        bounds = np.array([0, 1_000, 1_000, 5_000], np.int64)
        return hashes, bounds, np.zeros((3, 256), np.uint32), salt
    if name == "insert_pieces":
        starts, stops = np.array([0, 4_000, 10], np.int64), np.array([100, 5_000, 10], np.int64)
        return hashes, starts, stops, np.zeros((1, 2048), np.uint32), salt
    if name == "order_and_insert":
        bounds = np.array([0, 2_500, 5_000], np.int64)
        zones = np.zeros((2, 512), np.uint32)
        return hashes, 8, np.zeros((1, 4096), np.uint32), salt, bounds, zones
    assert name == "part_sums", f"a signature without arguments here: {name}"
    words = rng.integers(0, 2**64, (4, 40), dtype=np.uint64)
    starts = np.array([0, 8, 8, 33, 40], np.int64)
    weights = rng.integers(0, 2**64, 40, dtype=np.uint64)
    return words, starts, weights, np.uint64(0x2545F4914F6CDD1D), np.zeros((4, 4), np.uint64)


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.parametrize("name", sorted(kernels.SIGNATURES))
def test_the_loops_compiled_ahead_of_time_give_numbas_results(
    compiled: ModuleType, name: str
) -> None:
    """Every compiled function returns and writes what Numba's loop does, on arguments the
    way a build passes them."""
    loop = getattr(kernels._jit(), kernels.SIGNATURES[name][0])
    args = _arguments(name, np.random.default_rng(len(name)))
    assert kernels._fits(name, args), "the arguments are what the signature says"
    ahead, just_in_time = _copy(args), _copy(args)
    got, expected = getattr(compiled, name)(*ahead), loop(*just_in_time)
    if isinstance(expected, tuple):
        assert np.array_equal(got[0], expected[0]) and int(got[1]) == int(expected[1])
    else:
        assert got is None and expected is None
    for a, b in zip(ahead, just_in_time, strict=True):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b)
    written = [i for i, t in enumerate(kernels.SIGNATURES[name][2]) if t.endswith("!")]
    assert any(not np.array_equal(ahead[i], args[i]) for i in written), "it wrote something"


def test_xxh64_compiled_ahead_of_time_is_xxhash(compiled: ModuleType) -> None:
    values = np.arange(-5, 300, dtype=np.int64).view(np.uint64)
    out = np.zeros(len(values), np.uint64)
    compiled.xxh64_fixed_8(values, 8, out)
    assert out.tolist() == [xxhash.xxh64_intdigest(v.tobytes()) for v in values]


def test_only_arguments_the_signature_says_reach_the_compiled_loops() -> None:
    """The compiled functions check nothing (a strided array is read as contiguous, int32
    bounds crashed the process): anything but the exact dtypes, dimensions, C order,
    writable outputs and in-range scalars goes to Numba."""
    rng = np.random.default_rng(3)
    fits = _arguments("insert_words", rng)
    assert kernels._fits("insert_words", fits)
    hashes, bounds, words, salt = fits
    read_only = words.copy()
    read_only.flags.writeable = False
    wrong = {
        "int64 hashes": (hashes.view(np.int64), bounds, words, salt),
        "int32 bounds": (hashes, bounds.astype(np.int32), words, salt),
        "strided hashes": (np.repeat(hashes, 2)[::2], bounds, words, salt),
        "filters not in C order": (hashes, bounds, np.asfortranarray(words), salt),
        "filters a column slice": (hashes, bounds, np.zeros((3, 512), np.uint32)[:, :256], salt),
        "one filter, one dimension": (hashes, np.array([0, 5_000]), words[0], salt),
        "filters read-only": (hashes, bounds, read_only, salt),
        "a list": (hashes.tolist(), bounds, words, salt),
        "an argument short": (hashes, bounds, words),
    }
    for why, args in wrong.items():
        assert not kernels._fits("insert_words", args), why
    values, _, out = _arguments("xxh64_fixed_8", rng)
    assert kernels._fits("xxh64_fixed_8", (values, 8, out))
    assert not kernels._fits("xxh64_fixed_8", (values, 2**63, out)), "a scalar out of range"
    assert not kernels._fits("xxh64_fixed_8", (values, 8.0, out)), "a float for an integer"
    assert not kernels._fits("part_sums", (*_arguments("part_sums", rng)[:3], -1, out))


def test_what_does_not_fit_is_hashed_by_numba_the_same() -> None:
    """A strided array (every other value) hashes as the values themselves do, by Numba."""
    values = np.arange(1_000, dtype=np.uint64)
    strided = np.repeat(values, 2)[::2]
    out = np.zeros(1_000, np.uint64)
    kernels.xxh64_fixed(strided, 8, out)
    assert out.tolist() == [xxhash.xxh64_intdigest(v.tobytes()) for v in values]


def test_a_module_is_named_by_the_loops_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module compiled from other loops (or signatures) has another name: never loaded."""
    here = kernels.module_name()
    assert here is not None and here.startswith("_loops_")
    source = (ROOT / "pruner" / "loops.py").read_text()
    (tmp_path / "loops.py").write_text(source)
    monkeypatch.setattr(kernels, "__file__", str(tmp_path / "kernels.py"))
    assert kernels.module_name() == here, "the same source, the same name"
    (tmp_path / "loops.py").write_text(source.replace("_P1 = ", "_P1 = 1 + "))
    assert kernels.module_name() != here
    (tmp_path / "loops.py").write_text(source)
    monkeypatch.setitem(kernels.SIGNATURES, "extra", ("part_sums", "void", ("u8",)))
    assert kernels.module_name() != here
    (tmp_path / "loops.py").unlink()
    assert kernels.module_name() is None, "no source: no module"


def test_a_build_without_the_compiled_module_gives_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the module and without it (Numba compiles the loops), a build writes the same
    index, and both are Lance's own."""
    path = tmp_path / "d.lance"
    rng = np.random.default_rng(11)
    values = pa.array(rng.permutation(60_000).astype(np.int64))
    names = pa.array([f"k{v}" for v in rng.integers(0, 10**6, 60_000)])
    lance.write_dataset(pa.table({"id": values, "s": names}), str(path), max_rows_per_file=7_000)
    ds = lance.dataset(str(path))
    for column in ("id", "s"):
        ds.create_scalar_index(column, index_type="BLOOMFILTER")
    ds = lance.dataset(str(path))
    for column in ("id", "s"):
        with_module = build_lance_index(path, column)
        monkeypatch.setattr(kernels, "_loaded", {"ahead": None})
        without = build_lance_index(path, column)
        monkeypatch.undo()
        assert_same_index(with_module, without, column)
        (info,) = [i for i in list_bloom_indexes(ds) if i.column == column]
        assert_same_index(with_module, read_index_file(info.path, column), column)


def test_a_build_in_a_new_process_imports_no_numba_once_compiled() -> None:
    """``make install`` compiles the loops (``python -m pruner.kernels``): a new process
    then builds without importing Numba."""
    assert kernels._ahead() is not None, "make install compiles the loops ahead of time"
    code = (
        "import sys, tempfile, numpy as np, pyarrow as pa, lance\n"
        "from pruner.index import build_lance_index\n"
        "path = tempfile.mkdtemp() + '/d.lance'\n"
        "lance.write_dataset(pa.table({'id': np.arange(20_000)}), path)\n"
        "index = build_lance_index(path, 'id')\n"
        "assert index.num_zones == 3, index.num_zones\n"
        "print('numba' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
