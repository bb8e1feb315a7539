"""The state of a table's bloom indexes: what ``pruner index list`` shows, for Python.

:func:`index_status` gives, per index of a Lance dataset or Parquet directory, its summary,
its coverage of the table as it is now, its state and what an update would do: exactly the
rows ``pruner index list PATH --json`` prints. It binds each index to the table
(:meth:`pruner.table.Table.index`), so it sits above :mod:`pruner.table`, not in
:mod:`pruner.index`. :func:`index_summary` and :func:`update_words` are the pieces the
``pruner`` command prints after a build and an update too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pruner import storage
from pruner.discover import located
from pruner.errors import IndexFormatError, PrunerError
from pruner.index import Key, UpdatePlan, ZoneIndex, plan_update, read_index_file
from pruner.table import Table, open_table

__all__ = ["index_status", "index_summary", "update_words"]


def index_status(
    source: storage.PathLike | Table,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> list[dict[str, object]]:
    """The bloom indexes of a Lance dataset or Parquet directory (a path, an object store
    URI, or a :class:`~pruner.table.Table` already open), one dict per index: each indexed
    column's, then each compound key's. The dicts are what ``pruner index list PATH
    --json`` prints (plain ``str``, ``int``, ``float``, ``bool``, ``list`` and ``dict``
    values, so ``json.loads(json.dumps(rows)) == rows``).

    A URI (``s3://bucket/key``) is reached with Lance-style ``storage_options``, or the
    ``AWS_*`` environment variables; the rows name it by URI, never with the options.

    An index that can be used has:

    - its summary (:func:`index_summary`): ``column``, ``zones``, ``fragments``,
      ``rows_spanned``, ``items``, ``probability``, ``filter_bytes``, ``zones_with_nulls``,
      ``hierarchy`` (``"in use"``, or why the companion is not);
    - its coverage of the table now (:meth:`pruner.table.TableIndex.coverage`):
      ``fragments_indexed``, ``fragments_total``, ``rows_indexed``, ``rows_total``,
      ``stale_zones``, ``damaged_fragments``, and ``rows_deleted`` (rows deleted from the
      fragments it covers, which its zones still span);
    - ``state``: ``current``, ``stale`` (fragments changed or added since the build: read
      whole) or ``damaged`` (some fragments read whole, or the index file under its
      companion fails its checksums); ``why`` says why in words, and ``advice`` the command
      that covers them again (both ``""`` when current);
    - ``update``: what :func:`pruner.index.update_index` would do (the counts of
      :meth:`pruner.index.UpdatePlan.summary` and ``words``), or ``{"error": ...}`` when it
      cannot plan one; ``{}`` for a compound key, whose ``key`` lists its columns.

    An index that cannot be used is ``{"column", "state", "error"}``, ``state`` being
    ``unreadable`` (the whole table is read; ``error`` says why) or ``unusable`` (the
    files disagree on the column's type, or a compound key's reason).

    Raises:
        InvalidParameterError: ``source`` is neither a Lance dataset nor Parquet files.
    """
    table = source if isinstance(source, Table) else open_table(located(source, storage_options))
    rows = [_column_status(table, column) for column in table.indexed_columns()]
    rows += [_key_status(table, key) for key in table.compound_keys()]
    return rows


def index_summary(index: ZoneIndex) -> dict[str, object]:
    """An index's size and shape: zones, fragments, rows spanned, filter parameters, zones
    holding nulls, and whether its hierarchy companion is in use."""
    if index.hierarchy is not None:
        filter_bytes = [index.hierarchy.zone_bytes]
    else:
        filter_bytes = sorted({len(index.filter_bytes(z)) for z in range(min(index.num_zones, 1))})
    return {
        "column": index.column,
        "zones": index.num_zones,
        "fragments": len(np.unique(index.fragment_id)),
        "rows_spanned": index.num_rows,
        "items": index.items,
        "probability": index.probability,
        "filter_bytes": filter_bytes[0] if filter_bytes else 0,
        "zones_with_nulls": int(index.has_null.sum()),
        "hierarchy": "in use" if index.hierarchy is not None else (index.hierarchy_note or "none"),
    }


def update_words(plan: UpdatePlan, done: bool = True) -> str:
    """What an update did (or would do), in words."""
    if plan.old is not None and plan.old.value_encoding == "parquet":
        return "made again from the Parquet files' own filters"
    if plan.current:
        return "already current" if done else "nothing to do"
    if plan.whole:
        verb = "indexed" if done else "index"
        return f"{verb} all {len(plan.order):,} fragments again ({plan.whole})"
    parts = [
        f"{verb} {len(ids):,}"
        for verb, ids in (
            ("added" if done else "add", plan.add),
            ("re-indexed" if done else "re-index", plan.rebuild),
            ("dropped" if done else "drop", plan.drop),
            ("renamed" if done else "rename", plan.renamed),
        )
        if ids
    ]
    kept = "kept" if done else "keep"
    were = "were" if done else "are"
    words = f"{', '.join(parts)} fragments; {kept} {len(plan.kept):,} as they {were}"
    if plan.segment:
        words += " (the new ones in a segment of their own)"
    return words


def _column_status(table: Table, column: str) -> dict[str, object]:
    """One index's summary, its coverage of the table now, and its state:
    ``current``, ``stale`` (fragments changed or added since the build: read whole),
    ``damaged`` (some fragments read whole) or ``unreadable`` (the whole table is read)."""
    try:
        bound = table.index(column)
    except IndexFormatError as err:
        return {"column": column, "state": "unreadable", "error": str(err)}
    if bound is None:
        reason = "the files disagree on its type" if column in table.mixed_types else "none"
        return {"column": column, "state": "unusable", "error": reason}
    coverage = bound.coverage(table.fragment_rows)
    state = "current"
    unindexed = coverage["fragments_total"] - coverage["fragments_indexed"]
    if coverage["stale_zones"] or unindexed:
        state = "stale"
    if coverage["damaged_fragments"]:
        state = "damaged"
    unit = "file" if table.kind == "parquet" else "fragment"
    why = []
    file_damage = _index_file_damage(bound.index)
    if file_damage:
        state = "damaged"
        why.append(file_damage)
    why.extend(_coverage_gaps(coverage, unit))
    update: dict[str, object] = {}
    command = "build"
    try:
        plan = plan_update(table.path, column)
    except PrunerError as err:
        update = {"error": str(err)}
    else:
        update = {**plan.summary(), "words": update_words(plan, done=False)}
        if not plan.current:
            command = "update"
    advice = ""
    if why or command == "update":
        advice = (
            f"those {unit}s are read whole; to cover them: " if why else "to bring it up to date: "
        ) + f"pruner index {command} {table.path} --column {column}"
    return {
        **index_summary(bound.index),
        **coverage,
        "rows_deleted": _deleted_rows(table, bound.index),
        "state": state,
        "why": "; ".join(why),
        "advice": advice,
        "update": update,
    }


def _deleted_rows(table: Table, index: ZoneIndex) -> int:
    """Rows deleted from the fragments the index covers (their zones still span them; an
    update re-indexes a fragment once its deleted share passes --deleted-share)."""
    if table.kind != "lance":
        return 0
    indexed = set(np.unique(index.fragment_id).tolist())
    return sum(
        int(f.metadata.deletion_file.num_deleted_rows or 0)
        for f in table.lance_fragments()
        if f.fragment_id in indexed and f.metadata.deletion_file is not None
    )


def _index_file_damage(index: ZoneIndex) -> str:
    """When queries read an index through hierarchy companions, whether the index files
    themselves (which Lance's scanner reads) are damaged: '' when they are whole."""
    if index.hierarchy is None:
        return ""
    damaged = 0
    for index_file in getattr(index.hierarchy, "index_files", []):
        try:
            plain = read_index_file(index_file, index.column)
        except IndexFormatError as err:
            return f"the index file is unreadable ({err}); pruner answers from its companion"
        if plain.damaged is not None:
            damaged += int(plain.damaged.sum())
    if damaged:
        return (
            f"{damaged:,} zones of the index file fail their checksums "
            "(pruner answers from its companion; Lance's scanner reads the file)"
        )
    return ""


def _key_status(table: Table, key: Key) -> dict[str, object]:
    """A compound index's summary, coverage and state, as :func:`_column_status` gives a
    column's (a compound index is rebuilt, never updated in part)."""
    bound = table.key_index(key)
    if isinstance(bound, str):
        return {"column": key.shown, "state": "unusable", "error": bound}
    coverage = bound.coverage(table.fragment_rows)
    unit = "file" if table.kind == "parquet" else "fragment"
    why = _coverage_gaps(coverage, unit)
    state = "damaged" if coverage["damaged_fragments"] else "stale" if why else "current"
    advice = ""
    if why:
        advice = (
            f"those {unit}s are read whole; to cover them: pruner index update {table.path} "
            f"--key {','.join(key.columns)}"
        )
    return {
        **index_summary(bound.index),
        **coverage,
        "column": key.shown,
        "key": list(key.columns),
        "rows_deleted": _deleted_rows(table, bound.index),
        "state": state,
        "why": "; ".join(why),
        "advice": advice,
        "update": {},
    }


def _coverage_gaps(coverage: dict[str, int], unit: str) -> list[str]:
    """What an index does not cover of its table, from :meth:`TableIndex.coverage`."""
    gaps = []
    unindexed = coverage["fragments_total"] - coverage["fragments_indexed"]
    if unindexed:
        gaps.append(f"{unindexed:,} {unit}{'s' if unindexed != 1 else ''} not indexed")
    if coverage["stale_zones"]:
        gaps.append(f"{coverage['stale_zones']:,} zones of changed {unit}s")
    if coverage["damaged_fragments"]:
        gaps.append(f"{coverage['damaged_fragments']:,} damaged {unit}s")
    return gaps
