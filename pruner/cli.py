"""The ``pruner`` command.

``pruner index build PATH --column COL``   build (and commit/store) zone bloom indexes
                                           (``--engine spark``: as a Spark job)
``pruner index update PATH --column COL``  index only what changed since the build
``pruner index list PATH [--json]``        the bloom indexes of a dataset, and what an
                                           update would do
``pruner write PATH INPUT``                 append a Parquet/CSV/Arrow file's rows, then
                                           update the table's indexes
``pruner explain "SQL" --table NAME=PATH``  what each table scan would read, and why
``pruner query "SQL" --table NAME=PATH``    run it on an engine, reading only what may match
``pruner demo``                            generate events data, index it, run the examples

Errors are one clear line on stderr and exit status 2; ``pruner --debug ...`` adds the
traceback.
"""

from __future__ import annotations

import argparse
import csv as text_csv
import errno
import io
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as csv
from rich.console import Console
from rich.table import Table

from pruner.errors import EngineError, IndexFormatError, InvalidParameterError, PrunerError
from pruner.index import (
    DEFAULT_DELETED_SHARE,
    DEFAULT_ITEMS,
    DEFAULT_PROBABILITY,
    ENGINES,
    Key,
    UpdatePlan,
    ZoneIndex,
    build_index,
    plan_update,
    read_index_file,
    update_index,
)
from pruner.progress import progress_bar
from pruner.table import Table as PrunerTable
from pruner.table import open_table

__all__ = ["main"]

console = Console(stderr=True)


def _summary(index: ZoneIndex) -> dict[str, object]:
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


def _key_columns(text: str) -> list[str]:
    """A --key value: columns separated by commas."""
    columns = [c.strip() for c in text.split(",")]
    if len(columns) < 2 or not all(columns):
        raise InvalidParameterError(
            f"--key wants two or more columns separated by commas (--key a,b), got {text!r}"
        )
    return columns


def _cmd_index_build(args: argparse.Namespace) -> int:
    targets: list[str | list[str]] = [*(args.column or []), *map(_key_columns, args.key or [])]
    if not targets:
        raise InvalidParameterError(
            "name what to index: --column C, or --key a,b for a compound key"
        )
    for column in targets:
        started = time.perf_counter()
        name = column if isinstance(column, str) else "(" + ", ".join(column) + ")"
        with progress_bar(f"indexing {name}") as progress:
            index = build_index(
                args.path,
                column,
                items=args.items,
                probability=args.probability,
                progress=progress,
                engine=args.engine,
                from_parquet_filters=args.from_parquet_filters,
            )
        seconds = time.perf_counter() - started
        info = _summary(index)
        print(
            f"{name}: {info['zones']:,} zones over {info['fragments']} fragments, "
            f"{info['filter_bytes']:,} B per filter, built in {seconds:.2f} s"
        )
    return 0


def _cmd_index_update(args: argparse.Namespace) -> int:
    targets: list[str | list[str]] = [*(args.column or []), *map(_key_columns, args.key or [])]
    if not targets:
        raise InvalidParameterError("name what to update: --column C, or --key a,b")
    for target in targets:
        started = time.perf_counter()
        column = target if isinstance(target, str) else "(" + ", ".join(target) + ")"
        with progress_bar(f"updating {column}") as progress:
            index, plan = update_index(
                args.path,
                target,
                deleted_share=args.deleted_share,
                progress=progress,
                engine=args.engine,
            )
        seconds = time.perf_counter() - started
        print(f"{column}: {_update_words(plan)}; {index.num_zones:,} zones, in {seconds:.2f} s")
        if plan.hierarchy:
            print(f"{column}: no hierarchy companion: {plan.hierarchy}")
    return 0


def _typed_tuples(table: PrunerTable, key: str, texts: list[str]) -> list[tuple[Any, ...]]:
    """Keys of a compound key given as CSV lines (``7,abc``; quote a value holding a comma:
    ``7,"a,b"``), each field typed as :func:`_typed_keys` types a column's keys."""
    columns = _key_columns(key)
    for column in columns:
        if column not in table.schema.names:
            raise InvalidParameterError(
                f"column {column!r} is not in {table.path}; its columns are "
                f"{', '.join(table.schema.names)}"
            )
    rows = list(text_csv.reader(texts))
    for text, row in zip(texts, rows, strict=True):
        if len(row) != len(columns):
            raise InvalidParameterError(
                f"key {text!r} has {len(row)} fields, but the key ({key}) has {len(columns)}"
            )
    typed = [
        _typed_keys([row[i] for row in rows], table.schema.field(c).type)
        for i, c in enumerate(columns)
    ]
    return list(zip(*typed, strict=True))


