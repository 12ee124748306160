"""The simulator's model of pal-slurm on Slurm (sim.pald_on_slurm): the hook's held-job rule,
pald's cycle period and pald's clock, on a two-node cluster without variability or network."""

from pal_slurm.model import JobRequest
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.pald_on_slurm import PaldOnSlurm
from pal_slurm.sim.trace import Trace

from .builders import shaped_job

CONFIG = EventConfig(num_nodes=2, gpus_per_node=4, nodes_per_rack=None, network=False, jobs_stay_put=True)


job = shaped_job


# A holds node 1; B needs both nodes (held); C fits node 2 at once but arrives behind held B
TRACE = Trace("held", (job(0, 0, 1000, 1, 4), job(1, 10, 500, 2, 4), job(2, 20, 100, 1, 1)))


def starts(decider):
    seen: dict[int, float] = {}
    EventSimulator(CONFIG).run(TRACE, "pal", decider=decider, on_start=lambda t, j, g: seen.setdefault(j, t))
    return seen


def test_held_jobs_start_at_pald_s_next_cycle_and_newcomers_queue_behind_them():
    d = PaldOnSlurm("pal", cycle_period_s=300.0)
    seen = starts(d)
    assert seen[0] == 0.0
    assert seen[1] == 1200.0  # A ends at 1000; pald's next cycle is at 1200
    assert seen[2] == 1800.0  # C fitted at 20, but the hook held it behind B (FIFO, no backfill): B ends at 1700
    assert d.starts == {"placed": 1, "released": 2}


def test_a_cycle_at_every_instant_is_the_simulator_s_own_loop():
    seen = starts(PaldOnSlurm("pal", cycle_period_s=0.0))
    assert (seen[1], seen[2]) == (1000.0, 1500.0)


def test_pald_reads_time_limits_on_its_own_clock():
    d = PaldOnSlurm("pal", cycle_period_s=0.0, limits_s={0: 1200.0}, wall_scale=600.0)
    seen_job = d.as_pald_sees(JobRequest(job_id=0, num_gpus=4, submit_time=600.0, waiting_since=1200.0,
                                         remaining_time=999.0, net_sensitivity="high"))
    assert (seen_job.submit_time, seen_job.waiting_since, seen_job.remaining_time) == (1.0, 2.0, 2.0)
    assert seen_job.net_sensitivity == "medium"  # the replay's comments name no sensitivity


def test_a_backfilling_placement_starts_a_newcomer_that_does_not_delay_the_held_job():
    # pal-fit backfills: C (1 GPU, 100 s) fits node 2 now and ends long before A frees node 1
    # for held B, so the hook places it at once, as Slurm's backfill would, instead of holding
    # it until pald's next cycle; B still starts at the first cycle after A ends
    d = PaldOnSlurm("pal-fit", cycle_period_s=300.0)
    seen = starts(d)
    assert seen[2] == 20.0
    assert seen[1] == 1200.0
    assert d.starts == {"placed": 2, "released": 1}


def test_slurm_starts_what_pald_pinned_at_its_next_pass_and_nobody_takes_those_gpus_meanwhile():
    # pal-fit places C at 20 (see above); Slurm starts it at its next pass (250), and B, released
    # at pald's cycle at 1200, at the pass at 1250
    d = PaldOnSlurm("pal-fit", cycle_period_s=300.0, slurm_pass_s=250.0)
    seen = starts(d)
    assert (seen[0], seen[2], seen[1]) == (0.0, 250.0, 1250.0)
    # two one-GPU jobs on a one-GPU-free cluster: the second must not be placed on the GPU the
    # first was pinned to while that one waits for the pass
    trace = Trace("pinned", (job(0, 0, 1000, 1, 4), job(1, 0, 1000, 1, 3), job(2, 10, 100, 1, 1),
                             job(3, 20, 100, 1, 1)))
    gpus: dict[int, tuple[int, ...]] = {}
    EventSimulator(CONFIG).run(trace, "pal-fit", decider=PaldOnSlurm("pal-fit", cycle_period_s=300.0, slurm_pass_s=250.0),
                               on_start=lambda t, j, g: gpus.setdefault(j, (t, tuple(g))))
    assert gpus[2][0] == 250.0 and gpus[3][0] >= 250.0 + 100.0  # job 3 waits for job 2's GPU
