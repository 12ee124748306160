"""pal-slurm on Slurm, as the event simulator's decider: what the `pal`/`pal-net` replay arms run.

The model of pald is pald's own code: its placement service (daemon.service.PlacementService),
on a manual clock (pald's: trace seconds / the replay's scale), fed what pald would read from
Slurm, answering each new job through its submit path (`place`) and releasing held jobs through
its cycle (`plan_cycle`). Slurm is modelled (`ModelledSlurm`): it is where pald's answers go
(an engine Actuator: the job is pinned to the GPUs pald chose), and its scheduling pass starts
the pinned jobs (`policy.slurm_starts.started_at_pass`: the slots free at the pass, where pald
pinned only the nodes). Slurm's own scheduling (EASY backfill, its node choice) only decides
jobs pald passes, and a replayed trace has none (every job asks a shape pald places): a pass
is an error here.

What this decider adds to the simulator's own loop is what pald sees and when:

- pald's cycle, every `cycle_period_s` at its phase (a held job starts at the first cycle after
  its GPUs free up, not at that instant), and Slurm's pass, every `slurm_pass_s` (on the
  replay's labs nearly every start is the backfill pass's, see sim.stock_slurm);
- the view as of pald's last sync: a job that ended since is still running to pald (the hook
  does not place on its GPUs, the cycle plans around it) until its next sync, `view_age_s`
  before each cycle's decision;
- the jobs as Slurm shows them to pald: the hook's fields at submit (its `--time` in whole
  minutes, the comment's class and network sensitivity), squeue's records of the held jobs
  (times in whole seconds) and the running jobs, each with its time limit less the time it has
  run as what is left of it (what a finish-aware placement and backfill reservations plan with);
- pald's state between answers: its reservations (a pinned job's GPUs, following Slurm's pick
  where it pinned only the nodes), its promises (a pinned job runs, to a placement that plans
  around running jobs, until its limit), its queue of held jobs (the hook's held-job rule), and
  its engine (no network model: the placements' tier penalties).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from pal_slurm.daemon.protocol import JobFields, PlaceRequest
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine import Launch, ManualClock
from pal_slurm.intake.job import from_hook
from pal_slurm.model import ClusterView, DecisionKind, JobRequest, RoundPlan
from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.model.decision import JobId
from pal_slurm.policy.shapes import choice_of, shape_of
from pal_slurm.policy.slurm_starts import started_at_pass
from pal_slurm.ranking import Ranking
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.ticks import Period
from pal_slurm.slurm.readers import JobInfo

UID = 1000  # the replay's one user


@dataclass
class ModelledSlurm:
    """Slurm as pald acts on it (engine.Actuator): a job pald places or releases is pinned to
    the GPUs it chose, and Slurm's pass (`starts`) starts the pinned jobs it can."""

    pinned: dict[JobId, tuple[int, ...]] = field(default_factory=dict)

    def start(self, launch: Launch) -> None:
        self.pinned[launch.job.job_id] = tuple(launch.choice.gpu_ids)

    def starts(self, waiting: Mapping[JobId, JobRequest], view: ClusterView) -> dict[JobId, tuple[int, ...]]:
        """Slurm's pass: the pinned jobs it starts now, on which GPUs (no longer pinned)."""
        started = started_at_pass(self.pinned, waiting, view)
        self.pinned = {k: v for k, v in self.pinned.items() if k not in started}
        return started


