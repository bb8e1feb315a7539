"""Table formats whose log names which Parquet files of their folder are live: Delta Lake
(:mod:`pruner.formats.delta`). The rest of pruner reads a version of such a table as a
directory of Parquet files made of exactly its live files (:class:`Snapshot`)."""

from pruner.formats import delta
from pruner.formats.snapshot import Snapshot

__all__ = ["Snapshot", "delta"]
