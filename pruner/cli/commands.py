"""What each subcommand of the ``pruner`` command does, given its parsed arguments
(:mod:`pruner.cli.parser` names each one's ``run``); each returns the exit status."""

from __future__ import annotations

import argparse
import csv as text_csv
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pruner import formats, storage
from pruner.cli.printing import _print_index_list, _print_result, _row_groups_read
from pruner.errors import EngineError, InvalidParameterError, PrunerError
from pruner.index import build_index, update_index
from pruner.progress import progress_bar
from pruner.status import index_status, index_summary, update_words
from pruner.table import Table as PrunerTable
from pruner.table import open_table


def _storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    """The --storage-option pairs given (None when none: the ``AWS_*`` environment
    variables then say how to reach a store, as they do for Lance and obstore)."""
    pairs: list[tuple[str, str]] = getattr(args, "storage_options", None) or []
    return dict(pairs) or None


def _missing(text: str) -> str | None:
    """Why the table at ``text`` (a path or URI) cannot be there, as far as can be told
    without reading it: a local path that does not exist, or a URI of a scheme pruner does
    not read. A URI on an object store is not looked up here (that would need its
    options), nor a table of an Iceberg catalog (``iceberg:CATALOG.NAMESPACE.TABLE``); the
    layers below say clearly when either is missing."""
    if text.startswith(formats.iceberg.CATALOG_PREFIX):
        return None
    try:
        where = storage.location(text)
    except ValueError as err:
        return str(err)
    if storage.is_remote(where) or storage.exists(where):
        return None
    return f"{text} does not exist"


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
                storage_options=_storage_options(args),
            )
        seconds = time.perf_counter() - started
        info = index_summary(index)
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
                storage_options=_storage_options(args),
            )
        seconds = time.perf_counter() - started
        print(f"{column}: {update_words(plan)}; {index.num_zones:,} zones, in {seconds:.2f} s")
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
    table = open_table(
        args.path, args.version, storage_options=_storage_options(args), asof=args.asof
    )
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
    plans = append(args.path, rows, engine=args.engine, storage_options=_storage_options(args))
    seconds = time.perf_counter() - started
    print(f"appended {rows.num_rows:,} rows to {args.path} in {seconds:.2f} s")
    for column, plan in plans.items():
        print(f"{column}: {update_words(plan)}")
    if not plans:
        print("no bloom indexes to update (build one with `pruner index build`)")
    return 0


def _cmd_index_list(args: argparse.Namespace) -> int:
    rows = index_status(args.path, storage_options=_storage_options(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    _print_index_list(rows, args.path)
    return 0


def _table_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The --table pairs, each a path, or the table opened at its --version or --asof."""
    tables: dict[str, Any] = {}
    for pair in args.table or []:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise InvalidParameterError(f"--table wants NAME=PATH, got {pair!r}")
        problem = _missing(path)
        if problem is not None:
            raise InvalidParameterError(f"table {name}: {problem}")
        tables[name] = path
    versions = _named(args.version, "--version", "NAME=VERSION", tables)
    times = _named(args.asof, "--asof", "NAME=TIME", tables)
    for name in versions.keys() | times.keys():
        version = versions.get(name)
        if version is not None and not version.lstrip("-").isdecimal():
            raise InvalidParameterError(f"--version {name}= wants an integer, got {version!r}")
        tables[name] = open_table(
            tables[name],
            None if version is None else int(version),
            storage_options=_storage_options(args),
            asof=times.get(name),
        )
    return tables


def _named(pairs: list[str] | None, flag: str, form: str, tables: dict[str, Any]) -> dict[str, str]:
    """``flag``'s NAME=VALUE pairs, each naming a --table."""
    found = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not value:
            raise InvalidParameterError(f"{flag} wants {form}, got {pair!r}")
        if name not in tables:
            raise InvalidParameterError(f"{flag} {pair!r}: no --table {name}=PATH is given")
        found[name] = value
    return found


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

    tables = _table_arguments(args)
    parameters = [_parameter(p) for p in args.param or []]
    try:
        explanation = explain(
            args.sql,
            tables,
            dialect=args.dialect,
            parameters=parameters,
            storage_options=_storage_options(args),
        )
    except PrunerError:
        raise
    except Exception as err:  # the engine's own error: one line (the dialect's engine)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EngineError(f"{args.dialect}: {first}") from err
    print(explanation.to_json_text() if args.json else str(explanation))
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from pruner.engines import adapter, timed_query

    opening = None
    if args.engine == "duckdb":
        # A new process: DuckDB's database takes ~25 ms to open, mostly outside the GIL; it
        # opens in a thread while the query is planned (sqlglot's import, the index probes),
        # and the query waits for it (the adapter's lock). Joined before leaving, also on
        # an error, so no thread is left inside DuckDB at the exit.
        opening = threading.Thread(target=adapter("duckdb").shared_connection, daemon=True)
        opening.start()
    try:
        tables = _table_arguments(args)
        parameters = [_parameter(p) for p in args.param or []]
        run = timed_query(
            args.sql,
            tables,
            engine=args.engine,
            parameters=parameters,
            prune=not args.no_prune,
            storage_options=_storage_options(args),
        )
    finally:
        if opening is not None:
            opening.join()
    if run.result is None:  # the engine's own error (unknown table, bad SQL...)
        err = run.error
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EngineError(f"{args.engine}: {first_line}") from err
    _print_result(run.result, args.format, args.engine)
    read, total = run.plan.rows()
    if args.no_prune:
        scanned = f"not pruned: read all {total:,} rows"
    else:
        selected, zones = run.plan.zones()
        scanned = f"zones scanned {selected:,} / {zones:,} ({read:,} of {total:,} rows)"
        scanned += _row_groups_read(run.plan)
    sys.stdout.flush()  # the result before the summary, also when both go to one file
    print(
        f"{scanned}, {run.result.num_rows:,} rows out, {run.seconds * 1000:.1f} ms", file=sys.stderr
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from pruner.demo import run_demo

    return run_demo(Path(args.directory), rows=args.rows, fragments=args.fragments)
