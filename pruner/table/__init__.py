"""A table as pruner sees it: its schema, its fragments now, and its bloom indexes.

A Lance dataset's fragments are its fragments (ids from the manifest, physical row counts).
A Parquet directory's fragments are its files, numbered in path order. An index is *bound*
to the table's current fragments (:meth:`Table._bind`), and only what it proves is used:

- zones of fragments that no longer exist, that Lance's manifest no longer counts as
  covered, or of Parquet files whose size, modification time, row count or footer changed
  since the index was built, are ignored (*stale*);
- a fragment with a zone that is damaged (its checksum fails, or it reaches beyond the
  fragment's rows), or with a live row no zone covers, is read whole;
- a fragment no zone covers is read whole.

So a stale or damaged index widens a selection; it never drops a row.
"""

from __future__ import annotations

from pruner.table.bound import TableIndex
from pruner.table.cache import TableSource, as_table, open_tables
from pruner.table.model import Table
from pruner.table.opening import open_table

__all__ = ["Table", "TableIndex", "TableSource", "as_table", "open_table", "open_tables"]
