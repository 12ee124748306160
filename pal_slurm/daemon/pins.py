"""The GPUs of PAL jobs that Slurm shows pending on a pin pald or the hook made: pure rules,
no I/O (pald's sync reads them from every squeue; the placement service keeps them reserved).

Why from Slurm and not from memory: reservations live in pald's memory, and a restarted pald
(or one that took over from another) knew nothing of a job it had pinned and released that
had not started yet; it placed a new job on the same slot (both then waited on it). The pin
itself is in Slurm: the job's ReqNodeList and, where slots are bound, its slot-typed request.
So every read rebuilds the reservation of each such job pald does not hold one for.

Which pending jobs carry a PAL pin (tags.last_mark; held ones are pald's queue or someone's
hold, not promised anything):
- last mark ``pal:released``: pald pinned and released it (``job:<ref>``, the key of the cycle's
  own reservation); not ``pal:released;by=failsafe`` (released untouched, no pin);
- last mark ``pal:defer`` with a ReqNodeList the user did not give (no ``nodelist=own``): pald
  pinned and released it and died before writing its mark;
- last mark ``pal:placed=``: the hook pinned it at submit (``req:<id>``, the hook's key).
A job Slurm requeued that pald has not taken back yet (requeue.to_take_back) is not counted:
it goes back to pald's queue.

Which GPUs: the slots its request names on each pinned node (bound), else the lowest free
slots there, as Slurm takes them (`slurm_picks`: they follow each read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pal_slurm.daemon import requeue
from pal_slurm.intake.held import OWN_NODELIST, bound_slots
from pal_slurm.intake.refusals import refuses_pin
from pal_slurm.intake.tags import DEFER_TAG, FAILSAFE_RELEASE, PLACED_PREFIX, RELEASED_TAG, last_mark, request_id
from pal_slurm.model import ClusterView
from pal_slurm.intake.tres import gpu_count
from pal_slurm.slurm.readers import JobInfo


class Reserved(Protocol):
    """What a reservation shows of itself here (service.Reservation)."""

    @property
    def gpu_ids(self) -> frozenset[int]: ...


@dataclass(frozen=True)
class Pin:
    key: str  # the reservation's key (service.Reservation)
    gpu_ids: frozenset[int]
    slurm_picks: bool  # Slurm takes the lowest free slots on the nodes when it starts the job


def pin_key(job: JobInfo) -> str | None:
    """The reservation key of a pending job on a PAL pin, or None (module docstring)."""
    # a pin Slurm refuses leaves the job held by Slurm itself (priority 0, BadConstraints):
    # still a PAL pin (held_jobs.unpin_limited drops it)
    held = job.held and not refuses_pin(job.reason)
    if job.state != "PENDING" or held or not job.required_nodes or job.is_array_record:
        return None
    if requeue.to_take_back(job):
        return None
    mark = last_mark(job.admin_comment)
    if mark is None or mark == FAILSAFE_RELEASE:
        return None
    name = mark.split(";", 1)[0]
    if name == RELEASED_TAG or (name == DEFER_TAG and OWN_NODELIST not in mark.split(";")):
        return f"job:{job.ref}"
    if name.startswith(PLACED_PREFIX):
        rid = request_id(mark)
        return f"req:{rid}" if rid else None
    return None


def pinned_gpus(job: JobInfo, key: str, view: ClusterView) -> Pin | None:
    """The GPUs a pending job on a PAL pin (`key`: its pin_key) will take, the free ones of
    `view` where Slurm picks them; None when none are known."""
    index = {n.name: n for n in view.nodes}
    nodes = [index[n] for n in job.required_nodes if n in index]
    if not nodes:
        return None
    slots = bound_slots(job)
    if slots is not None:
        where = view.gpu_by_location()
        gpus = {where[(n.name, s)] for n in nodes for s in slots if (n.name, s) in where}
        return Pin(key, frozenset(gpus), False) if gpus else None
    per_node, total = gpu_count(job.tres_per_node), gpu_count(job.tres_per_job)
    picked: list[int] = []
    for n in nodes:
        free = [g for g in n.gpu_ids if g in view.free]
        want = per_node if per_node else max(0, (total or 0) - len(picked))
        picked += free[:want]
    return Pin(key, frozenset(picked), True) if picked else None




def unreserved_pins(jobs: Iterable[JobInfo], view: ClusterView,
                    reservations: Mapping[str, Reserved]) -> list[tuple[str, Pin]]:
    """The pins of pending jobs (from the same read as `view`) that `reservations` does not
    hold yet: a job pald pinned before it restarted, or whose reservation expired while it
    waits. Slurm-picked slots are taken from what no reservation (nor an earlier pin here)
    holds. The caller reserves each."""
    out: list[tuple[str, Pin]] = []
    taken = set().union(*[r.gpu_ids for r in reservations.values()])
    keys: set[str] = set()
    for j in jobs:
        key = pin_key(j)
        if key is None or key in reservations or key in keys:
            continue
        pin = pinned_gpus(j, key, view.with_free(view.free - taken))
        if pin is None:
            continue
        out.append((key, pin))
        keys.add(key)
        taken |= pin.gpu_ids
    return out
