"""job_submit.lua + pal.lua in Lua 5.1 (lupa) against stub slurm and luasocket tables:
every decision and every failure path. Real lua5.1 + luasocket: test_pal_real_lua51.py."""

import json

import pytest

from hook_harness import LUA_FLAVOUR, NO_VAL, Hook
from pal_slurm.daemon.protocol import PlaceRequest, decode_request

PLACE = {"v": 1, "ok": True, "decision": "place", "reason": "pal",
         "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1", "rank": 7}
JOB = {"comment": "exp1 pal:class=resnet,gpus=2", "name": "train", "user_name": "ann",
       "user_id": 1001, "partition": "gpu", "tres_per_node": "gres:gpu:2"}


def admin_tag(job):
    return job.get("admin_comment", "")


def test_runtime_is_lua_51():
    hook = Hook()
    assert LUA_FLAVOUR == "lua51"
    assert hook.lua.eval("_VERSION") == "Lua 5.1"


def test_both_entry_points_exist_and_modify_never_touches_a_job():
    hook = Hook()
    assert hook.modify({"comment": "pal:class=a", "req_nodes": "gpu01"}) == 0
    assert hook.writes == [] and hook.sockets_created == 0


def test_place_with_slots_sets_nodes_counts_gres_and_tag():
    hook = Hook()
    hook.reply(PLACE)
    rc, job = hook.submit(JOB)
    assert rc == 0
    assert job["req_nodes"] == "gpu03"
    assert job["min_nodes"] == 1 and job["max_nodes"] == 1
    assert job["tres_per_node"] == "gres:gpu:s2:1,gres:gpu:s3:1"
    assert job["priority"] == NO_VAL  # placed jobs are not held
    assert admin_tag(job).startswith("pal:placed=gpu03;rank=v7;req=h")
    assert job["comment"] == JOB["comment"]  # the user's text is kept
    assert any(line.startswith("pal: place class=resnet") for line in hook.info)


def test_the_request_is_what_pald_decodes():
    hook = Hook()
    hook.reply(PLACE)
    _, job = hook.submit({**JOB, "min_nodes": 1, "max_nodes": 2, "tres_per_job": "gres:gpu:4",
                          "tres_per_task": "gres:gpu:1"})
    req = decode_request(json.dumps(hook.sent))
    assert isinstance(req, PlaceRequest)
    assert req.job.uid == 1001 and req.job.user == "ann" and req.job.name == "train"
    assert req.job.partition == "gpu" and req.job.gpus_per_node == 2
    assert req.job.gpus_per_job == 4 and (req.job.min_nodes, req.job.max_nodes) == (1, 2)
    assert req.pal.perf_class == "resnet" and req.pal.gpus == 2
    assert req.request_id and admin_tag(job).endswith(";req=" + req.request_id)
    assert req.job.comment == JOB["comment"] and req.job.tres_per_node == "gres:gpu:2"
    assert req.job.tres_per_task == "gres:gpu:1" and req.job.tres_per_socket is None


def test_unset_node_counts_are_not_sent_and_uid_falls_back_to_submit_uid():
    hook = Hook()
    hook.reply(PLACE)
    hook.submit({"comment": "pal:class=a"}, submit_uid=4242)
    job = hook.sent["job"]
    assert "min_nodes" not in job and "max_nodes" not in job and "gpus_per_node" not in job
    assert job["uid"] == 4242


def test_place_on_two_nodes_sorts_names_and_sets_both_counts():
    hook = Hook()
    hook.reply({**PLACE, "nodes": {"gpu04": [0, 1], "gpu02": [0, 1]},
                "gres": "gres:gpu:s0:1,gres:gpu:s1:1"})
    _, job = hook.submit({**JOB, "min_nodes": 2, "max_nodes": 2})  # sbatch -N 2
    assert job["req_nodes"] == "gpu02,gpu04"
    assert job["min_nodes"] == 2 and job["max_nodes"] == 2
    assert admin_tag(job).startswith("pal:placed=gpu02,gpu04;")


def test_place_drops_gpu_items_of_tres_per_job_and_keeps_the_rest():
    hook = Hook()
    hook.reply(PLACE)
    _, job = hook.submit({**JOB, "tres_per_job": "gres:gpu:2,license:x:1"})
    assert job["tres_per_job"] == "license:x:1"
    hook = Hook()
    hook.reply(PLACE)
    _, job = hook.submit({**JOB, "tres_per_job": "gres:gpu:2"})
    assert job["tres_per_job"] == ""  # "" clears a string field in Slurm


