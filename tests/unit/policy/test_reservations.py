"""The running jobs' release lists a plan reads (policy.netaware.reservations._Releases) against
a plain count: per group of each network level, every job with GPUs there as (its end, its GPUs
there), ascending; no entry for a group where no running job holds GPUs."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

from pal_slurm.model import ClusterView
from pal_slurm.model.network import NODE, RACK, SPINE
from pal_slurm.policy.netaware.reservations import _Releases


def plain(cluster: ClusterView, holding: dict[int, tuple[int, ...]], ends: dict[int, float],
          level: int) -> dict[int, list[tuple[float, int]]]:
    t = cluster.topology
    group = (lambda g: t.node_of[g]) if level == NODE else (lambda g: t.rack_idx[t.node_of[g]]) if level == RACK \
        else (lambda g: 0)
    out: dict[int, list[tuple[float, int]]] = {}
    for jid, gpus in holding.items():
        for grp, cnt in Counter(group(g) for g in gpus).items():
            out.setdefault(grp, []).append((ends[jid], cnt))
    return {grp: sorted(lst) for grp, lst in out.items()}


@st.composite
def running(draw):
    nodes, per_node, per_rack = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    cluster = ClusterView.uniform(nodes, per_node, nodes_per_rack=per_rack)
    gpus = draw(st.permutations(range(cluster.size)))
    holding, at = {}, 0
    for jid in range(draw(st.integers(0, cluster.size))):
        n = draw(st.integers(1, 3))
        if at + n > len(gpus):
            break
        holding[jid] = tuple(gpus[at:at + n])
        at += n
    # ends with ties (equal ends order by the GPU count)
    ends = {jid: float(draw(st.integers(0, 4))) for jid in holding}
    return cluster, holding, ends, tuple(gpus[at:])


@settings(max_examples=200, deadline=None)
@given(running(), st.integers(0, 3))
def test_release_lists_at_every_level_equal_a_plain_count(case, start):
    cluster, holding, ends, spare = case
    releases = _Releases(dict(holding), dict(ends), cluster, {})
    for level in (NODE, RACK, SPINE):
        assert releases.at(level) == plain(cluster, holding, ends, level)
    # a job the plan starts joins every level built so far, and one built later
    if spare:
        gpus = spare[:1 + start % len(spare)]
        releases.hold(99, gpus, 2.5)
        holding, ends = {**holding, 99: gpus}, {**ends, 99: 2.5}
        for level in (NODE, RACK, SPINE):
            assert releases.at(level) == plain(cluster, holding, ends, level)
