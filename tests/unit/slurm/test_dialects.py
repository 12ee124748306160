"""Release detection and the per-release record functions (pal_slurm.slurm.dialects), on the
`sinfo --version` / `--json=list` text captured from real 22.05 and 24.11 daemons."""

from __future__ import annotations

from pathlib import Path

import pytest

from pal_slurm.slurm.dialects import (
    SlurmVersion,
    data_parser_job,
    data_parser_node,
    detect,
    dialect_for,
    offered_parsers,
    parse_version,
)
from pal_slurm.intake.slurm_numbers import NO_VAL
from pal_slurm.slurm.readers import parse_job_placement_request
from pal_slurm.slurm.errors import SlurmCommandFailed, SlurmError, SlurmUnsupported
from pal_slurm.slurm.readers import SlurmReader

DATA = Path(__file__).parent / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


class Canned:
    def __init__(self, answers: dict[str, str | Exception]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def run(self, argv, *, timeout=None) -> str:
        line = " ".join(argv)
        self.calls.append(line)
        answer = self.answers[line]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_versions_as_debian_prints_them() -> None:
    assert parse_version(load("22.05/version.txt")) == SlurmVersion(22, 5, 8)
    assert parse_version(load("24.11/version.txt")) == SlurmVersion(24, 11, 5)
    assert parse_version("slurm 25.05.0-0rc1") == SlurmVersion(25, 5, 0)
    assert str(SlurmVersion(23, 2, 7)) == "23.02.7"
    with pytest.raises(SlurmError, match="cannot read a Slurm version"):
        parse_version("sinfo: fatal: Could not establish a configuration source")


def test_offered_parsers_of_24_11() -> None:
    assert offered_parsers(load("24.11/json_list.txt")) == ["v0.0.40", "v0.0.41", "v0.0.42"]
    assert offered_parsers("") == []


def test_22_05_reads_sinfo_in_its_fixed_shape() -> None:
    d = dialect_for(SlurmVersion(22, 5, 8))
    assert d.nodes_argv == ["sinfo", "--json"] and d.jobs_argv == ["squeue", "--json"]
    assert d.tested and d.describe() == "Slurm 22.05.8 (openapi v0.0.38)"


@pytest.mark.parametrize("version, offered, pinned", [
    (SlurmVersion(23, 2, 7), ["v0.0.39"], "v0.0.39"),
    (SlurmVersion(23, 11, 10), ["v0.0.39", "v0.0.40"], "v0.0.40"),
    (SlurmVersion(24, 11, 5), ["v0.0.42", "v0.0.40", "v0.0.41"], "v0.0.42"),
    (parse_version(load("25.05/version.txt")), offered_parsers(load("25.05/json_list.txt")), "v0.0.43"),
    (parse_version(load("25.11/version.txt")), offered_parsers(load("25.11/json_list.txt")), "v0.0.44"),
])
def test_data_parser_releases_pin_the_newest_known_parser(version, offered, pinned) -> None:
    d = dialect_for(version, offered)
    assert d.data_parser == pinned and d.jobs_data_parser is None
    assert d.nodes_argv == ["scontrol", "show", "nodes", f"--json={pinned}"]
    assert d.jobs_argv == ["squeue", f"--json={pinned}", "--states=all"]
    assert d.tested == (version.release in ((24, 11), (25, 5), (25, 11)))


def test_26_05_reads_jobs_in_the_newest_parser_that_gives_their_sharing_mode() -> None:
    """v0.0.45 prints every job's `shared` as [] (removed in 26.05): nodes are read in v0.0.45,
    jobs in v0.0.44 while the clients offer it, and in v0.0.45 once they no longer do."""
    d = dialect_for(parse_version(load("26.05/version.txt")), offered_parsers(load("26.05/json_list.txt")))
    assert d.tested and d.data_parser == "v0.0.45" and d.jobs_data_parser == "v0.0.44"
    assert d.nodes_argv == ["scontrol", "show", "nodes", "--json=v0.0.45"]
    assert d.jobs_argv == ["squeue", "--json=v0.0.44", "--states=all"]
    assert d.job_argv(7) == ["squeue", "--json=v0.0.44", "--states=all", "--jobs=7"]
    assert d.describe() == f"Slurm {d.version} (data_parser v0.0.45, jobs v0.0.44)"
    later = dialect_for(SlurmVersion(27, 5, 0), ["v0.0.45", "v0.0.46", "v0.0.47"])
    assert later.data_parser == "v0.0.45" and later.jobs_argv == ["squeue", "--json=v0.0.45", "--states=all"]


def test_too_old_release_is_refused_with_the_supported_range() -> None:
    with pytest.raises(SlurmUnsupported, match=r"Slurm 21.08.8 is too old: pal-slurm reads Slurm 22.05 to 26.05"):
        dialect_for(SlurmVersion(21, 8, 8))


def test_future_release_keeps_a_known_parser_and_says_it_is_untested() -> None:
    d = dialect_for(SlurmVersion(26, 11, 0), ["v0.0.44", "v0.0.45", "v0.0.46"])
    assert d.data_parser == "v0.0.45" and d.jobs_data_parser == "v0.0.44" and not d.tested
    assert "Slurm 26.11.0 is newer than pal-slurm knows" in d.note
    bare = dialect_for(SlurmVersion(27, 5, 0), ["v0.0.46"])
    assert bare.data_parser is None and bare.jobs_argv == ["squeue", "--json", "--states=all"]
    assert "offer no data_parser version pal-slurm reads (v0.0.46" in bare.note


def test_detect_asks_twice_on_data_parser_releases() -> None:
    runner = Canned({"sinfo --version": "slurm 24.11.5\n", "scontrol --json=list": load("24.11/json_list.txt")})
    assert detect(runner).data_parser == "v0.0.42"
    assert runner.calls == ["sinfo --version", "scontrol --json=list"]
    failing = Canned({"sinfo --version": "slurm 24.11.5\n",
                      "scontrol --json=list": SlurmCommandFailed(["scontrol"], 1, "unknown option")})
    d = detect(failing)
    assert d.data_parser is None and not d.tested


def test_records_in_22_05_terms() -> None:
    node = data_parser_node({"name": "n1", "state": ["DOWN", "NOT_RESPONDING"], "features": ["a", "b"],
                             "free_mem": {"set": True, "infinite": False, "number": 17008}})
    assert (node["state"], node["state_flags"], node["features"], node["free_mem"]) == (
        "down", ["NOT_RESPONDING"], "a,b", 17008)
    job = data_parser_job({"job_id": 1, "job_state": ["RUNNING", "COMPLETING"],
                           "priority": {"set": False, "infinite": False, "number": 0},
                           "job_resources": {"nodes": {"list": "n[1-2]", "allocation": [{"name": "n1"}, {"name": "n2"}]}}})
    assert job["job_state"] == "COMPLETING" and job["priority"] == NO_VAL
    assert job["job_resources"]["allocated_nodes"] == [{"nodename": "n1"}, {"nodename": "n2"}]


@pytest.mark.parametrize("shared, as_22_05, exclusive", [
    (["none"], "none", True), (["oversubscribe"], "shared", False), (["user"], "user", False), ([], None, False)])
def test_job_shared_flag_lists_read_as_22_05_strings(shared, as_22_05, exclusive) -> None:
    """v0.0.40+ print the job's `shared` as a flag list (Slurm's data_parser JOB_SHARED flags:
    --exclusive is ["none"]); 22.05 printed one string ("none"/"shared"/"user") or null."""
    job = data_parser_job({"job_id": 1, "shared": shared})
    assert job["shared"] == as_22_05
    assert parse_job_placement_request(job).exclusive is exclusive


def test_unreadable_json_of_an_untested_release_is_reported_as_unsupported() -> None:
    runner = Canned({"sinfo --version": "slurm 27.05.1\n", "scontrol --json=list": "data_parser/v0.0.47\n",
                     "scontrol show nodes --json": '{"cluster": {"node_list": []}}'})
    with pytest.raises(SlurmUnsupported, match=r"Slurm 27.05.1 \(data_parser default\) printed JSON "
                                               r"pal-slurm cannot read \(scontrol --json has no 'nodes' field\)"):
        SlurmReader(runner).nodes()


def test_unreadable_json_of_a_tested_release_stays_a_parse_error() -> None:
    runner = Canned({"sinfo --version": "slurm 24.11.5\n", "scontrol --json=list": "data_parser/v0.0.42\n",
                     "scontrol show nodes --json=v0.0.42": "{}"})
    with pytest.raises(SlurmError, match="no 'nodes' field") as info:
        SlurmReader(runner).nodes()
    assert not isinstance(info.value, SlurmUnsupported)


def test_failed_detection_is_retried_at_the_next_read() -> None:
    runner = Canned({"sinfo --version": SlurmCommandFailed(["sinfo"], 1, "Unable to contact slurm controller")})
    reader = SlurmReader(runner)
    for _ in range(2):
        with pytest.raises(SlurmCommandFailed):
            reader.nodes()
    assert runner.calls == ["sinfo --version", "sinfo --version"]
