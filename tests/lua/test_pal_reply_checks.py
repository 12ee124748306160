"""What the hook does with pald's answer before writing it into a job: a reply is
checked against the job (shape, GPU count, slot types, nodes Slurm will give it) and passes
the job untouched on any doubt; the reply read is capped in bytes and time together; the
request carries its deadline; pald's text is made safe for terminals, logs and the tag."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from hook_harness import NO_VAL, Hook
from pal_slurm.daemon.cycle import is_pal_held
from pal_slurm.daemon.protocol import PlaceRequest, decode_request
from pal_slurm.intake.hostlist import HostSet, compress, expand

PLACE = {"v": 1, "ok": True, "decision": "place", "reason": "pal",
         "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1", "rank": 7}
JOB = {"comment": "pal:class=resnet", "user_id": 1001, "tres_per_node": "gres:gpu:2"}
PARTS = {"gpu": {"nodes": "gpu[01-04]", "flag_default": 1},
         "big": {"nodes": "big[001-100]", "flag_default": 0}}


def submit(reply, job=None, env=None, parts=None):
    hook = Hook(env)
    hook.reply(reply)
    _, final = hook.submit({**JOB, **(job or {})}, parts=parts)
    return hook, final


def assert_passed_bad_reply(hook, job, original):
    """The job exactly as submitted, the pass tag, and a message that tells the user so."""
    assert [w[0] for w in hook.writes] == ["admin_comment"], hook.writes
    assert job["admin_comment"].startswith("pal:pass=bad-reply;req=h"), job["admin_comment"]
    assert "req_nodes" not in job and job.get("tres_per_node") == original.get("tres_per_node")
    assert job["priority"] == NO_VAL and job["min_nodes"] == original.get("min_nodes", NO_VAL)
    (msg,) = hook.user_msgs
    assert msg.startswith("pal: the placement service's answer did not fit this job (")
    assert msg.endswith("the job is submitted as you asked, without PAL placement")


# ---------------------------------------------------------------- #2 / #10: the job's shape

@pytest.mark.parametrize(
    "reply, job",
    [
        # the finding: gres:gpu:0 ran a GPU job with no GPU
        ({**PLACE, "gres": "gres:gpu:0"}, {}),
        # the finding: 4 nodes for a 1-GPU job
        ({**PLACE, "nodes": {f"gpu0{i}": [0] for i in range(1, 5)}, "gres": "gres:gpu:s0:1"},
         {"tres_per_node": "gres:gpu:1"}),
        # 2 nodes for a job without -N (Slurm: one node)
        ({**PLACE, "nodes": {"gpu01": [2, 3], "gpu03": [2, 3]}}, {}),
        # more nodes than -N 2-3 allows, fewer than -N 2
        ({**PLACE, "nodes": {f"gpu0{i}": [2, 3] for i in range(1, 5)}},
         {"min_nodes": 2, "max_nodes": 3}),
        (PLACE, {"min_nodes": 2, "max_nodes": 2}),
        # GPU count differs from the job's
        ({**PLACE, "nodes": {"gpu03": [2]}, "gres": "gres:gpu:s2:1"}, {}),
        ({**PLACE, "nodes": {"gpu03": [0, 1, 2]}, "gres": None}, {}),
        ({**PLACE, "gres": "gres:gpu:3"}, {}),
        # slot types outside the binding scheme, or ones a node cannot have
        ({**PLACE, "gres": "gres:gpu:s2:1,gres:gpu:s9:1", "nodes": {"gpu03": [2, 9]}},
         {"_env": {"PAL_MAX_GPUS_PER_NODE": "4"}}),
        ({**PLACE, "nodes": {"gpu03": [2, 30]}, "gres": "gres:gpu:s2:1,gres:gpu:s30:1"}, {}),
        ({**PLACE, "gres": "gres:gpu:a100:2"}, {}),
        ({**PLACE, "gres": "gres:gpu:s2:2"}, {}),
        ({**PLACE, "gres": "gres:gpu:s02:1,gres:gpu:s3:1"}, {}),
        ({**PLACE, "gres": "gres:gpu:sx:1,gres:gpu:s3:1"}, {}),
        ({**PLACE, "gres": "gres:gpu:s2:1,gres:gpu:s2:1"}, {}),
        ({**PLACE, "gres": "gres:gpu:s2:1,gres:gpu:2"}, {}),
        ({**PLACE, "gres": "gres/gpu:s2:1,gres/gpu:s3:1"}, {}),
        ({**PLACE, "gres": "gres:gpu:s2:1,gres:gpu:s3:1,"}, {}),
        # slots that are not the ones the gres binds, or the same slot twice
        ({**PLACE, "nodes": {"gpu03": [0, 1]}}, {}),
        ({**PLACE, "nodes": {"gpu03": [2, 2]}, "gres": None}, {}),
        # node names Slurm cannot have
        ({**PLACE, "nodes": {"g" * 65: [2, 3]}}, {}),
        ({**PLACE, "nodes": {"gpu03;rm": [2, 3]}}, {}),
        ({**PLACE, "nodes": {"-gpu03": [2, 3]}}, {}),
        # a total request (--gpus=4) answered with another total or too many nodes
        ({**PLACE, "nodes": {"gpu01": [0, 1], "gpu02": [0]}, "gres": None},
         {"tres_per_node": None, "tres_per_job": "gres:gpu:4"}),
        ({**PLACE, "nodes": {f"gpu0{i}": [0] for i in range(1, 5)}, "gres": None},
         {"tres_per_node": None, "tres_per_job": "gres:gpu:2"}),
        # a job that asks for no GPU at all gets none from PAL either
        (PLACE, {"tres_per_node": None}),
    ],
)
def test_a_reply_that_does_not_fit_the_job_passes_it_untouched(reply, job):
    env = job.pop("_env", None)
    hook, final = submit({k: v for k, v in reply.items() if v is not None}, job, env)
    assert_passed_bad_reply(hook, final, {**JOB, **job})


@pytest.mark.parametrize(
    "reply, job, nodes",
    [
        # -N 2 --gres=gpu:2 on two nodes with the same slots
        ({**PLACE, "nodes": {"gpu01": [2, 3], "gpu04": [2, 3]}}, {"min_nodes": 2, "max_nodes": 2},
         "gpu01,gpu04"),
        # -N 2-4 answered with 3 nodes, pinned only
        ({**PLACE, "nodes": {"gpu01": [0, 1], "gpu02": [1, 2], "gpu04": [0, 3]}, "gres": None},
         {"min_nodes": 2, "max_nodes": 4}, "gpu01,gpu02,gpu04"),
        # --gpus=4 spread unevenly, pinned only
        ({**PLACE, "nodes": {"gpu01": [0, 1, 2], "gpu02": [3]}, "gres": None},
         {"tres_per_node": None, "tres_per_job": "gres:gpu:4"}, "gpu01,gpu02"),
        # --gpus=4 -N 2: bound slot by slot
        ({**PLACE, "nodes": {"gpu01": [0, 1], "gpu02": [0, 1]}, "gres": "gres:gpu:s0:1,gres:gpu:s1:1"},
         {"tres_per_node": None, "tres_per_job": "gres:gpu:4", "min_nodes": 2, "max_nodes": 2},
         "gpu01,gpu02"),
        # gpus= in the comment only
        ({**PLACE, "nodes": {"gpu02": [0, 1, 2]}, "gres": "gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1"},
         {"tres_per_node": None, "comment": "pal:class=a,gpus=3"}, "gpu02"),
        # one untyped item is a binding of the right count too
        ({**PLACE, "gres": "gres:gpu:2"}, {}, "gpu03"),
    ],
)
def test_replies_in_the_jobs_shape_are_applied(reply, job, nodes):
    hook, final = submit({k: v for k, v in reply.items() if v is not None}, job)
    assert final["req_nodes"] == nodes, final.get("admin_comment")
    assert final["admin_comment"].startswith("pal:placed=" + nodes + ";")
    assert hook.user_msgs == []


def test_max_gpus_per_node_is_configurable():
    reply = {**PLACE, "nodes": {"gpu03": [16, 17]}, "gres": "gres:gpu:s16:1,gres:gpu:s17:1"}
    hook, job = submit(reply)
    assert_passed_bad_reply(hook, job, JOB)
    _, job = submit(reply, env={"PAL_MAX_GPUS_PER_NODE": "32"})
    assert job["tres_per_node"] == "gres:gpu:s16:1,gres:gpu:s17:1"


# ------------------------------------------------------- #2: nodes Slurm will give the job

@pytest.mark.parametrize(
    "job, parts",
    [
        ({"exc_nodes": "gpu03"}, None),  # the job excludes the node
        ({"exc_nodes": "gpu[01-03]"}, None),
        ({}, {"gpu": {"nodes": "gpu[01-02,04]", "flag_default": 1}}),  # node removed
        ({"partition": "big"}, PARTS),  # not in the job's partition
        ({"partition": "big,other"}, PARTS),
    ],
)
def test_a_node_slurm_would_refuse_passes_the_job(job, parts):
    hook, final = submit(PLACE, job, parts=parts)
    assert_passed_bad_reply(hook, final, {**JOB, **job})


@pytest.mark.parametrize(
    "job, parts",
    [
        ({}, PARTS),  # the default partition
        ({"partition": "big,gpu"}, PARTS),  # one of the job's partitions has it
        ({"exc_nodes": "gpu[01-02,04]"}, PARTS),
        ({"partition": "nosuch"}, PARTS),  # Slurm refuses the partition itself: not ours
        ({}, {}),
    ],
)
def test_nodes_slurm_accepts_are_placed(job, parts):
    _, final = submit(PLACE, job, parts=parts)
    assert final["req_nodes"] == "gpu03"


def test_all_nodes_must_share_one_of_the_jobs_partitions():
    parts = {"a": {"nodes": "gpu[01-02]", "flag_default": 0},
             "b": {"nodes": "gpu[03-04]", "flag_default": 0}}
    reply = {**PLACE, "nodes": {"gpu02": [2, 3], "gpu03": [2, 3]}}
    job = {"partition": "a,b", "min_nodes": 2, "max_nodes": 2}
    hook, final = submit(reply, job, parts=parts)
    assert_passed_bad_reply(hook, final, {**JOB, **job})


_hostnames = st.builds(lambda p, n, w: f"{p}{n:0{w}d}", st.sampled_from(["gpu", "n", "a1b"]),
                       st.integers(0, 120), st.integers(1, 4))


@settings(max_examples=200, deadline=None)
@given(st.lists(_hostnames, min_size=1, max_size=12, unique=True), _hostnames)
def test_lua_hostlist_membership_agrees_with_pythons_expand(names, probe):
    """One hostlist vocabulary: what Python compresses, Lua matches exactly as Python expands."""
    pal = Hook().pal
    expr = compress(names)
    members = set(expand(expr))
    matcher = HostSet.from_expr(expr)  # pald's matcher: the third reader of the same list
    for name in [*names, probe, probe + "x", "x" + probe]:
        assert pal.hostlist_has(expr, name) == (name in members) == (name in matcher), (expr, name)


@pytest.mark.parametrize("expr, name, expected", [
    ("gpu[01-04,07]", "gpu07", True), ("gpu[01-04,07]", "gpu7", False),
    ("gpu[1-10]", "gpu10", True), ("gpu[1-10]", "gpu010", False),
    ("rack[1-2]-n[01-02]", "rack2-n02", True), ("rack[1-2]-n[01-02]", "rack3-n01", False),
    ("gpu[01-02]ib", "gpu02ib", True), ("cpu1,gpu[1-2]", "cpu1", True),
    ("", "gpu1", False), ("gpu[01-02", "gpu01", False),
])
def test_hostlist_forms(expr, name, expected):
    assert Hook().pal.hostlist_has(expr, name) is expected
    if expr != "gpu[01-02":  # malformed: pald refuses it at parse (the job passes), Lua says no
        assert (name in HostSet.from_expr(expr)) is expected


# ------------------------------------------------------------ #9: replies capped in size and time

def test_an_oversized_reply_is_cut_at_64_kib_and_passes():
    hook = Hook()
    hook.reply(json.dumps({**PLACE, "reason": "x" * 100_000}))
    _, job = hook.submit(JOB)
    assert_passed_bad_reply(hook, job, JOB)
    asked = [c[1] for c in hook.calls if c[0] == "receive"]
    assert sum(asked) <= 64 * 1024  # never asked LuaSocket for more than the protocol's limit
    assert "longer than 65536 bytes" in hook.user_msgs[0]


def test_a_reply_of_exactly_64_kib_with_its_newline_is_read():
    line = json.dumps({**PLACE, "reason": ""})
    line = line[:-1] + ', "pad": "' + "x" * (64 * 1024 - 1 - len(line) - 11) + '"}'
    assert len(line) + 1 == 64 * 1024
    hook = Hook()
    hook.reply(line)
    _, job = hook.submit(JOB)
    assert job["req_nodes"] == "gpu03"


def test_a_streaming_reply_without_newline_stops_at_the_cap():
    hook = Hook()
    hook.reply("x" * 10_000_000, newline=False)
    _, job = hook.submit(JOB)
    assert job["admin_comment"].startswith("pal:pass=bad-reply")
    assert int(hook.g.STUB.pos) - 1 <= 64 * 1024  # bytes taken from the socket


def test_a_dribbling_reply_stops_at_the_one_deadline():
    """pald sends 10 bytes every 5 ms and never a newline: the hook gives up at 150 ms in all
    (one deadline for the whole exchange), not 150 ms per read."""
    hook = Hook()
    hook.reply("x" * 10_000, newline=False)
    hook.stub(chunk=10, receive_cost=0.005)
    _, job = hook.submit(JOB)
    assert job["admin_comment"].startswith("pal:pass=timeout")
    assert float(hook.g.STUB.now) - 1000.0 <= 0.150 + 2 * 0.005 + 1e-9  # one round over at most
    assert int(hook.g.STUB.pos) - 1 < 1000


def test_a_reply_arriving_in_pieces_is_put_together():
    hook = Hook()
    hook.reply(PLACE)
    hook.stub(chunk=7)
    _, job = hook.submit(JOB)
    assert job["req_nodes"] == "gpu03"


def test_a_line_closed_before_its_newline_passes():
    hook = Hook()
    hook.reply(PLACE, newline=False)
    hook.stub(eof="closed")
    _, job = hook.submit(JOB)
    assert job["admin_comment"].startswith("pal:pass=socket-error")


# --------------------------------------------------------------- #3: the request's deadline

def test_the_request_carries_its_deadline_and_pald_still_decodes_it():
    hook = Hook({"PAL_TIMEOUT_MS": "80"})
    hook.reply(PLACE)
    hook.submit(JOB)
    sent = hook.sent
    assert sent["v"] == 1 and sent["deadline_ms"] == 1_000_080  # STUB clock 1000.0 s + 80 ms
    assert isinstance(sent["deadline_ms"], int)
    assert isinstance(decode_request(json.dumps(sent)), PlaceRequest)


# ------------------------------------------------- #10: pald's text on its way to people and tags

@pytest.mark.parametrize(
    "warning, shown",
    [
        ("unknown class 'x': using A", "pal: unknown class 'x': using A"),
        ("pal: unknown class", "pal: unknown class"),  # one prefix, not "pal: pal:"
        ("pal:pal: twice", "pal: twice"),
        ("red \x1b[31mALERT\x1b[0m\x07", "pal: red [31mALERT[0m"),
        ("csi \u009b2J and \u0085 next", "pal: csi 2J and  next"),
        ("line1\nline2\r\tend", "pal: line1 line2  end"),
        ("caf\u00e9 \u2713", "pal: caf\u00e9 \u2713"),
        ("\x1b\x1b", None),
    ],
)
def test_warnings_reach_users_without_control_characters_and_one_prefix(warning, shown):
    hook = Hook()
    hook.reply({**PLACE, "warning": warning})
    _, job = hook.submit(JOB)
    assert job["req_nodes"] == "gpu03"
    assert hook.user_msgs == ([shown] if shown else [])
    for msg in hook.user_msgs:
        assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in msg)


def test_bytes_that_are_not_utf8_are_dropped():
    """pald's JSON could carry raw bytes (the Lua decoder passes them through): a lone 0x9b
    is CSI on an 8-bit terminal."""
    got = Hook().lua.eval('package.loaded.pal.safe_text("a\\255\\254b\\155c\\194\\133d\\226\\156e", 200)')
    assert got == "abcde"


def test_a_long_warning_is_cut_at_200_bytes_on_a_character():
    hook = Hook()
    hook.reply({**PLACE, "warning": "\u00e9" * 500})
    hook.submit(JOB)
    (msg,) = hook.user_msgs
    body = msg[len("pal: "):].encode()
    assert len(body) <= 200 and body.decode() == "\u00e9" * 100


@pytest.mark.parametrize("reason", ["x pal:defer", "pal:defer", "PAL:defer;rank=v1",
                                    "a\npal:placed=gpu01", "ok;req=forged"])
def test_a_reason_cannot_forge_another_tag(reason):
    hook = Hook()
    hook.reply({"v": 1, "ok": True, "decision": "pass", "reason": reason})
    _, job = hook.submit(JOB)
    tag = job["admin_comment"]
    assert tag.startswith("pal:pass=") and tag.count("pal:") == 1 and tag.count(";") == 1
    assert "pal:defer" not in tag and ";req=forged" not in tag

    class HeldJob:  # what pald's cycle sees for this job once the user holds it
        held = True
        admin_comment = tag

    assert not is_pal_held(HeldJob)


def test_error_details_reach_the_log_as_one_safe_line():
    hook = Hook()
    hook.reply({"v": 1, "ok": False, "error": {"code": "internal", "message": "a\nlua: forged\x1b[2J"}})
    _, job = hook.submit(JOB)
    (line,) = [i for i in hook.info if i.startswith("pal: pass")]
    assert "\n" not in line and "\x1b" not in line and line.endswith("detail=a lua: forged[2J")


# --------------------------------------- #2: jobs whose nodes the hook cannot check a placement for

@pytest.mark.parametrize("field, value, reason", [
    ("features", "a100&fast", "constraint"),  # pinned nodes without the features: sbatch fails
    ("reservation", "maint", "reservation"),  # pinned nodes outside it: sbatch fails
    ("req_nodes", "gpu[02-03]", "nodelist"),  # the user chose the nodes
])
def test_jobs_pinned_by_the_user_are_placed_only_when_pald_checked_them(field, value, reason):
    hook = Hook()
    hook.reply(PLACE)  # a pald that does not say it judged the job's restrictions
    _, job = hook.submit({**JOB, field: value})
    assert hook.sockets_created == 1
    assert [w[0] for w in hook.writes] == ["admin_comment"]
    assert job["admin_comment"].startswith("pal:pass=" + reason) and job[field] == value
    assert job["tres_per_node"] == "gres:gpu:2" and job["priority"] == NO_VAL
    checked = Hook()
    checked.reply({**PLACE, "site_checked": True})
    _, job = checked.submit({**JOB, field: value})
    assert job["admin_comment"].startswith("pal:placed=")
    # a requeued job is placed again within the user's own nodelist only (daemon/requeue.py)
    assert (";nodelist=own" in job["admin_comment"]) == (field == "req_nodes")
    # the user's restriction stays (Slurm still enforces it); a nodelist narrows to pald's choice in it
    assert job[field] == ("gpu03" if field == "req_nodes" else value)
    if field == "req_nodes":  # a placement outside the user's own nodes is refused
        outside = Hook()
        outside.reply({**PLACE, "site_checked": True})
        _, job = outside.submit({**JOB, field: "gpu01"})
        assert job["admin_comment"].startswith("pal:pass=bad-reply") and job[field] == "gpu01"
