"""Parquet's own bloom filters as a zone source: one zone per row group.

Writers (pyarrow, DuckDB, DataFusion, Spark, Iceberg) may store, per row group and column
chunk, a Split Block Bloom Filter: the SBBF pruner builds (:mod:`pruner.sbbf`), hashed with
xxHash64 seed 0 as Lance's is, but over each value's *Parquet plain encoding*, which is not
always Lance's: an int8 or int16 is hashed as a 4-byte INT32, a timestamp as an INT64 in the
unit the file stores (``shared/seeds/parquet_bloom_filter_spec.md``). So such a zone index
carries :attr:`ZoneIndex.value_type`, the Arrow type whose bytes equal that encoding, and a
probe's literals are cast to it before they are hashed.

Where a chunk's filter sits is in the file's metadata (``bloom_filter_offset``, and
``bloom_filter_length`` when the writer recorded it; Spark does not). At the offset a Thrift
``BloomFilterHeader`` (decoded by thriftpy2 from ``parquet_bloom.thrift``) gives the bitset's
size, algorithm, hash and compression; the bitset follows. A probe reads only the 32-byte
block each hash points at, by offset.

Nothing unproven prunes: a chunk without a filter, with a header the format does not allow
(a size that is not a power of two of 32 bytes to 128 MiB, an unknown algorithm, hash or
compression, a length that disagrees), a bitset cut short, or a file changed since the table
was opened, leaves its row group selected.
"""

from __future__ import annotations

from pruner.index.native.filters import SOURCE, NativeFilters, native_index
from pruner.index.native.filters import IntegerWidths as IntegerWidths
from pruner.index.native.filters import _Chunk as _Chunk
from pruner.index.native.filters import _locate as _locate
from pruner.index.native.header import _thrift as _thrift
from pruner.index.native.header import read_header
from pruner.index.native.statistics import STATISTICS_ZONES, ruled_out_by_statistics
from pruner.index.native.value_types import hashable, parquet_value_type
from pruner.index.native.value_types import index_value_type as index_value_type
from pruner.index.native.write import index_from_filters, write_parquet

__all__ = [
    "SOURCE",
    "STATISTICS_ZONES",
    "NativeFilters",
    "hashable",
    "index_from_filters",
    "native_index",
    "parquet_value_type",
    "read_header",
    "ruled_out_by_statistics",
    "write_parquet",
]
