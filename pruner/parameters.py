"""``Parameters``: the values a query's placeholders are bound to.

Its own module because :mod:`pruner.explain` binds parameters and :mod:`pruner.plan`
(which imports explain) re-exports the type: defining it in either would make the other
import it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["Parameters"]

Parameters = Sequence[object] | Mapping[str, object]
"""Values for a query's placeholders: by position (``?``, ``$n``) or by name."""
