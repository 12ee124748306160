"""job_submit_lua/examples/job_submit.lua: a site's own hook that keeps its rules and calls
pal.lua last. The site's rules still apply to every job (PAL or not), a job they refuse never
reaches pald, and a PAL job is placed as with pal-slurm's own job_submit.lua."""

from hook_harness import HOOK_DIR, NO_VAL, Hook

PLACE = {"v": 1, "ok": True, "decision": "place", "reason": "pal",
         "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1", "rank": 7}
PAL_JOB = {"comment": "pal:class=resnet,gpus=2", "user_id": 1001, "partition": "gpu",
           "tres_per_node": "gres:gpu:2", "account": "vision", "time_limit": NO_VAL}


def site_hook() -> Hook:
    return Hook(env={"PAL_LUA_DIR": str(HOOK_DIR)}, hook_dir=HOOK_DIR / "examples")


def test_the_sites_rules_apply_and_pal_places_the_job():
    hook = site_hook()
    hook.reply(PLACE)
    rc, job = hook.submit(PAL_JOB)
    assert rc == 0
    assert job["time_limit"] == 60  # the site's rule
    assert job["req_nodes"] == "gpu03" and job["tres_per_node"] == "gres:gpu:s2:1,gres:gpu:s3:1"  # PAL's
    assert job["admin_comment"].startswith("pal:placed=gpu03")


def test_a_job_the_site_refuses_never_reaches_pald():
    hook = site_hook()
    hook.reply(PLACE)
    rc, job = hook.submit({**PAL_JOB, "account": ""})
    assert rc == -1 and hook.sockets_created == 0
    assert hook.user_msgs == ["site: please give --account"]
    assert "req_nodes" not in job


def test_a_job_without_pal_gets_the_sites_rules_only_and_pald_down_changes_nothing():
    hook = site_hook()
    rc, job = hook.submit({**PAL_JOB, "comment": "plain"})
    assert rc == 0 and job["time_limit"] == 60 and hook.sockets_created == 0
    down = site_hook()
    down.stub(connect_error="No such file or directory")
    rc, job = down.submit(PAL_JOB)
    assert rc == 0 and job["time_limit"] == 60 and "req_nodes" not in job
    assert job["admin_comment"].startswith("pal:pass=pald-down")


def test_without_pal_lua_the_sites_rules_still_apply():
    hook = Hook(env={"PAL_LUA_DIR": "/nonexistent"}, hook_dir=HOOK_DIR / "examples")
    rc, job = hook.submit(PAL_JOB)
    assert rc == 0 and job["time_limit"] == 60 and hook.sockets_created == 0
