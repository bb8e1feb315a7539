"""The slots of a SQL text: the literals a condition compares a column with, which
:mod:`pruner.analysis.templates` lets texts differing only in them share one analysis.

:func:`template_of` finds a text's **slots**: a plain literal right after ``column =`` (or
right before ``= column``, the whole condition), or in an ``IN (...)`` list of plain literals
after a column, followed by the end of a condition (AND, OR, a parenthesis, the next clause).
Plain SQL is read by one regular expression (:data:`_SIMPLE`); anything else (comments,
escapes, placeholders, backticks) by sqlglot's tokenizer for the dialect. The template's key
is the dialect and the SQL's text with each slot replaced by its class (an integer, a decimal
with a point, or a string without escapes): two texts share a key only when they differ in
nothing but their slots' literals, however their tokens were read.

>>> t = template_of("SELECT * FROM t WHERE id = 7 AND s IN ('a', 'b')", "duckdb")
>>> t.values
(Literal(kind='number', text='7', cast=None, double=False), \
Literal(kind='string', text='a', cast=None, double=False), \
Literal(kind='string', text='b', cast=None, double=False))
>>> template_of("SELECT * FROM t WHERE id = 9 AND s IN ('c', 'd')", "duckdb").key == t.key
True
>>> template_of("SELECT * FROM t WHERE id = '9' AND s IN ('c', 'd')", "duckdb").key == t.key
False
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from pruner.analysis.model import DIALECTS
from pruner.expressions import Literal

if TYPE_CHECKING:
    from sqlglot.tokens import Token

__all__ = ["MAX_TEMPLATE_CHARS", "Template", "template_of"]

MAX_TEMPLATE_CHARS = 4_096
"""Longer SQL is not templated: sqlglot's tokenizer takes ~8 us a token, and long literal
lists are already cheap to analyse (:mod:`pruner.folding`)."""

_INTEGER = re.compile(r"[0-9]{1,18}")
_DECIMAL = re.compile(r"[0-9]{1,18}\.[0-9]{1,18}")


@dataclass(frozen=True, slots=True)
class Template:
    """A SQL text as its key and its slots: the slot tokens' character spans and literals."""

    key: tuple[object, ...]
    spans: tuple[tuple[int, int], ...]
    values: tuple[Literal, ...]


class _Lexeme(NamedTuple):
    """A token as the slot finder sees it: its kind ("column", "=", "in", "(", ")", ",",
    "literal", "end" for a token that ends a condition, "other"), its literal class, its
    characters' span and its text (a string literal's without the quotes)."""

    kind: str
    literal_class: str | None
    start: int
    end: int
    text: str


_END_WORDS = frozenset(
    [
        "AND",
        "OR",
        "ORDER",
        "GROUP",
        "LIMIT",
        "HAVING",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "WHERE",
        "JOIN",
        "INNER",
        "LEFT",
        "RIGHT",
        "FULL",
        "CROSS",
        "QUALIFY",
        "WINDOW",
    ]
)
_NOT_COLUMNS = _END_WORDS | frozenset(
    [
        "SELECT",
        "FROM",
        "ON",
        "IN",
        "IS",
        "NOT",
        "NULL",
        "TRUE",
        "FALSE",
        "LIKE",
        "ILIKE",
        "BETWEEN",
        "CASE",
        "WHEN",
        "THEN",
        "ELSE",
        "END",
        "AS",
        "DISTINCT",
        "ALL",
        "ANY",
        "SOME",
        "EXISTS",
        "BY",
        "WITH",
        "INTERVAL",
        "DATE",
        "TIMESTAMP",
        "TIME",
        "CAST",
    ]
)
_SIMPLE = re.compile(
    r"""(?P<space>\s+)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<quoted>"[^"\\]*")
    |(?P<number>[0-9]+(?:\.[0-9]+)?)(?![A-Za-z0-9_.])
    |(?P<string>'[^'\\]*')(?!')
    |(?P<punct>[=(),;.*<>!+|%:]|-(?!-)|/(?!\*))""",
    re.VERBOSE,
)
"""The lexemes of plain SQL: identifiers, double-quoted names, plain numbers and strings
without escapes, operators. SQL with anything else (comments, escapes, placeholders,
brackets, prefixed strings) goes through sqlglot's tokenizer instead."""


