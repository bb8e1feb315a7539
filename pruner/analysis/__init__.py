"""The analyzer's parts, one job each; :mod:`pruner.analyzer` is the entry point.

* :mod:`pruner.analysis.model`: what an analysis is (:class:`Analysis`, :class:`Scan`) and
  substituting query parameters into it.
* :mod:`pruner.analysis.parsing`: SQL text -> sqlglot trees (placeholders numbered, long
  literal lists folded out and checked, depth and size limits).
* :mod:`pruner.analysis.statements`: the parsed statements -> an :class:`Analysis`.
* :mod:`pruner.analysis.templates`: analyses shared by texts that differ only in literals,
  the literals a condition compares a column with (its slots: :mod:`pruner.analysis.slots`).

Only ``parsing``, ``statements`` and the modules they use import sqlglot (~0.1 s): a process
whose every analysis comes from a template does not import it.
* :mod:`pruner.analysis.conditions`: name resolution within one SELECT and the conversion
  of its conditions into predicates.
* :mod:`pruner.analysis.scopes`: walking a statement's scopes (CTEs, derived tables, set
  operations, joins) to decide which conditions may prune which scan.
* :mod:`pruner.analysis.joins`: carrying values across equalities and join edges.
* :mod:`pruner.analysis.pushdown`: whether an enclosing query's filter may enter a subquery
  and what it becomes there.
* :mod:`pruner.analysis.nulls`: what an outer join's null extension can bring back.
"""
