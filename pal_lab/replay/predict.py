"""What the event simulator predicts for a replayed arm (same jobs, cluster, draw, seed).

The simulator runs the plan's jobs (the same subset, submission times relative to the first)
on the same cluster (nodes, GPUs per node, nodes per leaf switch) with the same per-GPU draw
(`variability_seed` = the replay's seed). Each arm maps to the simulator policy closest to it:
`stock` -> `slurm` (`policy.netaware.named.SLURM`), a variability-blind placement with EASY backfill that picks nodes as
Slurm does (`shapes.slurm_pick`: cons_tres takes the lowest free GPU indices, topology/tree the
leaf switch that fits the job best,
sched/backfill starts jobs out of order when they do not delay the blocked ones, each of which
reserves whole nodes), run as Slurm runs it (`sim.stock_slurm.StockSlurm`): every start at a
scheduling pass (`bf_interval`), backfill judged on the jobs' time limits as wall-clock bounds,
not their real length. Every arm with pald (`pal`, `pal-net`, `pal-fit`) -> pal-slurm on Slurm
(`replay.pald_model.PaldModel`: pald's own placement service, its submit path and its
held-job cycle every `PALD_CYCLE_S` x scale, on a manual clock, jobs in their Slurm shapes with
their time limits, started jobs kept where they are, Slurm's own slot choice where pald cannot
bind slots, and a modelled Slurm starting what pald pinned at its next pass). Both arms' jobs have the Slurm shapes the replay submits
(`plan.slurm_shape`). `palctl replay` reports the prediction next to the measurement so the
gap is visible.

Slurm's own cost per job (`launch_s`, trace seconds: the replay measures it as wall seconds
from Slurm's start in slurmctld's log to the payload running plus teardown, times the scale,
`harness.launch_cost`; ~0.1 s, 60 trace s at 600x) is charged to every job as time on its GPUs
without progress when it starts (`EventConfig.start_cost_s`: a fixed time, not stretched by
the job's slow GPUs or network). The wait for the pass (0.5 s on average at bf_interval=1, 300
trace s at 600x, more than the median job's ideal runtime) is the passes' own, on the clock the
lab's passes ran (`ctldlog.pass_clock`: their phase against the first submission is the lab's
draw, and a burst of submissions at a trace's start waits for it). pald's cycles run on the
clock pald ran them (`harness.pald_clock`: it cycles at the multiples of its period on the
epoch clock, so the phase is known, not drawn): a held job is released at the first cycle
that sees its GPUs free, tenths of a wall second after they free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pal_slurm.model import ClusterView
from pal_slurm.policy.netaware import NetAwarePlacement
from pal_slurm.policy.netaware.named import SLURM
from pal_lab.replay.compare import Parting, jct_gaps, partings
from pal_lab.replay.ctldlog import PassClock
from pal_slurm.ranking import Ranking
from pal_lab.replay.plan import ReplayPlan
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.stock_slurm import SLURM_WILL_RUN_WINDOW_S
from pal_slurm.sim.trace import Trace

if TYPE_CHECKING:
    from pal_lab.replay.harness import ArmRun, LabShape

SIM_POLICY: dict[str, NetAwarePlacement | str] = {"stock": SLURM, "pal": "pal", "pal-net": "pal-net",
                                                  "pal-fit": "pal-fit",
                                                  "pal-fit-aged": "pal-fit", "pal-fit-slurm": "pal-fit"}


def pald_ranking(db: Path, cluster: ClusterView) -> Ranking | None:
    """The ranking pald placed by in a replayed arm (its store, `<arm work dir>/pal.db`), on
    `cluster`; None when the arm has no store."""
    if not db.exists():
        return None
    from pal_slurm.daemon.service import ranking_of
    from pal_slurm.store.bootstrap import open_store

    return ranking_of(cluster, open_store(f"sqlite:///{db}", upgrade=False).latest_ranking())


def predict_measured(plan: ReplayPlan, run: "ArmRun", seed: int, shape: "LabShape") -> dict[str, Any]:
    """`predict` for a replayed arm with what its run measured (`harness.measure_arm`): Slurm's
    launch cost, pald's ranking and cycle, the clock of the lab's passes: the
    headline alone (`predict_arm` adds where the lab parted from it)."""
    return _headline(predicted_run_measured(plan, run, seed, shape))


def predicted_run_measured(plan: ReplayPlan, run: "ArmRun", seed: int, shape: "LabShape",
                           pald_phase_s: float | None = None, slurm_phase_s: float | None = None) -> RunResult:
    """`predicted_run` with what the arm's run measured (as `predict_measured`): every job's
    outcome, to set beside the lab's (`replay.compare.partings`). `pald_phase_s` replaces the
    measured phase of pald's cycle (`cycle_phase_spread`), `slurm_phase_s` that of Slurm's
    passes (`timing_grid`)."""
    cluster = shape.cluster()
    cycle = run.pald_cycle
    if cycle is not None and pald_phase_s is not None:
        cycle = replace(cycle, phase_s=pald_phase_s)
    clock = run.slurm_pass
    if slurm_phase_s is not None:
        from pal_lab.replay.harness import BF_INTERVAL_S

        clock = replace(clock or PassClock(phase_s=0.0, period_s=BF_INTERVAL_S), phase_s=slurm_phase_s)
    return predicted_run(plan, run.arm, seed, shape.num_nodes, shape.gpus_per_node, shape.nodes_per_rack,
                         launch_s=run.launch_wall_s * plan.scale, cluster=cluster,
                         ranking=pald_ranking(run.lab_dir.parent / "pal.db", cluster),
                         pald_cycle=cycle, slurm_pass=clock)


def pass_phases(clock: PassClock | None, k: int) -> list[float]:
    """`k` phases of Slurm's passes (wall s after the replay's first submission) that the lab
    could have had: the measured phase moved by the middles of k equal parts of the passes'
    offsets from the clock (`PassClock.jitter_s`, its quantiles (i + 0.5) / k), or, when the
    offsets were not observed, the middles of k equal parts of the period.

    Why not the whole period always: the harness starts every arm's trace 0.5 s after a pass,
    and with few jobs pending (a pald arm) the passes then keep that phase within ~0.03 s for
    the whole replay, so a phase of 0.1 s is one the lab never has; a grid over the whole
    period parted from the lab within the first 0.2 trace h in every cell (workload-1 seed 0,
    160 jobs: replay-7 and replay-14 placed elsewhere than in all four lab runs) and gave a
    24-GPU job the race that decides that trace 16 of 36 times. Over the measured offsets the
    cells run the first 0.27 h as the lab did, like the lab runs among themselves. Stock's long
    queue spreads its passes over the whole interval, and its quantiles do the same."""
    from pal_lab.replay.harness import BF_INTERVAL_S

    if clock is None or not clock.jitter_s:
        period = clock.period_s if clock else BF_INTERVAL_S
        return [period * (i + 0.5) / k for i in range(k)]
    return [(clock.phase_s + clock.jitter_quantile((i + 0.5) / k)) % clock.period_s for i in range(k)]


def timing_grid(plan: ReplayPlan, run: "ArmRun", seed: int, shape: "LabShape", k: int,
                follow: str | None = None) -> list[dict[str, Any]]:
    """The arm predicted at `k` phases of Slurm's passes (`pass_phases`) and, for a pald arm,
    at each of `k` phases of pald's cycle (k x k runs; stock: k), everything else as measured:
    the outcomes the replay's sub-second timing can give, each {"slurm_pass_phase_s",
    "pald_cycle_phase_s" (None: stock), "avg_jct_s", "makespan_s"}, and with `follow` (a replay
    job's name, e.g. "replay-80") "follow_start_s": when the model started that job in the
    cell (trace s), to ask what the outcome hangs on (`near_start`).

    Why a grid and not the measured phases alone: the phases are measured as averages over a
    replay, and the passes drift by milliseconds each while a 160-job replay runs 20 wall
    minutes, so which of two jobs ending a trace minute apart a pass or a cycle sees first is
    a draw the measurement cannot fix. pald's cycle runs on the epoch clock, so its phase
    against the trace is a new draw each replay: its k phases span the whole cycle. The
    grid's mean is the model's expected outcome over that draw."""
    followed = None
    if follow is not None:
        followed = next((j.trace_job.job_id for j in plan.jobs if j.name == follow), None)
        if followed is None:
            raise ValueError(f"no job {follow!r} in the replay of {plan.trace} ({len(plan.jobs)} jobs: "
                             f"{plan.jobs[0].name}..{plan.jobs[-1].name})")
    cycle = run.pald_cycle
    pald_phases: list[float | None] = [cycle.period_s * j / k for j in range(k)] if cycle else [None]
    out = []
    for pass_phase in pass_phases(run.slurm_pass, k):
        for pald_phase in pald_phases:
            result = predicted_run_measured(plan, run, seed, shape, pald_phase_s=pald_phase, slurm_phase_s=pass_phase)
            h = _headline(result)
            cell = {"slurm_pass_phase_s": pass_phase, "pald_cycle_phase_s": pald_phase,
                    "avg_jct_s": h["avg_jct_s"], "makespan_s": h["makespan_s"]}
            if followed is not None:
                cell["follow_start_s"] = next(o.first_start for o in result.jobs if o.job_id == followed)
            out.append(cell)
    return out


def cell_ratios(cells: list[dict[str, Any]], stock_cells: list[dict[str, Any]]) -> list[float]:
    """A pald arm's grid cells' avg JCT, each over the mean of stock's cells (stock's expected
    outcome): the two arms ran on labs of their own, so a pald cell's pass phase says nothing
    of which of stock's phases its replay is set beside."""
    stock = sum(c["avg_jct_s"] for c in stock_cells) / len(stock_cells)
    return [c["avg_jct_s"] / stock for c in cells]