def _simple_lexemes(sql: str) -> list[_Lexeme] | None:
    """``sql``'s lexemes by :data:`_SIMPLE` (about 20 times faster than sqlglot's Python
    tokenizer), or None where it holds anything else."""
    lexemes = []
    position = 0
    for match in _SIMPLE.finditer(sql):
        if match.start() != position:
            return None
        position = match.end()
        group = match.lastgroup
        text = match.group()
        if group == "space":
            continue
        if group == "word":
            upper = text.upper()
            kind = (
                "end"
                if upper in _END_WORDS
                else "in"
                if upper == "IN"
                else ("other" if upper in _NOT_COLUMNS else "column")
            )
            lexemes.append(_Lexeme(kind, None, match.start(), match.end(), text))
        elif group == "quoted":
            lexemes.append(_Lexeme("column", None, match.start(), match.end(), text))
        elif group == "number":
            klass = "i" if _INTEGER.fullmatch(text) else "d" if _DECIMAL.fullmatch(text) else None
            lexemes.append(_Lexeme("literal", klass, match.start(), match.end(), text))
        elif group == "string":
            lexemes.append(_Lexeme("literal", "s", match.start(), match.end(), text[1:-1]))
        else:
            kind = "end" if text == ";" else text if text in "=()," else "other"
            lexemes.append(_Lexeme(kind, None, match.start(), match.end(), text))
    return lexemes if position == len(sql) else None


@cache
def _sqlglot_kinds() -> dict[Any, str]:
    """The slot finder's kind of each sqlglot token type that has one (the rest: "other")."""
    from sqlglot.tokens import TokenType

    return {
        TokenType.VAR: "column",
        TokenType.IDENTIFIER: "column",
        TokenType.EQ: "=",
        TokenType.IN: "in",
        TokenType.L_PAREN: "(",
        TokenType.R_PAREN: ")",
        TokenType.COMMA: ",",
        **{
            kind: "end"
            for kind in (
                TokenType.AND,
                TokenType.OR,
                TokenType.SEMICOLON,
                TokenType.ORDER_BY,
                TokenType.GROUP_BY,
                TokenType.LIMIT,
                TokenType.HAVING,
                TokenType.UNION,
                TokenType.EXCEPT,
                TokenType.INTERSECT,
                TokenType.WHERE,
                TokenType.JOIN,
                TokenType.INNER,
                TokenType.LEFT,
                TokenType.RIGHT,
                TokenType.FULL,
                TokenType.CROSS,
                TokenType.QUALIFY,
                TokenType.WINDOW,
            )
        },
    }


def _sqlglot_lexemes(sql: str, dialect: str) -> list[_Lexeme] | None:
    """``sql``'s lexemes by sqlglot's tokenizer for ``dialect`` (imported here: plain SQL
    never needs it), or None where it does not tokenize."""
    import sqlglot
    from sqlglot.tokens import TokenType

    import pruner.analysis.parsing  # noqa: F401  (registers sqlglot's dialect "prunerduckdb")

    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECTS[dialect]).tokenize(sql)
    except Exception:
        return None
    kinds = _sqlglot_kinds()
    lexemes = []
    for token in tokens:
        klass = _class_of(token, sql)
        kind = (
            "literal"
            if token.token_type in (TokenType.NUMBER, TokenType.STRING)
            else (kinds.get(token.token_type, "other"))
        )
        lexemes.append(_Lexeme(kind, klass, token.start, token.end + 1, token.text))
    return lexemes


