"""SlurmActuator's command sequences, with a recording fake runner (the live behaviour is
tested in tests/integration/test_slurm_adapter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pal_slurm.slurm.actuator import (
    SlurmActuator,
    normalize_gres_spec,
    parse_show_job,
)
from pal_slurm.slurm.errors import SlurmCommandFailed, SlurmError

DATA = Path(__file__).parent / "data"

HELD = (
    "JobId=42 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0 "
    "JobState=PENDING Reason=JobHeldUser Dependency=(null) ReqNodeList=(null) "
    "ExcNodeList=(null) NodeList=(null) NumNodes=1 NumCPUs=1 TresPerNode=gres:gpu:2 "
    "Command=(null) WorkDir=/tmp/with space"
)


class FakeRunner:
    """Records argv; answers `scontrol -o show job` with `show`; fails commands matching `fail`."""

    def __init__(self, show: str = HELD, fail: str | None = None) -> None:
        self.show = show
        self.fail = fail
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=None) -> str:
        argv = list(argv)
        self.calls.append(argv)
        if self.fail and self.fail in " ".join(argv):
            raise SlurmCommandFailed(argv, 1, "Invalid node name specified")
        if argv[:4] == ["scontrol", "-o", "show", "job"]:
            return self.show + "\n"
        return ""

    def updates(self) -> list[list[str]]:
        return [c[1:] for c in self.calls if c[:2] != ["scontrol", "-o"]]


def test_parse_show_job() -> None:
    snap = parse_show_job(HELD)
    assert (snap.job_id, snap.state, snap.priority) == (42, "PENDING", 0)
    assert snap.tres_per_node == "gres:gpu:2" and snap.req_nodes == "" and snap.num_nodes == "1"
    assert snap.held
    with pytest.raises(SlurmError, match="unexpected"):
        parse_show_job("slurm_load_jobs error")


@pytest.mark.parametrize("release, num_nodes", [("22.05", "1"), ("24.11", "1-1"), ("25.05", "1-1"), ("25.11", "1-1"), ("26.05", "1-1")])
def test_parse_show_job_captured(release: str, num_nodes: str) -> None:
    """`scontrol -o show job` of a held `--gres=gpu:1` job as each release prints it (24.11 and
    later write TresPerNode=gres/gpu:1; the snapshot has one spelling)."""
    snap = parse_show_job((DATA / release / "scontrol_show_job_held.txt").read_text())
    assert (snap.job_id, snap.state, snap.priority, snap.held) == (4, "PENDING", 0, True)
    assert snap.tres_per_node == "gres:gpu:1"
    assert (snap.req_nodes, snap.num_nodes) == ("", num_nodes)


def test_place_held_job_sequence() -> None:
    runner = FakeRunner()
    SlurmActuator(runner).place_held_job(42, ["gpu02", "gpu01"], "gres:gpu:s2:1,gres:gpu:s3:1")
    assert runner.updates() == [
        ["update", "jobid=42", "NodeList=gpu[01-02]", "NumNodes=2-2"],
        ["update", "jobid=42", "TresPerNode="],  # 22.05: untyped -> typed needs a clear first
        ["update", "jobid=42", "Gres=gpu:s2:1,gpu:s3:1"],
        ["release", "42"],
    ]


def test_refused_clear_goes_straight_to_the_typed_request() -> None:
    """24.11 refuses `TresPerNode=` for a job with --mem-per-gpu (its MemPerTres would name
    no GPU request) and takes the typed request over the untyped one in one update."""
    runner = FakeRunner(HELD.replace("TresPerNode=gres:gpu:2", "MemPerTres=gres/gpu:100 TresPerNode=gres/gpu:2"),
                        fail="TresPerNode=")
    SlurmActuator(runner).place_on_slots(42, ["gpu01"], [0, 1])
    assert runner.updates() == [
        ["update", "jobid=42", "NodeList=gpu01", "NumNodes=1-1"],
        ["update", "jobid=42", "TresPerNode="],
        ["update", "jobid=42", "Gres=gpu:s0:1,gpu:s1:1"],
        ["release", "42"],
    ]


@pytest.mark.parametrize("release", ["22.05", "24.11", "25.05", "25.11", "26.05"])
def test_captured_show_job_tells_the_tres_spelling(release: str) -> None:
    snap = parse_show_job((DATA / release / "scontrol_show_job_held.txt").read_text())
    assert snap.slash_tres is (release != "22.05") and snap.cpus_per_tres == ""


def test_cpus_per_gpu_job_gets_its_nodes_only_where_two_slot_types_stall_it() -> None:
    """24.11 leaves a --cpus-per-gpu job bound to two slot types pending for ever: pinned to
    its nodes, it keeps its GPU request; one slot type, or 22.05's spelling, is bound."""
    on_24_11 = HELD.replace("TresPerNode=gres:gpu:2", "CpusPerTres=gres/gpu:4 TresPerNode=gres/gpu:2")
    runner = FakeRunner(on_24_11)
    SlurmActuator(runner).place_on_slots(42, ["gpu01"], [2, 3])
    assert runner.updates() == [["update", "jobid=42", "NodeList=gpu01", "NumNodes=1-1"], ["release", "42"]]
    runner = FakeRunner(on_24_11)
    SlurmActuator(runner).place_on_slots(42, ["gpu01"], [2])
    assert ["update", "jobid=42", "Gres=gpu:s2:1"] in runner.updates()
    runner = FakeRunner(HELD.replace("TresPerNode=gres:gpu:2", "CpusPerTres=gres:gpu:4 TresPerNode=gres:gpu:2"))
    SlurmActuator(runner).place_on_slots(42, ["gpu01"], [2, 3])
    assert ["update", "jobid=42", "Gres=gpu:s2:1,gpu:s3:1"] in runner.updates()


