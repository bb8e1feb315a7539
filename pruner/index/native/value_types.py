"""Which Arrow type's bytes are Parquet's plain encoding of a column's values, as its
filters hash them, and values cast to it (:func:`hashable`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pruner.hashing import is_uuid, plain_type

_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


def parquet_value_type(arrow_type: pa.DataType, column: Any) -> pa.DataType | None:
    """The Arrow type whose little-endian bytes are Parquet's plain encoding of the values
    of ``column`` (a ``pyarrow.parquet.ColumnSchema``) as engines read them at
    ``arrow_type``; None when pruner does not probe that column's filters (booleans,
    decimals, INT96 and fixed-length byte arrays, nested columns, a timestamp whose stored
    unit is not the unit it is read at)."""
    physical = column.physical_type
    arrow_type = plain_type(arrow_type)
    if column.max_repetition_level or column.name != column.path:
        return None  # nested: a leaf's path names its parents (a top-level name may hold dots)
    if pa.types.is_decimal(arrow_type):
        return _decimal_value_type(arrow_type, column)
    if physical == "FIXED_LEN_BYTE_ARRAY" and _logical(column).get("Type") == "UUID":
        # Read as pyarrow's arrow.uuid (DuckDB: UUID); a filter holds the 16 stored bytes.
        return pa.large_binary() if is_uuid(arrow_type) and column.length == 16 else None
    if physical == "FIXED_LEN_BYTE_ARRAY":
        # The bytes themselves (a UUID, a hash); hashed as binary of that width.
        fixed = pa.types.is_fixed_size_binary(arrow_type)
        same = fixed and arrow_type.byte_width == column.length
        return pa.large_binary() if same and _logical(column).get("Type") == "None" else None
    if physical == "INT32":
        if pa.types.is_integer(arrow_type) and arrow_type.bit_width <= 32:
            # Narrow integers are stored as INT32 (sign- or zero-extended, as the value).
            return pa.int32() if arrow_type.bit_width < 32 else arrow_type
        if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
            return arrow_type
        return None
    if physical == "INT64":
        if pa.types.is_integer(arrow_type) and arrow_type.bit_width == 64:
            return arrow_type
        if pa.types.is_timestamp(arrow_type) or pa.types.is_time64(arrow_type):
            unit = _UNITS.get(_logical(column).get("timeUnit", ""))
            return arrow_type if unit == arrow_type.unit else None
        return None
    if physical == "FLOAT" and pa.types.is_float32(arrow_type):
        return arrow_type
    if physical == "DOUBLE" and pa.types.is_float64(arrow_type):
        return arrow_type
    if physical == "BYTE_ARRAY" and (
        pa.types.is_large_string(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
    ):
        return pa.large_binary()
    return None


def _decimal_value_type(arrow_type: pa.DataType, column: Any) -> pa.DataType | None:
    """A decimal's Parquet encoding is its unscaled integer, at the file's precision and
    scale: an INT32 or INT64, or big-endian two's complement in a FIXED_LEN_BYTE_ARRAY
    (``fixed_size_binary`` of its width). None when the file's scale or precision is not
    the column's, or the decimal is stored another way (a BYTE_ARRAY: its width varies)."""
    logical = _logical(column)
    if (
        logical.get("Type") != "Decimal"
        or logical.get("precision") != arrow_type.precision
        or logical.get("scale") != arrow_type.scale
    ):
        return None
    stored = {"INT32": pa.int32(), "INT64": pa.int64()}.get(column.physical_type)
    if stored is not None:
        return stored
    if column.physical_type == "FIXED_LEN_BYTE_ARRAY" and 0 < column.length <= 32:
        return pa.binary(column.length)
    return None


