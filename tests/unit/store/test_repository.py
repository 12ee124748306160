"""The Repository contract: memory, SQLite and real PostgreSQL must behave identically."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from pal_slurm.model.classes import DEFAULT_APP_CLASSES
from pal_slurm.model.decision import DecisionKind
from pal_slurm.store.errors import InvalidRecord
from pal_slurm.store.records import (
    DecisionRecord,
    GpuRecord,
    HeldJob,
    HeldState,
    Heartbeat,
    NodeRecord,
    RankingEntry,
    Sample,
    Switch,
)
from pal_slurm.store.repository import Repository
from pal_slurm.store.switches import SiteSwitches, pause_switch

T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=timezone.utc)


def sample(node="n1", slot=0, cls="A", at=T0, **kw) -> Sample:
    kw.setdefault("backend", "replay")
    kw.setdefault("value", 1.0)
    kw.setdefault("higher_is_better", False)
    return Sample(node=node, slot=slot, perf_class=cls, taken_at=at.timestamp(), **kw)


def test_is_a_repository(repo):
    assert isinstance(repo, Repository)


# ---- topology -----------------------------------------------------------------------------


def test_upsert_nodes_and_gpus(repo):
    repo.upsert_nodes([NodeRecord("n2", "r1"), NodeRecord("n1")])
    repo.upsert_gpus(
        [GpuRecord("n1", 1, "GPU-b", "V100"), GpuRecord("n1", 0, "GPU-a"), GpuRecord("n3", 0)]
    )
    assert repo.nodes() == [NodeRecord("n1"), NodeRecord("n2", "r1"), NodeRecord("n3")]
    assert repo.gpus() == [
        GpuRecord("n1", 0, "GPU-a"),
        GpuRecord("n1", 1, "GPU-b", "V100"),
        GpuRecord("n3", 0),
    ]
    # update: rack changes, uuid added, model kept when not given
    repo.upsert_nodes([NodeRecord("n2", "r2")])
    repo.upsert_gpus([GpuRecord("n3", 0, "GPU-c"), GpuRecord("n1", 1)])
    assert NodeRecord("n2", "r2") in repo.nodes()
    gpus = {(g.node, g.slot): g for g in repo.gpus()}
    assert gpus[("n3", 0)].uuid == "GPU-c"
    assert gpus[("n1", 1)] == GpuRecord("n1", 1, "GPU-b", "V100")
    assert len(gpus) == 3


def test_uuid_follows_a_moved_gpu(repo):
    repo.upsert_gpus([GpuRecord("n1", 0, "GPU-a", "V100")])
    repo.upsert_gpus([GpuRecord("n2", 3, "GPU-a")])  # reseated in another node
    gpus = {(g.node, g.slot): g for g in repo.gpus()}
    assert gpus[("n2", 3)].uuid == "GPU-a"
    assert gpus[("n1", 0)] == GpuRecord("n1", 0, None, "V100")
    # a sample naming the uuid at yet another place is kept, never refused
    repo.add_samples([sample("n3", 1, uuid="GPU-a")])
    assert [(g.node, g.slot) for g in repo.gpus() if g.uuid == "GPU-a"] == [("n3", 1)]
    assert len(repo.recent_samples(T0)) == 1


def test_one_uuid_at_two_places_in_one_batch_is_refused(repo):
    repo.upsert_gpus([GpuRecord("n1", 0, "GPU-a")])
    with pytest.raises(InvalidRecord, match="GPU-a"):
        repo.upsert_gpus([GpuRecord("n9", 0, "GPU-a"), GpuRecord("n2", 0, "GPU-a")])
    with pytest.raises(InvalidRecord, match="GPU-b"):
        repo.add_samples([sample("n1", 0, uuid="GPU-b"), sample("n1", 1, uuid="GPU-b")])
    assert repo.gpus() == [GpuRecord("n1", 0, "GPU-a")]  # nothing written
    assert repo.recent_samples(T0) == []


@pytest.mark.parametrize(
    "bad", [GpuRecord("", 0), GpuRecord("n1", -1), GpuRecord("n1", True)]  # type: ignore[arg-type]
)
def test_bad_gpu_is_refused(repo, bad):
    with pytest.raises(InvalidRecord):
        repo.upsert_gpus([bad])
    assert repo.gpus() == []


# ---- samples ------------------------------------------------------------------------------


def test_samples_round_trip_and_window(repo):
    n = repo.add_samples(
        [
            sample("n1", 0, "A", T0, metrics={"tflops": 14.2, "clocks": [1380, 1530]}, value=1.02),
            sample("n1", 1, "A", T0 + timedelta(minutes=5), value=0.97, job_id="42"),
            sample("n2", 0, "B", T0 + timedelta(minutes=10), value=1.5, uuid="GPU-x"),
            sample("n1", 0, "A", T0 - timedelta(days=2), value=3.0),  # too old
            sample("n2", 1, "A", T0 + timedelta(minutes=1), value=9.9, busy=True),
        ]
    )
    assert n == 5
    got = repo.recent_samples(T0)
    assert [(s.node, s.slot, s.value) for s in got] == [("n1", 0, 1.02), ("n1", 1, 0.97), ("n2", 0, 1.5)]
    first = got[0]
    assert first.metrics == {"tflops": 14.2, "clocks": [1380, 1530]}
    assert first.taken_at == T0.timestamp()
    assert got[1].job_id == "42"
    assert got[2].uuid == "GPU-x"
    # GPUs named by samples exist now
    assert {(g.node, g.slot) for g in repo.gpus()} == {("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)}
    assert [s.value for s in repo.recent_samples(T0, perf_class="B")] == [1.5]
    with_busy = repo.recent_samples(T0, include_busy=True)
    assert [s.busy for s in with_busy] == [False, True, False, False]


def test_a_sample_comes_back_as_it_went_in(repo):
    """The one Sample type is stored whole: its value, direction, kind and busy reason too."""
    s = sample("n1", 2, "C", T0, backend="kernel", value=13.5, higher_is_better=True, metrics={"tflops": 13.5},
               busy=True, busy_reason="another job", kind="walltime", job_id="7", uuid="GPU-q")
    repo.add_samples([s])
    assert repo.recent_samples(T0, include_busy=True) == [s]


def test_naive_and_other_zones_mean_the_same_instant(repo):
    plus2 = timezone(timedelta(hours=2))
    repo.add_samples([sample(at=(T0 + timedelta(hours=2)).astimezone(plus2))])
    got = repo.recent_samples(T0.replace(tzinfo=None))  # naive = UTC
    assert len(got) == 1 and got[0].taken_at == (T0 + timedelta(hours=2)).timestamp()
    assert repo.recent_samples(T0 + timedelta(hours=2, seconds=1)) == []


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (dict(cls="E"), "unknown class"),
        (dict(value=float("nan")), "finite"),
        (dict(metrics={"x": object()}), "JSON"),
        (dict(node=""), "node name"),
        (dict(backend=""), "backend"),
    ],
)
def test_bad_sample_rejects_the_whole_batch(repo, bad, fragment):
    good = sample("n1", 0)
    with pytest.raises(InvalidRecord, match=fragment):
        repo.add_samples([good, sample(**bad)])
    assert repo.recent_samples(T0 - timedelta(days=1), include_busy=True) == []


def test_bulk_samples(repo):
    batch = [
        sample(f"n{(i // 4) % 16}", i % 4, "ABCD"[(i // 64) % 4], T0 + timedelta(seconds=i), value=1 + i / 1e4)
        for i in range(2000)
    ]
    assert repo.add_samples(batch) == 2000
    got = repo.recent_samples(T0)
    assert len(got) == 2000
    assert [s.taken_at for s in got] == sorted(s.taken_at for s in got)
    assert len(repo.gpus()) == 64


# ---- rankings -----------------------------------------------------------------------------


def entries(scale: float = 1.0) -> list[RankingEntry]:
    return [
        RankingEntry("n1", 0, "A", 1.0 * scale, 1.0, 0),
        RankingEntry("n1", 1, "A", 1.4 * scale, 1.5, 1, ("outlier",)),
        RankingEntry("n1", 0, "B", 0.9 * scale, 1.0, 0, ("few-samples", "busy-host")),
    ]


def test_ranking_versions_bump_and_latest(repo):
    assert repo.latest_ranking() is None
    first = repo.write_ranking("optimal", entries(), created_at=T0)
    second = repo.write_ranking("artifact", entries(2.0))
    assert (first.version, second.version) == (1, 2)
    latest = repo.latest_ranking()
    assert latest is not None and latest.version == 2 and latest.method == "artifact"
    assert sorted(latest.entries, key=lambda e: (e.perf_class, e.slot)) == sorted(
        entries(2.0), key=lambda e: (e.perf_class, e.slot)
    )
    old = repo.ranking(1)
    assert old is not None and old.created_at == T0
    assert {e.flags for e in old.entries} == {(), ("outlier",), ("few-samples", "busy-host")}
    assert repo.ranking(3) is None


def test_ranking_rejects_duplicates_and_keeps_version(repo):
    repo.write_ranking("optimal", entries())
    dup = entries() + [RankingEntry("n1", 0, "A", 2.0, 2.0, 1)]
    with pytest.raises(InvalidRecord, match="twice"):
        repo.write_ranking("optimal", dup)
    with pytest.raises(InvalidRecord, match="unknown class"):
        repo.write_ranking("optimal", [RankingEntry("n1", 0, "Z", 1.0, 1.0, 0)])
    assert repo.latest_ranking().version == 1
    assert repo.write_ranking("optimal", entries()).version == 2


def test_concurrent_ranking_writers_get_distinct_versions(repo):
    versions: list[int] = []
    errors: list[BaseException] = []

    def writer():
        try:
            for _ in range(3):
                versions.append(repo.write_ranking("optimal", entries()).version)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(versions) == list(range(1, 10))


# ---- application classes ---------------------------------------------------------------------


def test_app_classes_seeded_with_defaults(repo):
    assert repo.app_classes() == dict(DEFAULT_APP_CLASSES)


def test_app_class_set_update_remove(repo):
    repo.set_app_class("  LLaMA ", "B")
    assert repo.app_classes()["llama"] == "B"
    repo.set_app_class("llama", "C")
    assert repo.app_classes()["llama"] == "C"
    assert repo.remove_app_class("LLAMA") is True
    assert "llama" not in repo.app_classes()
    assert repo.remove_app_class("llama") is False
    assert repo.remove_app_class("resnet50") is True
    assert "resnet50" not in repo.app_classes()


@pytest.mark.parametrize("app, cls", [("x", "E"), ("x", "a"), ("", "A"), ("y" * 200, "A")])
def test_app_class_bad_input(repo, app, cls):
    before = repo.app_classes()
    with pytest.raises(InvalidRecord):
        repo.set_app_class(app, cls)
    assert repo.app_classes() == before


# ---- decisions -----------------------------------------------------------------------------


def test_decisions_log(repo):
    repo.record_decision(
        DecisionRecord("101", DecisionKind.PLACE, "best bin", {"n1": (0, 1), "n2": (3,)}, 7, "A", T0)
    )
    repo.record_decision(DecisionRecord("102", DecisionKind.DEFER, "no free GPUs", created_at=T0))
    repo.record_decision(
        DecisionRecord("101", DecisionKind.PASS, "daemon reload", created_at=T0 + timedelta(seconds=1))
    )
    all_ = repo.decisions()
    assert [(d.job_id, d.kind) for d in all_] == [
        ("101", DecisionKind.PASS),
        ("102", DecisionKind.DEFER),
        ("101", DecisionKind.PLACE),
    ]
    placed = repo.decisions("101")[-1]
    assert placed.nodes == {"n1": (0, 1), "n2": (3,)}
    assert placed.ranking_version == 7 and placed.perf_class == "A"
    assert placed.created_at == T0
    assert len(repo.decisions(limit=1)) == 1
    assert repo.decisions("nope") == []
    with pytest.raises(InvalidRecord):
        repo.record_decision(DecisionRecord("", DecisionKind.PASS))
    with pytest.raises(InvalidRecord):
        repo.record_decision(DecisionRecord("9", DecisionKind.PLACE, nodes={"n1": (-1,)}))


def test_decisions_since_a_time_and_by_reason_prefix(repo):
    for i, reason in enumerate(["shadow:pal", "shadow_started:req=a", "pal", "shadow%:odd", "shadow:pal"]):
        repo.record_decision(DecisionRecord(str(i), DecisionKind.PLACE, reason,
                                            created_at=T0 + timedelta(seconds=i)))
    assert [d.job_id for d in repo.decisions(limit=10, reason_prefix="shadow:")] == ["4", "0"]
    assert [d.job_id for d in repo.decisions(limit=10, since=T0 + timedelta(seconds=2))] == ["4", "3", "2"]
    assert [d.job_id for d in repo.decisions(limit=10, since=T0 + timedelta(seconds=1),
                                              reason_prefix="shadow")] == ["4", "3", "1"]
    assert [d.job_id for d in repo.decisions(limit=10, reason_prefix="shadow%")] == ["3"]  # no LIKE wildcard


# ---- held jobs --------------------------------------------------------------------------------


def test_held_jobs_lifecycle(repo):
    repo.add_held_job(HeldJob("7", "B", 4, T0 + timedelta(seconds=2)))
    repo.add_held_job(HeldJob("5", "A", 2, T0 + timedelta(seconds=2)))
    repo.add_held_job(HeldJob("9", "C", 1, T0))
    assert [j.job_id for j in repo.held_jobs()] == ["9", "5", "7"]
    assert repo.mark_released("5", at=T0 + timedelta(minutes=1)) is True
    assert repo.mark_released("5") is False  # not held any more
    assert repo.mark_released("404") is False
    assert repo.mark_released("9", state=HeldState.FAILSAFE) is True
    assert [j.job_id for j in repo.held_jobs()] == ["7"]
    released = repo.held_jobs(HeldState.RELEASED)
    assert len(released) == 1 and released[0].released_at == T0 + timedelta(minutes=1)
    assert released[0].gpus == 2 and released[0].perf_class == "A"
    assert {j.job_id: j.state for j in repo.held_jobs(None)} == {
        "5": HeldState.RELEASED,
        "7": HeldState.HELD,
        "9": HeldState.FAILSAFE,
    }
    with pytest.raises(InvalidRecord):
        repo.mark_released("7", state=HeldState.HELD)
    with pytest.raises(InvalidRecord):
        repo.add_held_job(HeldJob("8", "Q", 1, T0))
    # re-adding a job (pald restarted and re-synced) replaces it
    repo.add_held_job(HeldJob("7", "B", 8, T0 + timedelta(seconds=2)))
    assert [j.gpus for j in repo.held_jobs()] == [8]


# ---- heartbeat ---------------------------------------------------------------------------


def test_heartbeat(repo):
    assert repo.read_heartbeat("pald") is None
    repo.write_heartbeat(Heartbeat("pald", "host-a:12", T0, {"leader": True}))
    repo.write_heartbeat(Heartbeat("pald", "host-b:34", T0 + timedelta(seconds=5)))
    beat = repo.read_heartbeat("pald")
    assert beat == Heartbeat("pald", "host-b:34", T0 + timedelta(seconds=5), {})
    repo.write_heartbeat(Heartbeat("failsafe", "host-c:1", T0, {"released": 3}))
    assert repo.read_heartbeat("failsafe").details == {"released": 3}
    assert repo.read_heartbeat("pald").holder == "host-b:34"


# ---- switches ----------------------------------------------------------------------------


def test_switches_start_unset_and_the_last_set_wins(repo):
    assert repo.switches() == {}
    assert SiteSwitches.from_store(repo.switches()) == SiteSwitches(paused=False)
    repo.set_switch(pause_switch(True, "root@ctl", T0))
    site = SiteSwitches.from_store(repo.switches())
    assert site.paused and site.changed_by == "root@ctl" and site.changed_at == T0
    repo.set_switch(pause_switch(False, "admin@ctl", T0 + timedelta(seconds=3)))
    assert repo.switches()["pause"] == Switch("pause", "off", T0 + timedelta(seconds=3), "admin@ctl")
    assert not SiteSwitches.from_store(repo.switches()).paused


@pytest.mark.parametrize("bad", [Switch("", "on", T0, "root"), Switch("pause", "on", T0, " "),
                                 Switch("pause", "x" * 65, T0, "root"), Switch("p" * 65, "on", T0, "root")])
def test_a_bad_switch_is_refused_and_changes_nothing(repo, bad):
    repo.set_switch(pause_switch(True, "root@ctl", T0))
    with pytest.raises(InvalidRecord):
        repo.set_switch(bad)
    assert repo.switches() == {"pause": Switch("pause", "on", T0, "root@ctl")}


# ---- housekeeping ------------------------------------------------------------------------


def test_prune_keeps_recent_rows_rankings_and_held_jobs(repo):
    old, new = T0 - timedelta(days=100), T0
    repo.add_samples([sample(at=old), sample(at=old, slot=1), sample(at=new)])
    repo.record_decision(DecisionRecord("1", DecisionKind.PASS, created_at=old))
    repo.record_decision(DecisionRecord("2", DecisionKind.PASS, created_at=new))
    repo.add_held_job(HeldJob("10", "A", 1, old))  # still held: kept however old
    repo.add_held_job(HeldJob("11", "A", 1, old))
    repo.mark_released("11", at=old + timedelta(minutes=1))
    repo.add_held_job(HeldJob("12", "A", 1, old))
    repo.mark_released("12", at=new)
    repo.write_ranking("optimal", entries(), created_at=old)

    counts = repo.prune(T0 - timedelta(days=30))
    assert counts == {"samples": 2, "decisions": 1, "held_jobs": 1}
    assert [s.taken_at for s in repo.recent_samples(old - timedelta(days=1))] == [new.timestamp()]
    assert [d.job_id for d in repo.decisions()] == ["2"]
    assert {j.job_id for j in repo.held_jobs(None)} == {"10", "12"}
    assert repo.latest_ranking().version == 1
    assert repo.prune(T0 - timedelta(days=30)) == {"samples": 0, "decisions": 0, "held_jobs": 0}


def test_prune_keeps_the_newest_samples_of_each_gpu_and_class(repo):
    day = timedelta(days=1)
    old = [sample(slot=slot, cls=cls, at=T0 - (200 + i) * day) for slot in (0, 1) for cls in "AB" for i in range(5)]
    repo.add_samples(old + [sample(slot=0, cls="A", at=T0)])
    counts = repo.prune(T0 - 30 * day, keep_samples=2)
    left = repo.recent_samples(T0 - 400 * day)
    by_gpu_class: dict = {}
    for s in left:
        by_gpu_class.setdefault((s.slot, s.perf_class), []).append(s.taken_at)
    # slot 0 class A has a new sample: it and its newest old one stay; the other three keep 2
    assert by_gpu_class[(0, "A")] == [(T0 - 200 * day).timestamp(), T0.timestamp()]
    for key in ((0, "B"), (1, "A"), (1, "B")):
        assert by_gpu_class[key] == [(T0 - 201 * day).timestamp(), (T0 - 200 * day).timestamp()]
    assert counts["samples"] == 21 - len(left) == 13


def test_prune_in_batches_deletes_the_oldest_first(repo):
    day = timedelta(days=1)
    repo.add_samples([sample(slot=i % 4, at=T0 - (100 + i) * day) for i in range(10)])
    for i in range(7):
        repo.record_decision(DecisionRecord(str(i), DecisionKind.PASS, created_at=T0 - (100 + i) * day))
    assert repo.prune(T0, max_rows=3) == {"samples": 3, "decisions": 3, "held_jobs": 0}
    assert [s.taken_at for s in repo.recent_samples(T0 - 1000 * day)] == [
        (T0 - (100 + i) * day).timestamp() for i in range(6, -1, -1)]
    assert sorted(d.job_id for d in repo.decisions()) == ["0", "1", "2", "3"]
    assert repo.prune(T0, max_rows=3) == {"samples": 3, "decisions": 3, "held_jobs": 0}
    assert repo.prune(T0, max_rows=3) == {"samples": 3, "decisions": 1, "held_jobs": 0}
    assert repo.prune(T0, max_rows=3) == {"samples": 1, "decisions": 0, "held_jobs": 0}
    assert repo.prune(T0, max_rows=3) == {"samples": 0, "decisions": 0, "held_jobs": 0}