def test_place_without_gres_pins_nodes_only_and_keeps_the_gpu_request():
    hook = Hook()
    hook.reply({"v": 1, "ok": True, "decision": "place", "reason": "pal",
                "nodes": {"gpu02": [0, 1, 2], "gpu01": [3]}, "rank": 2})
    _, job = hook.submit({**JOB, "tres_per_node": None, "tres_per_job": "gres:gpu:4"})
    assert job["req_nodes"] == "gpu01,gpu02"
    assert job["min_nodes"] == 2 and job["max_nodes"] == 2
    assert job["tres_per_job"] == "gres:gpu:4" and "tres_per_node" not in job
    assert [w[0] for w in hook.writes] == ["req_nodes", "min_nodes", "max_nodes", "admin_comment"]
    assert job["admin_comment"].startswith("pal:placed=gpu01,gpu02;rank=v2;req=h")


def test_defer_holds_the_job_and_nothing_else():
    hook = Hook()
    hook.reply({"v": 1, "ok": True, "decision": "defer", "reason": "busy", "rank": 3})
    _, job = hook.submit(JOB)
    assert job["priority"] == 0
    assert admin_tag(job).startswith("pal:defer;rank=v3;req=h")
    assert [w[0] for w in hook.writes] == ["priority", "admin_comment"]


def test_pald_pass_leaves_the_job_alone_but_tags_it():
    hook = Hook()
    hook.reply({"v": 1, "ok": True, "decision": "pass", "reason": "no ranking yet"})
    _, job = hook.submit(JOB)
    assert hook.writes == [("admin_comment", job["admin_comment"])]
    assert job["admin_comment"].startswith("pal:pass=no-ranking-yet;req=h")
    assert job["priority"] == NO_VAL


def test_unknown_class_warning_is_relayed_to_the_user():
    hook = Hook()
    hook.reply({**PLACE, "class": "A",
                "warning": "unknown class 'mystery': using A (most variability-sensitive)"})
    _, job = hook.submit({**JOB, "comment": "pal:class=mystery"})
    assert hook.user_msgs == ["pal: unknown class 'mystery': using A (most variability-sensitive)"]
    assert job["req_nodes"] == "gpu03"


def test_percent_signs_in_messages_are_not_format_directives():
    hook = Hook()
    hook.reply({**PLACE, "warning": "100% %s %d"})
    rc, _ = hook.submit(JOB)
    assert rc == 0 and hook.user_msgs == ["pal: 100% %s %d"]


def test_existing_admin_comment_is_kept():
    hook = Hook()
    hook.reply(PLACE)
    _, job = hook.submit({**JOB, "admin_comment": "ops: vip"})
    assert job["admin_comment"].startswith("ops: vip pal:placed=gpu03;")


def assert_passed_untouched(hook, job, reason_prefix):
    assert [w[0] for w in hook.writes] == ["admin_comment"], hook.writes
    assert job["admin_comment"].startswith("pal:pass=" + reason_prefix), job["admin_comment"]
    assert "req_nodes" not in job and job["tres_per_node"] == "gres:gpu:2"
    assert job["priority"] == NO_VAL and job["min_nodes"] == NO_VAL
    assert any(line.startswith("pal: pass reason=" + reason_prefix) for line in hook.info)


