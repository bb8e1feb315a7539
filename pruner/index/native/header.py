"""The ``BloomFilterHeader`` before each Parquet bloom filter's bitset, decoded by
thriftpy2 from ``parquet_bloom.thrift`` (beside this module), and checked against what the
format allows."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pruner import sbbf
from pruner.errors import IndexFormatError

_MAX_BITSET = 128 * 1024 * 1024  # the format's upper bound on a filter
_BLOCK = sbbf.BLOCK_BYTES


@functools.cache
def _thrift() -> Any:
    """The thrift module of ``parquet_bloom.thrift``, parsed on first use (~30 ms: a new
    process that reads no Parquet bloom filter does not pay it)."""
    import thriftpy2

    return thriftpy2.load(
        str(Path(__file__).with_name("parquet_bloom.thrift")),
        module_name="pruner_parquet_bloom_thrift",
    )


class _Bytes:
    """A read-only transport over bytes that knows how many were consumed."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def read(self, count: int) -> bytes:
        end = self.position + count
        if end > len(self.data):
            raise IndexFormatError("bloom filter header cut short")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk


def read_header(raw: bytes) -> tuple[int, int]:
    """``(bitset bytes, header bytes)`` of the ``BloomFilterHeader`` at the start of ``raw``.

    Raises:
        IndexFormatError: the header does not decode, or describes a filter the Parquet
            format does not define.
    """
    transport = _Bytes(raw)
    from thriftpy2.protocol.compact import TCompactProtocol

    header = _thrift().BloomFilterHeader()
    try:
        header.read(TCompactProtocol(transport))
    except IndexFormatError:
        raise
    except Exception as err:  # thriftpy2 raises several types on garbage
        raise IndexFormatError(f"bloom filter header does not decode ({err})") from err
    size = header.numBytes
    if not isinstance(size, int) or size < _BLOCK or size > _MAX_BITSET or size & (size - 1):
        raise IndexFormatError(
            f"bloom filter of {size} bytes: the format allows a power of two from "
            f"{_BLOCK} bytes to 128 MiB"
        )
    for part, name, allowed in (
        (header.algorithm, "algorithm", "BLOCK"),
        (header.hash, "hash", "XXHASH"),
        (header.compression, "compression", "UNCOMPRESSED"),
    ):
        if part is None or getattr(part, allowed, None) is None:
            raise IndexFormatError(f"bloom filter with an unknown {name} (not {allowed})")
    return size, transport.position
