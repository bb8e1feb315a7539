"""Random Lance datasets of every indexable type, for comparisons with Lance itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INDEXABLE_TYPES: dict[str, pa.DataType] = {
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u8": pa.uint8(),
    "u16": pa.uint16(),
    "u32": pa.uint32(),
    "u64": pa.uint64(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "utf8": pa.string(),
    "lutf8": pa.large_string(),
    "bin": pa.binary(),
    "lbin": pa.large_binary(),
    "d32": pa.date32(),
    "d64": pa.date64(),
    "t32s": pa.time32("s"),
    "t32ms": pa.time32("ms"),
    "t64us": pa.time64("us"),
    "t64ns": pa.time64("ns"),
    "ts_s": pa.timestamp("s"),
    "ts_ms": pa.timestamp("ms"),
    "ts_us_utc": pa.timestamp("us", tz="UTC"),
    "ts_ns_tokyo": pa.timestamp("ns", tz="Asia/Tokyo"),
}


def random_column(
    arrow_type: pa.DataType, rows: int, rng: np.random.Generator, null_fraction: float
) -> pa.Array:
    """Values with duplicates, nulls, and the awkward ones (NaN, -0.0, empty strings)."""
    keys = rng.integers(0, max(2, rows // 3), rows)
    nulls = rng.random(rows) < null_fraction
    if pa.types.is_floating(arrow_type):
        special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf])
        values = np.where(keys % 11 < 5, special[keys % 5], keys * 0.25 - 7)
        array = pa.array(values.astype(arrow_type.to_pandas_dtype()), arrow_type)
    elif pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        strings = np.array(["", "é", "ключ", "a" * 40], dtype=object)
        texts = [strings[k % 4] if k % 7 == 0 else f"v{k}-" + "x" * int(k % 37) for k in keys]
        array = pa.array(texts, arrow_type)
    elif pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        array = pa.array([int(k).to_bytes(8, "little")[: k % 9] for k in keys], arrow_type)
    elif pa.types.is_integer(arrow_type):
        dtype = arrow_type.to_pandas_dtype()
        info = np.iinfo(dtype)
        pool = rng.integers(info.min, info.max, max(2, rows // 3), dtype=dtype, endpoint=True)
        pool[:2] = [info.min, info.max]
        array = pa.array(pool[keys % len(pool)], arrow_type)
    else:
        storage = pa.int32() if arrow_type.bit_width == 32 else pa.int64()
        limit = (
            86_399
            if arrow_type == pa.time32("s")
            else 86_399_000
            if arrow_type == pa.time32("ms")
            else 10**9
        )
        array = pa.array(keys % limit, storage).cast(storage).view(arrow_type)
    if not nulls.any():
        return array
    return pc.if_else(pa.array(nulls), pa.scalar(None, arrow_type), array)


def write_random_dataset(
    path: Path,
    rows: int,
    rows_per_fragment: int,
    seed: int,
    null_fraction: float = 0.1,
    delete_fraction: float = 0.1,
    columns: dict[str, pa.DataType] | None = None,
) -> None:
    """A Lance dataset of several fragments with random rows deleted."""
    import lance

    rng = np.random.default_rng(seed)
    columns = columns or INDEXABLE_TYPES
    table = pa.table(
        {"row": pa.array(np.arange(rows), pa.int64())}
        | {name: random_column(t, rows, rng, null_fraction) for name, t in columns.items()}
    )
    ds = lance.write_dataset(table, str(path), max_rows_per_file=rows_per_fragment)
    if delete_fraction:
        doomed = np.flatnonzero(rng.random(rows) < delete_fraction)
        if len(doomed):
            ds.delete(f"row IN ({', '.join(map(str, doomed.tolist()))})")
