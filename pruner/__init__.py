"""pruner: read-time pruning with Lance-compatible zone bloom indexes.

>>> import pyarrow as pa
>>> from pruner.hashing import hash_array
>>> int(hash_array(pa.array([""]))[0][0])
17241709254077376921
"""

from pruner.append import append
from pruner.engines import UpsertPlan, explain, find, query, upsert_plan
from pruner.errors import (
    IndexFormatError,
    IndexNotFoundError,
    InvalidParameterError,
    PrunerError,
    SqlSyntaxError,
    UnsupportedTypeError,
)
from pruner.explain import Explanation
from pruner.index import ZoneIndex, build_index, load_index
from pruner.index.native import write_parquet
from pruner.lookup import Lookup, lookup
from pruner.plan import Plan, plan
from pruner.selection import Selection
from pruner.status import index_status
from pruner.table import Table, open_table, open_tables

__all__ = [
    "Explanation",
    "IndexFormatError",
    "IndexNotFoundError",
    "InvalidParameterError",
    "Lookup",
    "Plan",
    "PrunerError",
    "Selection",
    "SqlSyntaxError",
    "Table",
    "UnsupportedTypeError",
    "UpsertPlan",
    "ZoneIndex",
    "append",
    "build_index",
    "explain",
    "find",
    "index_status",
    "load_index",
    "lookup",
    "open_table",
    "open_tables",
    "plan",
    "query",
    "upsert_plan",
    "write_parquet",
]
__version__ = "0.1.0"
