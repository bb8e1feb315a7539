"""Analyses kept in a folder between processes, so a new process that runs a query of a shape
an earlier one analysed neither parses it nor imports sqlglot (~0.1 s of a ~0.6 s command).

:class:`~pruner.analysis.templates.Templates` asks a :class:`Store` when its memory misses,
and gives it what it learned: a template's sentinel analysis once both analyses agreed
(:mod:`pruner.analysis.templates`), or the analysis of a text that has no slot. The ``pruner``
command keeps them in :func:`default_directory`; a program turns the store on for a block
with :func:`pruner.analyzer.analyses_kept_in`.

An entry is one JSON file, named by a digest of its key, holding the key in full and the
value, behind a SHA-256 of both. The value is JSON's own values and the analysis's frozen
dataclasses by name, read back by building only those: pruner unpickles nothing
(tests/end_to_end/test_hostile.py). The key names everything an analysis depends on:
pruner's code (every file of the package by size, times and inode: an edited or reinstalled
pruner never reads an older one's entries), sqlglot's version files likewise, Python's
version, the dialect, each schema's Arrow IPC bytes and the SQL text (a template's: its text
with the slots' classes). A file that fails its checksum, holds another key or does not read
back as what its kind holds is a miss: the text is analysed as if nothing were kept, and the
entry written again. The checksum finds damage, not intent: the folder is the user's own,
as Numba's and pip's caches are, and an entry written there on purpose is trusted as an
index file written there would be.

The folder holds at most :data:`MAX_ENTRIES` entries; a write past that removes the oldest
quarter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from pruner import storage
from pruner.analysis.model import Analysis, JoinEdge, Scan
from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Equals,
    In,
    IsNull,
    Literal,
    Not,
    NotEquals,
    NotIn,
    NotNull,
    Or,
    Unknown,
)

__all__ = ["MAX_ENTRIES", "Store", "default_directory"]

MAX_ENTRIES = 4_096
_MAGIC = b"pruner-analysis-1\n"
_DIGEST = 32


def default_directory() -> Path | None:
    """Where the ``pruner`` command keeps analyses: ``$PRUNER_CACHE_DIR/analyses``, else
    ``$XDG_CACHE_HOME/pruner/analyses``, else ``~/.cache/pruner/analyses``; None when
    ``PRUNER_CACHE_DIR`` is set empty (keep none)."""
    chosen = os.environ.get("PRUNER_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) / "analyses" if chosen else None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory: keep none
            return None
    return Path(base) / "pruner" / "analyses"


_code: str | None = None
_code_lock = threading.Lock()


def _code_fingerprint() -> str:
    """A digest of pruner's files, sqlglot's ``__init__.py`` and ``_version.py`` (each by
    size, times and inode: an edit or a reinstall changes them) and Python's version: ~0.6
    ms, once per process."""
    global _code
    with _code_lock:
        if _code is None:
            parts: list[object] = [sys.version_info[:2]]
            package = Path(__file__).resolve().parents[1]  # pruner
            for name, found in storage.list_stats(package, hidden=(".", "__pycache__")).items():
                parts.append((name, found.size, found.mtime_ns, found.ctime_ns, found.inode))
            spec = importlib.util.find_spec("sqlglot")  # found, not imported
            if spec is not None and spec.origin is not None:
                for name in ("__init__.py", "_version.py"):
                    try:
                        found = storage.stat(Path(spec.origin).with_name(name))
                    except OSError:
                        continue
                    parts.append(("sqlglot", name, found.size, found.mtime_ns, found.inode))
            _code = hashlib.sha256(repr(parts).encode()).hexdigest()
        return _code


def _plain_key(key: tuple[object, ...]) -> str:
    """``key`` as text, each Arrow schema in it as a digest of its IPC bytes."""

    def plain(part: object) -> object:
        if isinstance(part, tuple):
            return tuple(plain(p) for p in part)
        serialize = getattr(part, "serialize", None)
        if serialize is not None:  # a pyarrow Schema
            return "schema:" + hashlib.sha256(serialize().to_pybytes()).hexdigest()
        if part is None or isinstance(part, str | int | float | bool):
            return part
        raise TypeError(f"a key holds {type(part).__name__}")

    return repr((_code_fingerprint(), plain(key)))


class Store:
    """Analyses in the folder ``directory`` (made when first written)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _file(self, text: str) -> Path:
        return self.directory / (hashlib.sha256(text.encode()).hexdigest()[:40] + ".json")

    def get(self, key: tuple[object, ...]) -> Any:
        """The value kept under ``key``, or None (none kept, or unreadable)."""
        try:
            text = _plain_key(key)
            data, _ = storage.read_tail(self._file(text), 1 << 24)
        except (OSError, TypeError):
            return None
        head = len(_MAGIC)
        if not data.startswith(_MAGIC) or len(data) < head + _DIGEST:
            return None
        digest, body = data[head : head + _DIGEST], data[head + _DIGEST :]
        if hashlib.sha256(body).digest() != digest:
            return None
        try:
            kept = json.loads(body)
            if kept["key"] != text:
                return None
            return _decoded(kept["value"])
        except (ValueError, KeyError, TypeError, RecursionError):
            return None

    def put(self, key: tuple[object, ...], value: object) -> None:
        """Keep ``value`` under ``key``; a folder that cannot be written keeps nothing."""
        try:
            text = _plain_key(key)
            body = json.dumps({"key": text, "value": _encoded(value)}).encode()
            target = self._file(text)
            storage.make_dirs(self.directory)
            temporary = storage.temporary_for(target, f".{uuid.uuid4().hex}.tmp")
            new = storage.NewFile(temporary)
            try:
                try:
                    new.write_at(_MAGIC + hashlib.sha256(body).digest() + body, 0)
                finally:
                    new.close()
                storage.publish(temporary, target)
            except OSError:
                with contextlib.suppress(OSError):
                    storage.remove(temporary)
                raise
            self._trim()
        except (OSError, TypeError, ValueError, RecursionError):
            return

    def _trim(self) -> None:
        """Past :data:`MAX_ENTRIES`, the oldest entries go (files are stated only then)."""
        if len(storage.list_dir(self.directory)) <= MAX_ENTRIES:
            return
        stats = storage.list_stats(self.directory, hidden=(".",))
        oldest = sorted(stats, key=lambda name: stats[name].mtime_ns)
        for name in oldest[: len(stats) - MAX_ENTRIES * 3 // 4]:
            with contextlib.suppress(OSError):
                storage.remove(self.directory / name)


_KINDS: dict[str, type] = {
    kind.__name__: kind
    for kind in (
        Analysis,
        Scan,
        JoinEdge,
        Literal,
        AlwaysTrue,
        AlwaysFalse,
        Unknown,
        Equals,
        In,
        IsNull,
        NotEquals,
        NotIn,
        NotNull,
        Not,
        And,
        Or,
    )
}
"""What an entry may hold besides text, numbers, tuples and frozensets: an analysis's own
frozen dataclasses, by name; anything else is refused when kept and when read."""


def _encoded(value: object) -> object:
    """``value`` as JSON's values: a tuple ``{"t": [...]}``, a frozenset ``{"f": [...]}``, a
    dataclass of :data:`_KINDS` ``{"d": name, "v": {field: value}}``."""
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, tuple):
        return {"t": [_encoded(v) for v in value]}
    if isinstance(value, frozenset):
        return {"f": [_encoded(v) for v in value]}
    name = type(value).__name__
    if _KINDS.get(name) is type(value):
        fields = dataclasses.fields(value)  # type: ignore[arg-type]
        return {"d": name, "v": {f.name: _encoded(getattr(value, f.name)) for f in fields}}
    raise TypeError(f"an analysis holds {name}, which is not kept")


def _decoded(value: object) -> object:
    """What :func:`_encoded` wrote, built again (only :data:`_KINDS` are built)."""
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, dict):
        if value.keys() == {"t"}:
            return tuple(_decoded(v) for v in value["t"])
        if value.keys() == {"f"}:
            return frozenset(_decoded(v) for v in value["f"])
        if value.keys() == {"d", "v"} and isinstance(value["v"], dict):
            return _KINDS[value["d"]](**{k: _decoded(v) for k, v in value["v"].items()})
    raise ValueError("not an analysis")
