import random
from itertools import accumulate

import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.model import ClusterView
from pal_slurm.policy import PLACEMENTS
from pal_slurm.policy.netaware import NetAwarePlacement, PreemptConfig
from pal_slurm.ranking.profiles import gpu_profiles
from pal_slurm.sim.event import FOLD_FROM, EventConfig, EventJob, EventSimulator, simulator_for
from pal_slurm.sim.network import Congestion, NetworkModel
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.trace import ITER_TIME_S, Trace, TraceJob, synthetic_trace

ARTIFACT = ("pal", "pmfirst", "packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky", "firstfit")


def tj(job_id, n, submit, seconds, model="resnet50"):
    return TraceJob(job_id, n, float(submit), seconds / ITER_TIME_S[model], model)


def small_trace(seed=3, n=40):
    return synthetic_trace(n, seed=seed, jobs_per_hour=30.0, max_gpus=8)


# ---- basic behaviour ----------------------------------------------------------------------


@pytest.mark.parametrize("policy", sorted(PLACEMENTS))
def test_every_registered_placement_finishes_every_job(policy):
    tr = small_trace()
    r = EventSimulator(EventConfig(num_nodes=4, gpus_per_node=4, nodes_per_rack=2)).run(tr, policy)
    assert sorted(j.job_id for j in r.jobs) == sorted(j.job_id for j in tr.jobs)
    s = r.summary()
    assert s["jobs"] == len(tr.jobs)
    for j in r.jobs:
        assert j.first_start >= j.submit
        assert j.finish > j.first_start
        # never faster than the best GPUs at the best locality with no wait
        assert j.jct >= j.lower_bound_s * (1 - 1e-9)
        # the GPUs it ended on (a replay's model is set beside the lab's by them)
        assert len(set(j.gpus)) == j.num_gpus and set(j.gpus) <= set(range(16))
    assert 0.0 < s["utilization"] <= 1.0 + 1e-9
    assert r.mode == "event"


@pytest.mark.parametrize("policy", ["pal", "random-nonsticky", "pal-net", "dally"])
def test_runs_repeat_exactly_for_a_seed(policy):
    tr = small_trace(seed=5)
    cfg = EventConfig(num_nodes=4, gpus_per_node=4, nodes_per_rack=2, seed=7, variability_seed=2)
    a = EventSimulator(cfg).run(tr, policy)
    b = EventSimulator(cfg).run(tr, policy)
    assert a.jobs == b.jobs and a.util_series == b.util_series


def test_seeds_change_the_gpus():
    tr = small_trace(seed=5)
    runs = {
        s: EventSimulator(EventConfig(num_nodes=4, gpus_per_node=4, variability_seed=s)).run(tr, "packed-sticky")
        for s in (0, 1)
    }
    assert [j.finish for j in runs[0].jobs] != [j.finish for j in runs[1].jobs]


def test_runtime_is_ideal_times_worst_gpu_times_network():
    # one 8-GPU BERT job on two 4-GPU nodes under different leaves: it must cross the spine
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    tr = Trace("one", (tj(0, 8, 0, 3600.0, "BERT"),))
    cfg = EventConfig(cluster=c, congestion=Congestion(0.0, 0.5), variability_seed=4)
    r = EventSimulator(cfg).run(tr, "firstfit")
    (job,) = r.jobs
    pm = max(gpu_profiles(8, 4)["B"])
    net = NetworkModel(congestion=Congestion(0.0, 0.5)).factor("BERT", 8, 2, 2)
    assert job.finish == pytest.approx(3600.0 * pm * net)
    assert job.comm_overhead_s == pytest.approx(job.finish * (1 - 1 / net))
    off = EventSimulator(EventConfig(cluster=c, network=False, variability_seed=4)).run(tr, "firstfit")
    assert off.jobs[0].finish == pytest.approx(3600.0 * pm)
    assert off.jobs[0].comm_overhead_s == 0.0


def test_restart_cost_is_paid_on_every_restart():
    # non-sticky placements move jobs when others arrive/leave: each move costs restart_cost_s
    tr = small_trace(seed=11)
    base = dict(num_nodes=4, gpus_per_node=4, nodes_per_rack=2)
    cheap = EventSimulator(EventConfig(restart_cost_s=0.0, **base)).run(tr, "pal")
    dear = EventSimulator(EventConfig(restart_cost_s=600.0, **base)).run(tr, "pal")
    assert dear.extra["restarts"] > 0
    assert dear.summary()["avg_jct_s"] > cheap.summary()["avg_jct_s"]


