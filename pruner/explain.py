"""``explain``: what pruner would read for each table scan of a query, and why.

>>> import tempfile, pyarrow as pa, lance
>>> from pruner.index import build_index
>>> path = tempfile.mkdtemp() + "/t.lance"
>>> _ = lance.write_dataset(pa.table({"id": list(range(20000))}), path)
>>> _ = build_index(path, "id")
>>> print(explain("SELECT * FROM t WHERE id = 7", {"t": path}))
t: 1 of 3 zones, 8,192 of 20,000 rows, 1 of 1 fragments
  id = 7: bloom index, 1 zones
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pruner.analyzer import analyze
from pruner.evaluate import RowKeys, ScanSelection, select_scans, table_keys, table_selections
from pruner.parameters import Parameters
from pruner.selection import Selection
from pruner.table import TableSource, open_tables

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True)
class Explanation:
    """Per scan: zones, rows and fragments selected of the total, and every term's story."""

    sql: str
    dialect: str
    scans: tuple[ScanSelection, ...]

    def selections(self) -> dict[str, Selection]:
        """Per table name, the rows an engine must read (the union over its scans)."""
        return table_selections(list(self.scans))

    def keys(self) -> dict[str, RowKeys]:
        """Per table name, the keys every row the query keeps of it holds (when known)."""
        return table_keys(list(self.scans))

    def to_json(self) -> dict[str, object]:
        return {
            "sql": self.sql,
            "dialect": self.dialect,
            "scans": [
                {
                    "name": s.scan.table,
                    "alias": s.scan.alias,
                    "predicate": str(s.scan.predicate),
                    "zones_total": s.zones_total,
                    "zones_selected": s.zones_selected,
                    "rows_total": s.rows_total,
                    "rows_selected": s.selection.num_rows,
                    "fragments_total": s.fragments_total,
                    "fragments_selected": len(s.selection.fragment_ids()),
                    "ranges": [list(r) for r in s.selection.ranges()],
                    "terms": [t.to_json() for t in s.terms],
                }
                for s in self.scans
            ],
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def __str__(self) -> str:
        lines = []
        for s in self.scans:
            name = (
                s.scan.table
                if s.scan.alias == s.scan.table
                else f"{s.scan.table} AS {s.scan.alias}"
            )
            lines.append(
                f"{name}: {s.zones_selected:,} of {s.zones_total:,} zones, "
                f"{s.selection.num_rows:,} of {s.rows_total:,} rows, "
                f"{len(s.selection.fragment_ids()):,} of {s.fragments_total:,} fragments"
            )
            for term in s.terms:
                if term.used_index:
                    detail = f"bloom index, {term.zones_selected:,} zones"
                    detail += f" ({term.reason})" if term.reason else ""
                else:
                    detail = f"not used: {term.reason}"
                lines.append(f"  {term.term}: {detail}")
            if not s.terms:
                lines.append("  no condition on this table: read whole")
        return "\n".join(lines)


def explain(
    sql: str,
    tables: Mapping[str, TableSource],
    *,
    dialect: str = "duckdb",
    parameters: Parameters = (),
) -> Explanation:
    """What pruner would read for each scan of ``tables`` in ``sql``, and why.

    Args:
        sql: the query, as the engine will run it.
        tables: table name as the SQL uses it -> Lance dataset or Parquet directory
            (or an opened :class:`~pruner.table.Table`).
        dialect: ``duckdb`` (default), ``spark`` or ``datafusion``.
        parameters: values for ``?`` / ``$n`` / ``:name`` placeholders.
    """
    opened = open_tables(tables)
    schemas = {name: table.schema for name, table in opened.items()}
    analysis = analyze(sql, schemas, dialect).with_parameters(parameters)
    return Explanation(sql, dialect, tuple(select_scans(analysis, opened)))
