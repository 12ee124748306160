"""Parsers of Slurm's node and job JSON, on JSON captured from real lab clusters of every
tested release: 22.05 (openapi v0.0.38; Debian 12), 24.11 (data_parser v0.0.40, v0.0.41 and
v0.0.42; Debian 13) and 26.05 (v0.0.42 to v0.0.45; Debian testing). tests/unit/slurm/data/capture.sh
re-creates the files. Every release must give the same view of the same scene."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_slurm.slurm.dialects import LEGACY_22_05, SlurmVersion, dialect_for
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.readers import (
    SlurmReader,
    cluster_view,
    unheld_slots,
    parse_job,
    parse_sinfo,
    parse_squeue,
)

DATA = Path(__file__).parent / "data"
D24_11 = dialect_for(SlurmVersion(24, 11, 5), ["v0.0.40", "v0.0.41", "v0.0.42"])
P25_05 = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43")
D25_05 = dialect_for(SlurmVersion(25, 5, 8), list(P25_05))
P25_11 = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")
D25_11 = dialect_for(SlurmVersion(25, 11, 7), list(P25_11))
P26_05 = ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
D26_05 = dialect_for(SlurmVersion(26, 5, 5), list(P26_05))


def load(name: str) -> str:
    return (DATA / name).read_text()


class Shape:
    """One release's JSON of the captured scenes: where the files are, how to read them."""

    def __init__(self, release: str, dialect, nodes: str, suffix: str = "") -> None:
        self.release, self.dialect, self.nodes_cmd, self.suffix = release, dialect, nodes, suffix

    def nodes(self, scene: str, doc=None):
        return parse_sinfo(doc if doc is not None else self.nodes_doc(scene), self.dialect)

    def nodes_doc(self, scene: str) -> str:
        return load(f"{self.release}/{self.nodes_cmd}_{scene}{self.suffix}.json")

    def jobs(self, scene: str, doc=None):
        return parse_squeue(doc if doc is not None else self.jobs_doc(scene), self.dialect)

    def jobs_doc(self, scene: str) -> str:
        return load(f"{self.release}/squeue_{scene}{self.suffix}.json")

    def __repr__(self) -> str:
        return f"{self.release}{self.suffix}"


# default shapes: every scene; the pinned data_parser versions of 24.11, 25.05, 25.11 and 26.05:
# the busy scene
RELEASES = [Shape("22.05", LEGACY_22_05, "sinfo"), Shape("24.11", D24_11, "nodes"), Shape("25.05", D25_05, "nodes"),
            Shape("25.11", D25_11, "nodes"), Shape("26.05", D26_05, "nodes")]
PINNED = [Shape("24.11", D24_11, "nodes", f".{v}") for v in ("v0.0.40", "v0.0.41", "v0.0.42")] + [
    Shape("25.05", D25_05, "nodes", f".{v}") for v in P25_05] + [
    Shape("25.11", D25_11, "nodes", f".{v}") for v in P25_11] + [
    Shape("26.05", D26_05, "nodes", f".{v}") for v in P26_05]
by_release = pytest.mark.parametrize("shape", RELEASES, ids=repr)
by_shape = pytest.mark.parametrize("shape", RELEASES + PINNED, ids=repr)


