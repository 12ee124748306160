"""The replay's model of pal-slurm on Slurm (replay.pald_model: pald's own service, Slurm
modelled): the hook's held-job rule, pald's cycle period and pald's clock, on a two-node cluster
without variability or network."""

from dataclasses import replace

import pytest

from pal_lab.replay.pald_model import PaldModel
from pal_slurm.model import JobRequest
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.trace import UNCLASSED, Trace, TraceJob

from ...sim.builders import shaped_job

CONFIG = EventConfig(num_nodes=2, gpus_per_node=4, nodes_per_rack=None, network=False, jobs_stay_put=True)


job = shaped_job


# A holds node 1; B needs both nodes (held); C fits node 2 at once but arrives behind held B
TRACE = Trace("held", (job(0, 0, 1000, 1, 4), job(1, 10, 500, 2, 4), job(2, 20, 100, 1, 1)))


def starts(decider, trace=TRACE, policy="pal"):
    seen: dict[int, float] = {}
    EventSimulator(CONFIG).run(trace, policy, decider=decider, on_start=lambda t, j, g: seen.setdefault(j, t))
    return seen


def test_held_jobs_start_at_pald_s_next_cycle_and_newcomers_queue_behind_them():
    d = PaldModel("pal", cycle_period_s=300.0)
    seen = starts(d)
    assert seen[0] == 0.0
    assert seen[1] == 1200.0  # A ends at 1000; pald's next cycle is at 1200
    assert seen[2] == 1800.0  # C fitted at 20, but the hook held it behind B (FIFO, no backfill): B ends at 1700
    assert d.starts == {"placed": 1, "released": 2}


def test_a_cycle_at_every_instant_is_the_simulator_s_own_loop():
    seen = starts(PaldModel("pal", cycle_period_s=0.0))
    assert (seen[1], seen[2]) == (1000.0, 1500.0)


def test_pald_reads_time_limits_on_its_own_clock():
    """A waiting job reaches pald as the hook's fields and squeue's record show it (its limit in
    whole wall minutes, squeue's times in whole seconds); a running one with its limit less the
    time it has run as what is left."""
    d = PaldModel("pal", cycle_period_s=0.0, limits_s={0: 72000.0}, wall_scale=600.0)  # 2 wall minutes
    waiting = JobRequest(job_id=0, num_gpus=4, submit_time=900.0, waiting_since=900.0, remaining_time=999.0,
                         net_sensitivity="high")
    assert d.place_request(waiting).job.time_limit == 2
    record = d.job_info(waiting)
    assert (record.submit_time, record.time_limit_s) == (1, 120.0)  # 1.5 wall s, as squeue rounds it
    assert d.place_request(waiting).pal.net == "high"  # no declaration: the simulator's class of its model
    declared = PaldModel("pal", cycle_period_s=0.0, nets={0: "2.22"})
    assert declared.place_request(waiting).pal.net == declared.job_info(waiting).comment.split("net=")[1] == "2.22"
    # running since 1200 (waiting_since is its start): its limit less the 600 s it has run
    running = replace(waiting, waiting_since=1200.0, running_on=(0, 1, 2, 3))
    seen_job = d.as_pald_sees(running, now=1800.0)
    assert (seen_job.submit_time, seen_job.waiting_since, seen_job.remaining_time) == (1.5, 2.0, 119.0)
    assert seen_job.net_sensitivity == "high"
    assert d.as_pald_sees(running, now=90000.0).remaining_time == 0.0