def near_start(cells: list[dict[str, Any]], stock_cells: list[dict[str, Any]], start_s: float, within_s: float) -> list[float]:
    """The avg JCT ratios (`cell_ratios`) of the grid cells of a pald arm
    (`timing_grid(..., follow=job)`) in which the followed job started within `within_s` of
    `start_s`: the model's outcome given where the lab put that one job. On workload-1 seed 0
    at 160 jobs the outcome hangs on when a 24-GPU, 15-hour job starts (3.2, 4.4 or 5.6 trace
    h): the grid's mean says little about one replay, this says how well the model predicts
    it once that draw is known."""
    return [ratio for ratio, c in zip(cell_ratios(cells, stock_cells), cells)
            if abs(c["follow_start_s"] - start_s) <= within_s]


def cycle_phase_spread(plan: ReplayPlan, run: "ArmRun", seed: int, shape: "LabShape",
                       phases: int) -> list[tuple[float, dict[str, Any]]]:
    """(phase of pald's cycle in wall s, headline) of a pald arm predicted with its cycle at
    `phases` evenly spaced phases, everything else as measured: how much the outcome hangs on
    pald's timing. A held job is released at the first cycle that sees its GPUs free; on a
    loaded trace which of two jobs ending a few trace seconds apart a cycle sees first can
    decide the order of the large jobs (workload-3, 40 jobs, pal-net: 0.68 or 0.75 of stock's
    avg JCT by the phase; before pald's cycle ran on the epoch clock its phase drifted through
    a replay, so a point prediction was one draw of these). Empty for an arm without pald."""
    if run.pald_cycle is None:
        return []
    period = run.pald_cycle.period_s
    out = []
    for k in range(phases):
        phase = period * k / phases
        out.append((phase, _headline(predicted_run_measured(plan, run, seed, shape, pald_phase_s=phase))))
    return out


