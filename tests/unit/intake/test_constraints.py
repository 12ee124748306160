"""--constraint as pald reads it (pal_slurm.intake.constraints)."""

from __future__ import annotations

import pytest

from pal_slurm.intake.constraints import ConstraintTooLarge, ConstraintUnsupported, parse_constraint


@pytest.mark.parametrize("text, feats, expected", [
    ("f4", {"f4"}, True),
    ("f4", {"f3"}, False),
    ("a&b", {"a", "b"}, True),
    ("a&b", {"a"}, False),
    ("a|b", {"b"}, True),
    ("a|b|c", {"d"}, False),
    ("(a|b)&c", {"b", "c"}, True),
    ("(a|b)&c", {"b"}, False),
    ("a&(b|c)", {"a", "c"}, True),
    ("[a|b]", {"a"}, True),
    ("((a))", {"a"}, True),
])
def test_constraint_evaluates_names_and_or_and_groups(text, feats, expected):
    assert parse_constraint(text).matches(frozenset(feats)) is expected


@pytest.mark.parametrize("text", ["a&b|c", "a*2", "[a*2&b]", "a,b", "!a", "(a", "a)", "", "a&", "&a", "()"])
def test_constraint_pald_cannot_judge_is_refused(text):
    with pytest.raises(ConstraintUnsupported):
        parse_constraint(text)


def test_brackets_are_a_matching_or():
    assert parse_constraint("[a|b]").matching_or
    assert not parse_constraint("(a|b)").matching_or


def test_over_its_caps_is_too_large_with_a_short_message():
    for text in ("(" * 600 + "a" + ")" * 600, "a&" * 30_000 + "a", "[" * 17 + "a" + "]" * 17):
        with pytest.raises(ConstraintTooLarge) as caught:
            parse_constraint(text)
        assert len(str(caught.value)) < 80
