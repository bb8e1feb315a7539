"""rewrite_not on already-negated leaves (docs/mutation.md): the _Negate cases the analyzer's
SQL never reached (a NotEquals, NotIn, NotNull or Not under a NOT, and NOT of a constant or
of an Unknown), so no test noticed a mutant of them. NOT must give the exact complement
leaf (or, where there is none, something no narrower)."""

from __future__ import annotations

from pruner.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Equals,
    In,
    IsNull,
    Literal,
    Not,
    NotEquals,
    NotIn,
    NotNull,
    Or,
    Unknown,
    rewrite_not,
)

FIVE = Literal.number("5")
SIX = Literal.number("6")


def test_not_of_a_negated_leaf_is_the_leaf() -> None:
    assert rewrite_not(Not(NotEquals("x", FIVE))) == Equals("x", FIVE)
    assert rewrite_not(Not(NotEquals("x", FIVE, True))) == Equals("x", FIVE, True)
    assert rewrite_not(Not(NotIn("x", (FIVE, SIX)))) == In("x", (FIVE, SIX))
    assert rewrite_not(Not(NotIn("x", (FIVE, FIVE)))) == Equals("x", FIVE)
    assert rewrite_not(Not(NotNull("x"))) == IsNull("x")


def test_not_not_is_the_child_rewritten() -> None:
    inner = Or((Equals("x", FIVE), Not(IsNull("y"))))
    assert rewrite_not(Not(Not(inner))) == Or((Equals("x", FIVE), NotNull("y")))
    assert rewrite_not(Not(And((Not(Not(Equals("x", FIVE))), IsNull("y"))))) == Or(
        (NotEquals("x", FIVE), NotNull("y"))
    )


def test_not_of_what_has_no_negated_leaf_never_narrows() -> None:
    unknown = Unknown("a function", "f(x) = 1")
    assert rewrite_not(Not(unknown)) == unknown  # still selects everything
    assert isinstance(rewrite_not(Not(AlwaysFalse())), AlwaysTrue)
    assert isinstance(rewrite_not(Not(AlwaysTrue())), AlwaysFalse)