@dataclass(frozen=True)
class ArmPrediction:
    """A replayed arm's prediction made from what it measured (`predicted_run_measured`), and
    the jobs the lab ran otherwise than it (`replay.compare.partings`, in submission order,
    started more than `alike_within_s` apart or on other nodes)."""

    model: RunResult
    partings: list[Parting]
    alike_within_s: float
    gaps: list[Parting]  # every job, the largest JCT gap between the lab and the model first

    def gaps_line(self, k: int) -> str:
        """The lab's JCT less the model's over all jobs, and the `k` jobs with the largest gaps
        (trace hours): where a missed avg JCT comes from."""
        total = sum(p.jct_gap_s for p in self.gaps)
        head = (f"lab's JCT less the model's: {total / 3600:+.1f} h over {len(self.gaps)} jobs "
                f"({total / max(1, len(self.gaps)) / 3600:+.3f} h of avg JCT)")
        return "\n".join([head] + [f"   {p.jct_gap_s / 3600:+.2f} h {p.describe()}" for p in self.gaps[:k]])

    def headline(self) -> dict[str, Any]:
        return _headline(self.model)

    def partings_line(self, jobs: int) -> str:
        """How many of the arm's `jobs` parted, and the first of them (trace hours)."""
        first = f"; the first, trace hours: {self.partings[0].describe()}" if self.partings else ""
        return (f"{len(self.partings)} of {jobs} jobs ran otherwise than predicted (started more than "
                f"{self.alike_within_s:.0f} trace s apart, or on other nodes){first}")


