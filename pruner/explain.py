"""``explain``: what pruner would read for each table scan of a query, and why.

>>> import tempfile, pyarrow as pa, lance
>>> from pruner.index import build_index
>>> path = tempfile.mkdtemp() + "/t.lance"
>>> _ = lance.write_dataset(pa.table({"id": list(range(20000))}), path)
>>> _ = build_index(path, "id")
>>> print(explain("SELECT * FROM t WHERE id = 7", {"t": path}))
t: 1 of 3 zones, 8,192 of 20,000 rows, 1 of 1 fragments
  id = 7: bloom index, 1 zones (fragment filters: 1 of 1 fragments; zone filters: 1 zones)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pruner import storage
from pruner.analysis.model import Analysis, Scan
from pruner.analyzer import analyze, names_table
from pruner.costs import UNANALYSED, literals, needs_analysis, whole_files_reason, whole_reason
from pruner.errors import SqlSyntaxError
from pruner.evaluate import RowKeys, ScanSelection, select_scans, table_keys, table_selections
from pruner.expressions import Unknown
from pruner.parameters import Parameters
from pruner.reads import parquet_parts
from pruner.selection import Selection
from pruner.table import Table, TableSource, open_tables

__all__ = ["Explanation", "engine_reads", "explain", "explain_opened", "parquet_reads"]


@dataclass(frozen=True)
class Explanation:
    """Per scan: zones, rows and fragments selected of the total, and every term's story."""

    sql: str
    dialect: str
    scans: tuple[ScanSelection, ...]
    inner_joins_only: bool = False  # see pruner.analysis.model.Analysis
    # For tables on an object store: the requests and bytes pruner's planning read of the
    # stores (opening the tables, probing their indexes), None when no table is on one.
    store_reads: tuple[int, int] | None = None
    # Per table name the cost model reads whole although its scans selected less: why
    # (pruner.costs.whole_reason).
    read_whole: tuple[tuple[str, str], ...] = ()
    # Per table name the cost model reads some files of whole, where its scans selected
    # part of them: the wider selection and why (pruner.costs.whole_files_reason).
    read_files_whole: tuple[tuple[str, Selection, str], ...] = ()
    # False: a query does not analyse this SQL (pruner.costs.needs_analysis), it reads
    # every table whole; explain analyses it all the same, to say why no term could prune.
    analysed: bool = True

    def selections(self) -> dict[str, Selection]:
        """Per table name, the rows an engine must read (the union over its scans); the
        cost model may still read a table whole (:attr:`read_whole`), or some of its files
        (:attr:`read_files_whole`)."""
        return table_selections(list(self.scans))

    def chosen(self) -> dict[str, Selection]:
        """:meth:`selections` with the files the cost model reads whole added
        (:attr:`read_files_whole`); a table in :attr:`read_whole` the plan reads whole all
        the same, by the engine's own read."""
        wider = {name: selection for name, selection, _ in self.read_files_whole}
        return {name: wider.get(name, found) for name, found in self.selections().items()}

    def keys(self) -> dict[str, RowKeys]:
        """Per table name, the keys every row the query keeps of it holds (when known)."""
        return table_keys(list(self.scans))

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {
            "sql": self.sql,
            "dialect": self.dialect,
            "analysed_by_query": self.analysed,
        }
        if self.store_reads is not None:
            found["store_requests"], found["store_bytes_read"] = self.store_reads
        return found | {
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
                    "engine_reads": engine_reads(s),
                    "unindexed_fragments": list(s.unindexed_fragments),
                    "read_whole": dict(self.read_whole).get(s.scan.table),
                    "read_files_whole": self._files_whole(s),
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
            reads = engine_reads(s)
            if reads is not None:
                lines.append(f"  {_reads_text(reads)}")
            used_index = any(t.used_index for t in s.terms)
            if s.unindexed_fragments and s.table is not None and used_index:
                lines.append(f"  {_unindexed(s)}")
            for term in s.terms:
                if term.used_index:
                    detail = f"bloom index, {term.zones_selected:,} zones"
                    detail += f" ({term.reason})" if term.reason else ""
                else:
                    detail = f"not used: {term.reason}"
                lines.append(f"  {term.term}: {detail}")
            if not s.terms:
                lines.append("  no condition on this table: read whole")
            whole = dict(self.read_whole).get(s.scan.table)
            if whole is not None:
                lines.append(f"  {whole}")
            files = self._files_whole(s)
            if files is not None:
                lines.append(f"  {files['reason']}; {_reads_text(files['engine_reads'])}")
        if not self.analysed:
            lines.append(f"query: {UNANALYSED}")
        if self.store_reads is not None:
            requests, read = self.store_reads
            lines.append(
                f"object store: {requests:,} requests, {read:,} bytes read to plan (opening "
                "the tables, probing their indexes)"
            )
        return "\n".join(lines)

    def _files_whole(self, scan: ScanSelection) -> dict[str, Any] | None:
        """The cost model's files read whole of the scan's table: why, and what the engine
        reads then (:attr:`read_files_whole`), or None."""
        for name, selection, reason in self.read_files_whole:
            if name == scan.scan.table and scan.table is not None:
                return {"reason": reason, "engine_reads": parquet_reads(scan.table, selection)}
        return None


def _reads_text(reads: dict[str, int]) -> str:
    return (
        f"the engine reads {reads['row_groups_read']:,} of {reads['row_groups_total']:,} row "
        f"groups ({reads['rows_read']:,} rows) in {reads['files_read']:,} of "
        f"{reads['files_total']:,} files"
    )


def engine_reads(scan: ScanSelection) -> dict[str, int] | None:
    """What the engine reads of a Parquet table for the scan's selection: its row groups
    (a zone smaller than a row group still reads the whole group), or None (Lance reads
    the rows selected)."""
    table = scan.table
    if table is None or table.kind != "parquet":
        return None
    return parquet_reads(table, scan.selection)


def parquet_reads(table: Table, selection: Selection) -> dict[str, int]:
    """What the engine reads of Parquet ``table`` for ``selection`` (:func:`engine_reads`)."""
    files = table.files or {}
    parts = parquet_parts(table, selection)
    return {
        "row_groups_read": sum(
            len(p.file.row_group_rows) if p.row_groups is None else len(p.row_groups) for p in parts
        ),
        "row_groups_total": sum(len(f.row_group_rows) for f in files.values()),
        "rows_read": sum(p.rows() for p in parts),
        "files_read": len(parts),
        "files_total": len(files),
    }


def _unindexed(scan: ScanSelection) -> str:
    """Which fragments the index did not cover (read whole), and what to run about it."""
    table = scan.table
    assert table is not None
    count = len(scan.unindexed_fragments)
    if table.kind == "parquet":
        files = table.files or {}
        names = [files[f].relative for f in scan.unindexed_fragments if f in files][:3]
        what = f"{count:,} file{'s' if count != 1 else ''} ({', '.join(names)}"
        what += ", ...)" if count > len(names) else ")"
    else:
        what = f"{count:,} fragment{'s' if count != 1 else ''}"
    columns = sorted({t.column for t in scan.terms if t.used_index and t.column})
    column = columns[0] if columns else "COLUMN"
    return (
        f"{what} not covered by the index (new or changed since it was built): read whole; "
        f"to cover them run `pruner index update {table.path} --column {column}`"
    )


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
    before = storage.requests.snapshot()
    opened = open_tables(tables)
    found = explain_opened(sql, opened, dialect=dialect, parameters=parameters)
    if not any(storage.is_remote(table.path) for table in opened.values()):
        return found
    after = storage.requests.snapshot()
    reads = (after[0] - before[0], after[1] - before[1])
    return dataclasses.replace(found, store_reads=reads)


def explain_opened(
    sql: str,
    opened: Mapping[str, Table],
    *,
    dialect: str = "duckdb",
    parameters: Parameters = (),
    analysed: bool | None = None,
) -> Explanation:
    """:func:`explain` of tables :func:`pruner.table.open_tables` opened for this query
    (``analysed``: whether a query analyses it, when the caller knows: see
    :attr:`Explanation.analysed`)."""
    schemas = {name: table.schema for name, table in opened.items()}
    try:
        analysis = analyze(sql, schemas, dialect)
    except SqlSyntaxError as err:
        # SQL pruner's parser refuses is the engine's to accept or refuse: every table the
        # text names is read whole (the engine raises its own error, or answers).
        reason = f"{err}; the table is read whole"
        scans = tuple(
            Scan(name, name, Unknown(reason, "the whole statement"))
            for name in opened
            if names_table(name, sql)
        )
        analysis = Analysis(sql, dialect, scans)
    analysis = analysis.with_parameters(parameters)
    found = tuple(select_scans(analysis, opened))
    if analysed is None:
        named = {name: table for name, table in opened.items() if names_table(name, sql)}
        analysed = needs_analysis(sql, named)
    read_whole, files_whole = _cost_choices(found, dialect)
    return Explanation(
        sql,
        dialect,
        found,
        analysis.inner_joins_only,
        read_whole=read_whole,
        read_files_whole=files_whole,
        analysed=analysed,
    )


def _cost_choices(
    scans: tuple[ScanSelection, ...], dialect: str
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, Selection, str], ...]]:
    """The tables whose scans used an index that the cost model reads whole, and why; and
    those it reads some files of whole (for ``dialect``'s engine), the wider selection and
    why."""
    pruned = {s.scan.table: s.table for s in scans if s.table is not None and _used_index(s)}
    selections = table_selections(list(scans))
    whole, files_whole = [], []
    for name, table in pruned.items():
        selection = selections[name]
        count = sum(literals(s.scan.predicate) for s in scans if s.scan.table == name)
        wider = whole_files_reason(table, selection, count, dialect)
        if wider is not None:
            selection = wider[0]
        reason = whole_reason(table, selection, dialect)
        if reason is not None:
            whole.append((name, reason))
        elif wider is not None:
            files_whole.append((name, *wider))
    return tuple(whole), tuple(files_whole)


def _used_index(scan: ScanSelection) -> bool:
    return any(term.used_index for term in scan.terms)