def test_utilisation_series_tracks_busy_gpus():
    tr = Trace("two", (tj(0, 4, 0, 100.0), tj(1, 4, 50, 100.0)))
    r = EventSimulator(EventConfig(num_nodes=2, gpus_per_node=4, network=False)).run(tr, "firstfit")
    busy = dict(r.util_series)
    assert busy[0.0] == 4 and busy[50.0] == 8
    assert r.busy_gpu_s == pytest.approx(sum(j.finish - j.first_start for j in r.jobs) * 4)


def test_job_bigger_than_cluster_is_rejected():
    tr = Trace("big", (tj(0, 64, 0, 10.0),))
    with pytest.raises(ValueError, match="needs 64 GPUs"):
        EventSimulator(EventConfig(num_nodes=2, gpus_per_node=4)).run(tr, "pal-net")


def test_simulator_for_runner_spec():
    sim = simulator_for(RunSpec(mode="event", num_nodes=8, gpus_per_node=2, nodes_per_rack=2, congestion=0.3), 1)
    assert sim.cluster.size == 16 and len({n.rack for n in sim.cluster.nodes}) == 4
    assert sim.config.congestion == Congestion(0.3, 0.3)
    assert sim.config.variability_seed == 1


# ---- delay timers are events -----------------------------------------------------------


def _blocking_case():
    """4 nodes x 4 GPUs, 2 racks of 2 nodes. Four 4-GPU jobs fill the nodes at t=0 (node 0
    and 2 free at 1 h, node 1 at 1.5 h, node 3 at 10 h); an 8-GPU BERT job arrives at 0.5 h.
    At 1 h eight GPUs are free but only across racks; at 1.5 h rack 0 is free."""
    H = 3600.0
    return Trace(
        "blocking",
        (
            tj(0, 4, 0, 1.0 * H, "vgg19"),
            tj(1, 4, 0, 1.5 * H, "vgg19"),
            tj(2, 4, 0, 1.0 * H, "vgg19"),
            tj(3, 4, 0, 10.0 * H, "vgg19"),
            tj(4, 8, 0.5 * H, 2.0 * H, "BERT"),
        ),
    )


def _cfg(**kw):
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    return EventConfig(cluster=c, congestion=Congestion(0.2, 0.5), restart_cost_s=30.0, **kw)


FLAT = dict(variability=False, backfill="easy", finish_aware=False)


def test_delay_scheduling_lowers_communication_overhead_under_congestion():
    tr = _blocking_case()
    eager = EventSimulator(_cfg(network=True)).run(tr, NetAwarePlacement("t-eager", delay=False, **FLAT))
    patient = EventSimulator(_cfg(network=True)).run(tr, NetAwarePlacement("t-patient", delay=True, **FLAT))
    bert_eager = next(j for j in eager.jobs if j.model == "BERT")
    bert_patient = next(j for j in patient.jobs if j.model == "BERT")
    fin = {j.job_id: j.finish for j in eager.jobs}
    assert bert_eager.first_start == pytest.approx(max(fin[0], fin[2]))  # spread, at ~1 h
    assert bert_eager.first_start < fin[1]
    fin = {j.job_id: j.finish for j in patient.jobs}
    assert bert_patient.first_start == pytest.approx(fin[1])  # waited for rack 0 (~1.5 h)
    assert patient.summary()["comm_overhead_s"] < 0.2 * eager.summary()["comm_overhead_s"]
    assert bert_patient.jct < bert_eager.jct


def test_an_expiring_timer_wakes_the_scheduler():
    # a 900 s rack timer (cost-awareness off) has expired by the time GPUs free across racks:
    # BERT starts as soon as nodes 0 and 2 are free (~1 h), not at 1.5 h
    tr = _blocking_case()
    short = NetAwarePlacement("t-short", delay=True, cost_aware=False, timers={("high", "rack"): 900.0}, **FLAT)
    r = EventSimulator(_cfg()).run(tr, short)
    fin = {j.job_id: j.finish for j in r.jobs}
    assert r.jobs[4].first_start == pytest.approx(max(fin[0], fin[2]))
    # GPUs across racks are free from ~1 h; the 2700 s timer expires at 0.5 h + 2700 s = 1.25 h
    # with no other event then: the timer itself must wake the scheduler
    H = 3600.0
    tr2 = Trace("wake", (tj(0, 4, 0, 1.0 * H, "vgg19"), tj(1, 4, 0, 5.0 * H, "vgg19"), tj(2, 4, 0, 1.0 * H, "vgg19"),
                         tj(3, 4, 0, 5.0 * H, "vgg19"), tj(4, 8, 0.5 * H, H, "BERT")))
    timed = NetAwarePlacement("t-timed", delay=True, cost_aware=False, timers={("high", "rack"): 2700.0}, **FLAT)
    r2 = EventSimulator(_cfg()).run(tr2, timed)
    fin = {j.job_id: j.finish for j in r2.jobs}
    assert max(fin[0], fin[2]) < 0.5 * H + 2700.0
    assert r2.jobs[4].first_start == pytest.approx(0.5 * H + 2700.0)


