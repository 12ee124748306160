"""The hook's hostlist matching and the bound on its whole run: each node list (the job's
--exclude / --nodelist, its partitions' lists) is compiled once per run and the placed nodes
are looked up in it; a list the hook cannot read passes the job; the checks after pald's reply
stop at the run's deadline. The membership cases are shared with Python's hostlist module
(tests/golden/hostlist_match.json)."""

import json
from pathlib import Path

import pytest

from hook_harness import NO_VAL, Hook
from hook_harness import fill as fill_list

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "hostlist_match.json"
CASES = json.loads(GOLDEN.read_text())["cases"]
LIST_BYTES = 62 * 1024  # the longest --exclude a 64 KiB request line still carries with the job


def expression(case):
    if "expr" in case:
        return case["expr"]
    return "".join(text * times for text, times in case["expr_parts"])


@pytest.fixture(scope="module")
def pal():
    return Hook().pal


def compile_list(pal, expr):
    """pal.hostlist_compile's answer as (matcher, why): (matcher, None) or (None, why)."""
    got = pal.hostlist_compile(expr)
    return (None, got[1]) if isinstance(got, tuple) else (got, None)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.get('expr', 'long')[:30]}~{c['name']}")
def test_golden_membership(pal, case):
    expr = expression(case)
    matcher, why = compile_list(pal, expr)
    if case["status"] == "ok":
        assert matcher is not None, why
        assert pal.hostlist_match(matcher, case["name"]) is case["member"]
    else:
        assert matcher is None and why == case["status"]
    assert pal.hostlist_has(expr, case["name"]) is case["member"]


def test_one_compiled_list_answers_many_names(pal):
    matcher, _ = compile_list(pal, "gpu[01-10,20],cpu[1-3]x,a[1-2]b[07-08]")
    members = {"gpu01", "gpu10", "gpu20", "cpu2x", "a2b08"}
    others = {"gpu11", "gpu1", "cpu4x", "a2b8", "a3b07"}
    assert {n for n in members | others if pal.hostlist_match(matcher, n)} == members


# ------------------------------------------------- a 16-node placement against long lists

NODES = 16


def fill(item, limit=LIST_BYTES):
    return fill_list(item, limit)


# shape -> (placed node names, a long --exclude that spares them, an item excluding the 8th)
SHAPES = {
    "distinct names": ([f"gpu{i:02d}" for i in range(1, NODES + 1)],
                       fill(lambda i: f"x{i:05d}"), "gpu08"),
    "ranges": ([f"gpu{i:02d}" for i in range(1, NODES + 1)],
               fill(lambda i: f"gpu[{3 * i + 100:04d}-{3 * i + 101:04d}]"), "gpu[07-08]"),
    "one big range repeated": ([f"n{i}" for i in range(1, NODES + 1)],
                               fill(lambda i: "n[100-99999]"), "n[0-99999]"),
    "multi-group": ([f"r9-n{i:02d}" for i in range(1, NODES + 1)],
                    fill(lambda i: f"r[1-2]-n[{i % 90 + 1:02d}-{i % 90 + 9:02d}]"), "r[8-9]-n[08-09]"),
}


def sixteen_node_reply(names):
    return {"v": 1, "ok": True, "decision": "place", "reason": "pal", "rank": 3,
            "nodes": {n: [0] for n in names}, "gres": "gres:gpu:s0:1"}


def sixteen_node_job(exclude):
    return {"comment": "pal:class=resnet", "user_id": 1001, "tres_per_node": "gres:gpu:1",
            "min_nodes": NODES, "max_nodes": NODES, "exc_nodes": exclude}


LONG_LISTS = {"PAL_MAX_JOB_LIST_BYTES": str(64 * 1024)}  # a site that lets jobs carry such lists


def run(names, exclude, parts=None, env=LONG_LISTS, **stub):
    hook = Hook(env=env)
    hook.reply(sixteen_node_reply(names))
    hook.stub(**stub)
    _, job = hook.submit(sixteen_node_job(exclude), parts=parts)
    return hook, job


@pytest.mark.parametrize("shape", SHAPES)
def test_a_long_exclude_that_spares_the_nodes_is_placed(shape):
    names, exclude, _ = SHAPES[shape]
    assert LIST_BYTES - 64 < len(exclude) <= LIST_BYTES
    hook, job = run(names, exclude)
    assert len(hook.sent["job"]["exc_nodes"]) == len(exclude)  # pald got the whole list
    assert job["req_nodes"] == ",".join(sorted(names)), job.get("admin_comment")
    assert job["admin_comment"].startswith("pal:placed=")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("where", ["first", "last"])
def test_a_long_exclude_naming_one_placed_node_passes(shape, where):
    names, exclude, excluding = SHAPES[shape]
    while len(exclude) > LIST_BYTES - len(excluding) - 1:  # room for the excluding item
        exclude = exclude.split(",", 1)[1]
    exclude = f"{excluding},{exclude}" if where == "first" else f"{exclude},{excluding}"
    hook, job = run(names, exclude)
    assert [w[0] for w in hook.writes] == ["admin_comment"]
    assert job["admin_comment"].startswith("pal:pass=bad-reply;req=h")
    assert "req_nodes" not in job and job["min_nodes"] == NODES
    assert any("is excluded by the job" in line for line in hook.info)


# ------------------------------------------------------- lists the hook cannot read: pass

def assert_passed(hook, job, reason):
    """The job as submitted, tagged with `reason`, one log line saying so; never rejected."""
    assert [w[0] for w in hook.writes] == ["admin_comment"], hook.writes
    assert job["admin_comment"].startswith(f"pal:pass={reason};req=h"), job["admin_comment"]
    assert "req_nodes" not in job and job["priority"] == NO_VAL
    assert len([line for line in hook.info if line.startswith("pal: pass")]) == 1
    assert hook.user_msgs == []