def predict_arm(plan: ReplayPlan, run: "ArmRun", seed: int, shape: "LabShape") -> ArmPrediction:
    """The arm's measured prediction, where the lab parted from it and where their JCTs differ
    most, with the replay's one
    tolerance for "alike" (`harness.ALIKE_WITHIN_WALL_S`, in trace seconds): what `palctl
    replay` reports per arm and `benchmarks/slurm_replay.py --predict-only --partings` lists."""
    from pal_lab.replay.harness import ALIKE_WITHIN_WALL_S

    model = predicted_run_measured(plan, run, seed, shape)
    alike = ALIKE_WITHIN_WALL_S * plan.scale
    cluster = shape.cluster()
    return ArmPrediction(model, partings(plan, run.jobs, model, cluster, alike), alike,
                         jct_gaps(plan, run.jobs, model, cluster))


def predict(plan: ReplayPlan, arm: str, seed: int, num_nodes: int, gpus_per_node: int,
            nodes_per_rack: int, launch_s: float = 0.0, cluster: ClusterView | None = None,
            ranking: Ranking | None = None, pald_cycle: PassClock | None = None,
            slurm_pass: PassClock | None = None) -> dict[str, Any]:
    """{"policy", "avg_jct_s", "makespan_s"} of the event simulator for this arm (the
    arguments as in `predicted_run`)."""
    return _headline(predicted_run(plan, arm, seed, num_nodes, gpus_per_node, nodes_per_rack, launch_s, cluster,
                                   ranking, pald_cycle, slurm_pass))


def _headline(result: RunResult) -> dict[str, Any]:
    s = result.summary()
    return {"policy": result.policy, "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"]}


