"""A hold is its maker's: pald and pal-failsafe release only the holds the hook or pald made."""

import json
from dataclasses import replace

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon import failsafe
from pal_slurm.daemon.cycle import held_by_other, is_pal_held
from pal_slurm.intake.tags import held_by_pald, with_tag

from .builders import FakeActuator, FakeReader, acts, held_job
from .test_app_server import make_pald

RELEASED = "pal:defer;req=x pal:released"


def user_held(job_id, tag=RELEASED):
    """A job pald released that its user then held (`scontrol hold`: JobHeldUser, priority 0)."""
    return held_job(job_id, tag=tag)


def test_the_last_hold_mark_says_whose_hold_it_is():
    assert held_by_pald("pal:defer;req=x")
    assert not held_by_pald(RELEASED)
    assert held_by_pald(RELEASED + " pal:defer;unstuck=1")  # pald held it again
    assert not held_by_pald("pal:placed=gpu01;req=x")  # placed at submit: never pald's hold
    assert not held_by_pald("pal:pass=pal:defer")  # a reason that merely contains the text
    assert not held_by_pald(None)
    assert with_tag("a b", "c") == "a b c" and with_tag("", "c") == "c"


def test_a_user_hold_after_pald_s_release_is_the_user_s():
    job = user_held(7)
    assert not is_pal_held(job) and held_by_other(job)
    assert is_pal_held(held_job(8)) and not held_by_other(held_job(8))


def test_failsafe_releases_pald_s_holds_and_marks_them_but_leaves_user_holds(tmp_path):
    (tmp_path / "hb").write_text(json.dumps({"at": 1000.0}))
    config = Config(daemon=DaemonConfig(heartbeat_file=str(tmp_path / "hb"), heartbeat_stale_s=30))
    act = FakeActuator()
    jobs = [held_job(1), user_held(2), user_held(3, tag=RELEASED + " x")]
    why, released = failsafe.run(config, FakeReader([], jobs), act, now=1100.0)
    assert released == [1]
    assert act.calls == [("release", 1), ("admin_comment", 1, "pal:defer;req=x pal:released;by=failsafe")]


def test_pald_never_replaces_or_releases_a_job_its_user_held_and_resumes_after_the_user_s_release(tmp_path):
    pald = make_pald(tmp_path, jobs=[held_job(7, gpn=2, submit=1)])
    t = [1000.0]
    pald.clock = lambda: t[0]
    pald.sync_and_cycle()
    assert [c[0] for c in pald.actuator.calls] == ["place", "admin_comment"]
    assert pald.actuator.calls[1] == ("admin_comment", 7, RELEASED)
    pinned = pald.actuator.calls[0][2]
    pald.reader._jobs = [replace(user_held(7), required_nodes=pinned)]  # the user's `scontrol hold`
    bound = pald.config.daemon.release_start_s
    for _ in range(3):  # however long it stays held: pald neither places, releases nor unpins it
        t[0] += bound + 1
        pald.sync_and_cycle()
    assert len(pald.actuator.calls) == 2 and pald.counts["unstuck"] == 0
    # the user's `scontrol release`: it waits on its pin as before; the unstick clock starts then
    pald.reader._jobs = [replace(user_held(7), priority=1, reason="Resources", required_nodes=pinned)]
    t[0] += 1
    pald.sync_and_cycle()
    assert len(pald.actuator.calls) == 2
    t[0] += bound + 1
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls)[1:] == [("hold", 7), ("unpin", 7)]  # stuck: placed anew as before