def test_finish_aware_job_waits_for_the_rack_after_its_timers_ran_out():
    # timers of 0 s: plain delay scheduling would take the spread placement at 1 h; the
    # finish-aware rule sees that waiting for rack 0 (free at 1.5 h) ends much sooner
    tr = _blocking_case()
    no_timers = dict(delay=True, cost_aware=False, timers={("high", "node"): 0.0, ("high", "rack"): 0.0})
    blind = EventSimulator(_cfg()).run(tr, NetAwarePlacement("t-blind", **no_timers, **FLAT))
    aware = EventSimulator(_cfg()).run(
        tr, NetAwarePlacement("t-aware", **no_timers, **{**FLAT, "finish_aware": True}))
    fin = {j.job_id: j.finish for j in aware.jobs}
    assert blind.jobs[4].first_start < fin[1]
    assert aware.jobs[4].first_start == pytest.approx(fin[1])
    assert aware.jobs[4].finish < blind.jobs[4].finish


# ---- preemption ------------------------------------------------------------------------


def test_network_sensitive_preemption_helps_the_sensitive_job():
    # rack 0 busy with two low-sensitivity (vgg19) jobs that just started; rack 1 half busy.
    H = 3600.0
    tr = Trace(
        "preempt",
        (
            tj(0, 4, 0, 5 * H, "vgg19"),
            tj(1, 4, 0, 5 * H, "vgg19"),
            tj(2, 4, 0, 5 * H, "resnet50"),
            tj(3, 8, 60.0, 4 * H, "BERT"),
        ),
    )
    plain = NetAwarePlacement("t-plain", delay=True, **FLAT)
    pre = NetAwarePlacement("t-pre", delay=True, preempt=PreemptConfig(), **FLAT)
    a = EventSimulator(_cfg()).run(tr, plain)
    b = EventSimulator(_cfg()).run(tr, pre)
    assert sum(j.preemptions for j in a.jobs) == 0
    assert sum(j.preemptions for j in b.jobs) >= 1
    bert_a = next(j for j in a.jobs if j.model == "BERT")
    bert_b = next(j for j in b.jobs if j.model == "BERT")
    assert bert_b.comm_overhead_s < bert_a.comm_overhead_s
    assert bert_b.jct < bert_a.jct


