"""What every benchmark shares: the header it prints first (the command that ran it and the
machine it ran on) and the order cases take turns in."""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


def print_header(*libraries: ModuleType) -> None:
    """The exact command, then Python and each library's version, CPUs and architecture."""
    print("command:", shlex.join([sys.executable, *sys.argv]))
    versions = ", ".join(f"{lib.__name__} {lib.__version__}" for lib in libraries)
    print(
        f"python {platform.python_version()}, {versions}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )


def rotated(cases: Sequence[T], rep: int) -> list[T]:
    """``cases`` in the order of round-robin repetition ``rep``: each starts a turn in
    turn, so each runs after each other as often. In one fixed order, the case run right
    after DataFusion alone took up to twice its time (5M rows: pruner on DuckDB 13.6 ms
    after DataFusion alone, 7.0 ms after nothing), DataFusion's threads still busy."""
    shift = rep % len(cases) if cases else 0
    return [*cases[shift:], *cases[:shift]]


def medians_of(
    cases: dict[str, Callable[[str], Any]],
    sqls: Sequence[str],
    repeat: int,
    rows: Callable[[Any], list[Any]],
) -> dict[str, float]:
    """Median milliseconds of each case over ``repeat`` round-robin turns (:func:`rotated`,
    after one warm-up run each), the SQL of turn ``r`` being ``sqls[r % len(sqls)]``; every
    case must answer a turn's SQL with the same ``rows`` of its answer."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for run in cases.values():
        run(sqls[0])
    for rep in range(repeat):
        sql = sqls[rep % len(sqls)]
        reference = None
        for name in rotated(list(cases), rep):
            began = time.perf_counter()
            answer = cases[name](sql)
            times[name].append(time.perf_counter() - began)
            got = rows(answer)
            if reference is None:
                reference = got
            elif got != reference:
                raise AssertionError(f"{name} answered differently for {sql!r}")
    return {name: statistics.median(t) * 1000 for name, t in times.items()}
