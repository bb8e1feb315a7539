"""One version of a table whose log names its live data files (Delta Lake, Iceberg)."""

from __future__ import annotations

from dataclasses import dataclass

from pruner import storage

__all__ = ["Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """One version of a ``kind`` table (``"delta"``): its live data files, relative to the
    table's folder ``root`` (``/``-separated, sorted), and its columns' names."""

    kind: str
    root: storage.Location
    version: int
    files: tuple[str, ...]
    columns: tuple[str, ...] = ()
