"""SQL identifiers in double quotes, as DuckDB and DataFusion (and standard SQL) write them.

Spark's dialect quotes with backquotes: :func:`pruner.adapters.spark.quote_identifier`.
"""

from __future__ import annotations

__all__ = ["quote_identifier"]


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier: exactly ``name``, whatever it holds.

    DataFusion parses a name given to ``register_*`` as SQL: ``a.b`` would be table ``b`` of
    schema ``a``, ``t--x`` would be ``t`` and ``Events`` would be ``events``. Quoted, it is the
    name itself, the one the analyzer matches (so a mixed-case table is ``"Events"`` in SQL).

    >>> quote_identifier('a"b')
    '"a""b"'
    """
    return '"' + name.replace('"', '""') + '"'
