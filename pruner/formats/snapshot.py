"""One version of a table whose log names its live data files (Delta Lake, Iceberg)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pruner import storage

__all__ = ["Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """One version of a ``kind`` table (``"delta"``, ``"iceberg"``): its live data files,
    relative to the table's folder ``root`` (``/``-separated, sorted), and its columns'
    names. For Iceberg, the metadata file read (which a table opened again reads again), the
    columns' shapes (names and field ids) its data files must have, and the table's name
    mapping (the field ids of files written without them)."""

    kind: str
    root: storage.Location
    version: int
    files: tuple[str, ...]
    columns: tuple[str, ...] = ()
    metadata: storage.Location | None = None
    shape: tuple[Any, ...] = ()
    name_mapping: dict[str, Any] | None = None
