"""SQL text -> sqlglot statements: ``?`` placeholders numbered, long literal lists folded
out (:mod:`pruner.folding`), syntax errors as :class:`~pruner.errors.SqlSyntaxError`, and
SQL too long or too deep to analyse refused with :class:`TooComplex`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, TokenError

from pruner.analysis.model import DIALECTS
from pruner.errors import SqlSyntaxError
from pruner.folding import Folded, fold, unfold

__all__ = [
    "DIALECTS",
    "MAX_PARSED_CHARS",
    "PARAMETER_PREFIX",
    "TooComplex",
    "check",
    "parse_folded",
]


# pruner's dialects by sqlglot's names (analysis/model: DIALECTS), one of which is defined
# here: use sqlglot with DIALECTS through this module, which defines it.


class PrunerDuckDB(DuckDB):
    """sqlglot's DuckDB dialect reading ``X'0A0B'`` as DuckDB does (a BLOB literal; sqlglot
    30 refuses the SQL). Written back as ``UNHEX('0A0B')``, the same bytes to DuckDB."""

    class Tokenizer(DuckDB.Tokenizer):
        HEX_STRINGS: ClassVar = [("x'", "'"), ("X'", "'")]


MAX_PARSED_CHARS = 262_144
"""Longest SQL text (after :mod:`pruner.folding` took its literal lists out) pruner parses:
sqlglot takes ~10 us and ~250 bytes per character. Longer SQL is not analysed: every table
it names is read whole, and explain says why."""
PARAMETER_PREFIX = "__pruner_parameter_"  # a numbered ``?`` is :PARAMETER_PREFIX<n>


def _number_placeholders(sql: str, dialect: str) -> str:
    """Give every ``?`` its position, so parameters bind in textual order."""
    if "?" not in sql:
        return sql
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql + "\n")
    pieces, position, count = [], 0, 0
    for token in tokens:
        if token.text in ("?", "?::") and token.token_type in (
            sqlglot.TokenType.PLACEHOLDER,
            sqlglot.TokenType.QDCOLON,
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f":{PARAMETER_PREFIX}{count}" + token.text[1:])
            position, count = token.end + 1, count + 1
    pieces.append(sql[position:])
    return "".join(pieces)


class TooComplex(Exception):
    """The SQL is beyond what pruner analyses: every table it names is read whole."""


def _parse(sql: str, dialect: str) -> list[exp.Expr]:
    read = DIALECTS[dialect]
    try:
        # The newline changes no token; without it sqlglot 30's postgres tokenizer fails on
        # text with a ``$n`` placeholder that ends in ``''`` (SQL DataFusion accepts).
        statements = sqlglot.parse(_number_placeholders(sql, read) + "\n", read=read)
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        where = f"line {first.get('line', '?')}, column {first.get('col', '?')}"
        near = (first.get("highlight") or "").strip()
        detail = _plain(first.get("description") or str(err))
        raise SqlSyntaxError(
            f"could not parse the SQL ({dialect}) at {where}"
            + (f" near {near!r}" if near else "")
            + (f": {detail}" if detail else "")
            + "; check the SQL (pruner parses it as the engine's dialect)"
        ) from err
    except TokenError as err:
        raise SqlSyntaxError(f"could not read the SQL ({dialect}): {err}") from err
    except RecursionError as err:
        raise TooComplex(
            "the SQL is nested too deeply for pruner's parser: every table it names is read "
            "whole (the engine runs it as written)"
        ) from err
    return [statement for statement in statements if statement is not None]


def _plain(description: str) -> str:
    """sqlglot's error description without its internals: "Required keyword: 'this' missing
    for <class 'sqlglot.expressions.core.Paren'>" says only that something is missing."""
    if "<class 'sqlglot." in description or description.startswith("Required keyword"):
        return "an expression is missing or incomplete"
    return description


def parse_folded(sql: str, dialect: str) -> tuple[Folded, list[exp.Expr]]:
    """Parse ``sql`` with its long literal lists folded (:mod:`pruner.folding`): every fold
    that parsed where its values were is kept, any other is put back and the text parsed
    again (at most twice more, the last time with nothing folded)."""
    folded = fold(sql)
    first = True
    while True:
        if len(folded.sql) > MAX_PARSED_CHARS:
            raise TooComplex(
                f"the SQL is {len(folded.sql):,} characters long"
                + (" after folding its literal lists" if folded.lists else "")
                + f"; pruner analyses at most {MAX_PARSED_CHARS:,}: every table it names is "
                "read whole"
            )
        try:
            statements = _parse(folded.sql, dialect)
        except SqlSyntaxError:
            if not folded.lists:
                raise
            folded = unfold(folded, ())
            continue
        good = check(folded, statements)
        if len(good) == len(folded.lists):
            return folded, statements
        folded = unfold(folded, good if first else ())
        first = False


_CONDITION_PARENTS = (exp.Or, exp.Where, exp.Paren, exp.Having)


def check(folded: Folded, statements: Sequence[exp.Expr]) -> set[str]:
    """The names of the lists whose placeholder sits where its values would have been.

    Each must be found exactly once, as an element of an IN list (of values, not of a
    subquery); an OR run's IN must test a plain column and be an operand of an OR, a whole
    WHERE / HAVING / ON condition or a whole parenthesis.
    """
    if not folded.lists:
        return set()
    found: Counter[str] = Counter()
    good: set[str] = set()
    for statement in statements:
        for node in statement.find_all(exp.Placeholder):
            name = str(node.this or "")
            if name not in folded.lists:
                continue
            found[name] += 1
            parent = node.parent
            if not isinstance(parent, exp.In) or node.arg_key != "expressions":
                continue
            if any(parent.args.get(key) for key in ("query", "unnest", "field")):
                continue
            if folded.lists[name].column is not None:
                around = parent.parent
                on_join = isinstance(around, exp.Join) and parent.arg_key == "on"
                if not isinstance(parent.this, exp.Column) or not (
                    on_join or isinstance(around, _CONDITION_PARENTS)
                ):
                    continue
            good.add(name)
    return {name for name in good if found[name] == 1}
