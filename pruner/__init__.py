"""pruner: read-time pruning with Lance-compatible zone bloom indexes.

>>> import pyarrow as pa
>>> from pruner.hashing import hash_array
>>> int(hash_array(pa.array([""]))[0][0])
17241709254077376921
"""

from pruner.errors import (
    IndexFormatError,
    IndexNotFoundError,
    InvalidParameterError,
    PrunerError,
    SqlSyntaxError,
    UnsupportedTypeError,
)
from pruner.explain import Explanation, explain
from pruner.index import ZoneIndex, build_index, load_index
from pruner.selection import Selection

__all__ = [
    "Explanation",
    "IndexFormatError",
    "IndexNotFoundError",
    "InvalidParameterError",
    "PrunerError",
    "Selection",
    "SqlSyntaxError",
    "UnsupportedTypeError",
    "ZoneIndex",
    "build_index",
    "explain",
    "load_index",
]
__version__ = "0.1.0"
