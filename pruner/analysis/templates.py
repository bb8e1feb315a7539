"""Analyses shared by SQL texts that differ only in the literals a condition compares with.

``SELECT * FROM t WHERE id = 7`` and ``... id = 9`` have the same analysis but for the
literal, and parsing and analysing a short query costs a millisecond or more where a point
lookup's whole budget is a few. So texts are keyed by their template
(:func:`pruner.analysis.slots.template_of`: the text with each **slot**, a literal a condition
compares a column with, replaced by its class).

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pruner.analysis.model import Analysis, Scan
from pruner.analysis.slots import MAX_TEMPLATE_CHARS, Template, template_of
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
    from pruner.analysis.stored import Store

__all__ = ["MAX_TEMPLATE_CHARS", "SchemaKey", "Template", "Templates", "template_of"]

SchemaKey = tuple[tuple[str, Any], ...]
"""The schemas an analysis is of, as sorted (table name, Arrow schema) pairs."""


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