def predicted_run(plan: ReplayPlan, arm: str, seed: int, num_nodes: int, gpus_per_node: int,
                  nodes_per_rack: int, launch_s: float = 0.0, cluster: ClusterView | None = None,
                  ranking: Ranking | None = None, pald_cycle: PassClock | None = None,
                  slurm_pass: PassClock | None = None, starvation_bound_s: float | None = None,
                  queue: str | None = None) -> RunResult:
    """The event simulator's run of this arm, every job's outcome in it. `cluster`: the
    lab's (its node names; default num_nodes x gpus_per_node); `ranking`: pald's measured one
    on that cluster (pal-slurm arms; default the simulator's exact draw); `pald_cycle`: pald's
    cycle as the replay ran it (`harness.pald_clock`, wall seconds: its period and phase against
    the first submission; default pald's configured cycle at phase 0); `slurm_pass`: the
    clock of the lab's backfill passes (`ctldlog.pass_clock`, wall seconds; default the clock a
    replay starts its trace on: a pass every bf_interval, the first ALIGN_AFTER_PASS_S before
    the first submission); `starvation_bound_s`: pald's starvation bound in trace seconds
    (default a site's, compressed as the replay configures pald); `queue`: the order pald keeps
    its held jobs in (`[policy] queue`; default the arm's, `harness.arm_queue`), e.g. `slurm`:
    Slurm's priority order, every held job that cannot start reserving at once and no free
    backfill (`Engine.keeps_order`; with no Slurm priority in the model every job scores the
    same, so that is submit order under Slurm's backfill rule)."""
    from pal_lab.replay.harness import (ALIGN_AFTER_PASS_S, ARMS, BF_INTERVAL_S, PALD_CYCLE_S, PALD_VIEW_AGE_S,
                                         arm_queue, pald_times)
    from pal_slurm.sim.event import EventSimulator, simulator_for
    from pal_slurm.daemon.service import ServiceSettings
    from pal_slurm.policy.autotune import rack_timers
    from pal_lab.replay.pald_model import PaldModel
    from pal_slurm.sim.stock_slurm import StockSlurm

    pald = ARMS.get(arm) is not None  # an arm with pald: decided by pald's service on modelled Slurm (pald_model)
    clock = slurm_pass or PassClock(phase_s=BF_INTERVAL_S - ALIGN_AFTER_PASS_S, period_s=BF_INTERVAL_S)
    pass_s, pass_offset_s = clock.period_s * plan.scale, clock.phase_s * plan.scale
    jobs = tuple(replace(j.trace_job, submit_time=j.submit_s, shape=j.shape) for j in plan.jobs)
    spec = RunSpec(mode="event", num_nodes=num_nodes, gpus_per_node=gpus_per_node,
                   nodes_per_rack=nodes_per_rack, seeds=seed + 1, cluster=cluster if pald else None)
    policy = SIM_POLICY[arm]
    sim = simulator_for(spec, seed)
    sim = EventSimulator(replace(sim.config, start_cost_s=launch_s, jobs_stay_put=pald))
    decider: PaldModel | StockSlurm | None = None
    if not pald and arm == "stock":
        policy = replace(SLURM, will_run_window_s=SLURM_WILL_RUN_WINDOW_S * plan.scale)
        decider = StockSlurm(policy, pass_period_s=pass_s, pass_offset_s=pass_offset_s,
                             limits_s={i: j.limit_s for i, j in enumerate(plan.jobs)})
    if pald:
        limits = {i: j.limit_s for i, j in enumerate(plan.jobs)}
        cycle = pald_cycle or PassClock(phase_s=0.0, period_s=PALD_CYCLE_S, view_age_s=PALD_VIEW_AGE_S)
        times = pald_times(plan.scale)  # as the replay configures pald (pald's clock: wall seconds)
        if starvation_bound_s is not None:
            times = replace(times, starvation_bound_s=starvation_bound_s / plan.scale)
        decider = PaldModel(str(policy), cycle_period_s=cycle.period_s * plan.scale,
                            cycle_offset_s=cycle.phase_s * plan.scale, view_age_s=cycle.view_age_s * plan.scale,
                            limits_s=limits,
                            ranking=ranking, wall_scale=plan.scale, slurm_pass_s=pass_s,
                            slurm_pass_offset_s=pass_offset_s,
                            nets={i: j.net_sensitivity for i, j in enumerate(plan.jobs)},
                            settings=ServiceSettings(queue=queue or arm_queue(arm),
                                                     delay_timers=rack_timers(times.rack_wait_s),
                                                     reserve_after_s=times.reserve_after_s,
                                                     starvation_bound_s=times.starvation_bound_s))
    result = sim.run(Trace(plan.trace, jobs), policy, decider=decider)
    name = policy if isinstance(policy, str) else policy.name
    return replace(result, policy=f"{name}-on-slurm" if pald else name)
