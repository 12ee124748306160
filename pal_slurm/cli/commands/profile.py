"""palctl profile-nodes: measure GPUs, here (--local) or on each node through a Slurm job.

Without --local, one benchmark job per node is submitted with sbatch (exclusive, pinned with
-w); each job runs `palctl profile-nodes --local` on its node, which records samples in the
shared store (or hands them to pald where `[samples] send = "pald"`: bench/handoff.py). palctl waits for the jobs with a progress bar and prints how many samples each
node recorded.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
import time
from dataclasses import replace
from typing import Iterable

import click

from pal_slurm.bench.base import BACKENDS, Backend, GpuTarget, NoGpuAvailable, Sample, SampleSink
from pal_slurm.bench.busy import BusyProbe, flag_busy
from pal_slurm.bench.handoff import PaldSink
from pal_slurm.bench.hook import PROFILE_MARK
from pal_slurm.bench.gpuset import gpus_from_env
from pal_slurm.intake.hostlist import expand as expand_hostlist
from pal_slurm.bench.repository import StoreError, StoreProfilingRepository
from pal_slurm.bench.settings import ProfilingSettings
from pal_slurm.cli.commands._profiling import profiling_settings
from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.bench.select import select_backend
from pal_slurm.cli.conventions import Duration
from pal_slurm.cli.errors import PalError
from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.slurm.runner import Runner

ACTIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


class SlurmCalls:
    """The three Slurm calls profile-nodes makes, through pal_slurm.slurm's runner."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def _run(self, argv: list[str]) -> str:
        from pal_slurm.slurm.errors import SlurmError

        try:
            return self.runner.run(argv)
        except SlurmError as exc:
            raise PalError(str(exc)) from None

    def submit(self, node: str, command: str) -> str:
        out = self._run(["sbatch", "--parsable", "-N1", "-w", node, "--exclusive", "--job-name=pal-profile",
                         f"--comment={PROFILE_MARK}", "--output=/dev/null", "--wrap", command])
        return out.strip().split(";")[0]

    def states(self, job_ids: list[str]) -> dict[str, str]:
        """State of each job still known to slurmctld (finished jobs drop out)."""
        out = self._run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T"])
        wanted = set(job_ids)
        states = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in wanted:  # squeue may ignore -j for finished ids
                states[parts[0]] = parts[1]
        return states

    def idle_nodes(self) -> list[str]:
        out = self._run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"])
        return sorted({line.strip() for line in out.splitlines() if line.strip()})


def _slurm(ctx: click.Context) -> SlurmCalls:
    from pal_slurm.slurm.runner import CommandRunner

    cfg = cli_config(ctx).slurm
    return SlurmCalls(CommandRunner(slurm_conf=cfg.conf, bin_dir=cfg.bin_dir, timeout=30.0))


def _palctl_argv() -> list[str]:
    """How the benchmark job calls palctl: the installed script, else this interpreter."""
    return ["palctl"] if shutil.which("palctl") else [sys.executable, "-m", "pal_slurm.cli"]


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _local_targets(backend: Backend, nodes: list[str], gpus_per_node: int | None) -> list[GpuTarget]:
    if backend.name == "replay":
        if not nodes:
            nodes = [os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]]
        env_slots = gpus_from_env(os.environ) if gpus_per_node is None else ()
        slots = env_slots or tuple(range(gpus_per_node or 4))
        return [GpuTarget(n, s) for n in nodes for s in slots]
    if len(nodes) > 1:
        raise PalError(f"--local with the {backend.name} backend measures this host only; give at most one node name")
    node = nodes[0] if nodes else (os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0])
    job_slots = gpus_from_env({k: v for k, v in os.environ.items() if k == "SLURM_JOB_GPUS"})
    if job_slots and backend.name == "kernel" and os.environ.get("CUDA_VISIBLE_DEVICES"):
        # inside a job CUDA sees the job's GPUs as 0..n-1, in the order of SLURM_JOB_GPUS
        return [GpuTarget(node, slot, device=i) for i, slot in enumerate(job_slots)]
    if job_slots:
        return [GpuTarget(node, slot) for slot in job_slots]
    count = backend.device_count()
    return [GpuTarget(node, s) for s in range(count if gpus_per_node is None else min(count, gpus_per_node))]


