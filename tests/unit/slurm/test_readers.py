"""Parsers of `sinfo --json` / `squeue --json`, on JSON captured from a real Slurm 22.05 lab
(tests/unit/slurm/data/capture.sh re-creates the files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.readers import (
    GresItem,
    SlurmReader,
    cluster_view,
    gpu_indices,
    parse_gres,
    parse_index_list,
    parse_job,
    parse_sinfo,
    parse_squeue,
)

DATA = Path(__file__).parent / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


# ---- GRES strings ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, items",
    [
        ("gpu:4", [GresItem("gpu", None, 4)]),
        ("gpu:a100:4(S:0-1)", [GresItem("gpu", "a100", 4)]),
        ("gpu:2(IDX:0-1)", [GresItem("gpu", None, 2, frozenset({0, 1}))]),
        ("gpu:3(IDX:0,2-3)", [GresItem("gpu", None, 3, frozenset({0, 2, 3}))]),
        (
            "gpu:s0:0(IDX:N/A),gpu:s2:1(IDX:2)",
            [GresItem("gpu", "s0", 0), GresItem("gpu", "s2", 1, frozenset({2}))],
        ),
        ("gpu:s2:0(IDX:)", [GresItem("gpu", "s2", 0, frozenset())]),
        ("gres:gpu:s2:1,gres:gpu:s3:1", [GresItem("gpu", "s2", 1), GresItem("gpu", "s3", 1)]),
        ("gpu:a100", [GresItem("gpu", "a100", 1)]),
        ("(null)", []),
        ("", []),
        (None, []),
    ],
)
def test_parse_gres(text, items) -> None:
    assert list(parse_gres(text)) == items


@pytest.mark.parametrize("bad", ["gpu:s0:x", ":4", "gpu:a:b:c:d", "gpu:2(IDX:0-x)"])
def test_parse_gres_rejects_garbage(bad: str) -> None:
    with pytest.raises(SlurmParseError):
        parse_gres(bad)


def test_index_lists() -> None:
    assert parse_index_list("0-1,3") == {0, 1, 3}
    assert parse_index_list("") == frozenset()
    assert gpu_indices(parse_gres("gpu:3")) is None  # a count without indices: unknown
    assert gpu_indices(parse_gres("gpu:0")) == frozenset()


# ---- sinfo -------------------------------------------------------------------------------
def test_sinfo_typed_idle() -> None:
    nodes = parse_sinfo(load("sinfo_typed_idle.json"))
    assert [n.name for n in nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    for n in nodes:
        assert (n.state, n.gpus, n.gpus_used, n.used_slots) == ("idle", 4, 0, frozenset())
        assert n.usable and n.weight == 1 and n.partitions == ("gpu",)


def test_sinfo_typed_busy_has_exact_indices_and_drain() -> None:
    nodes = {n.name: n for n in parse_sinfo(load("sinfo_typed_busy.json"))}
    assert nodes["gpu01"].used_slots == {2, 3}
    assert nodes["gpu02"].used_slots == {0, 1}
    assert nodes["gpu04"].used_slots == {0, 1, 2, 3}
    assert nodes["gpu04"].state_flags == ("DRAIN",)
    assert nodes["gpu04"].reason == "capture-test"
    assert not nodes["gpu04"].usable
    assert nodes["gpu01"].state == "mixed" and nodes["gpu01"].usable


def test_sinfo_plain_has_counts_only() -> None:
    nodes = {n.name: n for n in parse_sinfo(load("sinfo_plain_busy.json"))}
    assert nodes["gpu01"].gpus == 4 and nodes["gpu01"].gpus_used == 3
    assert nodes["gpu01"].used_slots is None
    assert nodes["gpu02"].used_slots == frozenset()


def test_sinfo_lists_a_node_once_even_if_repeated() -> None:
    data = json.loads(load("sinfo_typed_idle.json"))
    data["nodes"].append(dict(data["nodes"][0]))
    assert len(parse_sinfo(data)) == 4


@pytest.mark.parametrize(
    "doc, message",
    [
        ("not json", "invalid JSON"),
        ("[]", "not an object"),
        ('{"errors": ["boom"], "nodes": []}', "reported errors"),
        ('{"errors": []}', "no 'nodes'"),
        ('{"nodes": [{"state": "idle"}]}', "no 'name'"),
        ('{"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:x:y"}]}', "node n1"),
    ],
)
def test_sinfo_bad_documents(doc: str, message: str) -> None:
    with pytest.raises(SlurmParseError, match=message):
        parse_sinfo(doc)


# ---- squeue ------------------------------------------------------------------------------
def test_squeue_empty() -> None:
    assert parse_squeue(load("squeue_empty.json")) == []


def test_squeue_typed_busy() -> None:
    jobs = {j.name: j for j in parse_squeue(load("squeue_typed_busy.json"))}
    typed = jobs["typed"]
    assert (typed.state, typed.nodes, typed.comment) == ("RUNNING", ("gpu01",), "pal:class=resnet")
    assert typed.gpu_slots == {"gpu01": frozenset({2, 3})}
    assert typed.tres_per_node == "gres:gpu:s2:1,gres:gpu:s3:1"
    assert not typed.held and typed.submit_time > 0

    two = jobs["untyped2n"]
    assert two.nodes == ("gpu02", "gpu03") and two.node_count == 2
    assert two.required_nodes == ("gpu02", "gpu03")
    assert two.gpu_slots == {"gpu02": frozenset({0, 1}), "gpu03": frozenset({0, 1})}
    assert two.admin_comment == "pal:placed=gpu[02-03];rank=v3"

    held = jobs["held"]
    assert held.held and held.pending and held.priority == 0
    assert held.reason == "JobHeldUser" and held.nodes == () and held.gpu_slots == {}
    assert held.comment == "pal:class=bert,mode=defer"

    waiting = jobs["waiting"]
    assert waiting.pending and not waiting.held and waiting.reason == "Resources"


def test_squeue_plain_busy() -> None:
    jobs = {j.name: j for j in parse_squeue(load("squeue_plain_busy.json"))}
    assert jobs["one"].gpu_slots == {"gpu01": frozenset({0})}
    assert jobs["two"].gpu_slots == {"gpu01": frozenset({1, 2})}
    assert jobs["twonode"].gpu_slots == {
        "gpu03": frozenset({0, 1, 2}),
        "gpu04": frozenset({0, 1, 2}),
    }


def test_squeue_rejects_detail_node_mismatch() -> None:
    data = json.loads(load("squeue_plain_busy.json"))
    data["jobs"][2]["gres_detail"] = data["jobs"][2]["gres_detail"][:1]
    with pytest.raises(SlurmParseError, match="job 3: 1 gres_detail entries for 2 nodes"):
        parse_job(data["jobs"][2])


def test_one_malformed_job_is_salvaged_and_never_hides_the_others() -> None:
    data = json.loads(load("squeue_typed_busy.json"))
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
def test_cluster_view_typed_from_sinfo_alone() -> None:
    view = cluster_view(parse_sinfo(load("sinfo_typed_busy.json")))
    assert view.size == 16
    assert [n.name for n in view.nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert view.gpus[6].node == "gpu02" and view.gpus[6].slot == 2
    # gpu01 slots 2,3 and gpu02/03 slots 0,1 used; gpu04 drained
    assert view.free == {0, 1, 6, 7, 10, 11}


def test_cluster_view_plain_needs_jobs_for_indices() -> None:
    nodes = parse_sinfo(load("sinfo_plain_busy.json"))
    jobs = parse_squeue(load("squeue_plain_busy.json"))
    assert cluster_view(nodes, jobs).free == {3, 4, 5, 6, 7, 11, 15}
    # without the jobs: counts only; the lowest slots are assumed used (never double-book)
    assert cluster_view(nodes).free == {3, 4, 5, 6, 7, 11, 15}


def test_cluster_view_counts_unknown_usage_conservatively() -> None:
    nodes = parse_sinfo(load("sinfo_plain_busy.json"))
    jobs = [j for j in parse_squeue(load("squeue_plain_busy.json")) if j.name == "two"]
    # gpu01 uses 3 GPUs; jobs explain slots 1,2; one more is unknown -> slot 0 assumed used
    assert cluster_view(nodes, jobs).free & {0, 1, 2, 3} == {3}


def test_cluster_view_racks_and_weights() -> None:
    data = json.loads(load("sinfo_typed_idle.json"))
    data["nodes"][1]["weight"] = 10
    view = cluster_view(parse_sinfo(data), racks={"gpu01": "r1", "gpu02": "r1"})
    assert [n.weight for n in view.nodes] == [1, 10, 1, 1]
    assert [n.rack for n in view.nodes] == ["r1", "r1", "rack0", "rack0"]


# ---- reader over a runner ----------------------------------------------------------------
class CannedRunner:
    """A fake runner that answers sinfo/squeue with captured JSON and records the calls."""

    def __init__(self, sinfo: str, squeue: str) -> None:
        self.out = {"sinfo": sinfo, "squeue": squeue}
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=None) -> str:
        self.calls.append(list(argv))
        return self.out[argv[0]]


def test_reader_builds_view_through_runner() -> None:
    runner = CannedRunner(load("sinfo_plain_busy.json"), load("squeue_plain_busy.json"))
    view = SlurmReader(runner).cluster_view()
    assert runner.calls == [["sinfo", "--json"], ["squeue", "--json"]]
    assert view.free == {3, 4, 5, 6, 7, 11, 15}
