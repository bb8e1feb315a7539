"""Analyses shared by SQL texts that differ only in the literals a condition compares with.

``SELECT * FROM t WHERE id = 7`` and ``... id = 9`` have the same analysis but for the
literal, and parsing and analysing a short query costs a millisecond or more where a point
lookup's whole budget is a few. So :func:`template_of` finds the **slots** of a SQL text: a
plain literal right after ``column =`` (or right before ``= column``, the whole condition),
or in an ``IN (...)`` list of plain literals after a column, followed by the end of a
condition (AND, OR, a parenthesis, the next clause). Plain
SQL is read by one regular expression (:data:`_SIMPLE`); anything else (comments, escapes,
placeholders, backticks) by sqlglot's tokenizer for the dialect. The template's key is the
dialect and the SQL's text with each slot replaced by its class (an integer, a decimal with
a point, or a string without escapes): two texts share a key only when they differ in
nothing but their slots' literals, however their tokens were read.

The first SQL of a key is analysed as usual, and once more with every slot replaced by a
sentinel of its class (a value no slot holds: :func:`_sentinels`). The template is kept only
when the two analyses agree once the sentinels are put back to the first SQL's values, and
every sentinel came out as a literal of a leaf (``column = literal`` / ``IN``). So whatever
the analyzer did with those literals, it did not depend on their values: folding them into
another constant, dropping one, using one's text in a reason or anything else that would
differ makes the two disagree, and that template is never used (its SQL texts are analysed
one by one, as before). A later SQL of the same key then gets the template's analysis with
its own literals put in the leaves, without parsing, provided its literals are distinct from
each other and from the other literals of the template's leaves, as the sentinels were (the
analyzer may merge equal ones: ``i IN (1, 1)`` is ``i = 1``).

The class is part of the key, so ``id = 7`` and ``id = '7'`` (or ``7`` and ``7.0``) never
share an analysis, nor do two dialects or two sets of schemas.

>>> import pyarrow as pa
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from pruner.analysis.model import DIALECTS, Analysis, Scan
from pruner.expressions import (
    And,
    Equals,
    In,
    Literal,
    Not,
    NotEquals,
    NotIn,
    Or,
    Predicate,
    PredicateVisitor,
    leaves,
    visit,
)

if TYPE_CHECKING:
    from sqlglot.tokens import Token

    from pruner.analysis.stored import Store

__all__ = ["MAX_TEMPLATE_CHARS", "SchemaKey", "Template", "Templates", "template_of"]

SchemaKey = tuple[tuple[str, Any], ...]
"""The schemas an analysis is of, as sorted (table name, Arrow schema) pairs."""

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


def _sentinels(template: Template, sql: str) -> tuple[Literal, ...] | None:
    """One literal per slot, of the slot's class, distinct from each other and from anything
    in ``sql``; None if no such set was found."""
    chosen = []
    for number, value in enumerate(template.values):
        if value.kind == "string":
            text = f"pruner~slot~{number}~"
        elif "." in value.text:
            text = f"{900_000_001 + number}.25"
        else:
            text = str(900_000_001 + number)
        if text in sql:
            return None
        chosen.append(replace(value, text=text))
    return tuple(chosen)


def _spelled(literal: Literal) -> str:
    return f"'{literal.text}'" if literal.kind == "string" else literal.text


def _with_values(sql: str, template: Template, values: tuple[Literal, ...]) -> str:
    pieces, position = [], 0
    for (start, end), value in zip(template.spans, values, strict=True):
        pieces += [sql[position:start], _spelled(value)]
        position = end
    pieces.append(sql[position:])
    return "".join(pieces)


class _Substitute(PredicateVisitor[Predicate]):
    """The predicate with its leaves' literals replaced through a mapping, every node rebuilt
    as it is (no builder re-simplifies: the structure the analyzer made is kept)."""

    def __init__(self, mapping: Mapping[Literal, Literal]) -> None:
        self.mapping = mapping
        self.used: set[Literal] = set()

    def _value(self, literal: Literal) -> Literal:
        new = self.mapping.get(literal)
        if new is None:
            return literal
        self.used.add(literal)
        return new

    def visit_and(self, node: And) -> Predicate:
        return And(tuple(visit(child, self) for child in node.children))

    def visit_or(self, node: Or) -> Predicate:
        return Or(tuple(visit(child, self) for child in node.children))

    def visit_not(self, node: Not) -> Predicate:
        return Not(visit(node.child, self))

    def visit_equals(self, node: Equals) -> Predicate:
        return replace(node, value=self._value(node.value))

    def visit_not_equals(self, node: NotEquals) -> Predicate:
        return replace(node, value=self._value(node.value))

    def visit_in(self, node: In) -> Predicate:
        return replace(node, values=tuple(self._value(v) for v in node.values))

    def visit_not_in(self, node: NotIn) -> Predicate:
        return replace(node, values=tuple(self._value(v) for v in node.values))

    def visit_other(self, node: Predicate) -> Predicate:
        return node


def _substituted(
    analysis: Analysis, mapping: Mapping[Literal, Literal], sql: str
) -> tuple[Analysis, set[Literal]]:
    visitor = _Substitute(mapping)
    scans = tuple(Scan(s.table, s.alias, visit(s.predicate, visitor)) for s in analysis.scans)
    return replace(analysis, sql=sql, scans=scans), visitor.used


class Templates:
    """A cache in front of an analyse function (``analyze(sql, dialect, schema_key)``,
    deterministic): the last ``size`` analyses by SQL text, and up to ``size`` templates
    (oldest first out)."""

    def __init__(
        self,
        analyze: Callable[[str, str, SchemaKey], Analysis],
        size: int = 256,
    ) -> None:
        self._analyze = analyze
        self._size = size
        self.store: Store | None = None  # kept between processes (pruner.analysis.stored)
        self._exact: dict[tuple[str, str, SchemaKey], Analysis] = {}
        # key -> (the sentinel analysis, its sentinels, the other literals of its leaves), or
        # None: this key is not templated
        self._known: dict[
            tuple[object, ...],
            tuple[Analysis, tuple[Literal, ...], frozenset[Literal]] | None,
        ] = {}

    def info(self) -> str:
        """How many analyses and templates are kept, and how many templates are refused."""
        refused = sum(1 for known in self._known.values() if known is None)
        return (
            f"{len(self._exact)} SQL texts, {len(self._known) - refused} templates "
            f"({refused} refused)"
        )

    def clear(self, *, texts_only: bool = False) -> None:
        """Forget every analysis (``texts_only``: only those kept by SQL text, so the next
        SQL of a known template is analysed from its template)."""
        self._exact.clear()
        if not texts_only:
            self._known.clear()

    def analysis(self, sql: str, dialect: str, schema_key: SchemaKey) -> Analysis:
        exact = (sql, dialect, schema_key)
        analysis = self._exact.pop(exact, None)
        if analysis is None:
            analysis = self._template_analysis(sql, dialect, schema_key)
            if len(self._exact) >= self._size:
                del self._exact[next(iter(self._exact))]
        self._exact[exact] = analysis  # the most recently used last
        return analysis

    def _template_analysis(self, sql: str, dialect: str, schema_key: SchemaKey) -> Analysis:
        template = template_of(sql, dialect)
        if template is None:
            return self._text_analysis(sql, dialect, schema_key)
        key = (dialect, schema_key, template.key)
        known = self._known.get(key, False)
        if known is False and self.store is not None:
            stored = _stored_template(self.store.get(("template", *key)))
            if stored is not None and len(stored[1]) == len(template.values):
                self._keep(key, stored)
                known = stored
        if known is None:
            return self._analyze(sql, dialect, schema_key)
        if known is not False:
            shape, sentinels, others = known  # type: ignore[misc]
            values = set(template.values)
            if len(values) == len(template.values) and values.isdisjoint(others):
                mapping = dict(zip(sentinels, template.values, strict=True))
                analysis, _ = _substituted(shape, mapping, sql)
                return analysis
            # Equal literals: the analyzer may merge them, which the template did not see.
            return self._analyze(sql, dialect, schema_key)
        analysis = self._analyze(sql, dialect, schema_key)
        self._learn(key, template, sql, dialect, schema_key, analysis)
        learned = self._known.get(key)
        if learned is not None and self.store is not None:
            self.store.put(("template", *key), learned)
        return analysis

    def _text_analysis(self, sql: str, dialect: str, schema_key: SchemaKey) -> Analysis:
        """The analysis of a text with no slot: the store's, or made (and then stored)."""
        if self.store is None or len(sql) > MAX_TEMPLATE_CHARS:
            return self._analyze(sql, dialect, schema_key)
        key = ("text", dialect, schema_key, sql)
        kept = self.store.get(key)
        if isinstance(kept, Analysis) and kept.sql == sql and kept.dialect == dialect:
            return kept
        analysis = self._analyze(sql, dialect, schema_key)
        self.store.put(key, analysis)
        return analysis

    def _keep(
        self,
        key: tuple[object, ...],
        known: tuple[Analysis, tuple[Literal, ...], frozenset[Literal]] | None,
    ) -> None:
        if len(self._known) >= self._size:
            del self._known[next(iter(self._known))]
        self._known[key] = known

    def _learn(
        self,
        key: tuple[object, ...],
        template: Template,
        sql: str,
        dialect: str,
        schema_key: SchemaKey,
        analysis: Analysis,
    ) -> None:
        sentinels = _sentinels(template, sql)
        if sentinels is None or len(set(sentinels)) != len(sentinels):
            self._keep(key, None)
            return
        try:
            shape = self._analyze(_with_values(sql, template, sentinels), dialect, schema_key)
        except Exception:
            self._keep(key, None)
            return
        back, used = _substituted(shape, dict(zip(sentinels, template.values, strict=True)), sql)
        agrees = back == analysis and used == set(sentinels)
        others = frozenset(_leaf_literals(shape)) - used
        self._keep(key, (shape, sentinels, others) if agrees else None)


def _leaf_literals(analysis: Analysis) -> Iterator[Literal]:
    for scan in analysis.scans:
        for leaf in leaves(scan.predicate):
            if isinstance(leaf, Equals | NotEquals):
                yield leaf.value
            elif isinstance(leaf, In | NotIn):
                yield from leaf.values


def _stored_template(
    value: object,
) -> tuple[Analysis, tuple[Literal, ...], frozenset[Literal]] | None:
    """A template as :class:`~pruner.analysis.stored.Store` gave it back, if it is one."""
    if not (isinstance(value, tuple) and len(value) == 3):
        return None
    shape, sentinels, others = value
    if (
        isinstance(shape, Analysis)
        and isinstance(sentinels, tuple)
        and all(isinstance(s, Literal) for s in sentinels)
        and isinstance(others, frozenset)
        and all(isinstance(o, Literal) for o in others)
    ):
        return shape, sentinels, others
    return None
