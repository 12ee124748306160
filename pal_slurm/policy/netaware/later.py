"""Waits for faster GPUs: whether a job that could start now on a slower bin finishes sooner
waiting for the running jobs to free GPUs of a faster one (one node, or k nodes with the
network factor of their span), and on which GPUs and from when."""

from __future__ import annotations

import itertools
import math
from typing import Collection, Iterable, Sequence

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.cluster import Topology
from pal_slurm.model.network import NODE
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.netaware.estimates import net_factor, topo
from pal_slurm.policy.netaware.reservations import _Releases, _Reservation
from pal_slurm.policy.shapes import fewest_leaves_among_ties

def faster_node_later(job: JobRequest, g: int, now_bin: float, free: Iterable[int], releases: "_Releases",
                      sf: Sequence[float], cluster: ClusterView, now: float,
                      reservations: Sequence["_Reservation"], cache: RunCache) -> tuple[float, tuple[int, ...]] | None:
    """(when, GPUs): the wait for `g` GPUs on one node of a faster bin than `now_bin` (the
    worst bin of what the job can take now) that finishes it soonest, when that is sooner than
    starting now (remaining time x bin); None when starting now is as soon.

    A long job that arrives while short ones hold the fast nodes would otherwise take the one
    node left for all its hours (workload-4: a 7.4-hour ResNet-50 job 8.7% slower on the only
    whole node free, where the nodes short jobs freed minutes later were in the best bin).
    The running jobs' ends are estimates (pald: their time limits, so waits look long); an
    end already past (a job running over its estimate) frees nothing. Candidates must leave
    the plan's earlier `reservations` whole. Only the nodes that could beat `now_bin` and the
    ends early enough to pay are looked at: this runs on pald's submit path."""
    left = job.remaining_time
    if left <= 0:
        return None
    t = topo(cluster)
    by_best = _gth_best_by_node(sf, g, t, cache)
    if not by_best or by_best[0][0] >= now_bin:
        return None
    candidates = {nd for _bin, nd in itertools.takewhile(lambda b: b[0] < now_bin, by_best)}
    latest = now + left * (now_bin - by_best[0][0])  # a wait ending later cannot pay
    node_of = t.node_of
    frees: dict[int, list[tuple[float, int]]] = {}
    for jid, gpus in releases.holding.items():
        if not any(nd in candidates for nd, _ in releases.nodes_of(gpus)):
            continue
        end = releases.ends[jid]
        if now < end < latest:
            for x in gpus:
                if node_of[x] in candidates:
                    frees.setdefault(node_of[x], []).append((end, x))
    if not frees:
        return None
    free_on = _free_by_node(free, node_of, frees.keys())
    best_finish = now + left * now_bin
    best: tuple[float, tuple[int, ...]] | None = None
    for nd, node_frees in frees.items():
        avail = free_on.get(nd, [])
        for end, x in sorted(node_frees):
            avail.append(x)
            if len(avail) < g:
                continue
            pick = sorted(avail, key=lambda y: (sf[y], y))[:g]
            finish = end + left * max(sf[y] for y in pick)
            if finish < best_finish - 1e-9 and all(r.admits(finish, pick, job.remaining_time) for r in reservations):
                best_finish, best = finish, (end, tuple(sorted(pick)))
    return best


