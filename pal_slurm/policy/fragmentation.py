"""Pack first, deviate for a better bin only when it pays: PAL's L x V choice with the network
tier and the fragmentation a choice causes in its cost.

Why: against a backfilling scheduler PAL's best-bin choice loses. It takes the
fastest GPUs wherever they are, so it opens whole free nodes (and racks) for small jobs, and the
multi-node jobs behind it find only partly used nodes: they wait, or they spread across racks
and run slower. A topology-aware first fit (what stock Slurm does with topology/tree) keeps
nodes and racks whole and won on three of six Sia-Philly workloads.

The rule (`packed_first_allocation`):

1. The anchor is the packed choice a variability-blind, topology-aware first fit makes: one
   node (the fullest one that fits), else one rack with the fewest nodes, else the fewest
   racks (`_pack` with GPU-id order; exactly the stock model's allocation).
2. Each of PAL's bins v gives a candidate: the tightest packing of the GPUs with sf <= v (best
   GPUs first inside a node), plus the anchor's own nodes with their best GPUs.
3. A candidate's cost is its expected slowdown (worst chosen GPU's binned factor x the network
   factor of the tiers it spans: node / rack / spine, from the context's network model) times
   `1 + node x (whole free nodes it opens beyond the anchor) + rack x (whole free racks it
   opens beyond the anchor)`. To "open" a node or rack is to take part of it while it was
   wholly free: what it leaves is of no use to a later job that needs it whole.
4. The cheapest candidate wins; ties keep the anchor (first listed). So the policy packs unless
   the variability gain beats both the locality cost and the fragmentation cost.

The fragmentation weights only count when somebody could need a whole node or rack: `opened`
counts nodes and racks only for jobs smaller than them.

Per-node requests (`-N k --gres=gpu:g`) keep PAL's per-node pick (policy.shapes): packing
them first this way won in the event simulator but lost on real Slurm (docs/results/slurm/).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.policy.base import PlacementContext

Allocation = tuple[tuple[int, ...], int, float]  # (gpus, tier, estimated network factor)
Packing = tuple[tuple[int, ...], int, int, int]  # (gpus, tier, nodes, racks)
# netaware._pack: (eligible GPUs ascending, n, cluster, rack_idx, max tier, GPU order in a node)
Packer = Callable[[list[int], int, ClusterView, Sequence[int], int, Callable[[int], object]], "Packing | None"]
NetFactor = Callable[[JobRequest, int, int, PlacementContext], float]


@dataclass(frozen=True)
class FragmentationCost:
    """Relative cost of fragmentation, per whole free node / rack a choice opens beyond what the
    packed (first-fit) choice opens. 0.1 per node: a better bin must save more than 10% of the
    job's run time to justify breaking a node the packed choice keeps whole (Sia-Philly, event
    mode, 8 seeds: 0.1 beat 0.03 on both clusters measured; docs/results/policy/).
    """

    node: float = 0.1
    rack: float = 0.1

    def __post_init__(self) -> None:
        if self.node < 0 or self.rack < 0:
            raise ValueError(f"fragmentation costs must be >= 0, not node={self.node}, rack={self.rack}")


def opened(gpus: Sequence[int], free: frozenset[int] | set[int], cluster: ClusterView,
           rack_idx: Sequence[int]) -> tuple[int, int]:
    """(nodes, racks) that were wholly free before taking `gpus` and are only partly taken.

    `rack_idx` maps a node index to its rack (all zeros: one rack, no rack fragmentation)."""
    node_of = cluster.node_of
    taken: dict[int, int] = {}
    for g in gpus:
        taken[node_of[g]] = taken.get(node_of[g], 0) + 1
    nodes = 0
    rack_taken: dict[int, int] = {}
    for nd, cnt in taken.items():
        rack_taken[rack_idx[nd]] = rack_taken.get(rack_idx[nd], 0) + cnt
        ids = cluster.nodes[nd].gpu_ids
        if cnt < len(ids) and all(g in free for g in ids):
            nodes += 1
    racks = 0
    members = _rack_members(cluster, rack_idx)
    if len(rack_taken) == 1 and len(members) == 1:
        return nodes, racks  # one rack: the spine tier does not exist
    for r, cnt in rack_taken.items():
        if cnt < len(members[r]) and members[r].issubset(free):
            racks += 1
    return nodes, racks


def _rack_members(cluster: ClusterView, rack_idx: Sequence[int]) -> dict[int, frozenset[int]]:
    """{rack: its GPUs}: the layout's own table (made once per layout) when `rack_idx` is the
    layout's racks, as it is for every placement; another grouping is counted here."""
    topology = cluster.topology
    if rack_idx is topology.rack_idx or tuple(rack_idx) == topology.rack_idx:
        return topology.members(1)
    out: dict[int, set[int]] = {}
    for nd, rk in enumerate(rack_idx):
        out.setdefault(rk, set()).update(cluster.nodes[nd].gpu_ids)
    return {rk: frozenset(gs) for rk, gs in out.items()}


