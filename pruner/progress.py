"""One progress bar for long builds, shared by the ``pruner`` command and the demo."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pruner.index import ProgressCallback

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(label: str) -> Iterator[ProgressCallback]:
    """A rich progress bar on a terminal; silent otherwise. Yields the callback to give
    :func:`pruner.index.build_index` (``progress(done_rows, total_rows)``). The bar goes to
    stderr, so that a command's stdout stays its result; rich is imported here, by a build
    (~20 ms a query does not pay)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        # rows as a field: rich draws the bar before the first update, when the total is
        # None, which "{task.total:,}" cannot format (every build on a terminal failed)
        TextColumn("{task.fields[rows]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=False,
    )
    with progress:
        task = progress.add_task(label, total=None, rows="")

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, rows=f"{done:,}/{total:,} rows")

        yield update
