"""Running a function on a thread with a big C stack: for work that recurses once per
operator of a query (sqlglot's parser, DataFusion's planner), which overflowed the main
thread's 8 MiB stack and killed the process on SQL nested thousands deep."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["on_big_stack"]

T = TypeVar("T")

_lock = threading.Lock()  # threading.stack_size() is process-wide: set only around a start()


def on_big_stack(
    function: Callable[[], T],
    stack_bytes: int,
    name: str,
    fallback: Callable[[], T] | None = None,
) -> T:
    """``function()`` on a new thread whose C stack is ``stack_bytes`` (only the pages used
    are allocated); what it raises is raised here. Where no such thread can start,
    ``fallback()`` (default ``function()``) on this thread."""
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(function())
        except BaseException as err:  # handed to the caller's thread
            outcome.append(err)

    try:
        with _lock:
            previous = threading.stack_size(stack_bytes)
            try:
                worker = threading.Thread(target=run, name=name, daemon=True)
                worker.start()
            finally:
                threading.stack_size(previous)
    except (RuntimeError, ValueError, MemoryError):
        return (fallback or function)()
    worker.join()
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result