def _typed_keys(texts: list[str], arrow_type: Any) -> list[Any]:
    """Keys given as text, as the values a user meant: numbers on a numeric column (text
    that is not one stays text, which matches no number), text on any other."""
    import pyarrow as pa

    convert: Any = None
    if pa.types.is_integer(arrow_type):
        convert = int
    elif pa.types.is_floating(arrow_type):
        convert = float
    keys: list[Any] = []
    for text in texts:
        try:
            keys.append(convert(text) if convert is not None else text)
        except ValueError:
            keys.append(text)
    return keys


def _cmd_lookup(args: argparse.Namespace) -> int:
    from pruner.lookup import lookup

    texts = list(args.keys)
    if args.keys_file:
        with open(args.keys_file, encoding="utf-8") as handle:
            texts += [line.rstrip("\r\n") for line in handle if line.strip()]
    if not texts:
        raise InvalidParameterError("give the keys to look up: KEY ... or --keys-file FILE")
    table = open_table(args.path)
    if args.key:
        found = lookup(table, _key_columns(args.key), _typed_tuples(table, args.key, texts))
    elif args.column not in table.schema.names:
        raise InvalidParameterError(
            f"column {args.column!r} is not in {args.path}; its columns are "
            f"{', '.join(table.schema.names)}"
        )
    else:
        column_type = table.schema.field(args.column).type
        found = lookup(table, args.column, _typed_keys(texts, column_type))
    if args.json:
        print(json.dumps(found.to_json()))
        return 0
    for position, key in enumerate(found.keys):
        ranges = found.ranges(position)
        if not ranges:
            print(f"{key}: no rows")
            continue
        rows = sum(length for _, _, length in ranges)
        fragments = len({fragment for fragment, _, _ in ranges})
        print(f"{key}: {len(ranges):,} ranges, {rows:,} rows in {fragments:,} fragments")
    return 0


def _cmd_write(args: argparse.Namespace) -> int:
    from pruner.append import append, read_input

    rows = read_input(args.input, args.format)
    started = time.perf_counter()
    plans = append(args.path, rows, engine=args.engine)
    seconds = time.perf_counter() - started
    print(f"appended {rows.num_rows:,} rows to {args.path} in {seconds:.2f} s")
    for column, plan in plans.items():
        print(f"{column}: {_update_words(plan)}")
    if not plans:
        print("no bloom indexes to update (build one with `pruner index build`)")
    return 0


def _update_words(plan: UpdatePlan, done: bool = True) -> str:
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


def _index_status(table: PrunerTable, column: str) -> dict[str, object]:
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
    if unindexed:
        why.append(f"{unindexed:,} {unit}{'s' if unindexed != 1 else ''} not indexed")
    if coverage["stale_zones"]:
        why.append(f"{coverage['stale_zones']:,} zones of changed {unit}s")
    if coverage["damaged_fragments"]:
        why.append(f"{coverage['damaged_fragments']:,} damaged {unit}s")
    update: dict[str, object] = {}
    command = "build"
    try:
        plan = plan_update(table.path, column)
    except PrunerError as err:
        update = {"error": str(err)}
    else:
        update = {**plan.summary(), "words": _update_words(plan, done=False)}
        if not plan.current:
            command = "update"
    advice = ""
    if why or command == "update":
        advice = (
            f"those {unit}s are read whole; to cover them: " if why else "to bring it up to date: "
        ) + f"pruner index {command} {table.path} --column {column}"
    return {
        **_summary(bound.index),
        **coverage,
        "rows_deleted": _deleted_rows(table, bound.index),
        "state": state,
        "why": "; ".join(why),
        "advice": advice,
        "update": update,
    }


def _deleted_rows(table: PrunerTable, index: ZoneIndex) -> int:
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