@pytest.mark.parametrize("exclude, reason", [
    ("a[0-99999]b[0-9]", "input-too-large"),  # 100,000 expanded prefixes
    ("n[0-99999999999999999]", "input-too-large"),  # a bound past 15 digits
    ("gpu[01-", "bad-hostlist"),
    ("gpu01,,gpu02", "bad-hostlist"),
])
def test_an_exclude_the_hook_cannot_read_passes_the_job(exclude, reason):
    hook, job = run([f"gpu{i:02d}" for i in range(1, NODES + 1)], exclude)
    assert_passed(hook, job, reason)


def test_a_partition_list_over_the_cap_passes_the_job():
    names = [f"gpu{i:02d}" for i in range(1, NODES + 1)]
    parts = {"gpu": {"nodes": "gpu[01-16]," + fill(lambda i: f"x{i:06d}", 70 * 1024),
                     "flag_default": 1}}
    hook, job = run(names, "", parts=parts)
    assert_passed(hook, job, "input-too-large")


@pytest.mark.parametrize("field, option", [("exc_nodes", "exclude"), ("req_nodes", "nodelist")])
def test_a_job_list_over_the_sites_cap_passes_unasked(field, option):
    """By default a job's own --exclude / --nodelist over 8 KiB passes before pald is asked:
    neither the hook (inside slurmctld's locks) nor pald reads it."""
    names = [f"gpu{i:02d}" for i in range(1, NODES + 1)]
    long_list = fill(lambda i: f"x{i:05d}", 8 * 1024 + 64)
    hook = Hook()
    hook.reply(sixteen_node_reply(names))
    _, job = hook.submit({**sixteen_node_job(""), field: long_list})
    assert hook.sent is None  # pald never asked
    assert job["admin_comment"].startswith(f"pal:pass=input-too-large:{option};req=h")
    assert [w[0] for w in hook.writes] == ["admin_comment"]
    _, job = Hook().submit({**sixteen_node_job(""), field: fill(lambda i: f"x{i:05d}", 8 * 1024)})
    assert "input-too-large" not in job["admin_comment"]  # at the cap: asked as usual


def test_a_long_nodelist_is_compiled_and_checked():
    names = [f"gpu{i:02d}" for i in range(1, NODES + 1)]
    nodelist = fill(lambda i: f"x{i:05d}", 30 * 1024) + ",gpu[01-16]"
    hook = Hook(env=LONG_LISTS)
    hook.reply({**sixteen_node_reply(names), "site_checked": True})
    _, job = hook.submit({**sixteen_node_job(""), "req_nodes": nodelist})
    assert job["req_nodes"] == ",".join(names)
    assert job["admin_comment"].endswith(";nodelist=own")


# ------------------------------------------------------------- the run's one deadline

def test_checks_past_the_runs_deadline_pass_the_job():
    """Every clock reading costs 8 ms (a starved slurmctld): the reply comes back inside the
    socket's 150 ms, but its checks (here compiling a long --exclude of ranges, which reads
    the clock every 256 items) cross 150 + 25 ms: the job passes, untouched but for the tag,
    and the hook returns two clock readings past the deadline (the check that crossed it, and
    the run time it logs)."""
    names, exclude, _ = SHAPES["ranges"]
    hook, job = run(names, exclude, tick=0.008)
    assert_passed(hook, job, "hook-deadline")
    started = 1000.008  # the hook's first clock reading
    assert float(hook.g.STUB.now) - started <= 0.175 + 2 * 0.008 + 1e-9


def test_the_same_job_without_the_slow_clock_is_placed():
    names, exclude, _ = SHAPES["ranges"]
    _, job = run(names, exclude, tick=0.0001)
    assert job["admin_comment"].startswith("pal:placed=")


def test_a_partition_named_many_times_is_checked_once_per_name():
    """-p gpu,gpu,... (the user's text): each distinct partition's list is compiled once, so
    a long repetition neither changes the decision nor multiplies the work past the deadline."""
    names = [f"gpu{i:02d}" for i in range(1, NODES + 1)]
    big = fill(lambda i: f"x{i:05d}", 40 * 1024)
    parts = {"gpu": {"nodes": big + ",gpu[01-16]", "flag_default": 0},
             "other": {"nodes": big, "flag_default": 0}}
    hook = Hook()
    hook.reply(sixteen_node_reply(names))
    hook.stub(tick=0.0005)  # 2000 compiles of a 40 KiB list would read the clock > 350 times
    partition = ",".join(["other"] * 2000 + ["gpu"])
    _, job = hook.submit({**sixteen_node_job(""), "partition": partition}, parts=parts)
    assert job["admin_comment"].startswith("pal:placed="), job["admin_comment"]


def test_plain_and_bracketed_items_interleaved_in_a_long_list(pal):
    """Plain runs between bracketed items (the compile's bracket search is cached between
    them): every member is found, and no other name."""
    expr = ",".join(f"p{i},q[{3 * i}-{3 * i + 1}]" for i in range(3000))
    assert len(expr) > 40 * 1024
    matcher, _ = compile_list(pal, expr)
    members = ["p0", "p1500", "p2999", "q0", "q1", "q4500", "q4501", "q8998"]
    others = ["p3000", "q2", "q4502", "q8999", "q9000", "p", "q"]
    assert [n for n in members + others if pal.hostlist_match(matcher, n)] == members


def test_a_long_item_without_commas_is_one_name(pal):
    name = "n" * 60_000
    matcher, _ = compile_list(pal, name + ",gpu[01-02]")
    assert pal.hostlist_match(matcher, name) and pal.hostlist_match(matcher, "gpu02")
    assert not pal.hostlist_match(matcher, "n" * 59_999)
