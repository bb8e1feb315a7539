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

A PATH may be a URI on an object store (``s3://bucket/key``, ``gs://``, ``az://``): the
standard ``AWS_*`` environment variables, or ``--storage-option KEY=VALUE`` (Lance-style
names, repeated), say how to reach it; neither is ever printed.

A query's analysis is kept between runs (in ``$PRUNER_CACHE_DIR``, else
``~/.cache/pruner``; ``PRUNER_CACHE_DIR=`` keeps none): the next run of a query of that shape,
whatever its literals, neither parses it nor imports sqlglot (:mod:`pruner.analysis.stored`).

Errors are one clear line on stderr and exit status 2; ``pruner --debug ...`` adds the
traceback.

One job per module: :mod:`~pruner.cli.parser` the arguments, :mod:`~pruner.cli.commands`
what each subcommand does, :mod:`~pruner.cli.printing` what they print (errors included);
what ``index list`` shows is :func:`pruner.index_status` (:mod:`pruner.status`).
"""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Sequence

__all__ = ["command", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pruner`` command run in this process (``argv``, else ``sys.argv``); returns the
    exit status. The garbage collector is paused as in :func:`command`, then resumed as it
    was."""
    enabled = gc.isenabled()
    try:
        return _run(argv, collect=enabled)
    finally:
        if enabled:
            gc.enable()


def command() -> None:
    """The ``pruner`` console script and ``python -m pruner.cli``: run, then exit.

    Python's cyclic garbage collector is paused while the command starts, and for the whole
    of a one-shot command (``query``, ``explain``, ``lookup``, ``index list``) until the
    process exits: what they make is modules, classes and one plan, all alive until the end,
    and each collection during the imports walks every object pyarrow, pandas (Lance's
    import), DuckDB and sqlglot made before it. The commands that work through data
    (``index build``, ``index update``, ``write``, ``demo``) collect as usual once their
    arguments are read.

    Once the command is done, every object left is frozen (:func:`gc.freeze`) before the
    exit: the interpreter's shutdown collects whatever the collector tracks, even paused,
    walking every object the imports made, which cost a ``pruner query`` ~0.1 s more than
    its exit without that walk (bench/startup.py). Nothing pruner writes waits for a
    collection: each file is written, closed and renamed before its command returns, and
    Python promises no ``__del__`` of an object still alive at exit.
    """
    status = _run(None, collect=gc.isenabled())
    gc.freeze()
    sys.exit(status)


def _run(argv: Sequence[str] | None, *, collect: bool) -> int:
    gc.disable()  # see command(); the imports below are made under it
    from pruner.analysis.stored import default_directory
    from pruner.analyzer import analyses_kept_in
    from pruner.cli.commands import _cmd_lookup, _missing
    from pruner.cli.parser import _parser
    from pruner.cli.printing import _one_line

    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if collect and not getattr(args, "one_shot", False):
        gc.enable()
    if extra:
        # KEY ... of `lookup` may follow its options (argparse gives them out as extras)
        if getattr(args, "run", None) is not _cmd_lookup or any(e.startswith("--") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.keys = [*args.keys, *extra]
    problem = _missing(args.path) if getattr(args, "path", None) is not None else None
    if problem is not None:
        print(f"pruner: error: {problem}", file=sys.stderr)
        return 2
    try:
        with analyses_kept_in(default_directory()):
            return int(args.run(args))
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(f"pruner: error: {_one_line(err)}", file=sys.stderr)
        return 2
