"""Placement for the shapes a Slurm job can express.

A Slurm job asks either for `g` GPUs on each of `k` nodes (`--gres=gpu:g`, `-N k`; the common
case, k = 1) or for `N` GPUs in total (`--gpus=N`) on any nodes. With per-slot GRES types the
hook can bind exact slots, but only the *same* slots on every node of a job (tres_per_node is
per node). So:

- per-node shape: choose `k` nodes with >= `g` free GPUs each and the best `g` GPUs on each.
  Variability first (PAL: the worst binned slowdown among the job's GPUs decides its speed),
  then best fit (the node with the fewest free GPUs, to keep whole nodes for big jobs), then
  node order. Locality is the user's choice (k nodes), so PAL's L x V trade-off does not apply.
- total shape: the configured placement's own allocator (PAL may trade locality for speed).

`stock_slurm_choice` is what Slurm's cons_tres would pick for the per-node shape (nodes by
weight then name, lowest free slots): the baseline pald reports next to its own choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from pal_slurm.model import JobRequest


@dataclass(frozen=True)
class ShapeChoice:
    gpu_ids: tuple[int, ...]
    nodes: dict  # node name -> tuple of slots
    worst_sf: float  # the job's expected slowdown (max binned sf over its GPUs)

    def same_slots_everywhere(self) -> bool:
        return len({tuple(s) for s in self.nodes.values()}) == 1


def _to_choice(gpu_ids, ctx, sf) -> ShapeChoice:
    gpus = ctx.cluster.gpus
    nodes: dict[str, list[int]] = {}
    for g in sorted(gpu_ids):
        nodes.setdefault(gpus[g].node, []).append(gpus[g].slot)
    return ShapeChoice(tuple(sorted(gpu_ids)), {n: tuple(s) for n, s in nodes.items()},
                       max((sf[g] for g in gpu_ids), default=1.0))


def per_node_choice(k: int, g: int, perf_class: str, ctx) -> ShapeChoice | None:
    """Best `g` GPUs on each of `k` nodes (see module docstring); None if it does not fit."""
    if k <= 0 or g <= 0:
        raise ValueError("a job needs at least one node and one GPU per node")
    sf = ctx.ranking.sf(perf_class)
    by_node: dict[int, list[int]] = {}
    for gid in sorted(ctx.cluster.free):
        by_node.setdefault(ctx.cluster.node_of[gid], []).append(gid)
    candidates = []
    for node, free in by_node.items():
        if len(free) < g:
            continue
        best = sorted(free, key=lambda x: (sf[x], x))[:g]
        candidates.append((max(sf[x] for x in best), len(free), node, best))
    if len(candidates) < k:
        return None
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    chosen = [gid for c in candidates[:k] for gid in c[3]]
    return _to_choice(chosen, ctx, sf)


def stock_slurm_choice(k: int, g: int, perf_class: str, ctx) -> ShapeChoice | None:
    """What Slurm's cons_tres picks: nodes by (weight, name), the lowest free slots on each."""
    sf = ctx.ranking.sf(perf_class)
    by_node: dict[int, list[int]] = {}
    for gid in sorted(ctx.cluster.free):
        by_node.setdefault(ctx.cluster.node_of[gid], []).append(gid)
    nodes = ctx.cluster.nodes
    order = sorted((n for n, f in by_node.items() if len(f) >= g), key=lambda n: (nodes[n].weight, nodes[n].name))
    if len(order) < k:
        return None
    chosen = [gid for n in order[:k] for gid in by_node[n][:g]]
    return _to_choice(chosen, ctx, sf)


def total_choice(n: int, perf_class: str, ctx, placement) -> ShapeChoice | None:
    """`n` GPUs anywhere, chosen by the placement's own allocator."""
    job = JobRequest(job_id="_", num_gpus=n, perf_class=perf_class)
    gpus = placement.place_one(job, ctx)
    return None if gpus is None else _to_choice(gpus, ctx, ctx.ranking.sf(perf_class))