def _key_status(table: PrunerTable, key: Key) -> dict[str, object]:
    """A compound index's summary, coverage and state, as :func:`_index_status` gives a
    column's (a compound index is rebuilt, never updated in part)."""
    bound = table.key_index(key)
    if isinstance(bound, str):
        return {"column": key.shown, "state": "unusable", "error": bound}
    coverage = bound.coverage(table.fragment_rows)
    unit = "file" if table.kind == "parquet" else "fragment"
    unindexed = coverage["fragments_total"] - coverage["fragments_indexed"]
    why = []
    if unindexed:
        why.append(f"{unindexed:,} {unit}{'s' if unindexed != 1 else ''} not indexed")
    if coverage["stale_zones"]:
        why.append(f"{coverage['stale_zones']:,} zones of changed {unit}s")
    if coverage["damaged_fragments"]:
        why.append(f"{coverage['damaged_fragments']:,} damaged {unit}s")
    state = "damaged" if coverage["damaged_fragments"] else "stale" if why else "current"
    advice = ""
    if why:
        advice = (
            f"those {unit}s are read whole; to cover them: pruner index update {table.path} "
            f"--key {','.join(key.columns)}"
        )
    return {
        **_summary(bound.index),
        **coverage,
        "column": key.shown,
        "key": list(key.columns),
        "rows_deleted": _deleted_rows(table, bound.index),
        "state": state,
        "why": "; ".join(why),
        "advice": advice,
        "update": {},
    }


