"""The one I/O seam: every byte of a table or an index that pruner reads, lists or writes.

Reading a Parquet footer, a row group, an index file or a hierarchy companion; listing a
table's files or an index folder; stating a file for its identity; writing an index and
publishing it atomically: all of it goes through this module, and nothing else in pruner
calls ``open``, ``os.stat``, ``os.walk`` or ``os.replace`` on table or index files
(``tests/index/test_storage.py`` checks). Two stores sit behind it: the local file system,
and object stores (S3 and what speaks its protocol, GCS, Azure) through obstore, the Python
binding of arrow-rs ``object_store`` (what Lance and DataFusion read stores with). A location
on a store is an :class:`ObjectPath` (``s3://bucket/key``, made by :func:`location`), which
behaves as a ``pathlib.Path`` for what pruner does with paths (``/``, ``name``, ``parent``)
and carries the store's options; every function here takes either. The operations are those
object stores offer:

- :class:`RangeFile`: an open file read by offset (``pread``; a ranged GET), many ranges per
  open; :func:`read_tail`: the end of a file and its :class:`Stat` in one read (a
  suffix-range GET);
- :func:`stat`: size, modification time and inode locally, size, time and ETag on a store;
- :func:`walk_files` / :func:`list_dir` / :func:`list_stats`: what a folder holds (one LIST
  on a store);
- :class:`NewFile` and :func:`publish`: a file written to a local temporary path, then made
  the target in one step: renamed over it locally, one PUT on a store (a reader sees the old
  object or the new one), conditional when the caller says what it expects there
  (create-if-absent, or compare-and-swap on the ETag it read).

Why obstore: it is the one library here that does what a store-aware reader needs in one
request each (FACTS §5: a suffix-range GET with the object's ETag, conditional PUTs, ETags
on LIST and HEAD), with the option names Lance takes (``aws_endpoint``, ``allow_http``...).
pyarrow's S3 file system sends a HEAD before every read and reports no ETag; s3fs sends
``If-Match`` on every read and reads ahead to the end of a file.

Credentials live only in an :class:`ObjectPath`'s options and the clients made from them:
an ObjectPath prints, compares and pickles for a log without them (:meth:`ObjectPath.__str__`),
and errors from a store are re-raised with the location, never the options.
"""

from __future__ import annotations

from pruner.storage.calls import ABSENT, ChangedUnderneath, Requests, Stat, requests, scrub
from pruner.storage.listing import (
    Listing,
    current_listing,
    exists,
    gather,
    has_subfolders,
    is_dir,
    is_file,
    list_dir,
    list_stats,
    listed,
    listing,
    stat,
    walk_files,
)
from pruner.storage.paths import (
    CLIENT_OPTIONS,
    STORE_SCHEMES,
    Location,
    ObjectPath,
    PathLike,
    dataset_location,
    is_remote,
    lance_options,
    location,
)
from pruner.storage.reads import (
    RangeFile,
    arrow_input,
    forget_read_ahead,
    input_stat,
    keep,
    kept_tail,
    local_copy,
    memory_map,
    object_reader,
    read_ahead,
    read_range,
    read_tail,
)
from pruner.storage.writes import (
    NewFile,
    arrow_output,
    make_dirs,
    publish,
    publish_soon,
    remove,
    remove_empty_dir,
    remove_leftovers,
    remove_tree,
    temporary_for,
    temporary_path,
)

__all__ = [
    "ABSENT",
    "CLIENT_OPTIONS",
    "STORE_SCHEMES",
    "ChangedUnderneath",
    "Listing",
    "Location",
    "NewFile",
    "ObjectPath",
    "PathLike",
    "RangeFile",
    "Requests",
    "Stat",
    "arrow_input",
    "arrow_output",
    "current_listing",
    "dataset_location",
    "exists",
    "forget_read_ahead",
    "gather",
    "has_subfolders",
    "input_stat",
    "is_dir",
    "is_file",
    "is_remote",
    "keep",
    "kept_tail",
    "lance_options",
    "list_dir",
    "list_stats",
    "listed",
    "listing",
    "local_copy",
    "location",
    "make_dirs",
    "memory_map",
    "object_reader",
    "publish",
    "publish_soon",
    "read_ahead",
    "read_range",
    "read_tail",
    "remove",
    "remove_empty_dir",
    "remove_leftovers",
    "remove_tree",
    "requests",
    "scrub",
    "stat",
    "temporary_for",
    "temporary_path",
    "walk_files",
]
