"""`palctl pause` as pald sees it: the store's pause switch makes every job pass and every
held job go back to Slurm as submitted (no pin) within one cycle; it survives a restart."""

from __future__ import annotations

from datetime import datetime, timezone

from pal_slurm.model import DecisionKind
from pal_slurm.store.memory import MemoryRepository
from pal_slurm.store.switches import pause_switch

from .builders import acts, held_job, request, snapshot
from .test_app_server import make_pald

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def store_with_ranking() -> MemoryRepository:
    store = MemoryRepository()
    store.write_ranking("optimal", snapshot({"A": {("gpu01", 0): (3.0, 3.0)}}).entries)
    return store


def pause(store, paused=True):
    store.set_switch(pause_switch(paused, "root@ctl", NOW))


def test_a_paused_pald_passes_every_job_and_places_again_after_resume(tmp_path):
    store = store_with_ranking()
    pald = make_pald(tmp_path, store)
    pald.refresh_store()
    pald.sync_and_cycle()
    assert pald.handle(request("resnet", gpn=1, nodes=1)).decision is not DecisionKind.PASS
    pause(store)
    pald.refresh_store()
    replies = [pald.handle(request("resnet", gpn=1, nodes=1, mode=m)) for m in (None, "wait", "now")]
    assert [(r.decision, r.reason) for r in replies] == [(DecisionKind.PASS, "paused")] * 3
    assert pald.counts["paused"] == 3 and pald.health().details["paused"] is True
    pause(store, False)
    pald.refresh_store()
    assert pald.handle(request("resnet", gpn=1, nodes=1)).decision is not DecisionKind.PASS
    assert pald.counts["paused"] == 3 and pald.health().details["paused"] is False


def test_a_paused_pald_releases_every_held_job_unpinned_in_one_cycle(tmp_path):
    store = store_with_ranking()
    # more held jobs than fit: unpaused, pald would pin some and keep the rest held
    jobs = [held_job(i, gpn=4, nodes=2, submit=i) for i in range(1, 6)]
    pald = make_pald(tmp_path, store, jobs=jobs)
    pause(store)
    pald.refresh_store()
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls) == [("release", i) for i in range(1, 6)]  # no place, no pin
    marks = [c for c in pald.actuator.calls if c[0] == "admin_comment"]
    assert [c[1] for c in marks] == [1, 2, 3, 4, 5] and all(c[2].endswith("pal:released") for c in marks)
    assert pald.counts["released"] == 5 and not pald.service.reservations
    pald.flush_decisions()  # each release is in the store (a job with no class read yet was refused once)
    assert sorted(d.job_id for d in store.decisions(limit=50) if d.reason == "released:paused") == list("12345")


def test_unpaused_the_same_jobs_are_pinned_or_kept_held(tmp_path):
    """The check above can fail: without the switch, pald pins what fits and holds the rest."""
    store = store_with_ranking()
    pald = make_pald(tmp_path, store, jobs=[held_job(i, gpn=4, nodes=2, submit=i) for i in range(1, 6)])
    pald.refresh_store()
    pald.sync_and_cycle()
    kinds = [c[0] for c in acts(pald.actuator.calls)]
    assert "release" not in kinds and 0 < kinds.count("place") < 5


def test_the_pause_survives_a_restart_of_pald(tmp_path):
    store = store_with_ranking()
    pause(store)
    first = make_pald(tmp_path, store)
    first.refresh_store()
    assert first.handle(request("resnet", gpn=1, nodes=1)).reason == "paused"
    again = make_pald(tmp_path, store, jobs=[held_job(9, gpn=1)])  # a new pald on the same store
    again.refresh_store()
    again.sync_and_cycle()
    assert again.handle(request("resnet", gpn=1, nodes=1)).reason == "paused"
    assert acts(again.actuator.calls) == [("release", 9)]


def test_a_paused_pald_holds_no_job_again(tmp_path):
    """Its upkeep would hold again a job stuck on its pin; paused, it leaves every job to Slurm."""
    store = store_with_ranking()
    pald = make_pald(tmp_path, store, jobs=[held_job(7, gpn=2, submit=1)])
    t = [1000.0]
    pald.clock = lambda: t[0]
    pald.refresh_store()
    pald.sync_and_cycle()
    assert [c[0] for c in acts(pald.actuator.calls)] == ["place"]
    pinned = pald.actuator.calls[0][2]
    from dataclasses import replace

    stuck = replace(held_job(7, gpn=2, submit=1, tag="pal:defer;req=x pal:released"), priority=1,
                    reason="Resources", required_nodes=pinned)
    pald.reader._jobs = [stuck]
    pause(store)
    pald.refresh_store()
    for _ in range(3):
        t[0] += pald.config.daemon.release_start_s + 1
        pald.sync_and_cycle()
    assert [c[0] for c in acts(pald.actuator.calls)] == ["place"]  # no unpin, no hold again
