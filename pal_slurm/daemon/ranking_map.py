"""Turn a stored ranking snapshot (keyed by node and slot) into a policy Ranking (keyed by the
gpu ids of one ClusterView). GPUs the snapshot does not know score as a median GPU (1.0): an
unmeasured GPU is neither preferred nor avoided."""

from __future__ import annotations

from pal_slurm.model import ClusterView
from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.ranking import ClassRanking, Ranking


def ranking_for(view: ClusterView, snapshot) -> Ranking:
    """`snapshot` is a store RankingSnapshot (version, method, entries) or None."""
    if snapshot is None or not snapshot.entries:
        return Ranking.uniform(view.size, version=0)
    where = view.gpu_by_location()
    scores = {c: [1.0] * view.size for c in CLASS_ORDER}
    sf = {c: [1.0] * view.size for c in CLASS_ORDER}
    seen: set[str] = set()
    for e in snapshot.entries:
        gid = where.get((e.node, e.slot))
        if gid is None:
            continue
        if e.perf_class not in scores:
            scores[e.perf_class] = [1.0] * view.size
            sf[e.perf_class] = [1.0] * view.size
        scores[e.perf_class][gid] = e.score
        sf[e.perf_class][gid] = e.sf
        seen.add(e.perf_class)
    classes = {c: ClassRanking(c, tuple(scores[c]), tuple(sf[c])) for c in scores if c in seen}
    if not classes:
        return Ranking.uniform(view.size, version=snapshot.version)
    return Ranking(snapshot.version, snapshot.method, classes)