def index_value_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """What pruner's own index of a Parquet column of ``arrow_type`` hashes its values as,
    when Lance's hashing has no encoding for the type: a decimal as Parquet's writers store
    it (the unscaled integer as an INT32 up to 9 digits, an INT64 up to 18, else big-endian
    in the fewest bytes that hold its precision), a fixed-length byte array as its bytes.
    None for every other type (hashed as Lance hashes it).

    >>> [str(index_value_type(pa.decimal128(p, 2))) for p in (9, 18, 19, 38)]
    ['int32', 'int64', 'fixed_size_binary[9]', 'fixed_size_binary[16]']
    """
    arrow_type = plain_type(arrow_type)
    if pa.types.is_fixed_size_binary(arrow_type):
        return pa.large_binary()
    if not pa.types.is_decimal(arrow_type):
        return None
    if arrow_type.precision <= 9:
        return pa.int32()
    if arrow_type.precision <= 18:
        return pa.int64()
    largest = 10**arrow_type.precision - 1
    return pa.binary(next(n for n in range(9, 33) if largest < 2 ** (8 * n - 1)))


def hashable(values: pa.Array, value_type: pa.DataType) -> pa.Array:
    """``values`` (at their column's plain type) as an array whose hashed bytes are
    ``value_type``'s: a cast, except for decimals, whose Parquet encoding
    (:func:`_decimal_value_type`) is the unscaled integer, little-endian as an INT32 /
    INT64, big-endian bytes of a ``fixed_size_binary`` width otherwise.

    Raises:
        pyarrow.ArrowInvalid: a value does not fit ``value_type`` (the caller widens).

    >>> from decimal import Decimal
    >>> hashable(pa.array([Decimal("-1.25")], pa.decimal128(9, 2)), pa.binary(4)).to_pylist()
    [b'\\xff\\xff\\xff\\x83']
    """
    if not pa.types.is_decimal(values.type):
        return values.cast(value_type)
    if values.offset:
        values = pa.concat_arrays([values])  # its buffers from its first value on
    width = values.type.byte_width
    raw = np.frombuffer(values.buffers()[1], np.uint8, len(values) * width)
    # Two's complement, little-endian: reversed, the big-endian bytes.
    big = raw.reshape(-1, width)[:, ::-1]
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
    if pa.types.is_fixed_size_binary(value_type):
        keep = value_type.byte_width
    elif pa.types.is_int32(value_type) or pa.types.is_int64(value_type):
        keep = value_type.bit_width // 8
    else:
        raise pa.ArrowInvalid(f"a decimal is not stored as {value_type} in Parquet")
    sign = np.where(big[:, -keep] >= 0x80, 0xFF, 0x00).astype(np.uint8)
    if not (big[valid, : width - keep] == sign[valid, None]).all():
        raise pa.ArrowInvalid(f"a value of {values.type} does not fit {value_type}")
    kept = np.ascontiguousarray(big[:, width - keep :])
    validity = values.buffers()[0] if values.null_count else None
    if pa.types.is_fixed_size_binary(value_type):
        fixed = pa.Array.from_buffers(
            value_type, len(values), [validity, pa.py_buffer(kept.tobytes())]
        )
        return fixed.cast(pa.large_binary())
    little = np.ascontiguousarray(kept[:, ::-1]).view(f"<i{keep}").ravel()
    return pa.Array.from_buffers(value_type, len(values), [validity, pa.py_buffer(little)])


def _logical(column: Any) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads(column.logical_type.to_json()))
    except (ValueError, AttributeError, TypeError):
        return {}


def _signed_width(column: Any) -> pa.DataType | None:
    """int32 or int64 for a column stored as a plain signed INT32 or INT64 (no logical type,
    or a signed integer of the physical width), else None."""
    width = {"INT32": 32, "INT64": 64}.get(column.physical_type)
    logical = _logical(column)
    if width is None or logical.get("Type") not in ("None", "Int"):
        return None
    if logical.get("Type") == "Int" and (
        logical.get("bitWidth") != width or not logical.get("isSigned")
    ):
        return None
    return pa.int32() if width == 32 else pa.int64()
