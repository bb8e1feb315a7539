"""Zones of a column whose value is one constant per fragment: a Delta table's partition
column, whose value for each data file is in the table's log, not in the file.

Each file is one zone whose filter holds its one value (a NULL value: no value, and
``has_null``), built in memory when a query first probes the column (a few bytes per file),
so ``part = 'x'``, ``part IN (...)`` and ``part IS NULL`` select only the files the log gives
such a value, through the same probes as any index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from pruner import sbbf
from pruner.errors import UnsupportedTypeError
from pruner.hashing import hash_array, hash_input_width, plain_type
from pruner.index.build import DEFAULT_PROBABILITY
from pruner.index.model import ZoneIndex
from pruner.index.native import hashable, index_value_type

__all__ = ["constant_index"]


def constant_index(
    column: str,
    arrow_type: pa.DataType,
    values: Mapping[int, Any],
    rows: Mapping[int, int],
    probability: float = DEFAULT_PROBABILITY,
) -> ZoneIndex | None:
    """The zones of ``column`` (of ``arrow_type``) whose value in fragment ``f`` is
    ``values[f]`` in each of its ``rows[f]`` rows: one zone per fragment. None for a type
    pruner does not hash (a boolean, say)."""
    value_type = index_value_type(arrow_type)
    try:
        hash_input_width(plain_type(arrow_type) if value_type is None else value_type)
    except UnsupportedTypeError:
        return None
    fragments = sorted(values)
    array = pa.array([values[f] for f in fragments], arrow_type).cast(plain_type(arrow_type))
    hashes, valid = hash_array(array if value_type is None else hashable(array, value_type))
    present = np.ones(len(fragments), bool) if valid is None else valid
    bounds = np.concatenate(([0], np.cumsum(present)))
    filters = sbbf.insert(hashes[present], bounds, sbbf.optimal_num_bytes(1, probability))
    lengths = np.array([rows[f] for f in fragments], np.uint64)
    return ZoneIndex(
        column=column,
        items=int(lengths.max(initial=1)),
        probability=probability,
        fragment_id=np.array(fragments, np.uint64),
        zone_start=np.zeros(len(fragments), np.uint64),
        zone_length=lengths,
        has_null=~present,
        filter_data=filters,
        value_type=value_type,
    )
