"""The Python validator against the ONE golden table the Lua parser also runs (tests/lua)."""

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from pal_slurm.model.comment_grammar import (
    GRAMMAR,
    CommentError,
    CommentSpec,
    opted_out,
    parse_comment,
    verify_spec,
)

GOLDEN = json.loads(
    (Path(__file__).resolve().parents[2] / "golden" / "comment_grammar.json").read_text()
)
CASES = GOLDEN["cases"]


def test_golden_file_names_the_grammar_we_implement():
    assert GOLDEN["grammar"] == GRAMMAR
    assert len(CASES) >= 40
    assert len({c["name"] for c in CASES}) == len(CASES), "case names must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_case(case):
    expect = case["expect"]
    assert opted_out(case["comment"]) is expect.get("opt_out", False)
    if not expect["pal"]:
        assert parse_comment(case["comment"]) is None
    elif "error" in expect:
        with pytest.raises(CommentError) as info:
            parse_comment(case["comment"])
        assert info.value.code == expect["error"]
        assert info.value.message  # a sentence for the user, never empty
    else:
        spec = parse_comment(case["comment"])
        assert spec is not None
        assert spec.to_wire() == expect["spec"]


def test_verify_spec_accepts_the_matching_parse():
    sent = CommentSpec("bert", gpus=4)
    assert verify_spec("x pal:class=bert,gpus=4 y", sent) == sent


@pytest.mark.parametrize(
    "comment, sent, code",
    [
        ("pal:class=bert", CommentSpec("resnet"), "mismatch"),
        ("pal:class=bert,gpus=2", CommentSpec("bert"), "mismatch"),
        ("no spec here", CommentSpec("bert"), "mismatch"),
        ("pal:class=bert,mode=later", CommentSpec("bert", mode="later"), "bad_mode"),
    ],
)
def test_verify_spec_rejects_what_the_comment_does_not_say(comment, sent, code):
    with pytest.raises(CommentError) as info:
        verify_spec(comment, sent)
    assert info.value.code == code


@given(st.text())
def test_any_text_gives_none_a_spec_or_a_comment_error(text):
    try:
        result = parse_comment(text)
    except CommentError as err:
        assert err.code in {
            "multiple_specs", "empty", "bad_pair", "unknown_key", "duplicate_key",
            "empty_value", "bad_gpus", "bad_mode", "bad_name", "missing_class",
        }
    else:
        assert result is None or isinstance(result, CommentSpec)
        if result is None:
            assert not (text.startswith("pal:") or " pal:" in text)