@pytest.mark.parametrize(
    "stub, reason",
    [
        ({"connect_error": "connection refused"}, "pald-down"),
        ({"connect_error": "No such file or directory"}, "pald-down"),
        ({"connect_error": "timeout"}, "timeout"),
        ({"send_error": "closed"}, "socket-error"),
        ({"receive_error": "timeout"}, "timeout"),
        ({"receive_error": "closed"}, "socket-error"),
        ({"create_error": "too many open files"}, "socket-error"),
    ],
)
def test_socket_failures_pass_the_job(stub, reason):
    hook = Hook()
    hook.stub(**stub)
    rc, job = hook.submit(JOB)
    assert rc == 0
    assert_passed_untouched(hook, job, reason)


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("", "bad-reply"),
        ("garbage\x00\xff", "bad-reply"),
        ("[1,2,3]", "bad-reply"),
        ('{"v":1,"ok":true,"decision":"place"', "bad-reply"),
        ('{"v":1,"ok":true,"decision":"place"} trailing', "bad-reply"),
        ({"v": 2, "ok": True, "decision": "pass"}, "bad-reply"),
        ({"v": 1, "decision": "pass"}, "bad-reply"),
        ({"v": 1, "ok": True, "decision": "later"}, "bad-reply"),
        ({"v": 1, "ok": True, "decision": "place", "gres": "gres:gpu:1"}, "bad-reply"),
        ({"v": 1, "ok": True, "decision": "place"}, "bad-reply"),
        ({**PLACE, "gres": ""}, "bad-reply"),
        ({**PLACE, "gres": 5}, "bad-reply"),
        ({**PLACE, "nodes": {}}, "bad-reply"),
        ({**PLACE, "nodes": [["gpu03", [1]]]}, "bad-reply"),
        ({**PLACE, "nodes": {"gpu[01-02]": [0]}}, "bad-reply"),
        ({**PLACE, "nodes": {"gpu03": []}}, "bad-reply"),
        ({**PLACE, "nodes": {"gpu03": [-1]}}, "bad-reply"),
        ({**PLACE, "nodes": {"gpu03": ["0"]}}, "bad-reply"),
        ({**PLACE, "gres": "gpu:2"}, "bad-reply"),
        ({**PLACE, "gres": "gres:gpu:s0:1;x"}, "bad-reply"),
        ({**PLACE, "rank": "v7"}, "bad-reply"),
        ({**PLACE, "rank": 1.5}, "bad-reply"),
        ("[" * 200 + "]" * 200, "bad-reply"),
        ({"v": 1, "ok": False, "error": {"code": "bad_field", "message": "job.uid"}},
         "pald-error:bad_field"),
        ({"v": 1, "ok": False, "error": {"code": "internal", "message": "boom"}},
         "pald-error:internal"),
        ({"v": 1, "ok": False}, "pald-error:unknown"),
    ],
)
def test_bad_or_error_replies_pass_the_job(reply, reason):
    hook = Hook()
    hook.reply(reply)
    rc, job = hook.submit(JOB)
    assert rc == 0
    assert_passed_untouched(hook, job, reason)


def test_reply_sent_before_pald_read_the_request_is_still_read():
    # pald refusing a peer answers at once and closes; our send then sees "closed".
    hook = Hook()
    hook.stub(send_error="closed")
    hook.reply({"v": 1, "ok": False, "error": {"code": "forbidden", "message": "uid 5"}})
    _, job = hook.submit(JOB)
    assert_passed_untouched(hook, job, "pald-error:forbidden")


def test_send_failure_other_than_closed_does_not_wait_for_a_reply():
    hook = Hook()
    hook.stub(send_error="broken pipe")
    hook.reply(PLACE)
    _, job = hook.submit(JOB)
    assert_passed_untouched(hook, job, "socket-error")
    assert not any(c[0] == "receive" for c in hook.calls)


def test_a_lua_error_inside_the_hook_passes_the_job():
    hook = Hook()
    hook.reply(PLACE)
    rc, job = hook.submit(JOB, fail_read="tres_per_node")
    assert rc == 0
    assert job["admin_comment"] == "pal:pass=lua-error"
    assert any("read of tres_per_node failed" in line for line in hook.info)


def test_a_failed_field_write_rolls_back_what_was_already_written():
    hook = Hook()
    hook.reply(PLACE)
    rc, job = hook.submit(JOB, fail_write="tres_per_node")
    assert rc == 0
    # req_nodes/min/max were written, then put back before the pass tag.
    assert job["req_nodes"] == "" and job["min_nodes"] == NO_VAL and job["max_nodes"] == NO_VAL
    assert job["tres_per_node"] == "gres:gpu:2"
    assert job["admin_comment"].startswith("pal:pass=write-failed;req=h")


