"""The compiled loops a build runs (imported by builds only, never by a query): the SBBF
inserts, xxHash64 of whole fragments and a companion's checksums. Their one source is
:mod:`pruner.loops`, compiled two ways:

* **ahead of time**, by ``python -m pruner.kernels`` (``make install`` runs it): Numba's
  ahead-of-time compiler (``numba.pycc``) writes them as an extension module beside this
  file, ``_loops_<digest>``. The digest covers the loops' source, the signatures below,
  NumPy's major version and the CPU's instruction sets (:func:`_cpu`), so a module compiled
  from any other source, or for another CPU, is never loaded. Loading it takes under a
  millisecond and imports no Numba.
* **just in time**, by Numba (``cache=True``), when there is no such module, and for any
  call whose arguments are not exactly what the module's signatures say.

Measured on this machine: a new process paid 0.36 s to import Numba and load its cached
code before a build's first value (0.20 s the import, 0.15 s the first call), where Lance's
whole build of a 5M-row column takes 0.30 s. The module's loops run as fast as Numba's
(5M hashes inserted into 32 KiB zones 34 ms both; ordered and inserted 71-74 ms).

The module's functions do not check what they are given (measured: a strided array was
read as if contiguous; int32 bounds where the signature says int64 crashed the process).
So every call is checked first (:func:`_fits`: each array's dtype, dimensions, C order and,
for one a loop writes, writability; each scalar's range), and anything else goes to Numba.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import platform
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "compile_ahead",
    "insert_pieces",
    "insert_words",
    "order_and_insert",
    "part_sums",
    "xxh64_bytes",
    "xxh64_fixed",
]

SIGNATURES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # compiled name: (its loop in pruner.loops, what it returns, its arguments' types in
    # Numba's notation; "!" marks an array the loop writes)
    **{
        f"xxh64_fixed_{width}": ("xxh64_fixed", "void", (f"u{width}[::1]", "i8", "u8[::1]!"))
        for width in (1, 2, 4, 8)
    },
    "xxh64_bytes_32": ("xxh64_bytes", "void", ("i4[::1]", "u8[::1]", "u8[::1]!")),
    "xxh64_bytes_64": ("xxh64_bytes", "void", ("i8[::1]", "u8[::1]", "u8[::1]!")),
    "insert_words": ("insert_words", "void", ("u8[::1]", "i8[::1]", "u4[:, ::1]!", "u8[::1]")),
    "insert_pieces": (
        "insert_pieces",
        "void",
        ("u8[::1]", "i8[::1]", "i8[::1]", "u4[:, ::1]!", "u8[::1]"),
    ),
    "order_and_insert": (
        "order_and_insert",
        "Tuple((u8[::1], i8))",
        ("u8[::1]", "i8", "u4[:, ::1]!", "u8[::1]", "i8[::1]", "u4[:, ::1]!"),
    ),
    "part_sums": ("part_sums", "void", ("u8[:, ::1]", "i8[::1]", "u8[::1]", "u8", "u8[:, ::1]!")),
}

_SCALAR_RANGE = {"i8": (-(1 << 63), 1 << 63), "u8": (0, 1 << 64)}


def _spec(numba_type: str) -> tuple[np.dtype | None, int, bool, str]:
    """An argument's dtype (None: a scalar), dimensions, whether the loop writes it, and
    its Numba type."""
    written = numba_type.endswith("!")
    numba_type = numba_type.rstrip("!")
    if "[" not in numba_type:
        return None, 0, False, numba_type
    return np.dtype(numba_type.split("[")[0]), numba_type.count(",") + 1, written, numba_type


_SPECS = {name: [_spec(t) for t in types] for name, (_, _, types) in SIGNATURES.items()}


def _fits(name: str, args: tuple[Any, ...]) -> bool:
    """Are ``args`` exactly what the compiled ``name`` takes?"""
    specs = _SPECS[name]
    if len(args) != len(specs):
        return False
    for arg, (dtype, ndim, written, numba_type) in zip(args, specs, strict=True):
        if dtype is None:
            low, high = _SCALAR_RANGE[numba_type]
            if not isinstance(arg, int | np.integer) or not low <= int(arg) < high:
                return False
        elif not (
            isinstance(arg, np.ndarray)
            and arg.dtype == dtype
            and arg.ndim == ndim
            and arg.flags.c_contiguous
            and (arg.flags.writeable or not written)
        ):
            return False
    return True


def module_name() -> str | None:
    """The name of the ahead-of-time module compiled from the loops as they are now (None
    when their source cannot be read)."""
    try:
        source = Path(__file__).with_name("loops.py").read_bytes()
    except OSError:
        return None
    digest = hashlib.sha256(source)
    digest.update(repr(sorted(SIGNATURES.items())).encode())
    digest.update(np.__version__.split(".")[0].encode())
    digest.update(_cpu()[1].encode())
    return f"_loops_{digest.hexdigest()[:16]}"


def _cpu() -> tuple[str, str]:
    """The CPU the loops are compiled for (LLVM's name; "": any of the machine's
    architecture) and what names it: this machine's ("host") where Linux lists its
    instruction sets, which the module's name then holds, so a module compiled on one CPU
    is never run on another that lacks one of them. (The machine's own CPU: xxHash64 of
    5M values 2.6 ms, as Numba's, against 12.4 ms for any x86-64.)"""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return ("host", f"{platform.machine()} {flags}") if flags else ("", platform.machine())


_LOCK = threading.Lock()
_loaded: dict[str, ModuleType | None] = {}


def _ahead() -> ModuleType | None:
    """The ahead-of-time module of the loops as they are now, if compiled."""
    if "ahead" not in _loaded:
        with _LOCK:
            if "ahead" not in _loaded:
                name = module_name()
                try:
                    module = importlib.import_module(f"pruner.{name}") if name else None
                except ImportError:
                    module = None
                _loaded["ahead"] = module
    return _loaded["ahead"]


def _jit() -> ModuleType:
    return importlib.import_module("pruner.loops")


def _run(name: str, loop: str, *args: Any) -> Any:
    """The compiled ``name`` on ``args`` when they fit it, else Numba's ``loop``."""
    ahead = _ahead()
    if ahead is not None and name in _SPECS and _fits(name, args):
        return getattr(ahead, name)(*args)
    return getattr(_jit(), loop)(*args)


def xxh64_fixed(values: np.ndarray, width: int, out: np.ndarray) -> None:
    """:func:`pruner.loops.xxh64_fixed`."""
    _run(f"xxh64_fixed_{width}", "xxh64_fixed", values, width, out)


def xxh64_bytes(offsets: np.ndarray, words: np.ndarray, out: np.ndarray) -> None:
    """:func:`pruner.loops.xxh64_bytes`."""
    _run(f"xxh64_bytes_{offsets.dtype.itemsize * 8}", "xxh64_bytes", offsets, words, out)


def insert_words(
    hashes: np.ndarray, bounds: np.ndarray, words: np.ndarray, salt: np.ndarray
) -> None:
    """:func:`pruner.loops.insert_words`."""
    _run("insert_words", "insert_words", hashes, bounds, words, salt)


def insert_pieces(
    hashes: np.ndarray, starts: np.ndarray, stops: np.ndarray, words: np.ndarray, salt: np.ndarray
) -> None:
    """:func:`pruner.loops.insert_pieces`."""
    _run("insert_pieces", "insert_pieces", hashes, starts, stops, words, salt)


def order_and_insert(
    hashes: np.ndarray,
    order_bits: int,
    words: np.ndarray,
    salt: np.ndarray,
    bounds: np.ndarray,
    zone_words: np.ndarray,
) -> tuple[np.ndarray, int]:
    """:func:`pruner.loops.order_and_insert`."""
    ordered, ones = _run(
        "order_and_insert", "order_and_insert", hashes, order_bits, words, salt, bounds, zone_words
    )
    return ordered, int(ones)


def part_sums(
    words: np.ndarray, starts: np.ndarray, weights: np.ndarray, start: np.uint64, out: np.ndarray
) -> None:
    """:func:`pruner.loops.part_sums`."""
    _run("part_sums", "part_sums", words, starts, weights, start, out)


@contextlib.contextmanager
def _releasing_the_gil() -> Iterator[None]:
    """Have ``numba.pycc`` compile functions that release the GIL while they run, as
    ``nogil=True`` has Numba's own, so a build's threads insert side by side. Measured:
    compiled without it, two threads' inserts of 5M values took as long together as one
    after the other (0.117 s against 0.121 s); with it, another Python thread ran about 1M
    loop iterations during one 20M-value call. pycc has no option for it: the compiler
    flags it makes are given ``release_gil``, the flag ``nogil`` sets."""
    from numba.pycc import compiler

    made = compiler.Flags

    class Flags(made):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    setattr(compiler, "Flags", Flags)  # noqa: B010 (mypy refuses assigning a class here)
    try:
        yield
    finally:
        setattr(compiler, "Flags", made)  # noqa: B010


def compile_ahead(directory: Path | None = None) -> Path:
    """Compile the loops ahead of time into ``directory`` (default: beside this module,
    where builds load them from), removing modules compiled there from other sources; the
    module's path. Takes about 5 s, and a C compiler."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc's own notice that it will be replaced
        from numba.pycc import CC

    name = module_name()
    if name is None:
        raise RuntimeError(f"the loops' source {Path(__file__).with_name('loops.py')} is missing")
    target = directory or Path(__file__).parent
    loops = _jit()
    with tempfile.TemporaryDirectory(prefix="pruner-loops-") as scratch:
        compiler = CC(name)
        compiler.output_dir = scratch
        compiler.target_cpu = _cpu()[0]
        compiler.verbose = False
        for compiled, (loop, returns, types) in SIGNATURES.items():
            signature = f"{returns}({', '.join(t.rstrip('!') for t in types)})"
            compiler.export(compiled, signature)(getattr(loops, loop).py_func)
        with warnings.catch_warnings(), _releasing_the_gil():
            warnings.simplefilter("ignore")  # pycc's own notice that it will be replaced
            compiler.compile()
        (made,) = Path(scratch).glob(f"{name}.*")
        for old in target.glob("_loops_*"):
            if old.name.split(".")[0] != name:
                old.unlink()
        placed = target / made.name
        shutil.move(made, placed.with_name(placed.name + ".tmp"))
        os.replace(placed.with_name(placed.name + ".tmp"), placed)
    return placed


if __name__ == "__main__":
    print(f"pruner: the build's loops compiled ahead of time into {compile_ahead()}")