def _cmd_index_list(args: argparse.Namespace) -> int:
    table = open_table(args.path)
    rows = [_index_status(table, column) for column in table.indexed_columns()]
    rows += [_key_status(table, key) for key in table.compound_keys()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no bloom indexes in {args.path}")
        return 0
    shown = Table(
        "column", "state", "zones", "fragments indexed", "rows indexed", "filter", "hierarchy"
    )
    advice = []
    for row in rows:
        if "error" in row:
            shown.add_row(str(row["column"]), str(row["state"]), str(row["error"]))
            continue
        state = str(row["state"]) + (f" ({row['why']})" if row["why"] else "")
        shown.add_row(
            str(row["column"]),
            state,
            f"{row['zones']:,}",
            f"{row['fragments_indexed']:,} / {row['fragments_total']:,}",
            f"{row['rows_indexed']:,} / {row['rows_total']:,}"
            + (f" ({row['rows_deleted']:,} deleted)" if row["rows_deleted"] else ""),
            f"{row['filter_bytes']:,} B, {row['items']:,} items, p={row['probability']}",
            str(row["hierarchy"]),
        )
        if row["advice"]:
            advice.append(f"{row['column']}: {row['advice']}")
            update = row["update"]
            if isinstance(update, dict) and "words" in update:
                advice.append(f"{row['column']}: an update would {update['words']}")
    console = Console() if Console().is_terminal else Console(width=160)  # piped: no wrapping
    console.print(shown)
    for line in advice:
        console.print(line, soft_wrap=True)
    return 0


def _table_arguments(pairs: list[str]) -> dict[str, str]:
    tables: dict[str, str] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise InvalidParameterError(f"--table wants NAME=PATH, got {pair!r}")
        if not Path(path).exists():
            raise InvalidParameterError(f"table {name}: {path} does not exist")
        tables[name] = path
    return tables


def _parameter(text: str) -> object:
    """A --param value: an integer, a float, NULL, or else a string."""
    if text.upper() == "NULL":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _cmd_explain(args: argparse.Namespace) -> int:
    from pruner.engines import explain

    tables = _table_arguments(args.table or [])
    parameters = [_parameter(p) for p in args.param or []]
    try:
        explanation = explain(args.sql, tables, dialect=args.dialect, parameters=parameters)
    except PrunerError:
        raise
    except Exception as err:  # the engine's own error: one line (the dialect's engine)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EngineError(f"{args.dialect}: {first}") from err
    print(explanation.to_json_text() if args.json else str(explanation))
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from pruner.engines import timed_query

    tables = _table_arguments(args.table or [])
    parameters = [_parameter(p) for p in args.param or []]
    run = timed_query(
        args.sql, tables, engine=args.engine, parameters=parameters, prune=not args.no_prune
    )
    if run.result is None:  # the engine's own error (unknown table, bad SQL...)
        err = run.error
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EngineError(f"{args.engine}: {first_line}") from err
    _print_result(run.result, args.format)
    read, total = run.plan.rows()
    if args.no_prune:
        scanned = f"not pruned: read all {total:,} rows"
    else:
        selected, zones = run.plan.zones()
        scanned = f"zones scanned {selected:,} / {zones:,} ({read:,} of {total:,} rows)"
        scanned += _row_groups_read(run.plan)
    sys.stdout.flush()  # the result before the summary, also when both go to one file
    console.print(
        f"{scanned}, {run.result.num_rows:,} rows out, {run.seconds * 1000:.1f} ms", soft_wrap=True
    )
    return 0


def _row_groups_read(prepared: Any) -> str:
    """What the engine reads of the Parquet tables, where a row group holds more than the
    zones selected in it: ``; Parquet row groups read 3 / 60 (750,000 rows)``."""
    from pruner.explain import engine_reads

    if prepared.explanation is None:
        return ""
    found = [r for r in map(engine_reads, prepared.explanation.scans) if r is not None]
    if not found:
        return ""
    groups = sum(r["row_groups_read"] for r in found)
    of = sum(r["row_groups_total"] for r in found)
    rows = sum(r["rows_read"] for r in found)
    return f"; Parquet row groups read {groups:,} / {of:,} ({rows:,} rows)"


def _print_result(result: pa.Table, form: str) -> None:
    result = _without_views(result)
    if form == "csv":
        buffer = io.BytesIO()
        csv.write_csv(result, buffer)
        sys.stdout.write(buffer.getvalue().decode())
    elif form == "json":
        print(json.dumps(result.to_pylist(), default=str, indent=1))
    else:
        table = Table(*result.schema.names)
        for row in result.to_pylist():
            table.add_row(*("NULL" if v is None else str(v) for v in row.values()))
        Console().print(table)


def _without_views(result: pa.Table) -> pa.Table:
    """``string_view`` / ``binary_view`` columns (DataFusion returns them for strings read
    from Parquet) as ``string`` / ``binary``: pyarrow's CSV writer refuses view types."""
    fields = []
    for f in result.schema:
        if pa.types.is_string_view(f.type):
            f = f.with_type(pa.string())
        elif pa.types.is_binary_view(f.type):
            f = f.with_type(pa.binary())
        fields.append(f)
    schema = pa.schema(fields, metadata=result.schema.metadata)
    return result if schema.equals(result.schema) else result.cast(schema)


def _cmd_demo(args: argparse.Namespace) -> int:
    from pruner.demo import run_demo

    return run_demo(Path(args.directory), rows=args.rows, fragments=args.fragments)


def _query_arguments(command: argparse.ArgumentParser, sql_help: str) -> None:
    """The SQL, its tables and its parameters: what explain and query both take."""
    command.add_argument("sql", help=sql_help)
    command.add_argument(
        "--table", action="append", metavar="NAME=PATH", help="a table the query names"
    )
    command.add_argument("--param", action="append", help="a value for ?, $1, ... in order")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pruner", description="Zone bloom indexes for Lance and Parquet"
    )
    parser.add_argument("--debug", action="store_true", help="on an error, print the traceback too")
    commands = parser.add_subparsers(dest="command", required=True)

    index = commands.add_parser("index", help="build and inspect bloom indexes")
    index_commands = index.add_subparsers(dest="index_command", required=True)
    build = index_commands.add_parser("build", help="build a zone bloom index")
    build.add_argument("path", help="a Lance dataset or a directory of Parquet files")
    build.add_argument("--column", action="append", help="column to index")
    build.add_argument(
        "--key",
        action="append",
        metavar="A,B[,C...]",
        help="a compound key to index: its columns, separated by commas",
    )
    build.add_argument("--items", type=int, default=DEFAULT_ITEMS, help="rows per zone")
    build.add_argument(
        "--probability", type=float, default=DEFAULT_PROBABILITY, help="false-positive rate"
    )
    build.add_argument(
        "--engine",
        default="local",
        choices=ENGINES,
        help="index the fragments in threads here (local) or as Spark tasks (spark)",
    )
    build.add_argument(
        "--from-parquet-filters",
        action="store_true",
        help="make the index from the Parquet files' own bloom filters (one zone per row "
        "group) without reading the data",
    )
    build.set_defaults(run=_cmd_index_build)
    update = index_commands.add_parser(
        "update",
        help="bring a zone bloom index up to date: index only the fragments or files it does "
        "not cover, drop the ones that are gone",
    )
    update.add_argument("path", help="a Lance dataset or a directory of Parquet files")
    update.add_argument("--column", action="append", help="indexed column")
    update.add_argument(
        "--key",
        action="append",
        metavar="A,B[,C...]",
        help="an indexed compound key",
    )
    update.add_argument(
        "--deleted-share",
        type=float,
        default=DEFAULT_DELETED_SHARE,
        help="re-index a fragment whose deleted rows pass this share of its rows "
        f"(default {DEFAULT_DELETED_SHARE})",
    )
    update.add_argument(
        "--engine",
        default="local",
        choices=ENGINES,
        help="index the fragments in threads here (local) or as Spark tasks (spark)",
    )
    update.set_defaults(run=_cmd_index_update)
    listing = index_commands.add_parser("list", help="list the bloom indexes of a dataset")
    listing.add_argument("path")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=_cmd_index_list)

    write = commands.add_parser(
        "write", help="append rows to a Lance dataset or Parquet directory and update its indexes"
    )
    write.add_argument("path", help="a Lance dataset or a directory of Parquet files")
    write.add_argument("input", help="a Parquet, CSV or Arrow IPC file of rows to append")
    write.add_argument(
        "--format", default="auto", choices=["auto", "parquet", "csv", "arrow"], help="of INPUT"
    )
    write.add_argument("--engine", default="local", choices=ENGINES, help="the index updates'")
    write.set_defaults(run=_cmd_write)

    look = commands.add_parser(
        "lookup", help="the fragments and row ranges that may hold each of many keys"
    )
    look.add_argument("path", help="a Lance dataset or a directory of Parquet files")
    look.add_argument("keys", nargs="*", metavar="KEY", help="keys to look up")
    which = look.add_mutually_exclusive_group(required=True)
    which.add_argument("--column", help="an indexed column")
    which.add_argument(
        "--key", metavar="A,B[,C...]", help="an indexed compound key; each KEY a CSV line"
    )
    look.add_argument("--keys-file", help="a text file of keys, one per line")
    look.add_argument(
        "--json", action="store_true", help='[{"key": ..., "ranges": [[fragment, start, length]]}]'
    )
    look.set_defaults(run=_cmd_lookup)

    explain = commands.add_parser("explain", help="what each table scan of a query would read")
    _query_arguments(explain, "the query")
    explain.add_argument("--dialect", default="duckdb", choices=["duckdb", "spark", "datafusion"])
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(run=_cmd_explain)

    run = commands.add_parser("query", help="run a query, each table pruned by its indexes")
    _query_arguments(run, "the query, in the engine's SQL dialect")
    run.add_argument("--engine", default="duckdb", choices=["duckdb", "datafusion", "spark"])
    run.add_argument("--no-prune", action="store_true", help="read every table whole")
    run.add_argument("--format", default="table", choices=["table", "csv", "json"])
    run.set_defaults(run=_cmd_query)

    demo = commands.add_parser("demo", help="generate data, build indexes, show pruning")
    demo.add_argument("--directory", default="demo_data")
    demo.add_argument("--rows", type=int, default=2_000_000)
    demo.add_argument("--fragments", type=int, default=20)
    demo.set_defaults(run=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pruner`` command; returns the exit status."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # KEY ... of `lookup` may follow its options (argparse gives them out as extras)
        if getattr(args, "run", None) is not _cmd_lookup or any(e.startswith("--") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.keys = [*args.keys, *extra]
    if getattr(args, "path", None) is not None and not Path(args.path).exists():
        print(f"pruner: error: {args.path} does not exist", file=sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(f"pruner: error: {_one_line(err)}", file=sys.stderr)
        return 2


_STORAGE_ERRORS = {
    errno.EACCES: "pruner reads the table and writes in its index folders: check their permissions",
    errno.EPERM: "pruner reads the table and writes in its index folders: check their permissions",
    errno.EROFS: "the file system is read-only: build or update the index where it can write",
    errno.ENOSPC: "free some space and run again",
    errno.EDQUOT: "the disk quota is used up: free some space and run again",
    errno.EFBIG: "a file would pass the size limit (ulimit -f): raise it and run again",
}
"""Errors of the storage under a table, and what to do about each."""


def _one_line(err: Exception) -> str:
    """An error as one line: pruner's own as they are (they say what to do); a missing
    engine extra with the install command; anything else with its type, and how to see
    the traceback."""
    if isinstance(err, PrunerError):
        return str(err)
    if isinstance(err, ImportError):
        return f"{err} (a missing extra: pip install the extra the message names)"
    if isinstance(err, OSError) and err.errno in _STORAGE_ERRORS:
        where = f" ({err.filename})" if err.filename else ""
        return (
            f"{err.strerror}{where}: {_STORAGE_ERRORS[err.errno]}; an index is replaced "
            "only after its new files are written, so the old one is still in use"
        )
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first} (run with --debug for the traceback)"


if __name__ == "__main__":
    sys.exit(main())