def _summarise(samples: Iterable[Sample]) -> list[str]:
    lines = []
    by_class: dict[str, list[Sample]] = {}
    for s in samples:
        by_class.setdefault(s.perf_class, []).append(s)
    for c in sorted(by_class):
        vals = sorted(s.value for s in by_class[c])
        busy = sum(1 for s in by_class[c] if s.busy)
        unit = "TFLOP/s" if by_class[c][0].higher_is_better else "slowness"
        lines.append(f"  class {c}: {len(vals)} sample(s), {unit} min {vals[0]:.3f} "
                     f"median {vals[len(vals) // 2]:.3f} max {vals[-1]:.3f}, {busy} busy")
    return lines


def _local_sink(ctx: click.Context, settings: ProfilingSettings) -> SampleSink:
    """Where --local's samples go: pald ([samples] send = "pald": this node has no store URL),
    else the store."""
    if settings.send == "pald":
        return PaldSink(settings.pald_address, settings.munge_socket, settings.send_timeout_s)
    try:
        return StoreProfilingRepository(cli_store(ctx, read_only=False))
    except StoreError as exc:
        raise PalError(str(exc)) from None


def _run_local(settings: ProfilingSettings, repo: SampleSink, backend_name: str, nodes: list[str],
               classes: list[str], gpus_per_node: int | None, rounds: int, seed: int, duration: float) -> None:
    job_id = os.environ.get("SLURM_JOB_ID") or None
    try:
        backend = select_backend(backend_name, seed=seed, replay_slowdown=settings.replay_slowdown,
                                 replay_cluster=settings.replay_cluster)
        targets = _local_targets(backend, nodes, gpus_per_node)
    except NoGpuAvailable as exc:
        raise PalError(str(exc)) from None
    if not targets:
        raise PalError("no GPUs to measure on this host")
    probe = BusyProbe(max_load_per_cpu=settings.max_load_per_cpu)
    samples: list[Sample] = []
    with click.progressbar(length=rounds * len(classes), label=f"profiling {len(targets)} GPU(s)",
                           file=sys.stderr) as bar:
        for _ in range(rounds):
            # replay measures nothing on this host, so host load cannot disturb it
            host = "" if backend.name == "replay" else probe.host_reason()
            for c in classes:
                try:
                    got = backend.sample(targets, c, duration)
                except (NoGpuAvailable, ValueError) as exc:
                    raise PalError(str(exc)) from None
                samples += [replace(s, job_id=job_id) for s in flag_busy(got, host)]
                bar.update(1)
    try:
        repo.add_samples(samples)
    except (StoreError, OSError) as exc:  # OSError: HandoffError (pald did not take them)
        raise PalError(f"measured {len(samples)} sample(s) but cannot store them: {exc}") from None
    click.echo(f"recorded {len(samples)} sample(s) from {len(targets)} GPU(s) with the {backend.name} backend")
    for line in _summarise(samples):
        click.echo(line)


def _run_jobs(repo: StoreProfilingRepository, slurm: SlurmCalls, nodes: list[str], args: list[str], wait_s: float,
              poll_s: float) -> None:
    started = time.time()
    jobs = {}
    for node in nodes:
        cmd = " ".join(shlex.quote(a) for a in [*_palctl_argv(), "profile-nodes", "--local", "--nodes", node, *args])
        jobs[node] = slurm.submit(node, cmd)
        click.echo(f"submitted job {jobs[node]} on {node}")
    ids = list(jobs.values())
    deadline = time.monotonic() + wait_s
    active = set(ids)
    with click.progressbar(length=len(ids), label="waiting for benchmark jobs", file=sys.stderr) as bar:
        while active:
            states = slurm.states(ids)
            done = {j for j in active if states.get(j) not in ACTIVE_STATES}
            bar.update(len(done))
            active -= done
            if not active:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(poll_s)
    try:
        recorded = repo.samples(since=started - 60)
    except (StoreError, OSError) as exc:
        raise PalError(str(exc)) from None
    per_job: dict[str, int] = {}
    for s in recorded:
        if s.job_id:
            per_job[s.job_id] = per_job.get(s.job_id, 0) + 1
    click.echo(f"{'NODE':<12} {'JOB':>8} {'SAMPLES':>7} STATUS")
    failed = 0
    for node, jid in jobs.items():
        n = per_job.get(jid, 0)
        status = "still running" if jid in active else ("ok" if n else "no samples (see the job's node log)")
        failed += 0 if (n and jid not in active) else 1
        click.echo(f"{node:<12} {jid:>8} {n:>7} {status}")
    if failed:
        raise PalError(f"{failed} of {len(jobs)} node(s) did not report samples")