def test_place_on_slots_without_prior_gres_and_without_release() -> None:
    runner = FakeRunner(HELD.replace("TresPerNode=gres:gpu:2", "TresPerNode="))
    SlurmActuator(runner).place_on_slots(42, "gpu03", [3, 1], release=False)
    assert runner.updates() == [
        ["update", "jobid=42", "NodeList=gpu03", "NumNodes=1-1"],
        ["update", "jobid=42", "Gres=gpu:s1:1,gpu:s3:1"],
    ]


def test_pending_job_not_held_is_held_first() -> None:
    runner = FakeRunner(HELD.replace("Priority=0", "Priority=4294901759"))
    SlurmActuator(runner).place_on_slots(42, ["gpu01"], [0])
    assert runner.updates()[0] == ["hold", "42"]
    assert runner.updates()[-1] == ["release", "42"]


def test_running_job_is_refused_untouched() -> None:
    runner = FakeRunner(HELD.replace("JobState=PENDING", "JobState=RUNNING"))
    with pytest.raises(SlurmError, match="RUNNING, not PENDING"):
        SlurmActuator(runner).place_on_slots(42, ["gpu01"], [0])
    assert runner.updates() == []


def test_failed_node_update_changes_nothing_else() -> None:
    runner = FakeRunner(fail="NodeList=gpu99")
    with pytest.raises(SlurmCommandFailed):
        SlurmActuator(runner).place_on_slots(42, ["gpu99"], [0])
    assert runner.updates() == [["update", "jobid=42", "NodeList=gpu99", "NumNodes=1-1"]]


def test_failed_node_update_gives_back_a_job_it_held() -> None:
    runner = FakeRunner(HELD.replace("Priority=0", "Priority=100"), fail="NodeList=gpu99")
    with pytest.raises(SlurmCommandFailed):
        SlurmActuator(runner).place_on_slots(42, ["gpu99"], [0])
    assert runner.updates() == [
        ["hold", "42"],
        ["update", "jobid=42", "NodeList=gpu99", "NumNodes=1-1"],
        ["release", "42"],
    ]


def test_failed_gres_update_restores_previous_request() -> None:
    runner = FakeRunner(fail="Gres=gpu:s0:1")
    with pytest.raises(SlurmCommandFailed):
        SlurmActuator(runner).place_on_slots(42, ["gpu01"], [0])
    assert runner.updates()[-3:] == [
        ["update", "jobid=42", "TresPerNode="],
        ["update", "jobid=42", "NodeList=", "NumNodes=1"],
        ["update", "jobid=42", "Gres=gpu:2"],
    ]
    assert ["release", "42"] not in runner.updates()


def test_hold_and_release() -> None:
    runner = FakeRunner()
    SlurmActuator(runner).hold(7)
    SlurmActuator(runner).release(7)
    assert runner.calls == [["scontrol", "hold", "7"], ["scontrol", "release", "7"]]


def test_unpin_clears_the_node_list_only() -> None:
    """pald's way out of a release stuck on its pins (its GPU request stays; on the lab the
    empty NodeList= clears ReqNodeList: test_faults' drained-node test)."""
    runner = FakeRunner()
    SlurmActuator(runner).unpin(7)
    assert runner.calls == [["scontrol", "update", "jobid=7", "NodeList="]]


def test_hold_many_holds_in_chunks_and_reports_a_failed_chunk_after_trying_all() -> None:
    runner = FakeRunner(fail="hold 3,4")
    with pytest.raises(SlurmCommandFailed):
        SlurmActuator(runner).hold_many([1, 2, 3, 4, 5], chunk=2)
    assert runner.calls == [["scontrol", "hold", "1,2"], ["scontrol", "hold", "3,4"], ["scontrol", "hold", "5"]]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("gres:gpu:s2:1,gres:gpu:s3:1", "gpu:s2:1,gpu:s3:1"),
        ("gpu:4", "gpu:4"),
        ("gpu", "gpu"),
        (" gpu:a100:2 ", "gpu:a100:2"),
    ],
)
def test_normalize_gres_spec(spec: str, expected: str) -> None:
    assert normalize_gres_spec(spec) == expected


@pytest.mark.parametrize("bad", ["", ",", "gpu:1 NodeList=x", "gpu:s0:1;rm", "4:gpu"])
def test_normalize_gres_spec_rejects_bad_input(bad: str) -> None:
    with pytest.raises(SlurmError):
        normalize_gres_spec(bad)


def test_empty_node_list_is_refused() -> None:
    runner = FakeRunner()
    with pytest.raises(SlurmError, match="no nodes"):
        SlurmActuator(runner).place_on_slots(42, [], [0])
    assert runner.calls == []


def test_place_nodes_keeps_the_gpu_request() -> None:
    runner = FakeRunner()
    SlurmActuator(runner).place_nodes(42, "gpu[03-04]")
    assert runner.updates() == [
        ["update", "jobid=42", "NodeList=gpu[03-04]", "NumNodes=2-2"],
        ["release", "42"],
    ]
