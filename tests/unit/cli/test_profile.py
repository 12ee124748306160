import shlex
import sys

import pytest

from pal_slurm.cli.commands import profile
from pal_slurm.cli.main import cli

from .profiling_env import palctl  # noqa: F401 - fixture


def test_local_replay_records_samples_per_gpu_class_and_round(palctl):
    r = palctl("profile-nodes", "--local", "--backend", "replay", "--nodes", "gpu[01-02]",
               "--classes", "A,D", "--rounds", "3", "--gpus-per-node", "2")
    assert r.exit_code == 0, r.output
    assert "recorded 24 sample(s) from 4 GPU(s) with the replay backend" in r.output
    samples = palctl.repo().samples()
    assert len(samples) == 24
    assert {(s.node, s.slot) for s in samples} == {("gpu01", 0), ("gpu01", 1), ("gpu02", 0), ("gpu02", 1)}
    assert {s.perf_class for s in samples} == {"A", "D"}


def test_no_gpu_here_is_a_clear_error(palctl):
    r = palctl("profile-nodes", "--local", "--backend", "nvml")
    assert r.exit_code == 1
    assert "backend nvml cannot run here" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nodes", "gpu[01-"], "bad node list"),
        (["--classes", ","], "no class given"),
        (["--backend", "cuda"], "Invalid value for '--backend'"),
        ([], "give --nodes LIST or --idle"),
        (["--local", "--backend", "replay", "--classes", "Z"], "no dataset for class 'Z'"),
    ],
)
def test_bad_input(palctl, args, message):
    r = palctl("profile-nodes", *args)
    assert r.exit_code != 0
    assert message in r.output
    assert palctl.repo().samples() == []


class FakeSlurm:
    """Runs each submitted job's command in-process, as if sbatch had run it on the node."""

    def __init__(self, monkeypatch, fail_nodes=()):
        self.mp = monkeypatch
        self.fail_nodes = set(fail_nodes)
        self.submitted = []
        self.polls = 0

    def submit(self, node, command):
        jid = str(100 + len(self.submitted))
        self.submitted.append((node, command))
        argv = shlex.split(command)
        at = argv.index("profile-nodes")
        assert argv[at:at + 2] == ["profile-nodes", "--local"]
        assert argv[:at] in (["palctl"], [sys.executable, "-m", "pal_slurm.cli"])
        if node not in self.fail_nodes:
            self.mp.setenv("SLURM_JOB_ID", jid)
            cli.main(argv[at:], standalone_mode=False)
            self.mp.delenv("SLURM_JOB_ID")
        return jid

    def states(self, ids):
        self.polls += 1
        return {}  # all finished

    def idle_nodes(self):
        return ["gpu03"]


def test_submits_one_job_per_node_and_summarises(palctl, monkeypatch):
    fake = FakeSlurm(monkeypatch)
    monkeypatch.setattr(profile, "_slurm", lambda ctx: fake)
    r = palctl("profile-nodes", "--nodes", "gpu[01-02]", "--idle", "--backend", "replay", "--classes", "A",
               "--rounds", "2", "--gpus-per-node", "4")
    assert r.exit_code == 0, r.output
    assert [n for n, _ in fake.submitted] == ["gpu01", "gpu02", "gpu03"]
    assert "--nodes gpu02" in fake.submitted[1][1] and "--rounds 2" in fake.submitted[1][1]
    lines = [line.split() for line in r.output.splitlines() if line.startswith("gpu0")]
    assert [(x[0], x[1], x[2], x[3]) for x in lines] == [
        ("gpu01", "100", "8", "ok"), ("gpu02", "101", "8", "ok"), ("gpu03", "102", "8", "ok")]


def test_a_node_without_samples_fails_the_command(palctl, monkeypatch):
    fake = FakeSlurm(monkeypatch, fail_nodes={"gpu02"})
    monkeypatch.setattr(profile, "_slurm", lambda ctx: fake)
    r = palctl("profile-nodes", "--nodes", "gpu[01-02]", "--backend", "replay", "--classes", "A")
    assert r.exit_code == 1
    assert "no samples" in r.output and "1 of 2 node(s) did not report samples" in r.output


def test_slurm_calls_go_through_the_runner():
    class Runner:
        def __init__(self):
            self.calls = []

        def run(self, argv, timeout=None):
            self.calls.append(list(argv))
            if argv[0] == "sbatch":
                return "42;lab\n"
            if argv[0] == "squeue":
                return "42 RUNNING\n7 PENDING\n"
            return "gpu02\ngpu01\ngpu02\n"

    r = Runner()
    calls = profile.SlurmCalls(r)
    assert calls.submit("gpu01", "echo hi") == "42"
    assert r.calls[0][:2] == ["sbatch", "--parsable"] and "-w" in r.calls[0] and r.calls[0][-1] == "echo hi"
    assert "--comment=pal:profile" in r.calls[0]
    assert calls.states(["42"]) == {"42": "RUNNING"}
    assert calls.idle_nodes() == ["gpu01", "gpu02"]


def test_local_kernel_inside_a_job_maps_cuda_devices_to_slots(palctl, monkeypatch):
    class Kernel:
        name = "kernel"

        def __init__(self):
            self.seen = []

        def device_count(self):
            return 2

        def sample(self, gpus, cls, d):
            from pal_slurm.bench.base import Sample

            self.seen += [(g.slot, g.index) for g in gpus]
            return [Sample(g.node, g.slot, cls, "kernel", 100.0, True) for g in gpus]

    k = Kernel()
    monkeypatch.setattr(profile, "select_backend", lambda name, seed=0, replay_slowdown="", replay_cluster="": k)
    monkeypatch.setenv("SLURM_JOB_GPUS", "2,3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    r = palctl("profile-nodes", "--local", "--backend", "kernel", "--classes", "A")
    assert r.exit_code == 0, r.output
    assert k.seen == [(2, 0), (3, 1)]
    assert {(s.node, s.slot) for s in palctl.repo().samples()} == {("gpu07", 2), ("gpu07", 3)}



def test_local_with_samples_through_pald_never_opens_the_store(palctl, monkeypatch, tmp_path):
    """[samples] send = "pald": --local hands its samples to pald (here nobody listens: a clear
    error) and the node's store is neither opened nor created."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PAL_SAMPLES_SEND", "pald")
    monkeypatch.setenv("PAL_SAMPLES_PALD", f"127.0.0.1:{port}")
    signed = []
    real_init = profile.PaldSink.__init__

    def with_fake_munge(self, address, munge_socket="", timeout_s=2.0, encode=None):
        real_init(self, address, munge_socket, timeout_s, encode=lambda payload: signed.append(payload) or "MUNGE:x:")

    monkeypatch.setattr(profile.PaldSink, "__init__", with_fake_munge)
    r = palctl("profile-nodes", "--local", "--backend", "replay", "--nodes", "gpu01", "--classes", "A",
               "--gpus-per-node", "1")
    assert r.exit_code != 0
    assert "cannot store them" in r.output and f"127.0.0.1:{port} unreachable" in r.output
    assert len(signed) == 1 and b'"node":"gpu01"' in signed[0]
    assert not (tmp_path / "pal.db").exists()