@pytest.mark.parametrize("policy", ["pal-net-preempt", "dally"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_preemption_never_starves_a_job(policy, seed):
    tr = synthetic_trace(120, seed=seed, jobs_per_hour=60.0, max_gpus=16)
    r = EventSimulator(EventConfig(num_nodes=8, gpus_per_node=4, nodes_per_rack=4,
                                   congestion=Congestion(0.3, 0.6))).run(tr, policy)
    assert len(r.jobs) == len(tr.jobs)  # every job finishes
    cap = PLACEMENTS[policy].preempt.max_preemptions
    assert max(j.preemptions for j in r.jobs) <= cap


def test_autotuned_policy_reports_its_timers():
    r = EventSimulator(EventConfig(num_nodes=8, gpus_per_node=4, nodes_per_rack=2)).run(
        synthetic_trace(80, seed=4, jobs_per_hour=40.0, max_gpus=16), "pal-net-tuned")
    timers = r.extra["timers"]
    assert timers and all(0.0 <= v <= 3600.0 for v in timers.values())
    assert "high/rack" in timers  # JSON-friendly keys


PROGRESS_BLIND = sorted(name for name, pol in PLACEMENTS.items() if not pol.traits.reads_progress)


def _runs_with_and_without_renewals(monkeypatch, pol, queue="fifo"):
    """{renewed?: (every job's outcome, requests renewed)} for `pol` as declared and with
    reads_progress forced on."""
    from dataclasses import replace

    from pal_slurm.model.job import JobRequest

    reading = replace(pol, traits=replace(pol.traits, reads_progress=True))
    trace = synthetic_trace(300, seed=3, jobs_per_hour=60.0, max_gpus=8)
    calls = {"n": 0}
    evolved = JobRequest.evolved

    def counted(self, **changes):
        calls["n"] += 1
        return evolved(self, **changes)

    monkeypatch.setattr(JobRequest, "evolved", counted)
    runs = {}
    for p, renewed in ((pol, False), (reading, True)):
        calls["n"] = 0
        r = EventSimulator(EventConfig(num_nodes=8, gpus_per_node=4, nodes_per_rack=4, queue=queue)).run(trace, p)
        runs[renewed] = ([(o.job_id, repr(o.first_start), repr(o.finish), repr(o.comm_overhead_s)) for o in r.jobs],
                         calls["n"])
    return runs


@pytest.mark.parametrize("policy", PROGRESS_BLIND)
def test_a_placement_that_never_reads_running_jobs_progress_gets_the_same_run_without_renewals(monkeypatch, policy):
    """A placement that declares reads_progress=False (firstfit, the artifact's round
    placements): under a queue order that does not read it either (fifo), the event clock keeps
    running jobs' requests as built at their start. The run is the same, bit for bit, as with
    renewed requests, and the requests are renewed far less often."""
    assert {"firstfit", "pal", "random-nonsticky"} <= set(PROGRESS_BLIND)
    runs = _runs_with_and_without_renewals(monkeypatch, PLACEMENTS[policy])
    assert runs[False][0] == runs[True][0]
    # a sticky placement's running jobs stay put (renewed only when they start); a non-sticky
    # one re-places them, and a moved job's request is built again anyway
    fewer = 3 if PLACEMENTS[policy].traits.sticky else 1
    assert runs[False][1] * fewer < runs[True][1], (runs[False][1], runs[True][1])


@pytest.mark.parametrize("queue", ["las", "srtf"])
def test_a_queue_order_that_reads_progress_renews_running_jobs_for_any_placement(monkeypatch, queue):
    """LAS orders by attained service: with it, pal's running jobs are renewed at every
    decision (their order decides which stay), whatever pal itself reads."""
    runs = _runs_with_and_without_renewals(monkeypatch, PLACEMENTS["pal"], queue=queue)
    assert runs[False][0] == runs[True][0]
    assert runs[False][1] == runs[True][1] > 0


def test_stale_finish_events_swept_out_change_nothing_but_the_heap(monkeypatch):
    """random-nonsticky re-places every job at every decision: each move leaves a stale finish
    event. Sweeping them out (here from 200 queued events on) keeps every job's outcome, the
    event, plan and restart counts, and the busy GPU-seconds up to rounding."""
    import pal_slurm.sim.event as event

    trace = synthetic_trace(300, seed=3, jobs_per_hour=60.0, max_gpus=8)
    cfg = EventConfig(num_nodes=8, gpus_per_node=4, nodes_per_rack=4)
    sweeps = {"n": 0, "dropped": 0}
    drop = event._EventRun.drop_stale_finishes

    def counted(self):
        before = len(self.heap)
        drop(self)
        sweeps["n"] += 1
        sweeps["dropped"] += before - len(self.heap)

    def outcome(r):
        return ([(o.job_id, repr(o.first_start), repr(o.finish), repr(o.comm_overhead_s), o.preemptions)
                 for o in r.jobs], r.extra["events"], r.extra["plans"], r.extra["restarts"])

    plain = EventSimulator(cfg).run(trace, "random-nonsticky")
    monkeypatch.setattr(event._EventRun, "drop_stale_finishes", counted)
    monkeypatch.setattr(event, "SWEEP_MIN", 200)
    swept = EventSimulator(cfg).run(trace, "random-nonsticky")
    assert sweeps["n"] > 0 and sweeps["dropped"] > 1000, sweeps
    assert outcome(swept) == outcome(plain)
    assert swept.busy_gpu_s == pytest.approx(plain.busy_gpu_s, rel=1e-12)


@pytest.mark.parametrize("mode", ["event", "compat"])
def test_the_clocks_hand_the_engine_their_jobs_in_fifo_order(monkeypatch, mode):
    """Both clocks tell the engine their jobs come in submit order, one priority (so FIFO skips
    its sort of thousands of waiting jobs at every decision): at every decision of a run with
    arrivals, moves, preemptions and finishes, that list is exactly FIFO's order of it."""
    from pal_slurm.engine import Engine
    from pal_slurm.policy.queue import fifo
    from pal_slurm.sim.compat import CompatConfig, CompatSimulator

    seen = {"decisions": 0, "max_jobs": 0}
    order_jobs = Engine.order_jobs

    def checked(self, jobs, in_submit_order=False):
        if in_submit_order:  # (a decider's own engine orders its held jobs itself)
            assert [j.job_id for j in jobs] == [j.job_id for j in fifo(jobs)]
            seen["decisions"] += 1
            seen["max_jobs"] = max(seen["max_jobs"], len(jobs))
        return order_jobs(self, jobs, in_submit_order)

    monkeypatch.setattr(Engine, "order_jobs", checked)
    trace = synthetic_trace(120, seed=5, jobs_per_hour=120.0, max_gpus=8)
    for policy in ("random-nonsticky", "pal", "packed-sticky"):
        if mode == "event":
            EventSimulator(EventConfig(num_nodes=4, gpus_per_node=4, nodes_per_rack=2)).run(trace, policy)
        else:
            CompatSimulator(CompatConfig()).run(small_trace(n=30), policy)
    assert seen["decisions"] > 50 and seen["max_jobs"] > 10, seen
    if mode == "event":  # and with a decider: the models of stock Slurm and of pald on Slurm
        from pal_lab.replay.plan import plan_replay
        from pal_lab.replay.predict import predicted_run
        from pal_slurm.sim.trace import bundled_trace

        before = seen["decisions"]
        plan = plan_replay(bundled_trace("workload-3"), 600, 4, 64, jobs=30)
        for arm in ("stock", "pal-fit"):
            predicted_run(plan, arm, 0, 16, 4, 4, launch_s=60.0)
        assert seen["decisions"] > before + 20, seen


def test_the_slurm_queue_order_without_slurm_is_submit_order():
    """The simulator reads no Slurm: every job's computed priority is 0, and the `slurm` order
    schedules as FIFO does (docs/policies.md)."""
    trace = synthetic_trace(120, seed=5, jobs_per_hour=60.0, max_gpus=8)
    runs = {}
    for queue in ("fifo", "slurm"):
        r = EventSimulator(EventConfig(num_nodes=4, gpus_per_node=4, nodes_per_rack=4, queue=queue)).run(
            trace, PLACEMENTS["pal"])
        runs[queue] = [(o.job_id, repr(o.first_start), repr(o.finish)) for o in r.jobs]
    assert runs["slurm"] == runs["fifo"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0.001, 5000.0), min_size=0, max_size=3 * FOLD_FROM), st.floats(0.0, 3000.0),
       st.floats(1.0, 3.0), st.floats(1.0, 2.5))
