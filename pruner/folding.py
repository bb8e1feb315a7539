"""Long lists of literals, folded out of the SQL text before sqlglot parses it.

sqlglot builds a dozen Python objects per token: ``id IN (<100,000 integers>)`` costs it
seconds and hundreds of megabytes, and ``id = 0 OR id = 1 OR ...`` (200,000 of them, 2 MB
of SQL) costs more than a gigabyte. Such queries are common (generated SQL), and the
list's values are all pruner needs from them. So before parsing, :func:`fold` finds

* a run of plain literals right after ``IN (``: ``IN (1, 2, -3.5, 'a', ...)``, and
* a run of equalities of one column with plain literals, joined by OR:
  ``x = 1 OR x = 2 OR ...``, which is ``x IN (1, 2, ...)`` in SQL's three-valued logic too,

of at least ``minimum`` values, records their values, and puts a named placeholder in their
place: ``IN (:__pruner_list0)`` and ``x IN (:__pruner_list1)``. The analyzer reads the
values back from :attr:`Folded.lists` where it meets the placeholder.

The text is scanned with regular expressions, not a tokenizer, so a run might sit inside a
string or a comment, or next to an operator that binds tighter than OR. That is why the
parsed result is checked (:func:`pruner.analysis.parsing.check`) before it is used: each
placeholder must appear exactly once, as an element of an ``IN`` list, and an OR run's
``IN`` must be an operand of an OR (or a whole WHERE / ON / HAVING condition, or a whole
parenthesis) with a plain column on its left. Text before a run is the same in both
versions, so when sqlglot's tokenizer finds the placeholder as a token, it was between
tokens at the run's start in the original text too, and from there the run's plain literals
tokenize as the values recorded. A run that fails the check is put back and the text parsed
again (:func:`unfold`); a list pruner cannot fold costs time, never a wrong value.

>>> folded = fold("SELECT * FROM t WHERE id IN (1, 2, 3) OR k = 7 OR k = 8 OR k = 9", minimum=3)
>>> folded.sql
'SELECT * FROM t WHERE id IN (:__pruner_list0) OR k IN (:__pruner_list1)'
>>> [str(v) for v in folded.lists["__pruner_list0"].values]
['1', '2', '3']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pruner.expressions import Literal

__all__ = ["MINIMUM", "Folded", "FoldedList", "fold", "unfold", "whole_in_lists"]

MINIMUM = 32
"""Shortest run folded: shorter lists parse fast enough, and keep their exact explain text."""

_WS = r"[ \t\r\n]"
# A literal whose token ends where the match ends: a number not followed by more of a word or
# a number (1e5, 1L, 1.5.2, 1_000), a string with no quote or backslash inside and no quote
# right after it (no escapes, no '' doubling: its text is the value in every dialect).
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_.$'\"`])"
_STRING = r"'[^'\\]*'(?!['\"])"
_LITERAL = f"(?:{_NUMBER}|{_STRING})"
_SEPARATOR = f"{_WS}*,{_WS}*"
_VALUE = re.compile(r"'[^']*'|-?[0-9]+(?:\.[0-9]+)?")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?"
_EQUALS = f"{_WS}*=(?![=>]){_WS}*"


# Possessive (``*+``): a greedy repeat would keep backtracking state for every value
# (~600 bytes each: 60 MiB for 100,000 values).
_IN_LIST = re.compile(rf"(?i:\bIN){_WS}*\({_WS}*(?P<run>{_LITERAL}(?:{_SEPARATOR}{_LITERAL})*+)")
_LIST_GOES_ON = re.compile(rf"{_WS}*[,)]")


_BLANKS = dict.fromkeys(map(ord, " \t\r\n"))


def _values(run: str) -> list[str]:
    """The literals' texts of a run of literals: of numbers only, the run cut at its commas
    once its blanks are gone (a number holds none: 0.4 ms for 10,000 keys, where the
    search of :data:`_VALUE` takes 2.2 ms)."""
    if "'" in run:
        return _VALUE.findall(run)
    return run.translate(_BLANKS).split(",")


# An OR run is matched one equality at a time (one regular expression repeated 200,000 times
# keeps ~800 bytes of backtracking state per repetition).
_FIRST_EQUALITY = re.compile(
    rf"(?<![^ \t\r\n(])(?P<column>{_IDENTIFIER}){_EQUALS}(?P<value>{_LITERAL})"
)
_NEXT_EQUALITY = re.compile(
    rf"{_WS}+(?i:OR){_WS}+(?P<column>{_IDENTIFIER}){_EQUALS}(?P<value>{_LITERAL})"
)


# What may come before an OR run's first equality and after its last one for the run to be a
# part of an OR chain (or a whole condition); other neighbours cost one element at that end.
_LEFT_OK = re.compile(r"(?:\(|(?<![A-Za-z0-9_$])(?i:WHERE|OR|ON|HAVING))\Z")
_RIGHT_OK = re.compile(
    rf"{_WS}*(?:\)|;|\Z|(?i:OR|GROUP|ORDER|LIMIT|HAVING|WINDOW|QUALIFY|UNION|INTERSECT|EXCEPT)"
    r"(?![A-Za-z0-9_$]))"
)


@dataclass(frozen=True, slots=True)
class FoldedList:
    """One run of literals taken out of the SQL text."""

    start: int  # the run's span in the original text
    end: int
    values: tuple[Literal, ...]
    column: str | None = None  # an OR run's column text; None for an IN list


@dataclass(frozen=True, slots=True)
class Folded:
    """The SQL text to parse, and the lists taken out of it by placeholder name."""

    original: str
    sql: str
    lists: dict[str, FoldedList]
    prefix: str  # every placeholder name starts with it; the original text never holds it


def _literals(values: Iterable[str]) -> tuple[Literal, ...]:
    """Literals as the analyzer reads them: a string's text between its quotes; a number's
    text as written (``-5`` parses as a negation of 5, which the analyzer spells ``-5``)."""
    return tuple(
        Literal("string", value[1:-1]) if value[0] == "'" else Literal("number", value)
        for value in values
    )


def _prefix(sql: str) -> str:
    """A placeholder prefix that occurs nowhere in ``sql``."""
    folded = sql.casefold()
    prefix = "__pruner_list"
    while prefix in folded:
        prefix += "_"
    return prefix


def _in_lists(sql: str, minimum: int) -> Iterable[tuple[int, int, str | None, list[str]]]:
    """(start, end, None, values) of each run of literals that opens an IN list, up to the
    last one that is a whole element (followed by a comma or the closing parenthesis)."""
    for match in _IN_LIST.finditer(sql):
        start, end = match.span("run")
        values = _values(match.group("run"))
        if not _LIST_GOES_ON.match(sql, end):  # `IN (1, 2, 3 + x)`: 3 is not an element
            last = values.pop()
            end = len(sql[: end - len(last)].rstrip(" \t\r\n").removesuffix(",").rstrip(" \t\r\n"))
        if len(values) >= minimum:
            yield start, end, None, values


_LIST_ENDS = re.compile(rf"{_WS}*\)")


def whole_in_lists(sql: str, minimum: int) -> Iterator[tuple[int, int, list[str]]]:
    """(start, end, values) of each ``IN (...)`` list of ``sql`` that is plain literals
    only, of at least ``minimum`` values: ``start`` at the ``IN``, ``end`` past the closing
    parenthesis, ``values`` the literals' texts. Found by regular expressions as
    :func:`fold` finds them, so a list may sit in a string or a comment."""
    for match in _IN_LIST.finditer(sql):
        closing = _LIST_ENDS.match(sql, match.end("run"))
        if closing is None:
            continue
        values = _values(match.group("run"))
        if len(values) >= minimum:
            yield match.start(), closing.end(), values


def _or_runs(sql: str, minimum: int) -> Iterable[tuple[int, int, str | None, list[str]]]:
    """(start, end, column, values) of each OR run, trimmed to neighbours that keep it one
    operand of an OR chain (or a whole condition)."""
    position = 0
    while (first := _FIRST_EQUALITY.search(sql, position)) is not None:
        column = first.group("column")
        values = [first.group("value")]
        ends = [first.end()]
        second = -1  # where the second equality starts
        while (following := _NEXT_EQUALITY.match(sql, ends[-1])) is not None:
            if following.group("column") != column:
                break
            if second < 0:
                second = following.start("column")
            values.append(following.group("value"))
            ends.append(following.end())
        position = ends[-1]
        if len(values) < minimum:
            continue
        start, end = first.start(), ends[-1]
        if not _LEFT_OK.search(sql[:start].rstrip(" \t\r\n")[-8:]):
            start, values = second, values[1:]
        if not _RIGHT_OK.match(sql, end):
            end, values = ends[-2], values[:-1]
        if len(values) >= minimum:
            yield start, end, column, values


def fold(sql: str, minimum: int | None = None) -> Folded:
    """Take every run of at least ``minimum`` (default :data:`MINIMUM`) literals out of
    ``sql`` (see the module doc)."""
    minimum = MINIMUM if minimum is None else max(2, minimum)
    prefix = _prefix(sql)
    spans = sorted([*_in_lists(sql, minimum), *_or_runs(sql, minimum)], key=lambda s: s[0])
    lists: dict[str, FoldedList] = {}
    pieces: list[str] = []
    position = 0
    for start, end, column, values in spans:
        if start < position:  # overlaps a run already taken
            continue
        name = f"{prefix}{len(lists)}"
        lists[name] = FoldedList(start, end, _literals(values), column)
        pieces.append(sql[position:start])
        pieces.append(f":{name}" if column is None else f"{column} IN (:{name})")
        position = end
    if not lists:
        return Folded(sql, sql, {}, prefix)
    pieces.append(sql[position:])
    return Folded(sql, "".join(pieces), lists, prefix)


def unfold(folded: Folded, keep: Iterable[str]) -> Folded:
    """``folded`` with only the lists named in ``keep`` still folded (the rest put back)."""
    kept = set(keep)
    lists = {name: entry for name, entry in folded.lists.items() if name in kept}
    if not lists:
        return Folded(folded.original, folded.original, {}, folded.prefix)
    pieces: list[str] = []
    position = 0
    renamed: dict[str, FoldedList] = {}
    for entry in sorted(lists.values(), key=lambda e: e.start):
        name = f"{folded.prefix}{len(renamed)}"
        pieces.append(folded.original[position : entry.start])
        pieces.append(f":{name}" if entry.column is None else f"{entry.column} IN (:{name})")
        renamed[name] = entry
        position = entry.end
    pieces.append(folded.original[position:])
    return Folded(folded.original, "".join(pieces), renamed, folded.prefix)
