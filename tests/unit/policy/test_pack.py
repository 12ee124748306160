"""The tightest packing of a `--gpus=N` job (policy.netaware.allocation._pack): its two
implementations, by dicts (short eligible lists) and by arrays (long ones), give the same
packing for any cluster, eligible set, size, tier and GPU order."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from pal_slurm.model.network import NODE, RACK, SPINE
from pal_slurm.policy.netaware import allocation
from pal_slurm.policy.netaware.allocation import _pack_arrays, _pack_lists

from .builders import cluster


@st.composite
def packings(draw):
    nodes, gpn = draw(st.integers(1, 12)), draw(st.integers(1, 8))
    c = cluster(nodes, gpn, racks=draw(st.sampled_from([None, 1, 2, 3, 5])))
    rng = random.Random(draw(st.integers(0, 2**16)))
    shares = [rng.choice([0.0, 0.3, 0.7, 1.0]) for _ in range(nodes)]  # nodes fuller and emptier
    eligible = sorted(g for g in range(c.size) if rng.random() < shares[c.node_of[g]])
    n = draw(st.integers(0, c.size + 1))
    sf = [rng.choice([0.95, 1.0, 1.05, 1.3]) for _ in range(c.size)]
    by_bin = draw(st.booleans())
    return c, eligible, n, draw(st.sampled_from([NODE, RACK, SPINE])), (lambda g: (sf[g], g)) if by_bin else (lambda g: g)


@settings(max_examples=400, deadline=None)
@given(case=packings())
def test_the_arrays_pack_as_the_dicts_do(case):
    c, eligible, n, max_tier, key = case
    rack_idx = c.topology.rack_idx
    want = _pack_lists(list(eligible), n, c, rack_idx, max_tier, key)
    assert _pack_arrays(eligible, n, c, rack_idx, max_tier, key) == want
    assert _pack_arrays(list(eligible), n, c, list(rack_idx), max_tier, key) == want  # lists: not kept


def test_a_rack_on_fewer_nodes_wins_over_one_with_fewer_gpus():
    """Racks of three 4-GPU nodes: rack 0 holds 7 on two nodes (4 + 4 + 4 eligible), rack 1 only
    on three (3 + 3 + 2): rack 0, though it leaves more eligible GPUs behind."""
    c = cluster(6, 4, racks=3)
    eligible = [*range(12), 12, 13, 14, 16, 17, 18, 20, 21]
    for pack in (_pack_lists, _pack_arrays):
        gpus, tier, nodes, racks = pack(eligible, 7, c, c.topology.rack_idx, SPINE, lambda g: g)
        assert (tier, nodes, racks) == (RACK, 2, 1) and set(gpus) <= set(range(12)), pack


def test_a_long_eligible_list_is_packed_by_arrays_and_a_short_one_by_dicts(monkeypatch):
    c = cluster(8, 4, racks=2)
    called = []
    monkeypatch.setattr(allocation, "_pack_arrays", lambda *a: called.append("arrays"))
    monkeypatch.setattr(allocation, "_pack_lists", lambda *a: called.append("lists"))
    monkeypatch.setattr(allocation, "ARRAYS_FROM", 16)
    allocation._pack(list(range(15)), 2, c, c.topology.rack_idx, SPINE, lambda g: g)
    allocation._pack(list(range(16)), 2, c, c.topology.rack_idx, SPINE, lambda g: g)
    assert called == ["lists", "arrays"]
