"""pruner: read-time pruning with Lance-compatible zone bloom indexes.

The public names below load on first use (PEP 562): ``import pruner`` costs a few
milliseconds, and a process pays for sqlglot, NumPy and the index code only when it calls
what needs them (``bench/startup.py``).

>>> import pyarrow as pa
>>> from pruner.hashing import hash_array
>>> int(hash_array(pa.array([""]))[0][0])
17241709254077376921
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "append": "pruner.append",
    "Explanation": "pruner.explain",
    "IndexFormatError": "pruner.errors",
    "IndexNotFoundError": "pruner.errors",
    "InvalidParameterError": "pruner.errors",
    "Lookup": "pruner.lookup",
    "Plan": "pruner.plan",
    "PrunerError": "pruner.errors",
    "Selection": "pruner.selection",
    "SqlSyntaxError": "pruner.errors",
    "Table": "pruner.table",
    "UnsupportedTypeError": "pruner.errors",
    "UpsertPlan": "pruner.engines",
    "ZoneIndex": "pruner.index",
    "build_index": "pruner.index",
    "explain": "pruner.engines",
    "find": "pruner.engines",
    "index_status": "pruner.status",
    "load_index": "pruner.index",
    "lookup": "pruner.lookup",
    "open_table": "pruner.table",
    "open_tables": "pruner.table",
    "plan": "pruner.plan",
    "query": "pruner.engines",
    "upsert_plan": "pruner.engines",
    "write_parquet": "pruner.index.native",
}
"""Each public name and the module that defines it."""

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


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use, and keep it here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pruner' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package's module: importing a submodule named as a public function
    (``pruner.explain``, ``pruner.plan``, ``pruner.lookup``, ``pruner.append``) leaves
    ``pruner.<name>`` the function, as the eager imports of this file used to."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return  # the submodule stays in sys.modules; the name stays the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