def test_a_finish_aware_placement_waits_for_a_running_job_s_end_that_pald_reads_from_its_limit():
    # A (3 GPUs on one node, limit 100 s) and B (3 on the other, long) run; C (2 GPUs, any
    # nodes, network-sensitive BERT, 10,000 s) arrives at 10: spread over both nodes now, or on
    # A's node when A ends at 100? pal-fit sees A's end from its limit and waits; a placement
    # that does not plan around running jobs (pal) spreads C at once
    trace = Trace("ends", (job(0, 0, 100, 1, 3), job(1, 0, 50_000, 1, 3),
                           TraceJob(2, 2, 10.0, 10_000.0, "BERT", iter_s=1.0, perf_class=UNCLASSED)))
    limits = {0: 100.0, 1: 100_000.0, 2: 20_000.0}
    seen: dict[int, tuple[float, tuple[int, ...]]] = {}
    EventSimulator(CONFIG).run(trace, "pal-fit", decider=PaldModel("pal-fit", cycle_period_s=0.0, limits_s=limits),
                               on_start=lambda t, j, g: seen.setdefault(j, (t, tuple(g))))
    assert seen[2][0] >= 100.0 and {g // 4 for g in seen[2][1]} == {seen[0][1][0] // 4}
    seen.clear()
    EventSimulator(CONFIG).run(trace, "pal", decider=PaldModel("pal", cycle_period_s=0.0, limits_s=limits),
                               on_start=lambda t, j, g: seen.setdefault(j, (t, tuple(g))))
    assert seen[2][0] == 10.0 and len({g // 4 for g in seen[2][1]}) == 2


def test_a_backfilling_placement_starts_a_newcomer_that_does_not_delay_the_held_job():
    # pal-fit backfills: C (1 GPU, 100 s) fits node 2 now and ends long before A frees node 1
    # for held B, so the hook places it at once, as Slurm's backfill would, instead of holding
    # it until pald's next cycle; B still starts at the first cycle after A ends
    d = PaldModel("pal-fit", cycle_period_s=300.0)
    seen = starts(d)
    assert seen[2] == 20.0
    assert seen[1] == 1200.0
    assert d.starts == {"placed": 2, "released": 1}


def test_slurm_starts_what_pald_pinned_at_its_next_pass_and_nobody_takes_those_gpus_meanwhile():
    # pal-fit places C at 20 (see above); Slurm starts it at its next pass (250), and B, released
    # at pald's cycle at 1200, at the pass at 1250
    d = PaldModel("pal-fit", cycle_period_s=300.0, slurm_pass_s=250.0)
    seen = starts(d)
    assert (seen[0], seen[2], seen[1]) == (0.0, 250.0, 1250.0)
    # two one-GPU jobs on a one-GPU-free cluster: the second must not be placed on the GPU the
    # first was pinned to while that one waits for the pass
    trace = Trace("pinned", (job(0, 0, 1000, 1, 4), job(1, 0, 1000, 1, 3), job(2, 10, 100, 1, 1),
                             job(3, 20, 100, 1, 1)))
    gpus: dict[int, tuple[int, ...]] = {}
    EventSimulator(CONFIG).run(trace, "pal-fit", decider=PaldModel("pal-fit", cycle_period_s=300.0, slurm_pass_s=250.0),
                               on_start=lambda t, j, g: gpus.setdefault(j, (t, tuple(g))))
    assert gpus[2][0] == 250.0 and gpus[3][0] >= 250.0 + 100.0  # job 3 waits for job 2's GPU


def test_gpus_pald_pinned_for_slurm_s_next_pass_free_at_the_job_s_limit_not_never():
    # as above, but A and B are pinned and wait for Slurm's pass (at 250) when C arrives at 10:
    # nothing runs yet. pal-fit sees A's GPUs free at A's limit (as pald sees its promises:
    # daemon.service.Reservation.as_running) and waits for A's node; before, pinned GPUs had no
    # end, no node could ever hold C, and C was spread over both nodes at once
    trace = Trace("promised", (job(0, 1, 100, 1, 3), job(1, 1, 50_000, 1, 3),
                               TraceJob(2, 2, 10.0, 10_000.0, "BERT", iter_s=1.0, perf_class=UNCLASSED)))
    limits = {0: 100.0, 1: 100_000.0, 2: 20_000.0}
    seen: dict[int, tuple[float, tuple[int, ...]]] = {}
    EventSimulator(CONFIG).run(trace, "pal-fit",
                               decider=PaldModel("pal-fit", cycle_period_s=0.0, limits_s=limits, slurm_pass_s=250.0),
                               on_start=lambda t, j, g: seen.setdefault(j, (t, tuple(g))))
    assert seen[0][0] == seen[1][0] == 250.0
    assert seen[2][0] >= 350.0 and {g // 4 for g in seen[2][1]} == {seen[0][1][0] // 4}


def test_the_hook_answers_from_palds_last_sync_so_gpus_freed_since_wait_for_the_next_cycle():
    # A holds node 1 to 1000, B node 2 for long; C (4 GPUs) arrives at 1100. pald syncs at its
    # cycle's ticks (900, 1200): at 1100 it still sees A running, so the hook holds C and the
    # cycle at 1200 releases it. A pald that synced at every instant would have placed it at 1100.
    trace = Trace("stale", (job(0, 0, 1000, 1, 4), job(1, 0, 50_000, 1, 4), job(2, 1100, 100, 1, 4)))

    stale = PaldModel("pal-fit", cycle_period_s=300.0)
    assert starts(stale, trace, "pal-fit")[2] == 1200.0 and stale.starts == {"placed": 2, "released": 1}
    assert starts(PaldModel("pal-fit", cycle_period_s=300.0, cycle_offset_s=100.0), trace, "pal-fit")[2] == 1100.0  # synced at 1000
    assert starts(PaldModel("pal-fit", cycle_period_s=0.0), trace, "pal-fit")[2] == 1100.0


def test_a_cycle_decides_on_its_read_so_an_end_between_the_two_waits_for_the_next_cycle():
    # A holds node 1 until 1000; B (node 1 too) is held behind it. pald decides at 1050, 1350
    # (its cycle's ticks) on reads made 100 before (950, 1250): the cycle at 1050 still sees A
    # running and B waits for the cycle at 1350. A model that read at the decision released B
    # at 1050 (the lab's pald: releases 0.13 wall s after its read's tick, median).
    trace = Trace("aged", (job(0, 0, 1000, 1, 4), job(1, 0, 50_000, 1, 4), job(2, 10, 100, 1, 4)))

    assert starts(PaldModel("pal-fit", cycle_period_s=300.0, cycle_offset_s=150.0), trace, "pal-fit")[2] == 1050.0
    aged = PaldModel("pal-fit", cycle_period_s=300.0, cycle_offset_s=150.0, view_age_s=100.0)
    assert starts(aged, trace, "pal-fit")[2] == 1350.0 and aged.starts == {"placed": 2, "released": 1}
    assert starts(PaldModel("pal-fit", cycle_period_s=300.0, cycle_offset_s=150.0, view_age_s=40.0), trace, "pal-fit")[2] == 1050.0


def test_an_end_that_leaves_the_cluster_idle_reaches_pald_at_its_next_sync_not_at_the_next_job():
    # A (both nodes) ends at 1000 and nothing else runs or waits; B (both nodes) arrives at
    # 1650, after pald's syncs at 1200 and 1500: pald saw A's end there, so the hook places B
    # at once. A simulator that called the decider only while jobs were active told pald of A's
    # end at 1650, as if it had just happened: pald held B until its cycle at 1800.
    trace = Trace("idle", (job(0, 0, 1000, 2, 4), job(1, 1650, 100, 2, 4)))
    seen: dict[int, float] = {}
    pald = PaldModel("pal-fit", cycle_period_s=300.0)
    EventSimulator(CONFIG).run(trace, "pal-fit", decider=pald, on_start=lambda t, j, g: seen.setdefault(j, t))
    assert seen == {0: 0.0, 1: 1650.0}
    assert pald.starts == {"placed": 2, "released": 0}


def test_slurm_takes_the_lowest_free_slots_when_its_pass_starts_a_job_pald_pinned_to_nodes():
    # A (1 GPU) runs on slot 0 of node 1 until 100. B (-N 2 --gres=gpu:3) arrives at 50: pald
    # pins it to both nodes (slots 1-3 there, 0-2 on node 2: not the same slots, so Slurm picks
    # them). Slurm's pass at 150 starts B after A ended, on the lowest free slots then: 0-2 on
    # both nodes. The model used to start B on the slots Slurm would have taken at 50.
    trace = Trace("slots", (job(0, 0, 100, 1, 1), job(1, 50, 1000, 2, 3)))
    seen: dict[int, tuple[float, tuple[int, ...]]] = {}
    EventSimulator(CONFIG).run(trace, "pal-fit", decider=PaldModel("pal-fit", cycle_period_s=0.0, slurm_pass_s=150.0),
                               on_start=lambda t, j, g: seen.setdefault(j, (t, tuple(g))))
    assert seen[0] == (0.0, (0,))
    assert seen[1] == (150.0, (0, 1, 2, 4, 5, 6))


def test_a_job_pald_passes_to_slurm_is_an_error_the_model_has_no_slurm_scheduler_for_it():
    wide = Trace("wide", (job(0, 0, 100, 1, 8),))  # 8 GPUs on one 4-GPU node: pald passes it
    with pytest.raises(SimulationError, match="pald passed job 0"):
        starts(PaldModel("pal", cycle_period_s=0.0), wide)