def packed_first_allocation(job: JobRequest, free: Sequence[int], ctx: PlacementContext, variability: bool,
                            max_tier: int, rack_idx: Sequence[int], cost: FragmentationCost, pack: Packer,
                            net_factor: NetFactor) -> Allocation | None:
    """The packed choice, or a better bin when its gain beats locality and fragmentation costs.

    `pack(eligible, n, cluster, rack_idx, max_tier, key)` is the tightest packing
    (netaware._pack); `net_factor(job, nodes, racks, ctx)` the network factor of a span.
    Returns (gpus, tier, network factor) or None when nothing fits within `max_tier`."""
    n = job.num_gpus
    if len(free) < n:
        return None
    cluster = ctx.cluster
    ordered = sorted(free)
    anchor = pack(ordered, n, cluster, rack_idx, max_tier, _by_id)
    if anchor is None:
        return None
    sf = ctx.ranking.sf(job.perf_class) if variability else None
    if sf is None:
        gpus, tier, nodes, racks = anchor
        return gpus, tier, net_factor(job, nodes, racks, ctx)
    free_set = frozenset(ordered)
    base_nodes, base_racks = opened(anchor[0], free_set, cluster, rack_idx)

    def by_bin(g: int) -> tuple[float, int]:
        return (sf[g], g)

    candidates: list[Packing] = [anchor]
    same_nodes = _best_on_nodes(anchor[0], ordered, cluster.node_of, sf)
    if same_nodes != anchor[0]:
        candidates.append((same_nodes, anchor[1], anchor[2], anchor[3]))
    for v in sorted({sf[g] for g in ordered}):
        eligible = [g for g in ordered if sf[g] <= v]
        if len(eligible) < n:
            continue
        got = pack(eligible, n, cluster, rack_idx, max_tier, by_bin)
        if got is not None:
            candidates.append(got)
    scored = ((gpus, tier, net_factor(job, nodes, racks, ctx)) for gpus, tier, nodes, racks in candidates)
    return _cheapest(scored, sf, free_set, cluster, rack_idx, cost, (base_nodes, base_racks))


def _cheapest(candidates: Iterable[Allocation], sf: Sequence[float], free: frozenset[int], cluster: ClusterView,
              rack_idx: Sequence[int], cost: FragmentationCost, base: tuple[int, int]) -> Allocation | None:
    """The candidate (gpus, tier, network factor) of least expected slowdown x fragmentation
    cost (module docstring, step 3); ties keep the first listed (the anchor)."""
    best: tuple[float, Allocation] | None = None
    for gpus, tier, factor in candidates:
        more_nodes, more_racks = opened(gpus, free, cluster, rack_idx)
        # beyond the anchor: opening fewer is no credit (a spread over partly used nodes in
        # several racks must not look cheaper than the packed choice because it opens none)
        frag = 1.0 + cost.node * max(0, more_nodes - base[0]) + cost.rack * max(0, more_racks - base[1])
        total = max(sf[g] for g in gpus) * factor * frag
        if best is None or total < best[0] - 1e-12:
            best = (total, (tuple(gpus), tier, factor))
    return None if best is None else best[1]


def _by_id(g: int) -> int:
    return g


def _best_on_nodes(gpus: Sequence[int], free: Sequence[int], node_of: Sequence[int],
                   sf: Sequence[float]) -> tuple[int, ...]:
    """The same number of GPUs on each of the same nodes, the best free ones there (sf, id)."""
    want: dict[int, int] = {}
    for g in gpus:
        want[node_of[g]] = want.get(node_of[g], 0) + 1
    there: dict[int, list[int]] = {nd: [] for nd in want}
    for g in free:
        if node_of[g] in there:
            there[node_of[g]].append(g)
    out: list[int] = []
    for nd, cnt in want.items():
        out.extend(sorted(there[nd], key=lambda g: (sf[g], g))[:cnt])
    return tuple(out)
