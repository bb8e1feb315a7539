"""Iceberg deletion vectors (the v3 spec's deletes), which pyiceberg reads but does not write.

:func:`write_deletion_vectors` writes a Puffin file with one ``deletion-vector-v1`` blob per
data file (https://iceberg.apache.org/puffin-spec/ and
https://iceberg.apache.org/spec/#deletion-vector-file-format); :func:`commit_deletion_vectors`
commits it to a table through pyiceberg's snapshot API, one position delete entry per blob.

What pyiceberg 0.12 allows: it refuses to write format-version 3 metadata (``create_table``
with ``{"format-version": "3"}`` raises NotImplementedError, ``upgrade_table_version(3)`` is
refused, and it writes no v3 manifest or manifest list), so the table is a format-version 2
one, which pyiceberg's reader does not check: it applies a PUFFIN position delete file's
vectors by the ``referenced-data-file`` property of each blob. Its v2 manifests have no
``referenced_data_file``, ``content_offset`` or ``content_size_in_bytes`` (nor does its
``DataFile`` on reading any table), so those are dropped when the entry is written; the
entries can carry the data file's path as their ``file_path`` bounds instead (``path_bounds``).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
ROW_POSITION_FIELD_ID = 2147483645  # the reserved _pos field, as deletion vectors name it
FILE_PATH_FIELD_ID = 2147483546  # the file_path column of position deletes


def _vector(positions: list[int]) -> bytes:
    """``positions`` as a 64-bit roaring bitmap, portable serialization: the count of 32-bit
    bitmaps (8 bytes little-endian), then per bitmap its key, the positions' high 32 bits
    (4 bytes little-endian, ascending), and the bitmap of their low 32 bits."""
    from pyroaring import BitMap

    by_key: dict[int, list[int]] = {}
    for position in sorted(set(positions)):
        if not 0 <= position < 1 << 63:
            raise ValueError(f"not a row position: {position}")
        by_key.setdefault(position >> 32, []).append(position & 0xFFFFFFFF)
    out = [struct.pack("<Q", len(by_key))]
    for key, lows in sorted(by_key.items()):
        out += [struct.pack("<I", key), BitMap(lows).serialize()]
    return b"".join(out)


def _blob(positions: list[int]) -> bytes:
    """A ``deletion-vector-v1`` blob: length of magic + vector (4 bytes big-endian), magic,
    vector, CRC-32 of magic + vector (4 bytes big-endian)."""
    body = DV_MAGIC + _vector(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def write_deletion_vectors(path: Path, vectors: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
    """Write a Puffin file at ``path`` with one ``deletion-vector-v1`` blob per data file in
    ``vectors`` (its path, as the table names it, to the row positions deleted in it).

    Returns:
        Per data file path, its blob's (offset, length) in the file: the delete entry's
        ``content_offset`` and ``content_size_in_bytes``.
    """
    out = bytearray(PUFFIN_MAGIC)
    blobs, where = [], {}
    for data_file, positions in vectors.items():
        blob = _blob(positions)
        where[data_file] = (len(out), len(blob))
        blobs.append(
            {
                "type": "deletion-vector-v1",
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": len(out),
                "length": len(blob),
                "properties": {
                    "referenced-data-file": data_file,
                    "cardinality": str(len(set(positions))),
                },
            }
        )
        out += blob
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": "pruner tests"}}).encode()
    # footer: magic, payload, payload size (4 bytes little-endian), flags (4 bytes, none set), magic
    out += PUFFIN_MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + PUFFIN_MAGIC
    path.write_bytes(bytes(out))
    return where


def commit_deletion_vectors(
    table: Any, vectors: dict[str, list[int]], path: Path, path_bounds: bool = False
) -> None:
    """Write ``vectors`` (see :func:`write_deletion_vectors`) as the Puffin file ``path`` and
    commit it to ``table`` in one new snapshot (a fast append): one POSITION_DELETES entry in
    PUFFIN format per data file, with its blob's cardinality as its record count, and the
    partition and spec of that data file (each must be live in the table's current snapshot).

    ``path_bounds``: give each entry its data file's path as the lower and upper bound of
    ``file_path``, which pyiceberg's planning uses to match a delete file to one data file.
    Without them (as Java's writers leave deletion vectors, with ``referenced_data_file``
    instead, which pyiceberg 0.12 does not keep), every entry of a partition is planned for
    every data file in it and, all naming one file, a task's ``delete_files`` holds one of them.
    """
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    live = {task.file.file_path: task.file for task in table.scan().plan_files()}
    missing = sorted(set(vectors) - set(live))
    if missing:
        raise ValueError(f"not live data files of the table: {missing}")
    where = write_deletion_vectors(path, vectors)
    entries = []
    for data_file, (offset, size) in where.items():
        bounds = {FILE_PATH_FIELD_ID: data_file.encode()} if path_bounds else None
        entry = DataFile.from_args(
            # v3 fields, for the last three below: written only to a v3 manifest, which
            # pyiceberg 0.12 does not write (its v2 manifests drop them)
            _table_format_version=3,
            content=DataFileContent.POSITION_DELETES,
            file_path=f"file://{path}",
            file_format=FileFormat.PUFFIN,
            partition=live[data_file].partition,
            record_count=len(set(vectors[data_file])),
            file_size_in_bytes=path.stat().st_size,
            lower_bounds=bounds,
            upper_bounds=bounds,
            referenced_data_file=data_file,
            content_offset=offset,
            content_size_in_bytes=size,
        )
        entry.spec_id = live[data_file].spec_id
        entries.append(entry)
    with (
        table.transaction() as transaction,
        transaction.update_snapshot().fast_append() as append,
    ):
        for entry in entries:
            append.append_data_file(entry)
