"""Pushing an enclosing query's filter into a subquery: whether it may reach the
subquery's scans (:func:`_accepts_pushdown`) and what it becomes on the columns they read
(:func:`_renamed`).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from pruner.expressions import Predicate, Unknown, map_leaves


def _accepts_pushdown(query: exp.Select) -> bool:
    """May an enclosing query's filter on this SELECT's output columns reach its scans?"""
    if any(query.args.get(key) for key in ("limit", "offset", "fetch", "qualify", "sample")):
        return False
    distinct = query.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        return False
    if any(select.find(exp.Window) for select in query.expressions):
        return False
    group = query.args.get("group")
    grouping_sets = ("rollup", "cube", "grouping_sets", "all")
    return group is None or not any(group.args.get(key) for key in grouping_sets)


def _renamed(pushed: Predicate, renames: dict[str, str], elsewhere: str) -> Predicate:
    """An enclosing query's filter on output columns, as a filter on the columns they are;
    a leaf on any other output becomes Unknown for the reason ``elsewhere``."""

    def leaf(part: Predicate) -> Predicate:
        column = getattr(part, "column", None)
        if column is None:
            return part
        target = renames.get(column)
        if target is None:
            return Unknown(elsewhere, str(part))
        return replace(part, column=target)  # type: ignore[type-var]

    return map_leaves(pushed, leaf)