@click.command("profile-nodes")
@click.option("--nodes", "node_expr", default=None, help="Nodes to profile (hostlist, e.g. gpu[01-04]).")
@click.option("--idle", is_flag=True, help="Profile every idle node (sinfo) instead of --nodes.")
@click.option("--classes", default=",".join(CLASS_ORDER), show_default=True, help="Comma-separated classes.")
@click.option("--backend", type=click.Choice(BACKENDS), default=None, help="Benchmark backend (default [profiling] backend).")
@click.option("--local", is_flag=True, help="Measure here instead of submitting one job per node.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=None, help="GPUs per node (replay; default 4 or the job's GPUs).")
@click.option("--rounds", type=click.IntRange(min=1), default=None, help="Samples per GPU and class (default 8 for replay, 1 otherwise).")
@click.option("--seed", type=int, default=None, help="Replay seed (default [profiling] replay_seed).")
@click.option("--duration", type=Duration(was="seconds"), default=None,
              help="Time per measurement, a Slurm duration (e.g. 2s, 00:05; default [profiling] duration_s).")
@click.option("--wait", "wait_s", type=Duration(was="seconds"), default="30:00", show_default=True,
              help="Longest wait for the jobs, a Slurm duration (MM:SS, HH:MM:SS, ...).")
@click.pass_context
def profile_nodes(ctx: click.Context, node_expr: str | None, idle: bool, classes: str, backend: str | None, local: bool,
                  gpus_per_node: int | None, rounds: int | None, seed: int | None, duration: float | None,
                  wait_s: float) -> None:
    """Benchmark GPUs and record samples for palctl rank."""
    class_list = _split(classes)
    if not class_list:
        raise click.BadParameter("no class given", param_hint="--classes")
    try:
        nodes = expand_hostlist(node_expr) if node_expr else []
    except ValueError as exc:
        raise click.BadParameter(f"bad node list {node_expr!r}: {exc}", param_hint="--nodes") from None
    settings = profiling_settings(ctx)
    backend = backend or settings.backend
    rounds = rounds or (8 if backend == "replay" else 1)
    seed = settings.replay_seed if seed is None else seed
    duration = settings.duration_s if duration is None else duration
    if local:
        _run_local(settings, _local_sink(ctx, settings), backend, nodes, class_list, gpus_per_node, rounds, seed,
                   duration)
        return
    try:
        repo = StoreProfilingRepository(cli_store(ctx, read_only=False))
    except StoreError as exc:
        raise PalError(str(exc)) from None
    slurm = _slurm(ctx)
    if idle:
        nodes = sorted(set(nodes) | set(slurm.idle_nodes()))
    if not nodes:
        raise click.UsageError("give --nodes LIST or --idle (or --local to measure this host)")
    args = ["--classes", ",".join(class_list), "--backend", backend, "--rounds", str(rounds),
            "--seed", str(seed), "--duration", f"{duration:.6f}".rstrip("0").rstrip(".") + "s"]
    if gpus_per_node:
        args += ["--gpus-per-node", str(gpus_per_node)]
    _run_jobs(repo, slurm, nodes, args, wait_s, poll_s=2.0)


COMMAND = profile_nodes
