"""Finding 2 (pald side): pald never answers with nodes or GRES slots Slurm does not have."""

from pal_slurm.daemon.choice_check import Binding, vet
from pal_slurm.daemon.cycle import plan_releases
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.readers import cluster_view, node_facts

from .builders import held_job, node_info, request


def facts(*nodes):
    return node_facts(nodes)


def test_node_facts_read_the_per_slot_types_from_sinfos_gres():
    f = facts(node_info("gpu01"), node_info("gpu02", gres="gpu:4"), node_info("gpu03", gres="gpu:a100:4"))
    assert f["gpu01"].typed_slots == {0, 1, 2, 3} and f["gpu01"].gpus == 4 and f["gpu01"].usable
    assert f["gpu02"].typed_slots == frozenset() and f["gpu03"].typed_slots == frozenset()


def test_vet_names_what_slurm_lacks():
    f = facts(node_info("gpu01"), node_info("gpu02", gpus=2))
    assert vet({"gpu01": (2, 3)}, f) == (Binding.SLOTS, "")
    assert vet({"gpu05": (0,)}, f) == (None, "unknown_node:gpu05")  # a node removed since the view
    assert vet({"gpu02": (1, 2)}, f) == (None, "no_such_gpu:gpu02")  # more GPUs than the node has
    drained = node_info("gpu03").__class__(**{**node_info("gpu03").__dict__, "state_flags": ("DRAIN",)})
    assert vet({"gpu03": (0,)}, facts(drained)) == (None, "node_unusable:gpu03")


def test_vet_binds_slots_or_nodes_or_doubts():
    f = facts(node_info("gpu01"), node_info("gpu02", gres="gpu:4"),
              node_info("gpu03", gres="gpu:s0:1,gpu:s1:1,gpu:4"))
    assert vet({"gpu01": (2, 3)}, f)[0] is Binding.SLOTS
    assert vet({"gpu02": (2, 3)}, f)[0] is Binding.NODES  # plain GRES: pin the node only
    assert vet({"gpu03": (0, 1)}, f)[0] is Binding.SLOTS
    assert vet({"gpu03": (2, 3)}, f) == (None, "slot_types_missing")  # types exist, not these: doubt
    assert vet({"gpu01": (0,), "gpu02": (0,)}, f) == (None, "slot_types_missing")  # one typed, one plain


def service_on(nodes, max_view_age_s=float("inf")):
    s = PlacementService(ServiceSettings(max_view_age_s=max_view_age_s))
    s.observe_cluster(cluster_view(nodes), now=0.0, facts=node_facts(nodes))
    return s


def test_place_on_plain_gres_nodes_pins_nodes_without_a_typed_gres():
    """gres.conf without per-slot types: a typed reply would make sbatch fail."""
    s = service_on([node_info(f"gpu0{i}", gres="gpu:4") for i in range(1, 5)])
    r = s.place(request(gpn=2), now=0.1, key="a")
    assert r.decision is DecisionKind.PLACE and r.gres is None and len(r.nodes) == 1


def test_place_passes_when_the_view_and_slurms_facts_disagree():
    nodes = [node_info(f"gpu0{i}") for i in range(1, 5)]
    s = service_on(nodes)
    s.facts = node_facts(nodes[1:])  # gpu01 gone from Slurm, still in the view
    r = s.place(request(gpn=4), now=0.1, key="a")
    assert (r.decision, r.reason) == (DecisionKind.PASS, "doubt:unknown_node:gpu01")
    assert s.reservations == {}  # a doubtful answer reserves nothing


def test_place_passes_on_a_view_older_than_allowed():
    s = service_on([node_info("gpu01")], max_view_age_s=5.0)
    assert s.place(request(gpn=1), now=4.0, key="a").decision is DecisionKind.PLACE
    r = s.place(request(gpn=1), now=6.0, key="b")
    assert (r.decision, r.reason) == (DecisionKind.PASS, "stale_view")


def test_deferred_job_with_a_doubtful_choice_is_released_as_submitted():
    nodes = [node_info("gpu01"), node_info("gpu02", gres="gpu:4")]
    s = service_on(nodes)
    s.facts = node_facts([nodes[1]])  # gpu01 vanished
    plan = plan_releases([held_job(1, gpn=4), held_job(2, gpn=4, submit=1)], s, backfill=True)
    by_id = {r.job_id: r for r in plan.releases}
    assert by_id[1].choice is None and by_id[1].reason == "doubt:unknown_node:gpu01"
    assert by_id[2].choice is None  # the view still offers gpu01 first: same doubt


def test_deferred_job_on_plain_gres_nodes_is_pinned_to_nodes_only():
    s = service_on([node_info("gpu01", gres="gpu:4"), node_info("gpu02", gres="gpu:4")])
    (rel,) = plan_releases([held_job(1, gpn=2)], s).releases
    assert rel.choice is not None and len(rel.choice.nodes) == 1 and rel.gres_spec is None
