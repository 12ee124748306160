"""pald's cycle for deferred jobs: held jobs -> engine -> actuator.

`HeldJobCycle.run` plans the PAL-held jobs of one Slurm read through the placement service
(the engine's cycle; every release's GPUs reserved under the shared lock) and carries the
releases out through the engine's Actuator (`launcher.SlurmLauncher.start`). Also here: which
Slurm jobs are PAL's held ones, and when the next cycle runs.

`apply_releases` (launcher.py) is the one function that acts on the plan, so a dry run prints
exactly what would be done. It runs without pald's lock: the releases' GPUs were reserved when
they were planned, so a submission answered meanwhile cannot be promised the same GPUs. The
planned starts of the jobs that stay held are logged and recorded after the releases: acting
on Slurm comes first.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from pal_slurm.daemon.held_jobs import HeldJobs
from pal_slurm.daemon.launcher import JobControl, JobRef, apply_releases
from pal_slurm.intake.held import HeldRead, HeldReader
from pal_slurm.engine.held import CycleResult, Release
from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.model.modes import ON
from pal_slurm.daemon.state import DaemonState
from pal_slurm.intake.tags import held_by_pald
from pal_slurm.engine import Actuator
from pal_slurm.model import ClusterView, DecisionKind, PlannedStart
from pal_slurm.model.decision import JobId
from pal_slurm.policy.shapes import choice_of
from pal_slurm.intake.hostlist import compress
from pal_slurm.slurm.readers import JobInfo, admin_comments


log = logging.getLogger("pald.cycle")


def until_next_tick(now_s: float, cycle_s: float) -> float:
    """Seconds from `now_s` (epoch seconds) to pald's next cycle: the cycles run at the multiples
    of `cycle_s` on the epoch clock, not `cycle_s` after the last one ended, so pald's cycle has
    one phase for its whole life (a loop that waits out the rest of each cycle drifts by each
    wait's overshoot: tenths of a second within minutes in the replays). What a cycle sees of a
    job that ended tenths of a second before it turns on that phase; known, a replay's
    prediction runs the cycles pald ran (replay.harness.pald_clock). A cycle that overran waits
    for the next multiple; within a millisecond of a multiple counts as at it (a wake-up a hair
    early does not run the same tick twice). Always > 0 for `cycle_s` > 0."""
    if cycle_s <= 0:
        return 0.0
    left = cycle_s - (now_s % cycle_s)
    return left if left > 1e-3 else left + cycle_s


def is_pal_held(job: JobInfo) -> bool:
    """A job the hook or pald held for pald (and not, say, held by its user for other reasons):
    held, and its last hold mark is pald's defer tag, not ``pal:released`` (tags.held_by_pald:
    a job its user held after pald released it is the user's, whatever pald did before).

    The defer tag must match exactly: a substring test would let a pass reason that merely
    contains the text (``pal:pass=pal:defer``) claim the job for pald."""
    return job.held and held_by_pald(job.admin_comment)


def held_by_other(job: JobInfo) -> bool:
    """Held, but not by pald: its user's hold (Reason=JobHeldUser) or an operator's
    (JobHeldAdmin) made after pald released it. pald neither releases nor re-pins it."""
    return job.held and not held_by_pald(job.admin_comment)


SITE_ORDER_LOGGED = 64  # the most held jobs one line of the site's order names


def site_order_line(ranked: Sequence[tuple[JobId, float]], released: Collection[JobId],
                    planned: Mapping[JobId, PlannedStart], view: ClusterView | None, now: float) -> str:
    """The held jobs of one cycle in the site's order (the `slurm` queue), highest priority
    first: `ID=PRIORITY` as pald computed it, `+` after a job released, and for one left
    waiting with a reservation `@S[NODE:SLOT.SLOT;...]`, its planned start in S seconds on
    those GPUs (`[any]`: anywhere). Why: a held job shows priority 0 in squeue and is absent
    from sprio, so this is where an admin (and the lab test of the order) reads who went
    ahead of whom, and whether the reservation of each job passed allowed it."""
    out = []
    for job_id, prio in ranked[:SITE_ORDER_LOGGED]:
        word = f"{job_id}={prio:.0f}"
        if job_id in released:
            word += "+"
        elif job_id in planned:
            start = planned[job_id]
            if start.gpus is None or view is None:
                where = "any"
            else:
                where = ";".join(f"{node}:{'.'.join(map(str, slots))}"
                                 for node, slots in choice_of(sorted(start.gpus), view).nodes.items())
            word += f"@{start.at - now:.0f}[{where}]"
        out.append(word)
    more = len(ranked) - len(out)
    return " ".join(out) + (f" (+{more} more)" if more > 0 else "")


class HeldJobCycle:
    """One cycle over the held jobs of a Slurm read: plan (the service's engine cycle, under the
    shared lock), act (`apply_releases` through `launcher`, outside it), then the accounting
    of what was done (held_jobs.HeldJobs) and of the jobs that stay held with a planned start.
    Runs on the cycle's worker thread."""

    def __init__(self, state: DaemonState, launcher: Actuator, actuator: JobControl, held_jobs: HeldJobs) -> None:
        self.state = state
        self.launcher = launcher
        self.actuator = actuator
        self.held_jobs = held_jobs
        self.reader = HeldReader()  # the held records' readings, kept from one cycle to the next

    def run(self, held: Sequence[JobInfo]) -> list[Release]:
        """Plan the held jobs through the engine and release those that fit; the releases done."""
        state = self.state
        now = state.clock()
        with state.lock:  # what the read needs, taken under the lock; the read itself (pure) is not
            paused = state.switches.paused
            classes, rules = state.service.class_map, state.service.settings.site_rules
        # paused, every held job goes back as submitted: nothing to read but its comment
        reads = None if paused else self.reader.read(held, now, classes, rules)
        comments = admin_comments(held) if reads is None else reads.comments  # what mark_released extends
        with state.lock:  # plan, and reserve every release's GPUs, before acting on Slurm
            if reads is None or state.switches.paused:  # `palctl pause`: every held job back to Slurm, as submitted
                plan = CycleResult([Release(j.job_id, "?", "paused") for j in held])
                state.service.planned = {}
            else:  # a job whose partition is no longer `on` (`palctl mode`) goes back the same way
                on: list[HeldRead] = []
                off: list[tuple[JobInfo, str]] = []
                for h in reads.jobs:
                    mode = state.modes.of_job(h.partitions)
                    if mode == ON:
                        on.append(h)
                    else:
                        off.append((h.job, mode))
                plan = state.service.plan_read(on, now)
                for j, mode in off:
                    plan.releases.append(Release(j.job_id, "?", f"mode_{mode}"))
        done_releases: list[Release] = []

        def done(rel: Release) -> None:
            with state.lock:
                service = state.service
                service.queue.released()
                state.counts["released"] += 1
                if rel.request is not None and rel.choice is not None and service.view is not None:
                    service.engine.observe_start(rel.request, rel.choice.gpu_ids, service.view, now)
                nodes = rel.choice.nodes if rel.choice else {}
                kind = DecisionKind.PLACE if rel.choice else DecisionKind.PASS
                # a job released untouched before its class was read has none ("?"): the
                # store takes only real classes, and a refused record would lose the release
                perf_class = rel.perf_class if rel.perf_class in CLASS_ORDER else None
                state.record(str(rel.job_id), kind, f"released:{rel.reason}", nodes, perf_class)
            self.held_jobs.released(rel.job_id, pinned=rel.choice is not None, now=now)
            done_releases.append(rel)

        def failed(rel: Release, exc: Exception) -> None:
            with state.lock:
                state.service.unreserve(rel.key)

        errors = apply_releases(plan, self.actuator, done=done, failed=failed, comments=comments,
                                launcher=self.launcher)
        with state.lock:
            if plan.ranked and done_releases:
                log.info("site order: %s", site_order_line(
                    plan.ranked, {r.job_id for r in done_releases},
                    {job_id: start for job_id, (start, _class) in plan.planned.items()}, state.service.view, now))
            self.note_planned_starts(now, {str(j.job_id) for j in held})
            self.note_limited(plan.limited)
        for job_id, err in errors:
            state.note_error("release", RuntimeError(f"job {job_id}: {err}"))
        self.held_jobs.give_up_on(dict(errors), comments)
        self.held_jobs.admin_hold([j for j in held if j.job_id in self.held_jobs.deferred],
                                  {r.job_id for r in done_releases})
        state.last_cycle = now
        return done_releases

    def note_planned_starts(self, now: float, held: Collection[str]) -> None:
        """Log and record a held job's backfill reservation when it first holds one or holds
        other nodes than the last one logged for it (its planned start moves with every
        estimate, and a cycle may leave it without one for a moment: not each time):
        `palctl explain JOB` and pald's log then say what a held job waits for, and a job
        behind it that stays held can be told why (the reservation refuses it the nodes it
        holds when it would end after the planned start). `held`: the held jobs' ids (a job
        no longer held is forgotten). Caller holds the lock."""
        state = self.state
        view = state.service.view
        now_on: dict[JobRef, str] = {k: v for k, v in state.reserved_on.items()
                                     if str(k).split("_", 1)[0] in held}
        for job_id, (start, perf_class) in state.service.planned.items():
            nodes = choice_of(sorted(start.gpus), view).nodes if start.gpus is not None and view else {}
            where = compress(nodes) if nodes else "anywhere"
            now_on[job_id] = where
            if state.reserved_on.get(job_id) != where:
                log.info("job %s waits with a reservation on %s, planned start in %.0f s", job_id, where,
                         start.at - now)
                state.record(str(job_id), DecisionKind.DEFER, f"reserved:start_in_s={start.at - now:.0f}",
                             nodes, perf_class)
        state.reserved_on = now_on

    def note_limited(self, limited: Mapping[JobRef, str]) -> None:
        """Log and record (`limit:<Slurm's reason>`, as held_jobs.unpin_limited) a held job
        the cycle did not release because one more running job would put its user, account
        or QOS over a job-count limit, when the last cycle did not keep it held for that same
        limit (not every cycle): `palctl explain JOB` then says what it waits for. Caller
        holds the lock."""
        state = self.state
        for job_id, why in limited.items():
            if state.limited.get(job_id) != why:
                log.info("job %s stays held: Slurm would keep it waiting for %s", job_id, why)
                state.record(str(job_id), DecisionKind.DEFER, f"limit:{why}", {}, None)
        state.limited = dict(limited)
