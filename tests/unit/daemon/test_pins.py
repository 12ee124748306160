"""A restarted pald rebuilds from Slurm what it promised: pending jobs on its pins keep their
GPUs reserved, its pin is never read as the user's --nodelist, and a stuck release is still
unstuck (pins.py, intake/held.placement_record, app.Pald._unstick)."""

from dataclasses import replace

from pal_slurm.daemon import pins

from .builders import acts, held_job, request, view
from .test_app_server import make_pald


def pinned(job_id, nodes=("gpu01",), tres="gres:gpu:s0:1,gres:gpu:s1:1", tag="pal:defer;req=x pal:released"):
    """A job pald pinned and released that Slurm has not started yet."""
    return replace(held_job(job_id, tag=tag), priority=1, reason="Resources", required_nodes=nodes,
                   tres_per_node=tres)


def test_which_pending_jobs_carry_a_pal_pin():
    assert pins.pin_key(pinned(5)) == "job:5"
    assert pins.pin_key(pinned(5, tag="pal:defer;req=x")) == "job:5"  # pald died before its mark
    assert pins.pin_key(pinned(5, tag="pal:defer;req=x;nodelist=own")) is None  # the user's list
    assert pins.pin_key(pinned(5, tag="pal:placed=gpu01;req=ab")) == "req:ab"  # the hook's pin
    assert pins.pin_key(pinned(5, tag="pal:defer;req=x pal:released;by=failsafe")) is None
    assert pins.pin_key(pinned(5, tag="pal:pass=no_room;req=x")) is None
    assert pins.pin_key(pinned(5, nodes=())) is None  # no pin
    assert pins.pin_key(held_job(5)) is None  # held: in pald's queue, promised nothing
    assert pins.pin_key(replace(pinned(5), state="RUNNING")) is None


def test_the_gpus_a_pinned_job_takes():
    v = view(nodes=2, gpus=4, busy=(0,))
    bound = pins.pinned_gpus(pinned(5), "job:5", v)
    assert bound is not None and bound.gpu_ids == {0, 1} and not bound.slurm_picks  # its slots, busy or not
    counted = pins.pinned_gpus(pinned(5, nodes=("gpu01", "gpu02"), tres="gres:gpu:2"), "job:5", v)
    assert counted is not None and counted.gpu_ids == {1, 2, 4, 5} and counted.slurm_picks  # lowest free
    total = pins.pinned_gpus(replace(pinned(5, tres=""), tres_per_job="gres:gpu:3"), "job:5", v)
    assert total is not None and total.gpu_ids == {1, 2, 3}


def test_a_restarted_pald_double_books_no_slot_pinned_to_a_pending_job(tmp_path):
    """A fresh pald (nothing in memory) reads a job its predecessor pinned to gpu01's four
    slots and released: a 4-GPU job submitted now goes elsewhere."""
    pald = make_pald(tmp_path, jobs=[pinned(5, tres="gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1,gres:gpu:s3:1")])
    pald.reader._nodes = pald.reader._nodes[:2]  # gpu01, gpu02
    pald.sync_and_cycle()
    assert "job:5" in pald.service.reservations
    reply = pald.answer(request(gpn=4, rid="new"))
    assert reply.decision.value == "place" and set(reply.nodes) == {"gpu02"}, reply
    again = pald.answer(request(gpn=4, rid="third"))
    assert again.decision.value != "place"  # gpu01 is promised, gpu02 taken: no slot twice


def test_a_restarted_pald_still_unsticks_a_release_its_predecessor_made(tmp_path):
    pald = make_pald(tmp_path, jobs=[pinned(5, tag="pal:defer;req=x pal:released")])
    t = [1000.0]
    pald.clock = lambda: t[0]
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == []
    t[0] += pald.config.daemon.release_start_s + 1
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == [("hold", 5), ("unpin", 5)]
    # held again once already (its tag says so): stuck again, it is only unpinned
    pald = make_pald(tmp_path, jobs=[pinned(6, tag="pal:defer;req=x pal:released pal:defer;unstuck=1 pal:released")])
    pald.clock = lambda: t[0]
    pald.sync_and_cycle()
    t[0] += pald.config.daemon.release_start_s + 1
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == [("unpin", 6)]


def test_a_release_slurm_keeps_waiting_for_a_limit_is_unpinned_at_once_and_its_gpus_go_to_others(tmp_path):
    """A user at MaxJobsPerUser (or a QOS/association GRES limit): the job pald released onto
    gpu01's four slots cannot start there or anywhere. At the first read that shows the
    limit pald drops the pin (no new hold: the next cycle would pin it again), and a job
    submitted then gets those GPUs."""
    four = "gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1,gres:gpu:s3:1"
    pald = make_pald(tmp_path, jobs=[replace(pinned(5, tres=four), reason="QOSMaxJobsPerUserLimit")])
    pald.reader._nodes = pald.reader._nodes[:1]  # gpu01 only
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == [("unpin", 5)]  # not release_start_s later: now
    pald.reader._jobs = [replace(pinned(5, nodes=(), tres=four), reason="QOSMaxJobsPerUserLimit")]
    pald.sync_and_cycle()
    assert "job:5" not in pald.service.reservations
    reply = pald.answer(request(gpn=4, rid="behind"))
    assert reply.decision.value == "place" and set(reply.nodes) == {"gpu01"}, reply


def test_a_pin_slurm_refuses_is_dropped_at_once_and_the_job_left_to_slurm(tmp_path):
    """Under topology/block a PAL pin beside the user's own --segment (which Slurm 24.11 shows
    pald nowhere) leaves the job pending with BadConstraints for ever: pald drops the pin at
    the first read that shows it, without holding it again, and frees its GPUs."""
    four = "gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1,gres:gpu:s3:1"
    refused = replace(pinned(5, tres=four), reason="BadConstraints", priority=0)  # Slurm holds it
    pald = make_pald(tmp_path, jobs=[refused])
    pald.reader._nodes = pald.reader._nodes[:1]  # gpu01 only
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == [("unpin", 5), ("release", 5)]
    pald.reader._jobs = [replace(pinned(5, nodes=(), tres=four), reason="Resources")]
    pald.sync_and_cycle()
    assert "job:5" not in pald.service.reservations


def test_which_pending_reasons_refuse_a_pin():
    from pal_slurm.intake.refusals import held_by_limit, refuses_pin

    assert refuses_pin("BadConstraints") and not held_by_limit("BadConstraints")
    for reason in ("Resources", "Priority", "QOSMaxJobsPerUserLimit", "ReqNodeNotAvail", ""):
        assert not refuses_pin(reason), reason


def test_which_pending_reasons_are_limits():
    from pal_slurm.intake.refusals import held_by_limit

    for reason in ("QOSMaxJobsPerUserLimit", "AssocMaxJobsLimit", "AssocGrpGRES", "QOSGrpGRES", "PartitionTimeLimit"):
        assert held_by_limit(reason), reason
    for reason in ("Resources", "Priority", "JobHeldAdmin", "ReqNodeNotAvail", "Dependency", ""):
        assert not held_by_limit(reason), reason

