"""Partitions, reservations and per-node CPUs/memory/features as Slurm 22.05 prints them
(the data files are captured from a real lab: several partitions, features, a reservation,
a drained node)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pal_slurm.slurm.dialects import LEGACY_22_05, SlurmVersion, dialect_for
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.intake.hostlist import HostSet
from pal_slurm.slurm.readers import parse_sinfo, parse_squeue
from pal_slurm.slurm.site import parse_minutes, parse_partitions, parse_reservations, read_site, site_view

DATA = Path(__file__).parent / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


def test_partitions_from_scontrol() -> None:
    parts = parse_partitions(load("scontrol_partitions.txt"))
    assert list(parts) == ["gpu", "one", "two", "acct"]
    gpu, one, two, acct = parts.values()
    assert gpu.default and gpu.up and gpu.nodes == {"gpu01", "gpu02", "gpu03", "gpu04"}
    assert gpu.max_nodes is None and gpu.max_time_min is None and gpu.allow_accounts is None
    assert not one.default and one.nodes == {"gpu04"}
    assert two.max_nodes == 1 and two.max_time_min == 60 and not two.up  # State=DOWN
    assert acct.allow_accounts == {"nobodyacct"} and acct.allow_qos is None and acct.deny_accounts == set()


def test_reservations_from_scontrol() -> None:
    resv = parse_reservations(load("scontrol_reservations.txt"))
    assert set(resv) == {"r1", "later"}
    assert resv["r1"].active and resv["r1"].nodes == {"gpu03"}
    assert not resv["later"].active and resv["later"].nodes == {"gpu01"}
    assert resv["r1"].start == datetime.fromisoformat("2026-11-23T16:44:27").timestamp()
    assert resv["r1"].end - resv["r1"].start == 3600
    assert parse_reservations("No reservations in the system\n") == {}


@pytest.mark.parametrize("text, minutes", [
    ("UNLIMITED", None), ("INFINITE", None), ("NONE", None), ("01:00:00", 60), ("2-00:00:00", 2880),
    ("30:00", 30), ("00:00:30", 1), ("1-02:03:00", 1563), ("1-02:03", 1563), ("", None),
])
def test_durations(text, minutes) -> None:
    assert parse_minutes(text) == minutes


@pytest.mark.parametrize("bad", ["soon", "1:2:3:4", "-5"])
def test_bad_durations(bad) -> None:
    with pytest.raises(SlurmParseError):
        parse_minutes(bad)


def test_bad_partition_records_are_errors() -> None:
    with pytest.raises(SlurmParseError, match="PartitionName"):
        parse_partitions("Nodes=a State=UP")
    with pytest.raises(SlurmParseError, match="partition p"):
        parse_partitions("PartitionName=p MaxNodes=many")


def test_site_view_from_sinfo_nodes() -> None:
    nodes = parse_sinfo(load("sinfo_site.json"))
    view = site_view(nodes, parse_partitions(load("scontrol_partitions.txt")))
    gpu02, gpu03 = view.nodes["gpu02"], view.nodes["gpu03"]
    assert not gpu02.usable  # drained
    assert gpu03.usable and gpu03.features == {"f3", "big"} and gpu03.partitions == ("gpu", "two")
    assert (gpu03.cpus, gpu03.memory_mb, gpu03.gpus) == (16, 4000, 4)
    assert gpu03.free_cpus == 16 and gpu03.idle
    assert view.default_partition.name == "gpu"
    assert gpu03.gpu_types == {"s0", "s1", "s2", "s3"}  # pal-slurm's per-slot types


def test_gpu_models_of_a_heterogeneous_site() -> None:
    view = site_view(parse_sinfo(load("sinfo_models.json")), {})
    assert {n: f.gpu_types for n, f in view.nodes.items()} == {
        "gpu01": {"a100"}, "gpu02": {"a100"}, "gpu03": {"v100"}, "gpu04": {"v100"}}
    assert all(f.gpus == 4 for f in view.nodes.values())


@pytest.mark.parametrize("doc, dialect", [
    ("22.05/sinfo_typed_busy.json", LEGACY_22_05),
    ("24.11/nodes_typed_busy.json", dialect_for(SlurmVersion(24, 11, 5), ["v0.0.42"])),
    ("26.05/nodes_typed_busy.json", dialect_for(SlurmVersion(26, 5, 5), ["v0.0.44", "v0.0.45"])),
])
def test_node_cpus_and_memory_in_use(doc, dialect) -> None:
    (node, *_rest) = parse_sinfo(load(doc), dialect)
    assert node.resources.cpus == 16 and node.resources.alloc_cpus == 1
    facts = site_view([node], {}).nodes[node.name]
    assert facts.free_cpus == 15 and not facts.idle


def test_held_job_restrictions_from_squeue() -> None:
    jobs = {j.job_id: j for j in parse_squeue(load("squeue_restricted_held.json"))}
    req = jobs[12].placement_request
    assert jobs[12].partition == "one,gpu"
    assert req.features == "f4|big" and req.excluded_nodes == HostSet.from_expr("gpu01") and req.reservation == "r1"
    assert req.exclusive and req.account == "xx" and req.memory_per_node_mb == 100
    assert req.cpus_per_tres == "gres:gpu:2"
    assert jobs[13].placement_request.memory_per_tres == "gres:gpu:20"
    assert jobs[14].placement_request.memory_per_cpu_mb == 10 and jobs[14].node_count == 2


class ScriptedRunner:
    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = []

    def run(self, argv, *, timeout=None):
        self.calls.append(list(argv))
        return self.outputs[argv[-1]]


def test_read_site_asks_scontrol_for_partitions_reservations_and_blocks() -> None:
    runner = ScriptedRunner({"partition": load("scontrol_partitions.txt"),
                             "reservation": load("scontrol_reservations.txt"),
                             "topology": "BlockName=b1 BlockIndex=0 Nodes=gpu[01-02] BlockSize=2\n"})
    view = read_site(runner, parse_sinfo(load("sinfo_site.json")))
    assert runner.calls == [["scontrol", "-o", "show", "partition"], ["scontrol", "show", "topology"],
                            ["scontrol", "-o", "show", "reservation"]]
    assert set(view.partitions) == {"gpu", "one", "two", "acct"} and set(view.reservations) == {"r1", "later"}
    assert view.blocks.block_of == {"gpu01": "b1", "gpu02": "b1"} and view.blocks.size == 2
    runner.calls.clear()  # a read on an earlier one keeps its partitions and blocks: only the reservations
    again = read_site(runner, parse_sinfo(load("sinfo_site.json")), view)
    assert runner.calls == [["scontrol", "-o", "show", "reservation"]]
    assert again.partitions == view.partitions and again.blocks == view.blocks