def test_hook_that_cannot_load_pal_lua_still_accepts_jobs(tmp_path):
    import shutil

    from hook_harness import HOOK_DIR

    shutil.copy(HOOK_DIR / "job_submit.lua", tmp_path / "job_submit.lua")
    (tmp_path / "pal.lua").write_text("error('broken install')\n")
    hook = Hook.__new__(Hook)
    from hook_harness import STUBS, LuaRuntime

    hook.lua = LuaRuntime(unpack_returned_tuples=True)
    hook.lua.execute(STUBS)
    hook.lua.execute(f"dofile({json.dumps(str(tmp_path / 'job_submit.lua'))})")
    hook.g = hook.lua.globals()
    assert any("cannot load pal.lua" in m for m in hook.g.slurm.errors.values())
    rc, job = hook.submit(JOB)
    assert rc == 0 and job["admin_comment"] == "pal:pass=hook-not-loaded"
    rc, job = hook.submit({"comment": "not ours"})
    assert rc == 0 and "admin_comment" not in job


def test_one_deadline_covers_connect_send_and_receive():
    hook = Hook({"PAL_TIMEOUT_MS": "120", "PAL_SOCKET": "/run/test/pald.sock"})
    hook.reply(PLACE)
    hook.stub(connect_cost=0.05)  # connect took 50 ms of the 120
    hook.submit(JOB)
    timeouts = [c[1] for c in hook.calls if c[0] == "settimeout"]
    assert [c[2] for c in hook.calls if c[0] == "settimeout"] == ["t", "t", "t", "t"]
    assert timeouts[0] == pytest.approx(0.12)  # connect
    assert timeouts[1] == pytest.approx(0.07) and timeouts[2] == pytest.approx(0.07)  # send, wait
    assert timeouts[3] == 0  # then only what has already arrived
    assert [c[1] for c in hook.calls if c[0] == "receive"] == [1, 64 * 1024 - 1]
    # the same instant is the request's deadline_ms: pald drops the request after it
    assert hook.sent["deadline_ms"] == 1000 * 1000 + 120
    assert ("connect", "/run/test/pald.sock") in hook.calls
    assert int(hook.g.STUB.closed) == 1


@pytest.mark.parametrize(
    "env, expected_s",
    [({}, 0.15), ({"PAL_TIMEOUT_MS": "5000"}, 0.15), ({"PAL_TIMEOUT_MS": "0"}, 0.001),
     ({"PAL_TIMEOUT_MS": "40"}, 0.04), ({"PAL_DAEMON_HOOK_TIMEOUT_MS": "60"}, 0.06),
     ({"PAL_DAEMON_HOOK_TIMEOUT_MS": "60", "PAL_TIMEOUT_MS": "40"}, 0.06),
     ({"PAL_TIMEOUT_MS": "fast"}, 0.15), ({"PAL_TIMEOUT_MS": "nan"}, 0.15)],
)
def test_timeout_is_configurable_but_never_above_150_ms(env, expected_s):
    hook = Hook(env)
    hook.reply(PLACE)
    hook.submit(JOB)
    assert hook.calls[0][0] == "settimeout" and hook.calls[0][1] == pytest.approx(expected_s)


def test_luasocket_2_style_unix_module_function_works_too():
    hook = Hook()
    hook.lua.execute('package.loaded["socket.unix"] = package.loaded["socket.unix"].stream')
    hook.reply(PLACE)
    _, job = hook.submit(JOB)
    assert job["req_nodes"] == "gpu03" and hook.sockets_created == 1


def test_default_socket_path():
    hook = Hook()
    hook.reply(PLACE)
    hook.submit(JOB)
    assert ("connect", "/run/pal/pald.sock") in hook.calls


@pytest.mark.parametrize(
    "env, path",
    [({"PAL_SOCKET": "/a.sock"}, "/a.sock"), ({"PAL_DAEMON_SOCKET": "/b.sock"}, "/b.sock"),
     ({"PAL_DAEMON_SOCKET": "/b.sock", "PAL_SOCKET": "/a.sock"}, "/b.sock"),
     ({"PAL_SOCKET": ""}, "/run/pal/pald.sock")],
)
def test_socket_path_from_the_environment(env, path):
    hook = Hook(env)
    hook.reply(PLACE)
    hook.submit(JOB)
    assert ("connect", path) in hook.calls


def test_overrides_global_wins_over_environment():
    hook = Hook({"PAL_SOCKET": "/env.sock"})
    hook.g.PAL_OVERRIDES.socket = "/override.sock"
    hook.reply(PLACE)
    hook.submit(JOB)
    assert ("connect", "/override.sock") in hook.calls


