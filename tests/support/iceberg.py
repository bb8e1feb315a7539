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


def relocated(source: Path, target: Path, prefix: str) -> Path:
    """A copy at ``target`` of the Iceberg table folder ``source`` (tests/data/iceberg), its
    paths that start with ``prefix`` (where its writer kept it) rewritten to the copy's:
    in each metadata JSON, in the Avro manifest lists and manifests (with the lengths of
    the files rewritten), and in a Puffin file's footer, where each deletion vector names
    its data file. Returns the copy's current metadata file (the newest)."""
    import json
    import shutil

    import fastavro

    shutil.copytree(source, target)
    here = f"file://{target}"

    def moved(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: moved(item) for key, item in value.items()}
        if isinstance(value, list):
            return [moved(item) for item in value]
        if isinstance(value, str) and value.startswith(prefix):
            return here + value[len(prefix) :]
        return value

    def local(uri: str) -> Path:
        return Path(uri.removeprefix("file://"))

    for puffin in target.rglob("*.puffin"):
        data = puffin.read_bytes()
        # the footer: its JSON, its length (4 bytes little-endian), flags and magic (8)
        size = int.from_bytes(data[-12:-8], "little")
        footer = json.dumps(moved(json.loads(data[-12 - size : -12]))).encode()
        puffin.write_bytes(
            data[: -12 - size] + footer + len(footer).to_bytes(4, "little") + data[-8:]
        )

    def rewrite(path: Path, change: Any) -> None:
        with path.open("rb") as handle:
            reader = fastavro.reader(handle)
            schema, codec = reader.writer_schema, reader.codec
            metadata = {
                key: value.decode() if isinstance(value, bytes) else value
                for key, value in reader.metadata.items()
                if not key.startswith("avro.")
            }
            records = [change(record) for record in reader]
        with path.open("wb") as handle:
            fastavro.writer(handle, schema, records, codec=codec, metadata=metadata)

    def data_file(record: dict[str, Any]) -> dict[str, Any]:
        entry = record["data_file"]
        for key in ("file_path", "referenced_data_file"):
            if entry.get(key) is not None:
                entry[key] = moved(entry[key])
        entry["file_size_in_bytes"] = local(entry["file_path"]).stat().st_size
        return record

    def manifest(record: dict[str, Any]) -> dict[str, Any]:
        record["manifest_path"] = moved(record["manifest_path"])
        record["manifest_length"] = local(record["manifest_path"]).stat().st_size
        return record

    listed = sorted((target / "metadata").glob("snap-*.avro"))
    for path in sorted((target / "metadata").glob("*.avro")):
        if path not in listed:
            rewrite(path, data_file)
    for path in listed:  # after the manifests, whose lengths they record
        rewrite(path, manifest)
    found = sorted((target / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:-14]))
    for path in found:
        path.write_text(json.dumps(moved(json.loads(path.read_text()))))
    return found[-1]
