import random

import numpy as np
from hypothesis import given, settings, strategies as st

from pal_slurm.policy.allocators import _bin_codes, _pm_first_arrays, lxv_order, pal, pm_first
from pal_slurm.policy.free import FreeGpus

from .builders import cluster, ctx, job


def _scan(j, free, x):
    """PM-First as a scan of every free GPU (the reference the kept keys must equal)."""
    c = free.array()
    codes = _bin_codes(x.ranking.sf(j.perf_class), x.cache)
    nodes = np.asarray(x.cluster.node_of, dtype=np.int64)
    return _pm_first_arrays(c, codes[c], nodes[c], j.num_gpus, x.cluster.size)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(6, 4), (5, 8), (12, 2)]))
def test_kept_pm_first_keys_pick_what_a_scan_of_the_free_gpus_picks(seed, shape):
    """Across a round of allocations of every size and class (GPUs taken between them, as a
    round takes them), pm_first reads its kept keys and picks what the scan picks."""
    rnd = random.Random(seed)
    nodes, gpn = shape
    c = cluster(nodes, gpn)
    scores = {k: [rnd.choice([0.95, 1.0, 1.05, 1.3, 2.8]) for _ in range(c.size)] for k in "AB"}
    x = ctx(c, scores)
    free = FreeGpus(c.size, rnd.sample(range(c.size), rnd.randint(c.size // 2, c.size)))
    kept = 0
    while len(free):
        j = job(1, rnd.choice([1, 1, 2, 3, gpn, gpn + 1, 2 * gpn]), rnd.choice("AB"))
        if j.num_gpus > len(free):
            j = job(1, 1, j.perf_class)
        want = _scan(j, free, x)
        assert pm_first(j, free, x) == want
        kept += bool(free.views)
        free.take(want)
    assert kept  # the kept keys were read, not only the scan


def test_a_gpu_given_back_drops_the_kept_keys():
    c = cluster(4, 4)
    x = ctx(c, {"A": [1.0] * 8 + [1.3] * 8})
    free = FreeGpus(c.size, range(c.size))
    free.take(pm_first(job(1, 1), free, x) or ())
    assert free.views and free.taken == [0]
    free.give([0])
    assert not free.views and not free.taken
    assert pm_first(job(2, 1), free, x) == _scan(job(2, 1), free, x) == (0,)


def test_pal_across_nodes_picks_from_the_lowest_bins_as_pm_first_on_every_free_gpu():
    """PAL's across-nodes option runs PM-First on the bins up to v: the same GPUs as on every
    free GPU (whole groups are left out, and they sort last)."""
    c = cluster(2, 4)
    x = ctx(c, {"A": [1.0, 1.0, 3.0, 3.0, 1.0, 1.0, 3.0, 3.0]}, penalty=1.2)
    free = FreeGpus(c.size, range(c.size))
    assert pal(job(1, 4), free, x) == _scan(job(1, 4), free, x) == (0, 1, 4, 5)


def _pal_within_scan(j, free, x):
    """PAL's within-node choice counted over every free GPU (the reference for the kept
    per-node counts), or None when no option fits or an across-nodes one comes first."""
    sf = x.ranking.sf(j.perf_class)
    n, mask = j.num_gpus, free.mask
    for v, within, _cost in lxv_order(sf, x.locality_penalty):
        if not within:
            if sum(sf[g] <= v for g in free.ids()) >= n:
                return None
            continue
        best = None
        for nd, node in enumerate(x.cluster.nodes):
            mine = sorted(sf[g] for g in node.gpu_ids if mask[g])
            count = sum(s <= v for s in mine)
            if count >= n and (best is None or (mine[n - 1], -count) < best[:2]):
                best = (mine[n - 1], -count, nd)
        if best is not None:
            return tuple([g for g in x.cluster.nodes[best[2]].gpu_ids if mask[g] and sf[g] <= best[0]][:n])
    return None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(6, 4), (5, 8)]))
def test_pal_within_a_node_picks_what_a_count_of_every_free_gpu_picks(seed, shape):
    """Across a round of allocations, PAL's kept per-node counts choose the node and GPUs a
    count over every free GPU chooses, whenever a within-node option fits."""
    rnd = random.Random(seed)
    nodes, gpn = shape
    c = cluster(nodes, gpn)
    scores = {k: [rnd.choice([0.95, 1.0, 1.05, 1.3, 2.8]) for _ in range(c.size)] for k in "AB"}
    x = ctx(c, scores, penalty=rnd.choice([1.2, 1.7, 5.0]))
    free = FreeGpus(c.size, rnd.sample(range(c.size), rnd.randint(c.size // 2, c.size)))
    within = 0
    while len(free) >= 2:
        j = job(1, rnd.randint(2, min(gpn, len(free))), rnd.choice("AB"))
        got = pal(j, free, x)
        want = _pal_within_scan(j, free, x)
        if want is not None and got == want:
            within += 1
        assert want is None or got == want
        free.take(got or free.ids()[:1])
    assert within or x.locality_penalty != 5.0  # (within-node options all come first)
