"""Where's memo of the nodes a node group allows: kept while the layout stands."""

from __future__ import annotations

from pal_slurm.engine.where import Where
from pal_slurm.model import ClusterView
from pal_slurm.policy.eligibility import NodeGroup


def group(names: list[str]) -> NodeGroup:
    return NodeGroup(None, frozenset(names), frozenset(names))


def test_a_groups_allowed_nodes_outlive_a_read_of_the_same_layout_and_not_a_new_layout():
    view = ClusterView.uniform(4, 2)
    names = [n.name for n in view.nodes]
    where = Where()
    first = where.allowed_nodes(view, group(names[1:]), view.free)
    assert first == frozenset({1, 2, 3})
    assert where.allowed_nodes(view, group(names), view.free) is None  # every node
    # the next read: equal groups, new objects, the same layout: the kept set itself
    where.view_changed(layout_changed=False)
    where.site_changed()
    again = group(names[1:])
    assert where.allowed_nodes(view, again, view.free) is first
    assert where.allowed_nodes(view, again, view.free) is first
    # a read whose nodes are ordered otherwise: node indices changed meaning
    turned = ClusterView.from_layout([(n, 2) for n in reversed(names)])
    where.view_changed(layout_changed=True)
    assert where.allowed_nodes(turned, group(names[1:]), turned.free) == frozenset({0, 1, 2})


def test_exclusive_jobs_get_only_wholly_free_nodes_and_are_not_kept():
    view = ClusterView.uniform(3, 2).with_free({0, 1, 2, 5})
    names = [n.name for n in view.nodes]
    where = Where()
    assert where.allowed_nodes(view, group(names), view.free, exclusive=True) == frozenset({0})
    assert where.allowed_nodes(view, group(names), {0, 1, 2, 3}, exclusive=True) == frozenset({0, 1})