def test_request_too_large_is_not_sent():
    hook = Hook()
    rc, job = hook.submit({**JOB, "name": "x" * 70000})
    assert rc == 0 and hook.sockets_created == 0
    assert job["admin_comment"].startswith("pal:pass=request-too-large;req=h")


@pytest.mark.parametrize("comment", ["pal:class=a " + "x" * 1013, "pal:class=a,gpus=x " + "x" * 1100])
def test_comment_slurm_will_refuse_is_not_sent_and_the_user_is_told_the_truth(comment):
    """#10 item 12: slurmctld 22.05 refuses a --comment over 1024 bytes after the hook ran
    (tested on a lab: 1024 accepted, 1025 "Pathname ... too long"). The hook must not say the
    job is submitted, and must not ask pald (a decision for a job that never exists)."""
    hook = Hook()
    hook.reply(PLACE)
    rc, job = hook.submit({**JOB, "comment": comment})
    assert len(comment) > 1024
    assert rc == 0 and hook.sockets_created == 0
    (msg,) = hook.user_msgs
    assert f"--comment is {len(comment)} bytes" in msg and "will refuse this job" in msg
    assert "submitted" not in msg
    assert job["admin_comment"] == "pal:pass=comment-too-long"


def test_comment_of_exactly_1024_bytes_is_placed():
    hook = Hook()
    hook.reply(PLACE)
    comment = "pal:class=a " + "x" * 1012
    assert len(comment) == 1024
    _, job = hook.submit({**JOB, "comment": comment})
    assert job["req_nodes"] == "gpu03" and hook.user_msgs == []


def test_request_ids_differ_between_jobs():
    hook = Hook()
    hook.reply(PLACE)
    hook.submit(JOB)
    first = hook.sent["id"]
    hook.submit(JOB)
    assert hook.sent["id"] != first


@pytest.mark.parametrize(
    "tres, count",
    [("gres:gpu:2", 2), ("gres:gpu:s2:1,gres:gpu:s3:1", 2), ("gres/gpu:4", 4),
     ("gres:gpu:a100:3", 3), ("gres:gpu", 1), ("gres:gpu:a100", 1), ("gpu:2", 2),
     ("gres:mps:100", None), ("gres:gpu:2,gres:mps:50", 2), ("", None), (None, None),
     ("gres:gpu:a:b:c", None)],
)
def test_gpu_count_from_tres(tres, count):
    assert Hook().pal.gpu_count(tres) == count


from hypothesis import given, settings, strategies as st  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers(-10, 2**40) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=12) | st.sampled_from(
    ["place", "defer", "pass", "gpu03", "gres:gpu:s1:1", "gres:gpu:0",
     "gres:gpu:s2:1,gres:gpu:s3:1", "gres:gpu:2", "pal:defer"])
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["v", "ok", "decision", "nodes", "gres", "rank", "reason", "warning",
                     "error", "code", "gpu03"]) | st.text(max_size=4), inner, max_size=5),
    max_leaves=12)
_replies = st.fixed_dictionaries({"v": st.just(1) | _scalars, "ok": st.just(True) | _scalars},
                                 optional={"decision": _scalars, "nodes": _json, "gres": _json,
                                           "rank": _json, "reason": _json, "warning": _json})


@settings(max_examples=150, deadline=None)
@given(_replies | _json)
def test_any_reply_leaves_the_job_placed_deferred_or_passed_never_broken(reply):
    hook = Hook()
    hook.reply(reply)
    rc, job = hook.submit(JOB)
    assert rc == 0
    tag = job["admin_comment"]
    assert tag.startswith(("pal:placed=", "pal:defer", "pal:pass="))
    assert tag.count("pal:") == 1  # pald's text never forges a second tag
    if tag.startswith("pal:pass="):
        assert "req_nodes" not in job and job["priority"] == NO_VAL
        assert job["tres_per_node"] == "gres:gpu:2"
    if tag.startswith("pal:placed="):
        assert job["req_nodes"] and job["min_nodes"] == job["max_nodes"] == len(
            job["req_nodes"].split(","))
        # whatever pald said, a placement applied is in the job's shape: one node, 2 GPUs
        assert job["min_nodes"] == 1 and hook.pal.gpu_count(job["tres_per_node"]) == 2