# ---- nodes -------------------------------------------------------------------------------
@by_release
def test_nodes_typed_idle(shape) -> None:
    nodes = shape.nodes("typed_idle")
    assert [n.name for n in nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    for n in nodes:
        assert (n.state, n.gpus, n.gpus_used, n.used_slots) == ("idle", 4, 0, frozenset())
        assert n.usable and n.weight == 1 and n.partitions == ("gpu",)
        assert n.state_flags == () and n.features == ()
        assert (n.address, n.hostname) == ("127.0.0.1", "localhost")  # what pald's sample intake checks


@by_shape
def test_nodes_typed_busy_have_exact_indices_and_drain(shape) -> None:
    nodes = {n.name: n for n in shape.nodes("typed_busy")}
    assert nodes["gpu01"].used_slots == {2, 3}
    assert nodes["gpu02"].used_slots == {0, 1}
    assert nodes["gpu04"].used_slots == {0, 1, 2, 3}
    assert nodes["gpu04"].state_flags == ("DRAIN",)
    assert nodes["gpu04"].reason == "capture-test"
    assert not nodes["gpu04"].usable
    assert nodes["gpu01"].state == "mixed" and nodes["gpu01"].usable
    assert nodes["gpu01"].gres == "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"


@by_release
def test_nodes_plain_have_counts_only(shape) -> None:
    nodes = {n.name: n for n in shape.nodes("plain_busy")}
    assert nodes["gpu01"].gpus == 4 and nodes["gpu01"].gpus_used == 3
    assert nodes["gpu01"].used_slots is None
    assert nodes["gpu02"].used_slots == frozenset()


@by_release
def test_nodes_lists_a_node_once_even_if_repeated(shape) -> None:
    data = json.loads(shape.nodes_doc("typed_idle"))
    data["nodes"].append(dict(data["nodes"][0]))
    assert len(shape.nodes("typed_idle", data)) == 4


def test_24_11_sinfo_json_is_not_read_as_22_05() -> None:
    """24.11's `sinfo --json` groups nodes by partition and has no
    'nodes' field; read with 22.05's dialect it is refused with that message (the reader
    detects the release and asks `scontrol show nodes --json` instead)."""
    with pytest.raises(SlurmParseError, match="no 'nodes' field"):
        parse_sinfo(load("24.11/sinfo_typed_idle.json"))
    assert D24_11.nodes_argv == ["scontrol", "show", "nodes", "--json=v0.0.42"]


@pytest.mark.parametrize(
    "doc, message",
    [
        ("not json", "invalid JSON"),
        ("[]", "not an object"),
        ('{"errors": ["boom"], "nodes": []}', "reported errors"),
        ('{"errors": []}', "no 'nodes'"),
        ('{"nodes": [{"state": "idle"}]}', "no 'name'"),
        ('{"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:x:y"}]}', "node n1"),
        ('{"nodes": ["n1"]}', "not an object"),
    ],
)
@by_release
def test_nodes_bad_documents(shape, doc: str, message: str) -> None:
    with pytest.raises(SlurmParseError, match=message):
        shape.nodes("", doc)


# ---- squeue ------------------------------------------------------------------------------
@by_release
def test_squeue_empty(shape) -> None:
    assert shape.jobs("", load(f"{shape.release}/squeue_empty.json")) == []


@by_shape
def test_squeue_typed_busy(shape) -> None:
    jobs = {j.name: j for j in shape.jobs("typed_busy")}
    typed = jobs["typed"]
    assert (typed.state, typed.nodes, typed.comment) == ("RUNNING", ("gpu01",), "pal:class=resnet")
    assert typed.gpu_slots == {"gpu01": frozenset({2, 3})}
    assert typed.tres_per_node == "gres:gpu:s2:1,gres:gpu:s3:1"  # 24.11 prints gres/gpu:s2:1
    assert not typed.held and typed.submit_time > 0 and typed.time_limit_s is None
    assert typed.partition == "gpu" and typed.node_count == 1

    two = jobs["untyped2n"]
    assert two.nodes == ("gpu02", "gpu03") and two.node_count == 2
    assert two.required_nodes == ("gpu02", "gpu03")
    assert two.gpu_slots == {"gpu02": frozenset({0, 1}), "gpu03": frozenset({0, 1})}
    assert two.admin_comment == "pal:placed=gpu[02-03];rank=v3"
    assert two.tres_per_node == "gres:gpu:2"

    held = jobs["held"]
    assert held.held and held.pending and held.priority == 0
    assert held.reason == "JobHeldUser" and held.nodes == () and held.gpu_slots == {}
    assert held.comment == "pal:class=bert,mode=defer"

    waiting = jobs["waiting"]
    assert waiting.pending and not waiting.held and waiting.reason == "Resources"
    assert waiting.priority > 0


@by_release
def test_squeue_plain_busy(shape) -> None:
    jobs = {j.name: j for j in shape.jobs("plain_busy")}
    assert jobs["one"].gpu_slots == {"gpu01": frozenset({0})}
    assert jobs["two"].gpu_slots == {"gpu01": frozenset({1, 2})}
    assert jobs["twonode"].gpu_slots == {
        "gpu03": frozenset({0, 1, 2}),
        "gpu04": frozenset({0, 1, 2}),
    }


@by_release
def test_squeue_rejects_detail_node_mismatch(shape) -> None:
    data = json.loads(shape.jobs_doc("plain_busy"))
    data["jobs"][2]["gres_detail"] = data["jobs"][2]["gres_detail"][:1]
    (bad,) = [j for j in shape.jobs("", data) if j.unreadable]  # salvaged, never hiding the others
    assert "1 gres_detail entries for 2 nodes" in bad.unreadable
    raw = data["jobs"][2]
    with pytest.raises(SlurmParseError, match="1 gres_detail entries for 2 nodes"):
        parse_job(shape.dialect.job_record(raw))


def test_one_malformed_job_is_salvaged_and_never_hides_the_others() -> None:
    data = json.loads(load("22.05/squeue_typed_busy.json"))
    good = parse_squeue(data)
    held = next(j for j in data["jobs"] if j["name"] == "held")
    held["gres_detail"] = ["gpu:x(IDX:oops)"]  # unparseable, and a count mismatch
    data["jobs"].append({"job_id": "not a number", "job_state": "PENDING"})  # no usable id: left out
    jobs = parse_squeue(data)
    assert [j.job_id for j in jobs] == [j.job_id for j in good]
    bad = next(j for j in jobs if j.job_id == held["job_id"])
    assert bad.unreadable and "gres_detail" in bad.unreadable
    assert bad.held and bad.admin_comment == held["admin_comment"] and bad.gpu_slots == {}
    assert all(not j.unreadable for j in jobs if j.job_id != held["job_id"])


# ---- cluster view ------------------------------------------------------------------------
@by_shape
def test_cluster_view_typed_from_nodes_alone(shape) -> None:
    view = cluster_view(shape.nodes("typed_busy"))
    assert view.size == 16
    assert [n.name for n in view.nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert view.gpus[6].node == "gpu02" and view.gpus[6].slot == 2
    # gpu01 slots 2,3 and gpu02/03 slots 0,1 used; gpu04 drained
    assert view.free == {0, 1, 6, 7, 10, 11}
    assert cluster_view(shape.nodes("typed_busy"), shape.jobs("typed_busy")).free == view.free


@by_release
def test_cluster_view_plain_needs_jobs_for_indices(shape) -> None:
    nodes = shape.nodes("plain_busy")
    jobs = shape.jobs("plain_busy")
    assert cluster_view(nodes, jobs).free == {3, 4, 5, 6, 7, 11, 15}
    # without the jobs: counts only; the lowest slots are assumed used (never double-book)
    assert cluster_view(nodes).free == {3, 4, 5, 6, 7, 11, 15}


@by_release
def test_cluster_view_counts_unknown_usage_conservatively(shape) -> None:
    nodes = shape.nodes("plain_busy")
    jobs = [j for j in shape.jobs("plain_busy") if j.name == "two"]
    # gpu01 uses 3 GPUs; jobs explain slots 1,2; one more is unknown -> slot 0 assumed used
    assert cluster_view(nodes, jobs).free & {0, 1, 2, 3} == {3}


@by_release
def test_gpus_sinfo_counts_that_no_job_holds_are_unheld_on_usable_nodes_only(shape) -> None:
    """A job that ended between sinfo's read and squeue's (or whose cleanup Slurm has not
    finished) leaves GPUs allocated with no job: those are the unheld ones. A drained node's
    GPUs are not: they do not free."""
    nodes, jobs = shape.nodes("typed_busy"), shape.jobs("typed_busy")
    assert unheld_slots(nodes, jobs) == {}
    gone = [j for j in jobs if j.name != "typed"]  # the job on gpu01 slots 2, 3 left squeue
    assert unheld_slots(nodes, gone) == {"gpu01": frozenset({2, 3})}
    # a running job whose slots the read does not give: its nodes' GPUs are not called unheld
    from dataclasses import replace
    blind = [replace(j, gpu_slots={}) if j.name == "untyped2n" else j for j in gone]
    assert unheld_slots(nodes, blind) == {"gpu01": frozenset({2, 3})}
    assert unheld_slots(nodes, [replace(j, nodes=()) for j in blind]) == {}  # ... nor anywhere, if it names none
    # no job at all: every allocated GPU is unheld, but drained gpu04's four are not
    assert unheld_slots(nodes, []) == {"gpu01": frozenset({2, 3}), "gpu02": frozenset({0, 1}),
                                       "gpu03": frozenset({0, 1})}


@by_release
def test_cluster_view_racks_and_weights(shape) -> None:
    data = json.loads(shape.nodes_doc("typed_idle"))
    data["nodes"][1]["weight"] = 10
    view = cluster_view(shape.nodes("", data), racks={"gpu01": "r1", "gpu02": "r1"})
    assert [n.weight for n in view.nodes] == [1, 10, 1, 1]
    assert [n.rack for n in view.nodes] == ["r1", "r1", "rack0", "rack0"]


# ---- reader over a runner ----------------------------------------------------------------
class CannedRunner:
    """A fake runner that answers each command line from a table and records the calls."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=None) -> str:
        self.calls.append(list(argv))
        return self.answers[" ".join(argv)]


def test_reader_detects_22_05_and_reads_sinfo() -> None:
    runner = CannedRunner({
        "sinfo --version": load("22.05/version.txt"),
        "sinfo --json": load("22.05/sinfo_plain_busy.json"),
        "squeue --json": load("22.05/squeue_plain_busy.json"),
    })
    reader = SlurmReader(runner)
    assert reader.cluster_view().free == {3, 4, 5, 6, 7, 11, 15}
    reader.cluster_view()  # the release is detected once
    assert runner.calls == [["sinfo", "--version"]] + [["sinfo", "--json"], ["squeue", "--json"]] * 2


@pytest.mark.parametrize("release, nodes_in, jobs_in, described", [
    ("24.11", "v0.0.42", "v0.0.42", "Slurm 24.11.5 (data_parser v0.0.42)"),
    ("25.05", "v0.0.43", "v0.0.43", "Slurm 25.05.8 (data_parser v0.0.43)"),
    ("25.11", "v0.0.44", "v0.0.44", "Slurm 25.11.7 (data_parser v0.0.44)"),
    # 26.05's v0.0.45 prints every job's sharing mode as []: its jobs are read in v0.0.44
    ("26.05", "v0.0.45", "v0.0.44", "Slurm 26.05.5 (data_parser v0.0.45, jobs v0.0.44)"),
])
def test_reader_detects_the_release_and_pins_the_parsers_it_reads(release, nodes_in, jobs_in, described) -> None:
    listing = load(f"{release}/json_list.txt").split("== scontrol --json=list")[1]
    runner = CannedRunner({
        "sinfo --version": load(f"{release}/version.txt"),
        "scontrol --json=list": listing,
        f"scontrol show nodes --json={nodes_in}": load(f"{release}/nodes_plain_busy.json"),
        f"squeue --json={jobs_in} --states=all": load(f"{release}/squeue_plain_busy.json"),
    })
    reader = SlurmReader(runner)
    assert reader.cluster_view().free == {3, 4, 5, 6, 7, 11, 15}
    assert reader.dialect.describe() == described
    assert reader.dialect.tested


@pytest.mark.parametrize("parser", P26_05)
def test_an_exclusive_job_reads_so_up_to_v0_0_44(parser) -> None:
    """A held `--exclusive` job on real 26.05 daemons, in each data_parser version: v0.0.45
    prints its `shared` as [] (the field is marked removed), as for a job that shares nodes;
    hence D26_05 reads jobs in v0.0.44."""
    (job,) = parse_squeue(load(f"26.05/squeue_exclusive_held.{parser}.json"), D26_05)
    assert job.held and job.name == "exclusive" and job.placement_request is not None
    assert job.placement_request.exclusive is (parser != "v0.0.45")
    assert D26_05.jobs_argv[1] == "--json=v0.0.44"


@by_release
def test_squeue_array_and_requeue_fields(shape) -> None:
    """An array's record of pending elements, one split-off element, a requeued job (the field
    names both releases print; 23.02+ wraps numbers in {"set", "number"} objects)."""
    doc = json.loads(shape.jobs_doc("plain_busy"))
    wrap = (lambda n: {"set": n is not None, "infinite": False, "number": n or 0}) if shape.release != "22.05" \
        else (lambda n: n)
    meta, split, requeued = (json.loads(json.dumps(doc["jobs"][0])) for _ in range(3))
    meta.update(job_id=40, array_job_id=wrap(40), array_task_id=wrap(None), array_task_string="1,3-4")
    split.update(job_id=42, array_job_id=wrap(40), array_task_id=wrap(2), array_task_string="")
    requeued.update(job_id=50, restart_cnt=2, eligible_time=wrap(1795462688))
    doc["jobs"] = [meta, split, requeued]
    jobs = {j.job_id: j for j in shape.jobs("plain_busy", json.dumps(doc))}
    assert jobs[40].element_refs() == ["40_1", "40_3", "40_4"] and jobs[40].ref == 40
    assert jobs[42].ref == "40_2" and jobs[42].element_refs() == ["40_2"]
    assert jobs[50].ref == 50 and jobs[50].restart_count == 2 and jobs[50].eligible_time == 1795462688
