"""Analyses shared by SQL texts that differ only in the literals a condition compares with.

``SELECT * FROM t WHERE id = 7`` and ``... id = 9`` have the same analysis but for the
literal, and parsing and analysing a short query costs a millisecond or more where a point
lookup's whole budget is a few. So :func:`template_of` takes such literals out of the SQL's
tokens (sqlglot's tokenizer for the dialect): a **slot** is a plain literal right after
``column =`` or in an ``IN (...)`` list of plain literals, followed by the end of a condition
(AND, OR, a parenthesis, the next clause). What is left (every other token with its text,
each slot as its class: an integer, a decimal with a point, or a string without escapes)
together with the dialect and schemas is the template's key.

The first SQL of a template is analysed as usual, and once more with every slot replaced by
a sentinel of its class (a value no slot holds: :func:`_sentinels`). The template is kept only
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
from typing import Any

import sqlglot
from sqlglot.tokens import Token, TokenType

from pruner.analysis.model import Analysis, Scan
from pruner.analysis.parsing import DIALECTS
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

__all__ = ["MAX_TEMPLATE_CHARS", "SchemaKey", "Template", "Templates", "template_of"]

SchemaKey = tuple[tuple[str, Any], ...]
"""The schemas an analysis is of, as sorted (table name, Arrow schema) pairs."""

MAX_TEMPLATE_CHARS = 4_096
"""Longer SQL is not templated: sqlglot's tokenizer takes ~8 us a token, and long literal
lists are already cheap to analyse (:mod:`pruner.folding`)."""

_INTEGER = re.compile(r"[0-9]{1,18}")
_DECIMAL = re.compile(r"[0-9]{1,18}\.[0-9]{1,18}")

_COLUMN = {TokenType.VAR, TokenType.IDENTIFIER}
_ENDS = {
    TokenType.AND,
    TokenType.OR,
    TokenType.R_PAREN,
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
}
"""Tokens that may follow a slot: each ends the condition the literal is an operand of (a
token binding tighter, such as ``::``, ``COLLATE``, ``+`` or ``||``, would make the literal
part of another expression)."""


@dataclass(frozen=True, slots=True)
class Template:
    """A SQL text as its key and its slots: the slot tokens' character spans and literals."""

    key: tuple[object, ...]
    spans: tuple[tuple[int, int], ...]
    values: tuple[Literal, ...]


def _class_of(token: Token, sql: str) -> str | None:
    """A literal token's class when it may be a slot: "i" an integer, "d" a decimal, "s" a
    string in single quotes whose text is exactly what is between them (no escapes)."""
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


def _in_list_slots(tokens: list[Token], classes: list[str | None], i: int) -> int:
    """After ``IN`` at ``tokens[i]``: the index of the list's ``)`` when ``( literal, ... )``
    holds only slot-class literals, else -1."""
    j = i + 1
    if j >= len(tokens) or tokens[j].token_type != TokenType.L_PAREN:
        return -1
    j += 1
    while j < len(tokens):
        if classes[j] is None:
            return -1
        j += 1
        if j < len(tokens) and tokens[j].token_type == TokenType.COMMA:
            j += 1
            continue
        if j < len(tokens) and tokens[j].token_type == TokenType.R_PAREN:
            return j
        return -1
    return -1


def _ends_condition(tokens: list[Token], j: int) -> bool:
    return j >= len(tokens) or tokens[j].token_type in _ENDS


def template_of(sql: str, dialect: str) -> Template | None:
    """``sql``'s template key and slots (``dialect`` one of pruner's), or None when it has
    no slot (or is too long, or does not tokenize, or the dialect is unknown)."""
    if len(sql) > MAX_TEMPLATE_CHARS:
        return None
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECTS[dialect]).tokenize(sql)
    except Exception:
        return None
    classes = [_class_of(token, sql) for token in tokens]
    slot = [False] * len(tokens)
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.IN and i > 0 and tokens[i - 1].token_type in _COLUMN:
            close = _in_list_slots(tokens, classes, i)
            if close > 0 and _ends_condition(tokens, close + 1):
                for j in range(i + 2, close, 2):
                    slot[j] = True
        elif (
            classes[i] is not None
            and i >= 2
            and tokens[i - 1].token_type == TokenType.EQ
            and tokens[i - 2].token_type in _COLUMN
            and _ends_condition(tokens, i + 1)
        ):
            slot[i] = True
    if not any(slot):
        return None
    key: list[object] = []
    spans: list[tuple[int, int]] = []
    values: list[Literal] = []
    for token, token_class, is_slot in zip(tokens, classes, slot, strict=True):
        if is_slot:
            key.append(token_class)
            spans.append((token.start, token.end + 1))
            text = token.text
            values.append(Literal.string(text) if token_class == "s" else Literal.number(text))
        else:
            key.append((token.token_type, token.text))
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
            return self._analyze(sql, dialect, schema_key)
        key = (dialect, schema_key, template.key)
        known = self._known.get(key, False)
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
        return analysis

    def _learn(
        self,
        key: tuple[object, ...],
        template: Template,
        sql: str,
        dialect: str,
        schema_key: SchemaKey,
        analysis: Analysis,
    ) -> None:
        if len(self._known) >= self._size:
            del self._known[next(iter(self._known))]
        sentinels = _sentinels(template, sql)
        if sentinels is None or len(set(sentinels)) != len(sentinels):
            self._known[key] = None
            return
        try:
            shape = self._analyze(_with_values(sql, template, sentinels), dialect, schema_key)
        except Exception:
            self._known[key] = None
            return
        back, used = _substituted(shape, dict(zip(sentinels, template.values, strict=True)), sql)
        agrees = back == analysis and used == set(sentinels)
        others = frozenset(_leaf_literals(shape)) - used
        self._known[key] = (shape, sentinels, others) if agrees else None


def _leaf_literals(analysis: Analysis) -> Iterator[Literal]:
    for scan in analysis.scans:
        for leaf in leaves(scan.predicate):
            if isinstance(leaf, Equals | NotEquals):
                yield leaf.value
            elif isinstance(leaf, In | NotIn):
                yield from leaf.values
