"""pal.lua targets Debian's Lua 5.1 but stays portable: Slurm builds elsewhere may link Lua
5.2-5.4. The golden grammar and the place/pass paths under every Lua that lupa ships."""

import importlib
import json

import pytest

from hook_harness import REPO, Hook, to_py

GOLDEN = json.loads((REPO / "tests" / "golden" / "comment_grammar.json").read_text())
PLACE = {"v": 1, "ok": True, "decision": "place", "reason": "pal",
         "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1", "rank": 7}


def runtime(flavour):
    try:
        return importlib.import_module(f"lupa.{flavour}").LuaRuntime
    except ImportError:
        pytest.skip(f"lupa has no {flavour}")


@pytest.mark.parametrize("flavour", ["lua51", "lua52", "lua53", "lua54"])
def test_grammar_and_hook_paths_under_each_lua(flavour):
    hook = Hook(runtime=runtime(flavour))
    assert hook.lua.eval("_VERSION") == "Lua " + flavour[3] + "." + flavour[4]
    for case in GOLDEN["cases"]:
        result = hook.pal.parse_comment(case["comment"])
        status, value = (result, None) if isinstance(result, str) else result
        expect = case["expect"]
        if not expect["pal"]:
            assert status == "none", case["name"]
        elif "error" in expect:
            assert (status, value.code) == ("error", expect["error"]), case["name"]
        else:
            assert (status, to_py(value)) == ("ok", expect["spec"]), case["name"]
    hook.reply(PLACE)
    rc, job = hook.submit({"comment": "pal:class=resnet,gpus=2", "tres_per_node": "gres:gpu:2"})
    assert rc == 0 and job["req_nodes"] == "gpu03" and job["min_nodes"] == 1
    assert job["admin_comment"].startswith("pal:placed=gpu03;rank=v7;req=h")
    assert hook.sent["pal"] == {"class": "resnet", "gpus": 2}
    raw = hook.g.STUB.sent
    assert '"gpus_per_node":2,' in raw and '"gpus":2}' in raw  # integers on the wire, not 2.0
    hook.stub(connect_error="connection refused")
    rc, job = hook.submit({"comment": "pal:class=resnet", "tres_per_node": "gres:gpu:2"})
    assert rc == 0 and job["admin_comment"].startswith("pal:pass=pald-down")