def test_a_job_advanced_over_many_instants_at_once_equals_one_advance_per_instant(gaps, restart, pm, net):
    """A running job catches up on the decision instants it skipped (a placement that reads no
    progress) with numpy's running folds from FOLD_FROM instants on: the same work left,
    network seconds and service as an advance per instant, bit for bit, in its restart's
    window or after it."""
    _advanced_both_ways(gaps, restart, pm, net)


@pytest.mark.parametrize("seed", range(5))
def test_a_long_run_of_instants_folds_to_the_same_bits(seed):
    """Thousands of instants (a long job on a large site): where a pairwise sum would round
    differently from the loop."""
    rnd = random.Random(seed)
    _advanced_both_ways([rnd.uniform(0.001, 900.0) for _ in range(5000)], rnd.uniform(0, 3000),
                        rnd.uniform(1, 3), rnd.uniform(1, 2.5))


def _advanced_both_ways(gaps: list[float], restart: float, pm: float, net: float) -> None:
    src = TraceJob(job_id=1, num_gpus=2, submit_time=0.0, iterations=1e6, model="ResNet-50")

    def job() -> EventJob:
        return EventJob(key=1, src=src, perf_class="A", submit=0.0, gpus=(0, 1), work_left=1e6 * 0.1,
                        rate=1.0 / (pm * net), net=net, last=10.0, resume_at=10.0 + restart)

    times = [10.0 + t for t in accumulate(gaps)]
    one, many = job(), job()
    for t in times:
        one.advance(t)
    many.advance_over(times)
    assert (many.work_left, many.comm_s, many.attained, many.last) == (one.work_left, one.comm_s, one.attained, one.last)