class PaldModel:
    """The simulator's decider for a pal-slurm arm (sim.event.Decider).

    `limits_s`: per trace job index, the Slurm time limit pald reads (None: the job's own
    remaining work); `cycle_period_s`: pald's cycle in trace seconds (`cycle_s` x the replay's
    time scale), `cycle_offset_s` its phase against the trace's start (pald cycles on the epoch
    clock, `daemon.cycle.until_next_tick`, so a replay knows it: `replay.harness.pald_clock`);
    `ranking`: the ranking pald ranked by (a replay measures it from noisy samples, so it bins
    GPUs a little differently from the simulator's exact draw; the jobs still run at the draw);
    `wall_scale`: trace seconds per wall second of a time-compressed replay; `slurm_pass_s`:
    Slurm's scheduling pass in trace seconds (0: Slurm starts pald's jobs at once),
    `slurm_pass_offset_s` its phase against the trace's start; `nets`: per trace job index, the
    network sensitivity its comment declares (absent: the simulator's class of its model).
    pald lives on the wall clock: its times are trace seconds / scale, and its delay timers
    (`settings.delay_timers` over the placement's own) are wall seconds, so a compressed replay
    stretches them by the scale: a medium job's 120 s wait for one node is 20 trace hours at
    600x.

    `view_age_s` (trace seconds): how old pald's view of Slurm is when its cycle decides. pald
    reads Slurm at the top of each cycle and decides on that read a tenth of a wall second
    later (`replay.harness.pald_clock`); a job that ends in between is still running to that
    cycle, as it is to the hook until the next read. The cycle's ticks (`cycle_offset_s`) are
    its decisions; its reads come `view_age_s` before each."""

    def __init__(self, placement: str, cycle_period_s: float, limits_s: Mapping[int, float] | None = None,
                 settings: ServiceSettings | None = None, ranking: Ranking | None = None,
                 wall_scale: float = 1.0, slurm_pass_s: float = 0.0, slurm_pass_offset_s: float = 0.0,
                 nets: Mapping[int, str] | None = None, cycle_offset_s: float = 0.0,
                 view_age_s: float = 0.0):
        self.service = PlacementService(replace(settings or ServiceSettings(), placement=placement))
        self.clock = ManualClock()  # pald's
        self.slurm = ModelledSlurm()
        self.ranking = ranking  # pald's own (measured) ranking; None: the simulator's
        self.cycle = Period(float(cycle_period_s), float(cycle_offset_s))
        # pald's reads of Slurm: each cycle's, view_age_s before its decision
        self.sync = Period(float(cycle_period_s), float(cycle_offset_s) - float(view_age_s))
        self.slurm_pass = Period(float(slurm_pass_s), float(slurm_pass_offset_s))
        self.limits = dict(limits_s or {})
        self.nets = dict(nets or {})
        self.scale = float(wall_scale)
        self.keys: dict[JobId, str] = {}  # pinned job -> pald's reservation key for it
        self.started: set[str] = set()  # reservation keys of jobs Slurm started since pald's last read
        self.classes: dict[str, str] = {}  # pald's class map: the simulator's application -> class
        self.held: dict[JobId, JobRequest] = {}  # job id -> the simulator's job, held by pald
        self.running: dict[JobId, JobRequest] = {}  # running at the last call
        self.ended: dict[JobId, tuple[float, JobRequest]] = {}  # ended since pald's last sync: (when, job)
        self.seen: set[JobId] = set()
        self.starts = {"placed": 0, "released": 0}

    # ---- sim.event.Decider -------------------------------------------------------------------
    def start(self, cluster: ClusterView, ranking: Ranking) -> None:
        self.cluster = cluster
        self.where = cluster.gpu_by_location()

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan:
        self.clock.set(now / self.scale)
        waiting = {j.job_id: j for j in jobs if not j.running_on}
        running_now = {j.job_id: j for j in jobs if j.running_on}
        unseen = self.ended_since_sync(now, running_now)
        self.held = {k: v for k, v in self.held.items() if k in waiting}
        self.read(now, view, ranking, [*running_now.values(), *unseen], unseen)
        for job in sorted((j for j in waiting.values() if j.job_id not in self.seen), key=lambda j: j.submit_time):
            self.seen.add(job.job_id)
            self.submit(job)
        if self.held and self.cycle.is_tick(now):
            self.run_cycle()
        if not self.slurm_pass.is_tick(now):
            return RoundPlan(frozenset(), {})
        started = self.slurm.starts(waiting, view)
        self.started.update(self.keys.pop(k) for k in started)
        self.running.update({k: waiting[k].started_on(gpus, now) for k, gpus in started.items()})
        return RoundPlan(frozenset(), started)

    def next_wakeup(self, now: float) -> float | None:
        """pald's next cycle while it holds jobs, Slurm's next pass while jobs pald pinned wait
        for it (the simulator wakes for them)."""
        times = [t for t in (self.cycle.next_after(now) if self.held else None,
                             self.slurm_pass.next_after(now) if self.slurm.pinned else None) if t is not None]
        return min(times) if times else None

    # ---- pald's read, hook and cycle ---------------------------------------------------------
    def read(self, now: float, view: ClusterView, ranking: Ranking, running: Sequence[JobRequest],
             unseen: Sequence[JobRequest]) -> None:
        """pald's read of Slurm, given to its service as its sync gives it, at every decision:
        Slurm's view now, except that a job ended since pald's last sync still holds its GPUs;
        the jobs Slurm started and those it shows; the held jobs' count; and the running jobs
        (for a placement that plans around them)."""
        service, now_pald = self.service, self.clock.now()
        busy = {g for j in unseen for g in j.running_on}
        service.observe_cluster(view.with_free(view.free - busy), now_pald, held_jobs=len(self.held),
                                started=self.started, in_queue=set(self.keys.values()), queue_read_at=now_pald)
        self.started = set()
        service.ranking = self.ranking or ranking  # pald's, in place of the store's snapshot
        if service.engine.policy.traits.plans_around_running:
            service.running = [self.as_pald_sees(j, now) for j in running]

    def submit(self, job: JobRequest) -> None:
        """The submit hook asks pald: placed now (pinned) or held for its cycle."""
        key = f"req:{job.job_id}"
        app = job.app.strip().lower()
        if app not in self.classes:  # pald's class map knows every application the trace runs
            self.classes[app] = job.perf_class
            self.service.set_class_map(dict(self.classes))
        req, now = self.place_request(job), self.clock.now()
        got = from_hook(req.job, req.pal, key, now, self.service.class_map)
        reply = self.service.place(got, now, UID)
        if reply.decision is DecisionKind.PLACE:
            self.pin(job, self.gpus(reply.nodes), key)
            self.starts["placed"] += 1
        elif reply.decision is DecisionKind.DEFER:
            self.held[job.job_id] = job
        else:
            raise SimulationError(f"pald passed job {job.job_id} to Slurm ({reply.reason}): no Slurm of its own here")

    def run_cycle(self) -> None:
        """pald's cycle over the jobs it holds, as squeue shows them; the releases pinned."""
        held = sorted(self.held.values(), key=lambda j: j.submit_time)
        result = self.service.plan_cycle([self.job_info(j) for j in held], self.clock.now())
        for rel in result.releases:
            if rel.choice is None:
                raise SimulationError(f"pald released job {rel.job_id} untouched ({rel.reason})")
            job = self.held.pop(rel.job_id)
            self.pin(job, rel.choice.gpu_ids, rel.key)
            self.service.queue.released()
            self.starts["released"] += 1

    def pin(self, job: JobRequest, gpus: Sequence[int], key: str) -> None:
        self.keys[job.job_id] = key
        self.slurm.start(Launch(job, choice_of(gpus, self.cluster)))

    def gpus(self, nodes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
        return tuple(sorted(self.where[(n, s)] for n, slots in nodes.items() for s in slots))

    # ---- the jobs as Slurm shows them to pald ------------------------------------------------
    def limit_minutes(self, job: JobRequest) -> int:
        """Its `--time`, whole wall minutes (at least one)."""
        limit = self.limits.get(int(job.job_id))
        return max(1, round((job.remaining_time if limit is None else float(limit)) / self.scale / 60.0))

    def comment(self, job: JobRequest) -> CommentSpec:
        """Its `pal:` comment: its application, and the network sensitivity it declares (`nets`:
        the replay writes its model's spread factor, replay.plan)."""
        return CommentSpec(job.app, net=self.nets.get(int(job.job_id), job.net_sensitivity))

    def place_request(self, job: JobRequest) -> PlaceRequest:
        """The submit hook's request for a new job."""
        shape, spec = shape_of(job), self.comment(job)
        comment = f"pal:class={spec.perf_class},net={spec.net}"
        if shape.is_per_node:
            fields = JobFields(uid=UID, comment=comment, gpus_per_node=shape.per_node, min_nodes=shape.nodes,
                               tres_per_node=f"gres:gpu:{shape.per_node}", time_limit=self.limit_minutes(job))
        else:
            fields = JobFields(uid=UID, comment=comment, gpus_per_job=shape.total,
                               tres_per_job=f"gres:gpu:{shape.total}", time_limit=self.limit_minutes(job))
        return PlaceRequest(fields, spec, request_id=f"sim{job.job_id}")

    def job_info(self, job: JobRequest) -> JobInfo:
        """squeue's record of a job pald holds."""
        shape, spec = shape_of(job), self.comment(job)
        return JobInfo(
            job_id=int(job.job_id), name="sim", state="PENDING", reason="JobHeldUser", user_id=UID,
            comment=f"pal:class={spec.perf_class},net={spec.net}", admin_comment=f"pal:defer;req=sim{job.job_id}",
            nodes=(), required_nodes=(), node_count=shape.nodes or 1,
            tres_per_node=f"gres:gpu:{shape.per_node}" if shape.is_per_node else "", gpu_slots={}, priority=0,
            submit_time=int(job.submit_time / self.scale), start_time=0, time_limit_s=60.0 * self.limit_minutes(job),
            tres_per_job="" if shape.is_per_node else f"gres:gpu:{shape.total}")

    def as_pald_sees(self, job: JobRequest, now: float) -> JobRequest:
        """A running job as squeue shows it to pald: on pald's clock, its time limit less the
        time it has run as its remaining time, the network sensitivity its comment names."""
        limit = self.limits.get(int(job.job_id))
        left = job.remaining_time if limit is None else max(0.0, float(limit) - (now - job.waiting_since))
        return replace(job, submit_time=job.submit_time / self.scale, waiting_since=job.waiting_since / self.scale,
                       remaining_time=left / self.scale, net_sensitivity=self.comment(job).net or job.net_sensitivity)

    def ended_since_sync(self, now: float, running: dict[JobId, JobRequest]) -> list[JobRequest]:
        """The jobs that ended after pald's last read of Slurm (at or before `now`, `sync`):
        pald still sees them running on their GPUs until its next sync. The simulator calls a
        decider at every job's end, so a job gone from `running` since the last call (running
        then, or started by it) ended now. Keeps `running` for the next call."""
        for job_id, job in self.running.items():
            if job_id not in running:
                self.ended[job_id] = (now, job)
        self.running = running
        synced = self.sync.last_at_or_before(now)
        self.ended = {k: v for k, v in self.ended.items() if v[0] > synced}
        return [job for _, job in self.ended.values()]