def faster_nodes_later(job: JobRequest, k: int, g: int, now_cost: float, free: Iterable[int],
                       releases: "_Releases", sf: Sequence[float], ctx: PlacementContext, rack_idx: Sequence[int],
                       now: float, reservations: Sequence["_Reservation"]) -> tuple[float, tuple[int, ...]] | None:
    """(when, GPUs): for a job of `k` >= 2 nodes x `g` GPUs that could start now at `now_cost`
    (its worst bin there x the network factor of that span), the wait for k nodes of faster
    bins that finishes it soonest (ready time + remaining x worst bin x network factor of the
    k nodes' span), when that is sooner than starting now; None when starting now is as soon.

    `faster_node_later` for jobs on several nodes. A job as large as half the cluster is
    placed on whatever k nodes are free when it could start, and runs at its slowest GPU's
    pace for all its hours: workload-4's 32-GPU, 30-hour ResNet-50 job took the only eight
    free nodes, one with a GPU at 1.113x, when a short job freed four fast nodes 750 trace
    seconds later (a lab replay at 150: it ran 2.4% longer than under stock and set a
    makespan 1.024 of stock's). The ends are the running jobs' estimates (pald: their time
    limits); an end already past frees nothing; only nodes whose g-th best GPU could beat the
    job's pace now and ends early enough to pay are looked at, and the sweep stops once no
    later start could pay (pald's submit path). A candidate set must leave the plan's
    earlier `reservations` whole. Nodes are taken as `fewest_leaves_among_ties` takes them:
    the k fastest, under as few leaf switches as ties allow."""
    left = job.remaining_time
    if left <= 0 or k < 2:
        return None
    cluster = ctx.cluster
    t = topo(cluster)
    by_best = _gth_best_by_node(sf, g, t, ctx.cache)
    if len(by_best) < k:
        return None
    fewest_racks = math.ceil(k / max(1, t.rack_nodes))
    floor_net = net_factor(job, k, fewest_racks, ctx)
    floor = by_best[k - 1][0] * floor_net  # the fastest any k nodes could run it
    if floor >= now_cost:
        return None
    candidates = {nd for b, nd in by_best if b * floor_net < now_cost}
    latest = now + left * (now_cost - floor)  # a wait ending later cannot pay
    node_of = t.node_of
    frees: list[tuple[float, int]] = []
    for jid, gpus in releases.holding.items():
        if not any(nd in candidates for nd, _ in releases.nodes_of(gpus)):
            continue
        end = releases.ends[jid]
        if now < end < latest:
            frees.extend((end, x) for x in gpus if node_of[x] in candidates)
    if not frees:
        return None
    frees.sort()
    avail = _free_by_node(free, node_of, candidates)
    best_finish = now + left * now_cost
    best: tuple[float, tuple[int, ...]] | None = None
    i = 0
    while i < len(frees):
        end = frees[i][0]
        if end + left * floor >= best_finish - 1e-9:
            break  # no later start can finish sooner
        while i < len(frees) and frees[i][0] == end:
            avail.setdefault(node_of[frees[i][1]], []).append(frees[i][1])
            i += 1
        picks = {nd: sorted(xs, key=lambda y: (sf[y], y))[:g] for nd, xs in avail.items() if len(xs) >= g}
        if len(picks) < k:
            continue
        scored = sorted((sf[p[-1]], nd) for nd, p in picks.items())
        nodes = fewest_leaves_among_ties(scored, rack_idx.__getitem__, k)
        assert nodes is not None  # None only for fewer than k candidates
        pick = tuple(sorted(x for nd in nodes for x in picks[nd]))
        racks = len({rack_idx[nd] for nd in nodes})
        finish = end + left * max(sf[y] for y in pick) * net_factor(job, k, racks, ctx)
        if finish < best_finish - 1e-9 and all(r.admits(finish, pick, left) for r in reservations):
            best_finish, best = finish, (end, pick)
    return best


def _free_by_node(free: Iterable[int], node_of: Sequence[int], nodes: Collection[int]) -> dict[int, list[int]]:
    """{node: its free GPUs} for the free GPUs on `nodes` (the nodes a wait looks at)."""
    out: dict[int, list[int]] = {}
    for x in free:
        if node_of[x] in nodes:
            out.setdefault(node_of[x], []).append(x)
    return out


def _gth_best_by_node(sf: Sequence[float], g: int, t: Topology, cache: RunCache) -> list[tuple[float, int]]:
    """[(the g-th best bin among a node's GPUs, node), ...] ascending: the best bin a one-node
    job of g GPUs could have there (kept for the run, per ranking and size)."""
    table: dict[int, tuple[Topology, list[tuple[float, int]]]] = cache.get("gth-best-by-node", sf, dict)
    hit = table.get(g)
    if hit is None or hit[0] is not t:  # (a layout's topology is one object: ClusterView.topology)
        hit = table[g] = (t, sorted((sorted(sf[x] for x in gpus)[g - 1], nd)
                                    for nd, gpus in t.members(NODE).items() if len(gpus) >= g))
    return hit[1]
