"""The harness every benchmark runs in: its arguments, the header it prints first, the one
timing loop (cases side by side, round-robin, each turn in its own shuffled order), and the one
writer of its output (markdown tables, targets met or missed, notes, plots, a docs page).

Importing it puts the checkout first on ``sys.path``, so a benchmark run as a script uses the
checkout's ``pruner`` whether or not it is installed (import it before ``pruner``).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import random
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T = TypeVar("T")


# ------------------------------------------------------------------------------ arguments


def parser(doc: str | None, **defaults: Any) -> argparse.ArgumentParser:
    """The arguments of a benchmark whose docstring is ``doc``: the shared ``--rows`` (a
    list default: several sizes), ``--fragments`` and ``--repeat``, each where given a
    default here; the benchmark adds its own."""
    made = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if "rows" in defaults:
        several = isinstance(defaults["rows"], list)
        made.add_argument(
            "--rows", type=int, nargs="*" if several else None, default=defaults["rows"]
        )
    if "fragments" in defaults:
        made.add_argument("--fragments", type=int, default=defaults["fragments"])
    if "repeat" in defaults:
        made.add_argument(
            "--repeat", type=int, default=defaults["repeat"], help="timed turns per case"
        )
    return made


def parse(made: argparse.ArgumentParser, *libraries: ModuleType) -> argparse.Namespace:
    """The arguments, checked, after which the header (:func:`print_header`) is printed."""
    args = made.parse_args()
    rows = getattr(args, "rows", None)
    sizes = rows if isinstance(rows, list) else [] if rows is None else [rows]
    fragments = getattr(args, "fragments", 1)
    if getattr(args, "repeat", 1) < 1 or fragments < 1 or any(r < fragments for r in sizes):
        made.error("need rows >= fragments >= 1 and repeat >= 1")
    print_header(*libraries)
    return args


def print_header(*libraries: ModuleType) -> None:
    """The exact command, then Python and each library's version, CPUs and architecture."""
    print("command:", shlex.join([sys.executable, *sys.argv]))
    versions = ", ".join(f"{lib.__name__} {lib.__version__}" for lib in libraries)
    print(
        f"python {platform.python_version()}, {versions}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )


# --------------------------------------------------------------------------------- timing


@dataclass
class Case:
    """One case of a comparison: ``run(input)`` is timed; ``setup()``, where given, runs
    untimed before each call (say, putting back what the previous call changed)."""

    name: str
    run: Callable[[Any], Any]
    setup: Callable[[], object] | None = None
    seconds: list[float] = field(default_factory=list)
    answer: Any = None  # the last call's

    def median(self) -> float:
        """Median milliseconds."""
        return statistics.median(self.seconds) * 1000

    def p90(self) -> float:
        return float(np.percentile(self.seconds, 90)) * 1000

    def best(self) -> float:
        return min(self.seconds) * 1000


def turn_order(cases: Sequence[T], turn: int) -> list[T]:
    """``cases`` in the order of round-robin turn ``turn``: a shuffle seeded by the turn, so
    over the turns each case starts a turn, and runs right after each other case, about as
    often. What ran just before a case changes its time: a case run right after DataFusion
    alone took up to twice its time (5M rows: pruner on DuckDB 13.6 ms after DataFusion
    alone, 7.0 ms after nothing), DataFusion's threads still busy; and one run right after a
    table reopened (Lance loading its index anew) 1.4x its time after a warm lookup. A
    rotation of one order, as this was, always put each case after the same one."""
    order = list(cases)
    random.Random(turn).shuffle(order)
    return order


def measure(
    cases: Mapping[str, Callable[[Any], Any]] | Iterable[Case],
    inputs: Sequence[Any] = (None,),
    repeat: int = 1,
    *,
    warmup: int = 1,
    check: Callable[[Any, Any], Any] | None = None,
) -> dict[str, Case]:
    """The cases timed side by side: ``warmup`` untimed turns, then ``repeat`` timed ones.
    In each turn every case runs once on the turn's input (turn ``r``:
    ``inputs[r % len(inputs)]``), in the order :func:`turn_order` gives the turn; where
    ``check`` is given, ``check(input, answer)`` must come out the same for every case of a
    turn. A case's previous answer is released before its next call, untimed."""
    listed = [Case(n, r) for n, r in cases.items()] if isinstance(cases, Mapping) else [*cases]
    named = {case.name: case for case in listed}
    assert len(named) == len(listed), "case names must differ"
    for turn in range(-warmup, repeat):
        value = inputs[turn % len(inputs)]
        reference: list[Any] = []
        for case in turn_order(listed, turn):
            if case.setup is not None:
                case.setup()
            case.answer = None
            began = time.perf_counter()
            case.answer = case.run(value)
            elapsed = time.perf_counter() - began
            if turn >= 0:
                case.seconds.append(elapsed)
            if check is not None:
                got = check(value, case.answer)
                if not reference:
                    reference.append(got)
                elif got != reference[0]:
                    raise AssertionError(f"{case.name} answered differently for {value!r}")
    return named


def timed(run: Callable[[], T]) -> tuple[float, T]:
    """Seconds of one call, and its answer: a one-off cost (a first call, a session's
    start), where :func:`measure` times what is compared."""
    began = time.perf_counter()
    answer = run()
    return time.perf_counter() - began, answer


def sorted_rows(_: object, table: Any) -> list[tuple[Any, ...]]:
    """An Arrow answer's rows in a fixed order (a ``check`` of :func:`measure`)."""
    columns = [c.to_pylist() for c in table.columns]
    return sorted(zip(*columns, strict=True), key=repr)


# --------------------------------------------------------------------------------- output


def verdict(value: float, limit: float, above: bool = False) -> str:
    return "met" if (value >= limit if above else value <= limit) else "MISSED"


def markdown(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table (rich's MARKDOWN box, columns aligned; numbers to the right)."""
    cells = [[str(cell).replace("|", "\\|") for cell in row] for row in rows]
    table = Table(box=box.MARKDOWN)
    for i, name in enumerate(columns):
        numeric = all(re.fullmatch(r"-|-?[\d.,]+x?", row[i]) for row in cells)
        table.add_column(name, justify="right" if cells and numeric else "left")
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    console = Console(file=io.StringIO(), width=100_000, color_system=None, highlight=False)
    console.print(table)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in lines if line.strip())


@dataclass
class Report:
    """What a benchmark prints (tables, targets met or missed, notes), kept to be written
    as a markdown page too."""

    sections: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def table(self, title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        text = f"### {title}\n\n{markdown(columns, rows)}"
        self.sections.append(text)
        print(f"\n{text}\n", flush=True)

    def target(self, text: str, value: float, limit: float, above: bool = False) -> bool:
        """A ratio against its target (at most ``limit``; at least, if ``above``)."""
        met = verdict(value, limit, above)
        line = f"{met}: {text}: {value:.2f} (target {'>=' if above else '<='} {limit})"
        self.targets.append(line)
        print(line, flush=True)
        return met == "met"

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(text, flush=True)

    def write(self, path: Path, title: str, intro: str, images: Sequence[str] = ()) -> None:
        """The page: title, intro, targets, images (``img/`` beside it), notes, tables."""
        parts = [f"# {title}", intro]
        if self.targets:
            parts += ["## Targets", "\n".join(f"- {line}" for line in self.targets)]
        if images:
            parts.append("\n".join(f"![{name}](img/{name})" for name in images))
        if self.notes:
            parts.append("\n".join(f"- {line}" for line in self.notes))
        path.write_text("\n\n".join([*parts, *self.sections]) + "\n")
        print(f"wrote {path}")


@dataclass
class Panel:
    """One plot of a figure: lines of median ms (name -> (x values, y values)), log-log."""

    title: str
    xlabel: str
    lines: dict[str, tuple[Sequence[float], Sequence[float]]]


def plot(path: Path, panels: Sequence[Panel]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(max(7.0, 4.4 * len(panels)), 4.5))
    for axis, panel in zip(np.atleast_1d(axes), panels, strict=True):
        for name, (xs, ys) in panel.lines.items():
            axis.plot(xs, ys, marker="o", label=name)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(panel.title)
        axis.set_xlabel(panel.xlabel)
        axis.set_ylabel("median ms")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


# --------------------------------------------------------------------------------- checks


def index_differences(ours: Any, theirs: Any) -> list[str]:
    """How two zone indexes (:class:`pruner.index.ZoneIndex`) differ (empty: identical):
    parameters, zone arrays, every zone's filter, null rows."""
    problems = []
    if (ours.items, ours.probability) != (theirs.items, theirs.probability):
        problems.append(
            f"params: {ours.items}/{ours.probability} vs {theirs.items}/{theirs.probability}"
        )
    if ours.num_zones != theirs.num_zones:
        return [*problems, f"zones: {ours.num_zones} vs {theirs.num_zones}"]
    for name in ("fragment_id", "zone_start", "zone_length", "has_null"):
        if not np.array_equal(getattr(ours, name), getattr(theirs, name)):
            problems.append(f"{name} differs")
    differing = sum(ours.filter_bytes(z) != theirs.filter_bytes(z) for z in range(ours.num_zones))
    if differing:
        problems.append(f"{differing} of {ours.num_zones} zone filters differ")
    nulls = [{k: v.tolist() for k, v in (i.null_rows or {}).items()} for i in (ours, theirs)]
    if nulls[0] != nulls[1]:
        problems.append("null_rows differ")
    return problems
