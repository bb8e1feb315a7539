"""From SQL to a Selection: the analyzer, literal coercion, Selection algebra, and the property
that no matching row falls outside the Selection."""
