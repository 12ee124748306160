"""Which real GPUs the simulated ones are: a site's measured per-GPU data, per class.

By default the simulators draw every GPU from the bundled Longhorn measurements (PAL artifact,
hal-uw/blox-pal, MIT). `palctl simulate --variability SOURCE` replaces that, class by class,
with measurements keyed by (node, GPU slot): the store's ranking (`store`, `store:vN`) or a file
in any format `palctl import-variability` reads. Classes the source does not cover keep the
bundled draws.

Two ways to use the data, chosen by the cluster:
- the cluster *is* the measured one (same node names and slots): every simulated GPU has its own
  measured score, no randomness;
- any other cluster (`--cluster 64x4`): each simulated GPU becomes one measured GPU, drawn with
  the run's variability seed (the same draw for every class, so a slow GPU stays slow), the
  way the bundled data is used. That answers "what if my cluster had more GPUs like these".

Loading lives in `load_measured` (the only part with I/O); `MeasuredGpus` is plain data.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from pal_slurm.input_files import InputError
from pal_slurm.model.classes import class_rank
from pal_slurm.model.cluster import ClusterView
from pal_slurm.ranking.snapshot import RankingSnapshot

Location = tuple[str, int]  # (node name, GPU slot)


class VariabilityError(InputError):
    """A variability source that cannot be used (no ranking, unknown version, mismatched cluster)."""


@dataclass(frozen=True)
class MeasuredGpus:
    """Per class, each measured GPU's score (1.0 = the class median, > 1 slower)."""

    source: str  # what it came from, for reports ("store v3", a file name)
    scores: Mapping[str, Mapping[Location, float]]

    def classes(self) -> list[str]:
        return sorted(self.scores, key=lambda c: (class_rank(c), c))

    def locations(self) -> list[Location]:
        """Every measured (node, slot), nodes in natural order ('gpu2' before 'gpu10')."""
        locs = {loc for per in self.scores.values() for loc in per}
        return sorted(locs, key=lambda loc: (_natural(loc[0]), loc[1]))

    def layout(self) -> list[tuple[str, int]]:
        """[(node, GPUs)] of the measured cluster: as many GPUs per node as the fullest node has.

        The simulators assume nodes of one size; a node with fewer measured GPUs gets the missing
        slots at the class median (see `scores_for`).
        """
        per_node: dict[str, int] = {}
        for node, slot in self.locations():
            per_node[node] = max(per_node.get(node, 0), slot + 1)
        width = max(per_node.values(), default=0)
        return [(node, width) for node in per_node]

    def matches(self, cluster: ClusterView) -> bool:
        """Whether the cluster's GPUs are the measured ones (by node name and slot)."""
        return bool(set(cluster.gpu_by_location()) & set(self.locations()))

    def scores_for(self, cluster: ClusterView, seed: int) -> dict[str, tuple[float, ...]]:
        """Per class, a score for each GPU of `cluster` in gpu_id order."""
        if self.matches(cluster):
            return {c: tuple(per.get((g.node, g.slot), 1.0) for g in cluster.gpus) for c, per in self.scores.items()}
        rng = random.Random(seed)
        locs = self.locations()
        picks = [rng.choice(locs) for _ in range(cluster.size)]
        return {c: tuple(per.get(loc, 1.0) for loc in picks) for c, per in self.scores.items()}

    def gaps(self, cluster: ClusterView) -> list[str]:
        """Why the cluster is not exactly the measured one ([] when it is)."""
        have = set(self.locations())
        want = set(cluster.gpu_by_location())
        missing_nodes = sorted({n for n, _ in want - have if not any(h[0] == n for h in have)})
        out = []
        if missing_nodes:
            out.append(f"no data for node(s) {', '.join(missing_nodes[:5])}{' ...' if len(missing_nodes) > 5 else ''}")
        unused = sorted({n for n, _ in have - want})
        if unused:
            out.append(f"data for node(s) not in the cluster: {', '.join(unused[:5])}{' ...' if len(unused) > 5 else ''}")
        return out


def _natural(name: str) -> list[int | str]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def from_snapshot(snapshot: RankingSnapshot, source: str) -> MeasuredGpus:
    """From a `ranking.snapshot.RankingSnapshot` (the store's, or one ranked from a file)."""
    scores: dict[str, dict[Location, float]] = {}
    for e in snapshot.entries:
        scores.setdefault(e.perf_class, {})[(e.node, e.slot)] = float(e.score)
    return MeasuredGpus(source, scores)


def merge(sources: Sequence[MeasuredGpus]) -> MeasuredGpus | None:
    """Later sources win class by class; None when there are none."""
    if not sources:
        return None
    scores: dict[str, Mapping[Location, float]] = {}
    names: dict[str, str] = {}
    for s in sources:
        for c, per in s.scores.items():
            scores[c] = per
            names[c] = s.source
    by_source: dict[str, list[str]] = {}
    for c in sorted(names, key=lambda c: (class_rank(c), c)):
        by_source.setdefault(names[c], []).append(c)
    label = "; ".join(f"{','.join(cs)} from {src}" for src, cs in by_source.items())
    return MeasuredGpus(label, scores)


def load_measured(spec: str, open_store_ranking: Callable[[int | None], RankingSnapshot | None] | None = None,
                  *, nodes: Sequence[str] | None = None, gpus_per_node: int = 4) -> MeasuredGpus:
    """`store`, `store:vN`, `FILE`, or `CLASS=FILE` (a per-run file of one class).

    `open_store_ranking(version)` returns the store's RankingSnapshot (None version = latest)
    or None; palctl passes one that opens the configured store. `nodes` and `gpus_per_node`
    place a file's GPUs as import-variability's --map-to-nodes and --gpus-per-node do.
    """
    from pal_slurm.bench.importer import import_samples, split_class
    from pal_slurm.ranking.rank import rank_samples

    spec = spec.strip()
    m = re.fullmatch(r"store(?::v?(\d+))?", spec)
    if m:
        version = int(m.group(1)) if m.group(1) else None
        if open_store_ranking is None:
            raise VariabilityError(f"{spec}: no store to read")
        snap = open_store_ranking(version)
        if snap is None:
            raise VariabilityError(f"{spec}: the store has no ranking{' v' + str(version) if version else ''} "
                                   "(run palctl profile-nodes and palctl rank, or palctl import-variability --rank)")
        if not snap.entries:
            raise VariabilityError(f"{spec}: ranking v{snap.version} is empty")
        return from_snapshot(snap, f"store v{snap.version}")
    perf_class, spec = split_class(spec)
    samples = import_samples(spec, perf_class=perf_class, nodes=nodes, gpus_per_node=gpus_per_node,
                             class_option="--variability CLASS=FILE (e.g. A=FILE)")
    if not samples:
        raise VariabilityError(f"no samples{' of class ' + perf_class if perf_class else ''}", spec)
    snap = rank_samples(samples, now=1.0, window_s=2.0)
    return from_snapshot(snap, spec)
