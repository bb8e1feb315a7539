"""The errors pruner raises.

One base class, a few flat subclasses. Every message names the offending value and says
what to do about it, so that a user never has to read a traceback to act.
"""

from __future__ import annotations

__all__ = [
    "EngineError",
    "IndexFormatError",
    "IndexNotFoundError",
    "InvalidParameterError",
    "PrunerError",
    "SqlSyntaxError",
    "UnsupportedTypeError",
]


class PrunerError(Exception):
    """Base class of every error pruner raises on purpose."""


class InvalidParameterError(PrunerError, ValueError):
    """A parameter is out of its allowed range (items < 1, fpp outside [0, 1), ...)."""


class UnsupportedTypeError(PrunerError, TypeError):
    """A column's Arrow type cannot be indexed the way Lance indexes it."""


class IndexFormatError(PrunerError):
    """An index file is damaged or is not a Lance BLOOMFILTER index file."""


class IndexNotFoundError(PrunerError, FileNotFoundError):
    """No bloom index exists for the requested dataset and column."""


class SqlSyntaxError(PrunerError, ValueError):
    """SQL text that does not parse; the message names the line and column."""


class EngineError(PrunerError):
    """The engine refused or failed the query, or could not start."""
