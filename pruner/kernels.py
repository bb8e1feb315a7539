"""The compiled loops a build runs (imported by builds only, never by a query): the SBBF
inserts, xxHash64 of whole fragments and a companion's checksums, whose source is
:mod:`pruner.loops`."""

from __future__ import annotations

from pruner.loops import (
    insert_pieces,
    insert_words,
    order_and_insert,
    part_sums,
    xxh64_bytes,
    xxh64_fixed,
)

__all__ = [
    "insert_pieces",
    "insert_words",
    "order_and_insert",
    "part_sums",
    "xxh64_bytes",
    "xxh64_fixed",
]
