"""Finding 2 (pald side): pald never answers with nodes or GRES slots Slurm does not have."""

from dataclasses import replace

from pal_slurm.engine.choice_check import Binding, vet
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.model import DecisionKind
from pal_slurm.model.site import PartitionFacts, SiteView
from pal_slurm.slurm.readers import cluster_view
from pal_slurm.slurm.site import node_facts

from .builders import held_job, node_info, place, request


def facts(*nodes):
    """Slurm's facts for `nodes` (with CPUs and memory to spare, as on the lab)."""
    return {n.name: replace(node_facts(n), cpus=16, free_cpus=16, memory_mb=4000, free_memory_mb=4000)
            for n in nodes}


def site(nodes):
    return SiteView(facts(*nodes), {"gpu": PartitionFacts("gpu", frozenset(n.name for n in nodes), default=True)})


def test_node_facts_carry_the_per_slot_types_from_sinfos_gres():
    f = facts(node_info("gpu01"), node_info("gpu02", gres="gpu:4"), node_info("gpu03", gres="gpu:a100:4"))
    assert f["gpu01"].gpu_types == {"s0", "s1", "s2", "s3"} and f["gpu01"].gpus == 4 and f["gpu01"].usable
    assert f["gpu02"].gpu_types == {""} and f["gpu03"].gpu_types == {"a100"}


def test_vet_names_what_slurm_lacks():
    f = facts(node_info("gpu01"), node_info("gpu02", gpus=2))
    assert vet({"gpu01": (2, 3)}, f) == (Binding.SLOTS, "")
    assert vet({"gpu05": (0,)}, f) == (None, "unknown_node:gpu05")  # a node removed since the view
    assert vet({"gpu02": (1, 2)}, f) == (None, "no_such_gpu:gpu02")  # more GPUs than the node has
    drained = replace(node_info("gpu03"), state_flags=("DRAIN",))
    assert vet({"gpu03": (0,)}, facts(drained)) == (None, "node_unusable:gpu03")


def test_vet_binds_slots_only_where_every_chosen_slot_has_its_type():
    f = facts(node_info("gpu01"), node_info("gpu02", gres="gpu:4"),
              node_info("gpu03", gres="gpu:s0:1,gpu:s1:1,gpu:2"))
    assert vet({"gpu01": (2, 3)}, f)[0] is Binding.SLOTS
    assert vet({"gpu02": (2, 3)}, f)[0] is Binding.NODES  # plain GRES: pin the node only
    assert vet({"gpu03": (0, 1)}, f)[0] is Binding.SLOTS
    assert vet({"gpu03": (2, 3)}, f)[0] is Binding.NODES  # types exist, but not for these slots
    assert vet({"gpu01": (0,), "gpu02": (0,)}, f)[0] is Binding.NODES  # one typed, one plain


def service_on(nodes, max_view_age_s=float("inf")):
    s = PlacementService(ServiceSettings(max_view_age_s=max_view_age_s))
    s.observe_site(site(nodes))
    s.observe_cluster(cluster_view(nodes), now=0.0)
    return s


def test_place_on_plain_gres_nodes_pins_nodes_without_a_typed_gres():
    """gres.conf without per-slot types: a typed reply would make sbatch fail."""
    s = service_on([node_info(f"gpu0{i}", gres="gpu:4") for i in range(1, 5)])
    r = place(s, request(gpn=2), now=0.1, key="a")
    assert r.decision is DecisionKind.PLACE and r.gres is None and len(r.nodes) == 1


def test_place_passes_when_the_view_and_slurms_facts_disagree():
    nodes = [node_info(f"gpu0{i}") for i in range(1, 5)]
    s = service_on(nodes)
    s.site = replace(s.site, nodes=facts(*nodes[1:]))  # gpu01 gone from Slurm, still in the view
    answers = [place(s, request(gpn=4), now=0.1, key=f"k{i}") for i in range(4)]
    assert all("gpu01" not in r.nodes for r in answers)  # never the node Slurm lacks
    assert sum(r.decision is DecisionKind.PLACE for r in answers) == 3  # the others are used
    assert all(not (r.gpu_ids & {0, 1, 2, 3}) for r in s.reservations.values())


def test_place_passes_on_a_view_older_than_allowed():
    s = service_on([node_info("gpu01")], max_view_age_s=5.0)
    assert place(s, request(gpn=1), now=4.0, key="a").decision is DecisionKind.PLACE
    r = place(s, request(gpn=1), now=6.0, key="b")
    assert (r.decision, r.reason) == (DecisionKind.PASS, "stale_view")


def test_deferred_job_on_plain_gres_nodes_is_pinned_to_nodes_only():
    s = service_on([node_info("gpu01", gres="gpu:4"), node_info("gpu02", gres="gpu:4")])
    (rel,) = s.plan_cycle([held_job(1, gpn=2)], 0.0).releases
    assert rel.choice is not None and len(rel.choice.nodes) == 1 and rel.gres_spec is None


def test_on_plain_gres_nodes_pald_reserves_the_slots_slurm_takes():
    """Pinned to a node without slot types, a job keeps its count and Slurm takes the node's
    lowest free GPUs: pald's answer and reservation are those, not the ones PAL would pick."""
    from .builders import snapshot

    nodes = [node_info("gpu01", gres="gpu:4")] + [node_info(f"gpu0{i}", gres="gpu:4", used=range(4)) for i in (2, 3, 4)]
    s = service_on(nodes)
    s.set_snapshot(snapshot({"A": {("gpu01", 0): (2.8, 2.8)}}))
    r = place(s, request("resnet", gpn=2), now=0.1, key="a")
    assert r.decision is DecisionKind.PLACE and r.gres is None
    assert r.nodes == {"gpu01": (0, 1)} and s.reservations["a"].gpu_ids == {0, 1}
    r2 = place(s, request("resnet", gpn=2), now=0.2, key="b")
    assert r2.nodes == {"gpu01": (2, 3)} and not s.reservations["b"].gpu_ids & s.reservations["a"].gpu_ids
