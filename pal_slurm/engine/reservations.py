"""What pald has promised and Slurm does not show yet: *reservations*, GPUs (and CPUs/memory
per node) held for a job between pald's answer and the Slurm read that shows the job. No I/O.

Why: the hook answers before the job exists, and a released job starts a moment later, so
without them two decisions would get the same GPUs. The engine's decisions on a Slurm site
(engine/site.py at submit, engine/held.py in the cycle) book what they answer here in the same
call that makes the answer, so no answer leaves the engine unbooked; pald's placement service
owns the book (one owner: pald's lock) and ends reservations as reads confirm them.

The book also keeps the free GPUs the reservations leave on the service's view (`available`)
and the same set indexed for the submit path (`index`, updated in place by each booking).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Collection, Iterable, Mapping

from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.policy.shapes import ShapeIndex


@dataclass
class Reservation:
    key: str
    gpu_ids: frozenset[int]
    made_at: float
    promised: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # node -> (CPUs, memory MB)
    # pald pinned only the nodes: Slurm takes the lowest slots free there when it starts the job,
    # so the reservation follows what each read shows free (Reservations.follow_slurm_picks)
    slurm_picks: bool = False
    # the job as the engine planned it (its time limit as what is left): until Slurm starts it, a
    # placement that plans around running jobs sees these GPUs free at its end, not never
    request: JobRequest | None = None
    user: int | None = None  # the submitting user's uid (placements at submit)
    seen: bool = False  # a Slurm read has shown its job (in any state)

    def as_running(self, busy: Collection[int] = ()) -> JobRequest | None:
        """The promised job as if it ran on its GPUs (less `busy`: GPUs a running job holds)
        from when they were promised; None: no request known, or nothing left. Why: GPUs
        missing from the free set with no end in sight made a finish-aware placement see no leaf
        switch ever free for a large job while each leaf held one promised node, and take a
        spread placement 7.8x slower (the replay model, workload-1)."""
        if self.request is None:
            return None
        on = sorted(self.gpu_ids.difference(busy))
        return self.request.started_on(on, self.made_at) if on else None


@dataclass
class Reservations:
    """The reservations by key, and the free GPUs they leave on a view (cached until either
    changes: the owner calls `changed` when its view does). `per_user_max`: placements at
    submit one user may have that no read has shown yet (`crowded`)."""

    by_key: dict[str, Reservation] = field(default_factory=dict)
    per_user_max: int = 8
    _available: ClusterView | None = None  # the view minus the reservations
    _index: ShapeIndex | None = None  # the same free GPUs, indexed
    _index_behind: bool = False  # the index is of an earlier free set (same layout): follow it when asked
    # the CPUs and memory promised per node (`promised`), and how many reservations promise
    # on it, kept as reservations come and go
    _promised: dict[str, tuple[int, int]] = field(default_factory=dict)
    _promising: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.by_key.values():
            self._count(r, 1)

    # ---- what the engine decides on ------------------------------------------------------
    def available(self, view: ClusterView) -> ClusterView:
        """`view` with the reserved GPUs taken out: what the engine may place on."""
        if self._available is None:
            taken = set().union(*[r.gpu_ids for r in self.by_key.values()])
            self._available = view.with_free(view.free - taken)
        return self._available

    def index(self, view: ClusterView) -> ShapeIndex:
        """The free GPUs of `available`, indexed (ShapeIndex); kept across reads and dropped
        reservations of the same layout, moved onto the new free set by what changed."""
        if self._index is None:
            self._index = ShapeIndex(self.available(view))
        elif self._index_behind:
            self._index.follow(self.available(view).free)
        self._index_behind = False
        return self._index

    def promised(self) -> Mapping[str, tuple[int, int]]:
        """CPUs and memory per node promised to jobs Slurm does not show running yet (read
        it, never change it). Kept as reservations are made and dropped: every request and
        every held job's check read it, and summing it afresh cost O(reservations) each."""
        return self._promised

    def _count(self, r: Reservation, sign: int) -> None:
        """`r`'s CPUs and memory added to (`sign` 1) or taken from (-1) `_promised`."""
        for node, (cpus, memory) in r.promised.items():
            left = self._promising.get(node, 0) + sign
            if left:
                had = self._promised.get(node, (0, 0))
                self._promised[node] = (had[0] + sign * cpus, had[1] + sign * memory)
                self._promising[node] = left
            else:
                del self._promised[node], self._promising[node]

    def with_running(self, running: list[JobRequest]) -> list[JobRequest]:
        """Slurm's `running` jobs and the jobs promised GPUs that Slurm has not started yet,
        each ending at its limit: what a placement that plans around running jobs sees."""
        if not self.by_key:  # the hook's common case: nothing more to build
            return running
        busy = {g for j in running for g in j.running_on}
        started = {j.job_id for j in running}
        promised = (r.as_running(busy) for r in self.by_key.values())
        return [*running, *(p for p in promised if p is not None and p.job_id not in started)]

    def in_flight(self, uid: int) -> int:
        """Placements at submit for user `uid` whose job no Slurm read has shown yet."""
        return sum(1 for r in self.by_key.values() if r.user == uid and not r.seen)

    def crowded(self, uid: int) -> bool:
        """User `uid` has as many placements in flight as pald promises one user."""
        return self.in_flight(uid) >= self.per_user_max

    # ---- booking -------------------------------------------------------------------------
    def reserve(self, key: str, gpu_ids: Iterable[int], now: float, job: JobRestrictions | None = None,
                nodes: Iterable[str] = (), slurm_picks: bool = False, request: JobRequest | None = None,
                user: int | None = None) -> None:
        """Promise `gpu_ids` (and, with `job`, its CPUs and memory on each of `nodes`) to `key`;
        `slurm_picks`: pald pinned only the nodes, Slurm picks the slots (they follow each read);
        `request`: the job as the engine planned it (Reservation.as_running); `user`: the
        submitting uid of a placement at submit (in_flight)."""
        promised = {n: (job.cpus_per_node, job.memory_per_node_mb) for n in nodes} if job else {}
        had = self.by_key.get(key)
        if had is not None:
            self._count(had, -1)
        self.by_key[key] = made = Reservation(key, frozenset(gpu_ids), now, promised, slurm_picks, request, user)
        self._count(made, 1)
        self._available = None  # rebuilt when asked; the index stays in step
        if self._index is not None and not self._index_behind:  # (behind: it follows when asked)
            self._index.take(gpu_ids)

    def drop(self, key: str) -> None:
        """A decision that could not be carried out: its GPUs are free again."""
        r = self.by_key.pop(key, None)
        if r is not None:
            self._count(r, -1)
            self._free_changed()

    def clear(self) -> None:
        """Every reservation dropped, on the same layout and ranking (`changed` when those
        change): the index is moved onto the free GPUs they leave, not built again."""
        self.by_key.clear()
        self._promised.clear()
        self._promising.clear()
        self._free_changed()

    def settle(self, view: ClusterView) -> None:
        """Move a kept index onto the free GPUs of `view` now (the owner calls it after a
        read), so that the first request after a read does not pay for following it."""
        if self._index is not None and self._index_behind:
            self.index(view)

    def changed(self) -> None:
        """The layout or the ranking changed (or the reservations, wholesale): the free GPUs
        and their index are made again when asked."""
        self._available = None
        self._index = None

    def _free_changed(self) -> None:
        """The free GPUs changed on the same layout and ranking (a read, a dropped
        reservation): made again when asked, the index moved onto them (`index`)."""
        self._available = None
        self._index_behind = self._index is not None

    # ---- what a Slurm read shows ---------------------------------------------------------
    def observe(self, view: ClusterView, now: float, started: Collection[str], in_queue: Collection[str] | None,
                queue_read_at: float | None, grace_s: float, ttl_s: float) -> None:
        """Drop the reservations a read of `view` (taken at `now`) confirms, that expired
        (`ttl_s`), or whose job never came (PlacementService.observe_cluster says when); mark
        those whose job the read shows; move the Slurm-picked ones onto Slurm's pick."""
        for key, r in list(self.by_key.items()):
            confirmed = key in started or (r.made_at < now and not (r.gpu_ids & view.free))
            never_came = (in_queue is not None and queue_read_at is not None and key not in in_queue
                          and r.made_at + grace_s <= queue_read_at)
            if confirmed or never_came or now - r.made_at > ttl_s:
                del self.by_key[key]
                self._count(r, -1)
            elif in_queue is not None and key in in_queue and not r.seen:
                self.by_key[key] = replace(r, seen=True)
        self.follow_slurm_picks(view)
        self._free_changed()

    def follow_slurm_picks(self, view: ClusterView) -> None:
        """Move each not yet started job whose slots Slurm picks onto the lowest slots free on
        its nodes now (in the order they were promised, around the exact reservations).

        Why: pald reserved the lowest slots its view showed free, but a view is up to a cycle
        old; a slot below them that frees before Slurm's pass is the one Slurm gives the job,
        and pald had promised it to the next job, which then waited behind it (a lab replay of
        workload-4: a 1-GPU job waited two scheduling passes, 1600 trace s, on a slot Slurm had
        given a 6-GPU job; at a site it waits for that job's whole run)."""
        if not any(r.slurm_picks for r in self.by_key.values()):
            return
        taken = set().union(*[r.gpu_ids for r in self.by_key.values() if not r.slurm_picks])
        for key, r in sorted(self.by_key.items(), key=lambda kv: kv[1].made_at):
            if not r.slurm_picks:
                continue
            free = view.free - taken
            picked: set[int] = set()
            for node, mine in _by_node(r.gpu_ids, view).items():
                lowest = [g for g in view.nodes[node].gpu_ids if g in free][:len(mine)]
                picked.update(lowest if len(lowest) == len(mine) else mine)  # not startable yet: as promised
            taken |= picked
            if picked != r.gpu_ids:
                self.by_key[key] = replace(r, gpu_ids=frozenset(picked))


def _by_node(gpu_ids: Iterable[int], view: ClusterView) -> dict[int, list[int]]:
    """GPU ids grouped by their node's index."""
    out: dict[int, list[int]] = {}
    for g in sorted(gpu_ids):
        out.setdefault(view.gpus[g].node_index, []).append(g)
    return out
