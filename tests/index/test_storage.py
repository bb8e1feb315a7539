"""The one I/O seam: only pruner/storage/ touches the file system for table and index files.

import-linter cannot say "no module but one calls os.stat" (every module may import os), so
this test reads the code: no module of the core (everything but the CLI and the demo, which
handle the user's own files and the demo's data, and pruner.kernels, which compiles the
package's own loops beside it) calls a file-system function or method
that pruner.storage wraps. An object store then plugs in at one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from pruner import storage

PACKAGE = Path(__file__).resolve().parents[2] / "pruner"

FUNCTIONS = {
    "open",
    "os.open",
    "os.pread",
    "os.preadv",
    "os.pwrite",
    "os.stat",
    "os.fstat",
    "os.lstat",
    "os.walk",
    "os.scandir",
    "os.listdir",
    "os.replace",
    "os.rename",
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "os.mkdir",
    "os.makedirs",
    "os.path.exists",
    "os.path.isdir",
    "os.path.isfile",
    "os.path.getsize",
    "pa.OSFile",
    "pa.memory_map",
    "pyarrow.OSFile",
}
"""Called by their dotted name."""

METHODS = {
    "stat",
    "lstat",
    "open",
    "read_bytes",
    "write_bytes",
    "read_text",
    "write_text",
    "iterdir",
    "glob",
    "rglob",
    "unlink",
    "mkdir",
    "rmdir",
    "exists",
    "is_dir",
    "is_file",
    "touch",
}
"""Path methods (called on anything: the names are Path's own)."""

OUTSIDE_THE_CORE = {"storage", "demo.py", "cli", "kernels.py"}

RECEIVERS = {"storage", "reader"}
"""Calls on these are not the file system's: pruner.storage itself, and pyarrow's
``ParquetReader.open`` of a buffer or a file storage opened."""


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        receiver = name.rsplit(".", 1)[0].rsplit(".", 1)[-1] if method else ""
        shutil = name.startswith("shutil.") and name != "shutil.which"
        if name in FUNCTIONS or shutil or (method in METHODS and receiver not in RECEIVERS):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name or method}")
    return found


def test_only_storage_touches_the_file_system() -> None:
    modules = [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if not OUTSIDE_THE_CORE.intersection(p.relative_to(PACKAGE).parts)
    ]
    assert len(modules) > 40
    found = [call for module in modules for call in _calls(module)]
    assert not found, "use pruner.storage instead:\n" + "\n".join(found)


def test_the_check_sees_each_kind_of_call(tmp_path: Path) -> None:
    """The scan is not blind: each kind of forbidden call in a module is reported."""
    module = tmp_path / "pruner" / "sample.py"
    module.parent.mkdir()
    module.write_text(
        "import os, shutil\n"
        "def f(p):\n"
        "    os.stat(p)\n"
        "    p.exists()\n"
        "    shutil.rmtree(p)\n"
        "    open(p)\n"
        "    os.path.join(p, 'x')\n"
        "    storage.stat(p)\n"
        "    reader.open(p)\n"
        "    p.open()\n"
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "pruner"
    try:
        found = _calls(module)
    finally:
        PACKAGE = saved
    kinds = [line.split()[1] for line in found]
    assert kinds == ["os.stat", "p.exists", "shutil.rmtree", "open", "p.open"]


@pytest.mark.parametrize("hidden", [("_", "."), (), (".", "__pycache__")])
def test_list_stats_states_what_walk_files_walks(tmp_path: Path, hidden: tuple[str, ...]) -> None:
    """list_stats of a local folder (one scandir per folder) holds exactly walk_files' files,
    in its order, each with the Stat stat gives: hidden folders and files left out, a link to
    a file stated through it, a link to a folder not entered, a missing folder empty."""
    folder = tmp_path / "t"
    for name in ("a/_hidden/y", "a/x", "b/c/d", "__pycache__/m", ".z", "_w", "top"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(name.encode())
    (folder / "link").symlink_to(folder / "top")
    (folder / "linked_folder").symlink_to(folder / "b")
    stats = storage.list_stats(folder, hidden=hidden)
    walked = storage.walk_files(folder, hidden=hidden)
    assert list(stats) == walked and "b/c/d" in walked
    assert not any(name.startswith("linked_folder") for name in walked)
    assert stats == {name: storage.stat(folder / name) for name in walked}
    assert stats["link"] == storage.stat(folder / "top")
    assert storage.list_stats(tmp_path / "missing") == {}


def test_storage_reads_ranges_lists_and_publishes(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    storage.make_dirs(folder / "a" / "_hidden")
    (folder / "a" / "x.parquet").write_bytes(b"0123456789")
    (folder / "a" / "_hidden" / "y.parquet").write_bytes(b"")
    (folder / ".z").write_bytes(b"")
    assert storage.walk_files(folder) == ["a/x.parquet"]
    assert storage.walk_files(folder, hidden=()) == [".z", "a/_hidden/y.parquet", "a/x.parquet"]
    with storage.RangeFile(folder / "a" / "x.parquet") as handle:
        assert handle.read(3, 4) == b"3456"
        assert handle.read(8, 10) == b"89", "fewer bytes at the end"
        assert handle.file_stat().size == 10
        buffer = bytearray(5)
        assert handle.read_into(memoryview(buffer), 5) == 5 and bytes(buffer) == b"56789"
    assert storage.read_range(folder / "a" / "x.parquet", 0, 2) == b"01"
    target = folder / "index"
    new = storage.NewFile(folder / ".index.tmp")
    assert new.write_at(b"new", 0) == 3
    new.close()
    with pytest.raises(FileExistsError):
        storage.NewFile(folder / ".index.tmp")
    target.write_bytes(b"old")
    storage.publish(folder / ".index.tmp", target)
    assert target.read_bytes() == b"new" and not storage.exists(folder / ".index.tmp")
    with storage.arrow_output(folder / "table.arrow") as sink:
        sink.write(b"arrow")
    with storage.arrow_input(folder / "table.arrow") as source:
        assert source.read() == b"arrow"
        assert storage.input_stat(source).size == 5
    assert isinstance(storage.memory_map(folder / "table.arrow"), pa.NativeFile)
    storage.remove_empty_dir(folder / "a")  # not empty: kept
    assert storage.is_dir(folder / "a")
    storage.remove_tree(folder / "a")
    storage.remove(folder / "missing")  # nothing to remove: no error
    assert not storage.exists(folder / "a")
    assert sorted(storage.list_dir(folder)) == [".z", "index", "table.arrow"]


def test_a_store_error_is_scrubbed_of_reply_bodies_and_option_values() -> None:
    """AWS's InvalidAccessKeyId reply echoes the key id in its XML body, which obstore's
    message carries: pruner keeps the status line only and masks every option value."""
    from pruner import storage

    location = storage.location("s3://bucket/t", {"aws_access_key_id": "AKIACANARY0123"})
    assert isinstance(location, storage.ObjectPath)
    reply = (
        "Generic S3 error: Error performing GET http://h/bucket/t in 3ms - Server returned "
        'non-2xx status code: 403 Forbidden: <?xml version="1.0"?><Error><AWSAccessKeyId>'
        "AKIACANARY0123</AWSAccessKeyId></Error>\nDebug source: AKIACANARY0123"
    )
    scrubbed = storage.scrub(reply, location)
    assert "AKIACANARY0123" not in scrubbed and "403 Forbidden" in scrubbed
    assert "AKIACANARY0123" not in storage.scrub("signed with AKIACANARY0123", location)