def _class_of(token: Token, sql: str) -> str | None:
    """A literal token's class when it may be a slot: "i" an integer, "d" a decimal, "s" a
    string in single quotes whose text is exactly what is between them (no escapes)."""
    from sqlglot.tokens import TokenType

    text = token.text
    if token.token_type == TokenType.NUMBER:
        if _INTEGER.fullmatch(text):
            return "i"
        if _DECIMAL.fullmatch(text):
            return "d"
        return None
    if token.token_type == TokenType.STRING:
        start, end = token.start, token.end
        if sql[start] == "'" and sql[end] == "'" and sql[start + 1 : end] == text:
            return "s" if "'" not in text and "\\" not in text else None
    return None


def _ends_condition(lexemes: list[_Lexeme], j: int) -> bool:
    return j >= len(lexemes) or lexemes[j].kind in ("end", ")")


def _after_column(lexemes: list[_Lexeme], i: int) -> bool:
    """Is the literal ``lexemes[i]`` the right side of ``column = literal``, a condition?"""
    return (
        i >= 2
        and lexemes[i - 1].kind == "="
        and lexemes[i - 2].kind == "column"
        and _ends_condition(lexemes, i + 1)
    )


def _before_column(lexemes: list[_Lexeme], i: int) -> bool:
    """Is the literal ``lexemes[i]`` the left side of ``literal = column``, a condition of
    its own (after WHERE, AND, OR or a parenthesis, and before the condition's end)?"""
    return (
        i >= 1
        and lexemes[i - 1].kind in ("end", "(")
        and i + 2 < len(lexemes)
        and lexemes[i + 1].kind == "="
        and lexemes[i + 2].kind == "column"
        and _ends_condition(lexemes, i + 3)
    )


def _in_list_end(lexemes: list[_Lexeme], i: int) -> int:
    """After ``IN`` at ``lexemes[i]``: the index of the list's ``)`` when ``( literal, ... )``
    holds only slot-class literals, else -1."""
    j = i + 1
    if j >= len(lexemes) or lexemes[j].kind != "(":
        return -1
    j += 1
    while j < len(lexemes):
        if lexemes[j].kind != "literal" or lexemes[j].literal_class is None:
            return -1
        j += 1
        if j < len(lexemes) and lexemes[j].kind == ",":
            j += 1
            continue
        if j < len(lexemes) and lexemes[j].kind == ")":
            return j
        return -1
    return -1


def template_of(sql: str, dialect: str) -> Template | None:
    """``sql``'s template key and slots (``dialect`` one of pruner's), or None when it has
    no slot (or is too long, or does not tokenize, or the dialect is unknown).

    The key is the SQL's text with each slot replaced by its class: two texts share a key
    only when they differ in nothing but their slots' literals."""
    if len(sql) > MAX_TEMPLATE_CHARS or dialect not in DIALECTS:
        return None
    lexemes = _simple_lexemes(sql)
    if lexemes is None:
        lexemes = _sqlglot_lexemes(sql, dialect)
        if lexemes is None:
            return None
    slot = [False] * len(lexemes)
    for i, lexeme in enumerate(lexemes):
        if lexeme.kind == "in" and i > 0 and lexemes[i - 1].kind == "column":
            close = _in_list_end(lexemes, i)
            if close > 0 and _ends_condition(lexemes, close + 1):
                for j in range(i + 2, close, 2):
                    slot[j] = True
        elif (
            lexeme.kind == "literal"
            and lexeme.literal_class is not None
            and (_after_column(lexemes, i) or _before_column(lexemes, i))
        ):
            slot[i] = True  # (an IN list's literals were made slots at its IN)
    if not any(slot):
        return None
    key: list[object] = [dialect]
    spans: list[tuple[int, int]] = []
    values: list[Literal] = []
    position = 0
    for lexeme, is_slot in zip(lexemes, slot, strict=True):
        if not is_slot:
            continue
        key += [sql[position : lexeme.start], lexeme.literal_class]
        spans.append((lexeme.start, lexeme.end))
        position = lexeme.end
        if lexeme.literal_class == "s":
            values.append(Literal.string(lexeme.text))
        else:
            values.append(Literal.number(lexeme.text))
    key.append(sql[position:])
    return Template(tuple(key), tuple(spans), tuple(values))
