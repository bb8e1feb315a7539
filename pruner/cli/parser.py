"""The arguments of the ``pruner`` command: one subparser per subcommand, each naming the
function of :mod:`pruner.cli.commands` that runs it (``args.run``)."""

from __future__ import annotations

import argparse

from pruner.cli.commands import (
    _cmd_demo,
    _cmd_explain,
    _cmd_index_build,
    _cmd_index_list,
    _cmd_index_update,
    _cmd_lookup,
    _cmd_query,
    _cmd_write,
)
from pruner.index import DEFAULT_DELETED_SHARE, DEFAULT_ITEMS, DEFAULT_PROBABILITY, ENGINES

TABLE_HELP = (
    "a Lance dataset or a directory of Parquet files: a path, or a URI on an object store "
    "(s3://bucket/key, gs://, az://; see --storage-option)"
)


def _query_arguments(command: argparse.ArgumentParser, sql_help: str) -> None:
    """The SQL, its tables and its parameters: what explain and query both take."""
    command.add_argument("sql", help=sql_help)
    command.add_argument(
        "--table",
        action="append",
        metavar="NAME=PATH",
        help="a table the query names (PATH a path, or a URI such as s3://bucket/key)",
    )
    command.add_argument("--param", action="append", help="a value for ?, $1, ... in order")
    command.add_argument(
        "--version",
        action="append",
        metavar="NAME=VERSION",
        help="read table NAME at a version (a Lance or Delta version, an Iceberg snapshot id)",
    )
    command.add_argument(
        "--asof",
        action="append",
        metavar="NAME=TIME",
        help="read table NAME as it was at TIME (ISO 8601; without an offset, UTC)",
    )


def _storage_option(text: str) -> tuple[str, str]:
    """A --storage-option value: ``KEY=VALUE`` (the value may hold ``=``).

    The error does not repeat the text given: it may be a credential mistyped.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            "wants KEY=VALUE, such as aws_region=us-east-1; the value given has no KEY= "
            "part (it is not shown: it may be a credential)"
        )
    return key.strip(), value


def _store_arguments() -> argparse.ArgumentParser:
    """The options of a table on an object store, shared by every command that reads one
    (argparse's ``parents``): declared once, spelt the same everywhere."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument(
        "--storage-option",
        action="append",
        type=_storage_option,
        default=[],
        dest="storage_options",
        metavar="KEY=VALUE",
        help="how to reach a table given as a URI (s3://bucket/key, gs://, az://): a "
        "Lance-style storage option such as aws_endpoint=http://host:9000 or "
        "aws_region=us-east-1; repeat for each. Credentials are better left to the AWS_* "
        "environment variables (a command line is visible to other users)",
    )
    return shared


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pruner", description="Zone bloom indexes for Lance and Parquet"
    )
    parser.add_argument("--debug", action="store_true", help="on an error, print the traceback too")
    commands = parser.add_subparsers(dest="command", required=True)
    store = [_store_arguments()]

    index = commands.add_parser("index", help="build and inspect bloom indexes")
    index_commands = index.add_subparsers(dest="index_command", required=True)
    build = index_commands.add_parser("build", help="build a zone bloom index", parents=store)
    build.add_argument("path", help=TABLE_HELP)
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
        parents=store,
    )
    update.add_argument("path", help=TABLE_HELP)
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
    listing = index_commands.add_parser(
        "list", help="list the bloom indexes of a dataset", parents=store
    )
    listing.add_argument("path", help=TABLE_HELP)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=_cmd_index_list, one_shot=True)

    write = commands.add_parser(
        "write",
        help="append rows to a Lance dataset or Parquet directory and update its indexes",
        parents=store,
    )
    write.add_argument("path", help=TABLE_HELP)
    write.add_argument("input", help="a Parquet, CSV or Arrow IPC file of rows to append")
    write.add_argument(
        "--format", default="auto", choices=["auto", "parquet", "csv", "arrow"], help="of INPUT"
    )
    write.add_argument("--engine", default="local", choices=ENGINES, help="the index updates'")
    write.set_defaults(run=_cmd_write)

    look = commands.add_parser(
        "lookup", help="the fragments and row ranges that may hold each of many keys", parents=store
    )
    look.add_argument("path", help=TABLE_HELP)
    look.add_argument("keys", nargs="*", metavar="KEY", help="keys to look up")
    which = look.add_mutually_exclusive_group(required=True)
    which.add_argument("--column", help="an indexed column")
    which.add_argument(
        "--key", metavar="A,B[,C...]", help="an indexed compound key; each KEY a CSV line"
    )
    look.add_argument("--keys-file", help="a text file of keys, one per line")
    at = look.add_mutually_exclusive_group()
    at.add_argument("--version", type=int, help="a Lance or Delta version, an Iceberg snapshot id")
    at.add_argument("--asof", metavar="TIME", help="the version current at TIME (ISO 8601)")
    look.add_argument(
        "--json", action="store_true", help='[{"key": ..., "ranges": [[fragment, start, length]]}]'
    )
    look.set_defaults(run=_cmd_lookup, one_shot=True)

    explain = commands.add_parser(
        "explain", help="what each table scan of a query would read", parents=store
    )
    _query_arguments(explain, "the query")
    explain.add_argument("--dialect", default="duckdb", choices=["duckdb", "spark", "datafusion"])
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(run=_cmd_explain, one_shot=True)

    run = commands.add_parser(
        "query", help="run a query, each table pruned by its indexes", parents=store
    )
    _query_arguments(run, "the query, in the engine's SQL dialect")
    run.add_argument("--engine", default="duckdb", choices=["duckdb", "datafusion", "spark"])
    run.add_argument("--no-prune", action="store_true", help="read every table whole")
    run.add_argument("--format", default="table", choices=["table", "csv", "json"])
    run.set_defaults(run=_cmd_query, one_shot=True)

    demo = commands.add_parser("demo", help="generate data, build indexes, show pruning")
    demo.add_argument("--directory", default="demo_data")
    demo.add_argument("--rows", type=int, default=2_000_000)
    demo.add_argument("--fragments", type=int, default=20)
    demo.set_defaults(run=_cmd_demo)
    return parser
