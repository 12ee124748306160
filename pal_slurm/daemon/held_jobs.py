"""pald's accounting of the jobs it holds: what it did to each held job, kept across Slurm
reads, and the upkeep that follows from it each cycle.

- the store's record of each held job (once) and of each release;
- the hook's user hold turned into pald's admin hold (`admin_hold`);
- a deferred job released behind pald's back: held again once, or recorded and left
  (`notice_outside_releases`);
- a requeued PAL job taken back into pald's queue (`take_back_requeued`);
- a job on a PAL pin that Slurm keeps waiting for a QOS, association or partition limit, or
  refuses (BadConstraints): unpinned at once, its GPUs free for the jobs behind it, left to
  Slurm (`unpin_limited`);
- a released job that never started: held again to be placed anew, then left to Slurm
  (`unstick`);
- a job whose placement Slurm keeps refusing: released as submitted (`give_up_on`).

Everything here belongs to the cycle's worker thread (state.py): no lock around these sets;
what the socket thread also reads (counts, the store link) goes through the shared state.
What it tracks is rebuilt from Slurm's tags, so a restarted pald loses none of it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timezone

from pal_slurm.daemon import pins, requeue
from pal_slurm.daemon.launcher import JobControl, JobRef, mark_released
from pal_slurm.intake.job import held_shape
from pal_slurm.intake.refusals import held_by_limit, refuses_pin
from pal_slurm.daemon.state import DaemonState
from pal_slurm.intake.tags import DEFER_TAG, pal_tags, with_tag
from pal_slurm.model import DecisionKind
from pal_slurm.model.shape import ShapeError
from pal_slurm.slurm.errors import SlurmError, SlurmParseError
from pal_slurm.slurm.readers import JobInfo
from pal_slurm.store.records import HeldJob

log = logging.getLogger("pald")

MAX_RELEASE_FAILURES = 3  # then the job is released as submitted (see HeldJobs.give_up_on)
MAX_REPLACES = 1  # a released job stuck this many times more keeps no node pin (see HeldJobs.unstick)


def times_unstuck(admin_comment: str | None) -> int:
    """How often pald held a stuck release again (its ``pal:defer;unstuck=<n>`` tags, highest n)."""
    counts = [0]
    for word in (admin_comment or "").split():
        name, *fields = word.split(";")
        if name == DEFER_TAG:
            counts += [int(f[8:]) for f in fields if f.startswith("unstuck=") and f[8:].isdigit()]
    return max(counts)


class HeldJobs:
    """The cycle's memory of the jobs pald holds and released (module docstring)."""

    def __init__(self, state: DaemonState, actuator: JobControl, release_start_s: float) -> None:
        self.state = state
        self.actuator = actuator
        self.release_start_s = release_start_s
        self.held_seen: set[int] = set()
        self.deferred: set[JobRef] = set()  # PAL-held jobs at the last sync, minus those pald released
        self.released_by_pald: set[JobRef] = set()  # deferred jobs this pald released (still in squeue)
        self.noticed: set[int] = set()  # deferred jobs seen released by someone else (recorded once)
        self.admin_held: set[JobRef] = set()  # deferred jobs seen under pald's admin hold (or given one)
        self.reheld: set[int] = set()  # deferred jobs a user released in the window, held again (once)
        self.released_at: dict[JobRef, float] = {}  # jobs pald pinned and released, not seen started yet
        self.replaced: dict[JobRef, int] = {}  # job id -> times a stuck release went back to the queue
        self.release_failures: dict[JobRef, int] = {}  # job id -> cycles in a row Slurm refused its placement

    def upkeep(self, jobs: Collection[JobInfo], held: Collection[JobInfo], now: float) -> None:
        """A read's upkeep before the cycle plans `held` (module docstring)."""
        self.track_held(held, jobs)
        self.admin_held.update(j.job_id for j in held if j.reason == "JobHeldAdmin")
        self.notice_outside_releases(jobs, held)
        self.take_back_requeued(jobs)
        self.unpin_limited(jobs)
        self.unstick(jobs, now)

    def released(self, job_id: JobRef, pinned: bool, now: float) -> None:
        """pald released `job_id` (`pinned`: on its placement, not as submitted)."""
        self.state.mark_released(job_id)
        self.deferred.discard(job_id)
        self.released_by_pald.add(job_id)
        if pinned:
            self.released_at[job_id] = now

    def track_held(self, held: Iterable[JobInfo], jobs: Iterable[JobInfo]) -> None:
        """Record each PAL-held job in the store once. `held_seen` keeps only jobs Slurm still
        shows (a job gone from squeue never comes back), so it stays the size of the queue."""
        link = self.state.link
        if link is None:
            return
        self.held_seen &= {j.job_id for j in jobs}
        for j in held:
            if j.job_id in self.held_seen:
                continue
            try:
                gpus = held_shape(j, None).total
            except ShapeError:
                gpus = 0  # no GPU request: the cycle releases it untouched
            link.add_held_job(HeldJob(
                job_id=str(j.job_id), perf_class=self.state.service.settings.default_class,
                gpus=gpus,
                submitted_at=datetime.fromtimestamp(j.submit_time or self.state.clock(), timezone.utc)))
            self.held_seen.add(j.job_id)

    def give_up_on(self, failed: dict[JobRef, str], comments: Mapping[JobRef, str]) -> None:
        """A job whose placement Slurm refused MAX_RELEASE_FAILURES cycles in a row is released
        as submitted: a PAL problem costs a job its placement, never its run."""
        self.release_failures = {j: self.release_failures.get(j, 0) + 1 for j in failed}
        for job_id, times in list(self.release_failures.items()):
            if times < MAX_RELEASE_FAILURES:
                continue
            try:
                self.actuator.release(job_id)
            except Exception as exc:  # noqa: BLE001 - try again next cycle
                self.state.note_error("release", RuntimeError(f"job {job_id}: {exc}"))
                continue
            mark_released(self.actuator, job_id, comments.get(job_id))
            log.warning("job %s: placement refused %d times (%s); released without PAL placement",
                        job_id, times, failed[job_id])
            with self.state.lock:
                self.state.counts["released"] += 1
                self.state.record(str(job_id), DecisionKind.PASS, "released:placement_refused", {}, None)
                self.state.service.queue.released()
            self.released(job_id, pinned=False, now=0.0)
            del self.release_failures[job_id]

    def notice_outside_releases(self, jobs: Iterable[JobInfo], held: Iterable[JobInfo]) -> None:
        """A deferred job (`pal:defer` tag) that is no longer held and that pald did not
        release was released behind its back. Jobs from before this pald started count only
        if it saw them held.

        - Still pending, and pald never saw it under its admin hold: its user lifted the hook's
          hold (a user hold: Lua cannot set an admin one) in the window before pald's first
          cycle. pald holds it again, once, and it waits its turn in pald's queue like any
          deferred job (`reheld`).
        - Otherwise (it started, an operator or pal-failsafe released it, or it was held again
          once already): the release stands. pald records it once and forgets it, so it is
          never placed a second time (`released_outside`)."""
        held_now: set[JobRef] = {j.job_id for j in held}
        jobs = list(jobs)
        released_arrays = {_array_of(r) for r in self.released_by_pald} - {None}
        for j in jobs:
            if (j.job_id in held_now or self._released_by_pald(j, released_arrays)
                    or j.job_id in self.noticed
                    or j.state == "CANCELLED" or DEFER_TAG not in pal_tags(j.admin_comment)
                    or (j.job_id not in self.deferred and j.submit_time < self.state.started)):
                continue
            if j.state == "PENDING" and j.job_id not in self.admin_held and j.job_id not in self.reheld:
                self._hold_again(j.job_id, j.ref)
                continue
            self.noticed.add(j.job_id)
            self.state.count("released_outside")
            log.warning("job %s was released outside pald (now %s): it runs without PAL placement",
                        j.job_id, j.state)
            self.state.record(str(j.job_id), DecisionKind.PASS, "released_outside_pal", {}, None)
            self.state.mark_released(j.job_id)
        present: set[JobRef] = {j.job_id for j in jobs}
        present |= {j.ref for j in jobs}
        arrays = {j.array_job_id for j in jobs if j.array_job_id}
        self.deferred = held_now
        # an element pald released is kept while its array shows (it may still be inside the
        # array's record): no array's elements are spelled out here
        self.released_by_pald = {r for r in self.released_by_pald if r in present or _array_of(r) in arrays}
        self.noticed &= present
        self.admin_held &= present
        self.reheld &= present

    def _released_by_pald(self, j: JobInfo, released_arrays: set[int | None]) -> bool:
        """pald released what this record stands for: the job, the element, or every element
        of an array's record of pending ones. The array's last pending element, once pald has
        released it, can still show as that record (under the array's id, its task string
        naming the one element, not yet split off): Slurm 26.05 does, until its scheduler next
        looks at it, and pald held the whole array again for it. `released_arrays`: the
        arrays of the elements pald released (made once per read)."""
        if j.job_id in self.released_by_pald or j.ref in self.released_by_pald:
            return True
        if not j.is_array_record or j.array_job_id not in released_arrays:
            return False  # (an array's elements are spelled out only where pald released some)
        try:
            refs = j.element_refs()
        except SlurmParseError:
            return False
        return all(ref in self.released_by_pald for ref in refs)

    def _hold_again(self, job_id: int, ref: JobRef) -> None:
        """Put a deferred job its user released back under pald's (admin) hold (by `ref`, its
        scontrol name: an array element's job id may be the array's, which names them all)."""
        try:
            self.actuator.hold(ref)
        except Exception as exc:  # noqa: BLE001 - it started meanwhile, or Slurm refused: next sync sees which
            self.state.note_error("hold", exc)
            return
        self.reheld.add(job_id)
        self.admin_held.add(job_id)
        self.state.count("reheld")
        log.warning("job %s: its user released it before pald's admin hold; held again, it waits its turn",
                    job_id)
        self.state.record(str(job_id), DecisionKind.DEFER, "reheld:released_by_user", {}, None)

    def unpin_limited(self, jobs: Iterable[JobInfo]) -> None:
        """A job on a PAL pin (placed at submit or released by pald) that Slurm keeps waiting
        for a QOS, association or partition limit (`QOSMaxJobsPerUserLimit`, `AssocGrpGRES`,
        ...: intake.refusals.held_by_limit) cannot use its pin, and would keep its GPUs from
        the jobs behind it until the limit clears. At the first read that shows it, pald drops
        the pin and the GPUs it promised, and leaves the job to Slurm, which starts it wherever
        there is room once the limit allows (holding it again would only pin it again).
        Recorded `limit:<Slurm's reason>`. A job its user or an operator holds is theirs.

        A pin Slurm refuses (`BadConstraints`: intake.refusals.refuses_pin; under
        topology/block, a pin beside the user's own --segment, which Slurm 24.11 shows pald
        nowhere) is dropped the same way, recorded `refused:<reason>`, and the job released
        (Slurm holds a job it finds non-runnable, priority 0): it then runs where Slurm's own
        placement puts it, as its user asked."""
        for j in jobs:
            key = pins.pin_key(j)
            refused = refuses_pin(j.reason)  # Slurm holds such a job itself (priority 0)
            if key is None or (j.held and not refused) or not (held_by_limit(j.reason) or refused):
                continue
            try:
                self.actuator.unpin(j.ref)
                if refused:
                    self.actuator.release(j.ref)
            except Exception as exc:  # noqa: BLE001 - it started meanwhile, or Slurm refused: next sync
                self.state.note_error("unpin", RuntimeError(f"job {j.job_id}: {exc}"))
                continue
            with self.state.lock:
                self.state.service.unreserve(key)
            self.released_at.pop(j.ref, None)
            self.state.count("unstuck")
            what = "waits for a Slurm limit" if held_by_limit(j.reason) else "has a pin Slurm refuses"
            log.warning("job %s %s (%s): its pin on %s dropped, left to Slurm", j.job_id, what,
                        j.reason, ",".join(j.required_nodes))
            kind = "limit" if held_by_limit(j.reason) else "refused"
            self.state.record(str(j.job_id), DecisionKind.PASS, f"{kind}:{j.reason}", {}, None)

    def unstick(self, jobs: Iterable[JobInfo], now: float) -> None:
        """A job pald pinned and released that has not started `release_start_s` later waits on
        PAL's pins, maybe for ever (its node drained after the release, its GPUs went to a job
        Slurm preferred). pald holds it again (tagged ``pal:defer;unstuck=<n>`` first: the
        hold is pald's, tags.py), then drops its node pin: the next cycle places it anew on
        what is free then. Stuck a second time (MAX_REPLACES), it keeps no node pin
        and is left to Slurm. Each step is counted (`unstuck`) and recorded. A job its user
        (or an operator) held meanwhile is theirs: pald waits, and its clock starts again when
        it is released.

        What it tracks is rebuilt from Slurm, so a restart loses none of it: a pending job on a
        pin pald made (pins.pin_key: ``job:<ref>``) that it does not track is tracked from this
        read on, and how often a job was held again is its ``pal:defer;unstuck=<n>`` tags."""
        bound = self.release_start_s
        jobs = list(jobs)
        states: dict[JobRef, JobInfo] = {**{j.job_id: j for j in jobs}, **{j.ref: j for j in jobs}}
        for j in jobs:
            key = pins.pin_key(j)
            if key is not None and key.startswith("job:"):
                self.released_at.setdefault(j.ref, now)
                self.replaced[j.ref] = max(self.replaced.get(j.ref, 0), times_unstuck(j.admin_comment))
        for job_id, since in list(self.released_at.items()):
            found = states.get(job_id)
            if found is None or found.state != "PENDING":  # started or gone
                del self.released_at[job_id]
                continue
            if found.held:  # held by its user or an operator: theirs until they release it
                self.released_at[job_id] = now
                continue
            if now - since < bound:
                continue
            again = self.replaced.get(job_id, 0) < MAX_REPLACES
            try:
                if again:
                    # held before its pin is dropped: an unheld job without its pin is
                    # Slurm's to start at once (the update runs its scheduler), and pald's
                    # next read would find it running, released behind its back
                    times = self.replaced.get(job_id, 0) + 1
                    self.actuator.set_admin_comment(job_id, with_tag(found.admin_comment,
                                                                     f"{DEFER_TAG};unstuck={times}"))
                    self.actuator.hold(job_id)
                else:
                    self.actuator.unpin(job_id)
            except Exception as exc:  # noqa: BLE001 - it started meanwhile, or Slurm refused: next sync
                self.state.note_error("unstick", RuntimeError(f"job {job_id}: {exc}"))
                continue
            del self.released_at[job_id]
            if again:
                try:
                    self.actuator.unpin(job_id)
                except Exception as exc:  # noqa: BLE001 - held on its pin: the next placement replaces it
                    self.state.note_error("unstick", RuntimeError(f"job {job_id}: {exc}"))
                self.replaced[job_id] = self.replaced.get(job_id, 0) + 1
                self.admin_held.add(job_id)
                self.released_by_pald.discard(job_id)
            self.state.count("unstuck")
            what = "held again to be placed anew" if again else "left to Slurm without a node pin"
            log.warning("job %s: released %.0f s ago on %s and not started; %s", job_id, now - since,
                        ",".join(found.required_nodes) or "?", what)
            self.state.record(str(job_id), DecisionKind.DEFER if again else DecisionKind.PASS,
                              "unstuck:replace" if again else "unstuck:unpinned", {}, None)
        present = set(states)
        self.replaced = {k: v for k, v in self.replaced.items() if k in present}

    def take_back_requeued(self, jobs: Iterable[JobInfo]) -> None:
        """PAL jobs Slurm requeued go back into pald's queue, to be placed again (requeue.py):
        tagged first, then held; the next sync plans them. A failure leaves the job to Slurm
        as it was (pinned to its old placement) and is retried next sync, unless the tag got
        written (then Slurm runs it where it was: a PAL problem never costs a job its run)."""
        for j in jobs:
            if not requeue.to_take_back(j):
                continue
            try:
                self.actuator.set_admin_comment(j.ref, requeue.tagged_comment(j))  # A_I: not its array
                self.actuator.hold(j.ref)
            except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the others
                self.state.note_error("requeue", RuntimeError(f"job {j.job_id}: {exc}"))
                continue
            self.state.count("requeued")
            log.info("job %s was requeued (restart %d): back in pald's queue to be placed again",
                     j.job_id, j.restart_count)
            self.state.record(str(j.job_id), DecisionKind.DEFER, f"requeued:{j.restart_count}", {}, None)

    def admin_hold(self, held: Iterable[JobInfo], released: Collection[JobRef] = ()) -> None:
        """Turn the hook's hold (priority 0, JobHeldUser: its user may `scontrol release` it and
        jump pald's queue) into an admin hold (JobHeldAdmin), which only an Operator or above
        lifts. pald runs as one (its own user with AdminLevel=Operator, SlurmUser or root), so
        `scontrol hold` here is an admin hold.

        `held` was read before this cycle's releases (`released`): an array's record is held
        by the names of the elements it still has (`JobInfo.own_ref`), never by the array's
        job id, which would hold again the elements just released (a flaky 30 s wait, found
        by tests/integration/test_site_compat.py's array test)."""
        refs: list[JobRef] = []
        user_held: list[int] = []
        for j in held:
            if j.reason == "JobHeldAdmin":
                continue
            try:
                ref = j.own_ref(without=released)
            except SlurmError as exc:  # an array task string not read: the plan passed it to Slurm
                self.state.note_error("hold", exc)
                continue
            if ref is not None:
                refs.append(ref)
                user_held.append(j.job_id)
        if not refs:
            return
        try:
            self.actuator.hold_many(refs)
        except Exception as exc:  # noqa: BLE001 - the jobs stay held as they were; next cycle retries
            self.state.note_error("hold", exc)
            return
        self.admin_held.update(user_held)


def _array_of(ref: JobRef) -> int | None:
    """The array job id an element's scontrol name (``A_I``) names; None for a plain job id."""
    if isinstance(ref, str) and "_" in ref:
        head = ref.split("_", 1)[0]
        return int(head) if head.isdigit() else None
    return None
