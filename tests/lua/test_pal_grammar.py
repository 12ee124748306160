"""The Lua parser against the ONE golden table (tests/golden/comment_grammar.json), directly and
through the whole hook: non-PAL -> untouched, no socket; malformed -> untouched + user message;
well formed -> pald is asked with exactly the parsed fields and the raw comment."""

import json

import pytest

from hook_harness import REPO, Hook, to_py

GOLDEN = json.loads((REPO / "tests" / "golden" / "comment_grammar.json").read_text())
CASES = GOLDEN["cases"]
PASS_REPLY = {"v": 1, "ok": True, "decision": "pass", "reason": "test"}


@pytest.fixture(scope="module")
def hook():
    return Hook()


def test_lua_names_the_same_grammar(hook):
    assert hook.pal.GRAMMAR == GOLDEN["grammar"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_case_parse(hook, case):
    result = hook.pal.parse_comment(case["comment"])
    status, value = (result, None) if isinstance(result, str) else result
    expect = case["expect"]
    assert hook.pal.opted_out(case["comment"]) is expect.get("opt_out", False)
    if not expect["pal"]:
        assert status == "none"
    elif "error" in expect:
        assert status == "error"
        assert value.code == expect["error"]
        assert value.message
    else:
        assert status == "ok"
        assert to_py(value) == expect["spec"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_case_through_the_hook(case):
    hook = Hook()
    hook.reply(PASS_REPLY)
    fields = {} if case["comment"] is None else {"comment": case["comment"]}
    rc, job = hook.submit(fields)
    assert rc == 0
    expect = case["expect"]
    if not expect["pal"]:
        assert hook.writes == []
        assert hook.sockets_created == 0
        assert hook.user_msgs == [] and hook.info == []
    elif "error" in expect:
        assert hook.sockets_created == 0
        assert hook.writes == [("admin_comment", f"pal:pass=bad-comment:{expect['error']}")]
        (msg,) = hook.user_msgs
        assert "without PAL placement" in msg and GOLDEN["grammar"] in msg
        assert job.get("priority") == 4294967294  # never held
    else:
        assert hook.sockets_created == 1
        assert hook.sent["pal"] == expect["spec"]
        assert hook.sent["job"]["comment"] == case["comment"]


# Differential fuzzing: beyond the golden table, Lua and Python must agree on any comment.
from hypothesis import given, settings, strategies as st  # noqa: E402

from pal_slurm.model.comment_grammar import CommentError, parse_comment  # noqa: E402

_pieces = st.sampled_from([
    "pal:", "PAL:", "xpal:", "class=", "gpus=", "mode=", "net=", "now", "defer", "later", ",",
    "=", " ", "\t", "\n", "\v", "\f", "\r", "\u00a0", "resnet", "bert", "0", "1", "42",
    "999999", "1000000", "-", ".", "_", "a", "Z", "é", "/", ";", "\"", "", "color=", "Class=",
])
_comments = st.lists(_pieces | st.text(max_size=3), max_size=12).map("".join)


def _python_view(comment):
    try:
        spec = parse_comment(comment)
    except CommentError as err:
        return ("error", err.code)
    return ("none",) if spec is None else ("ok", spec.to_wire())


@settings(max_examples=1500, deadline=None)
@given(_comments)
def test_lua_and_python_agree_on_any_comment(hook, comment):
    result = hook.pal.parse_comment(comment)
    status, value = (result, None) if isinstance(result, str) else result
    lua_view = ("none",) if status == "none" else (
        ("error", value.code) if status == "error" else ("ok", to_py(value)))
    assert lua_view == _python_view(comment)
