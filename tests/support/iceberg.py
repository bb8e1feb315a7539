"""Iceberg tables with what pyiceberg does not write itself: delete files (its own deletes
rewrite data files) and data files of other formats, committed through its snapshot API."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def commit_file(
    table: Any,
    path: Path,
    content: Any,
    file_format: Any = None,
    record_count: int = 1,
    **more: Any,
) -> None:
    """``path`` added to ``table`` as a file of ``content`` (a ``DataFileContent``), in one
    new snapshot (a fast append, as pyiceberg's own appends commit)."""
    from pyiceberg.manifest import DataFile, FileFormat
    from pyiceberg.typedef import Record

    entry = DataFile.from_args(
        content=content,
        file_path=f"file://{path}",
        file_format=file_format or FileFormat.PARQUET,
        partition=Record(),
        record_count=record_count,
        file_size_in_bytes=path.stat().st_size,
        **more,
    )
    entry.spec_id = 0
    with table.transaction() as transaction:
        append = transaction.update_snapshot().fast_append()
        with append:
            append.append_data_file(entry)
