"""A real single-host Slurm cluster for integration tests, benchmarks and the demo.

A thin Python face on `scripts/slurm-lab.sh` (which does the work: canonical daemon names,
private munged, fake GPU devices, per-slot typed GRES). `start_lab` picks free ports, starts
a lab in its own directory and returns a `LabCluster` with the client environment and a few
helpers (submit, wait, read output); `LabCluster.stop` kills the lab's processes by PID.

Typical use (pytest fixture in tests/integration/conftest.py does exactly this)::

    lab = start_lab(tmp_path / "lab", hook="job_submit_lua/job_submit.lua",
                    env={"PAL_SOCKET": str(sock)})
    try:
        job = lab.sbatch("--gres=gpu:2", wrap="echo $CUDA_VISIBLE_DEVICES")
        assert lab.wait_job(job) == "COMPLETED"
        print(lab.job_output(job))
    finally:
        lab.stop()
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterable, Mapping

from pal_slurm.slurm.actuator import SlurmActuator, parse_show_job
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.readers import SlurmReader
from pal_slurm.slurm.runner import CommandRunner

REPO_ROOT = Path(__file__).resolve().parents[1]
LAB_SCRIPT = REPO_ROOT / "scripts" / "slurm-lab.sh"
SBIN = Path(os.environ.get("SLURM_SBIN", "/usr/sbin"))
REQUIRED_DAEMONS = ("slurmctld-wlm", "slurmd-wlm", "slurmstepd-wlm")
REQUIRED_CLIENTS = ("sinfo", "squeue", "scontrol", "sbatch")
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


class LabError(SlurmError):
    """The lab cluster could not be started or did not behave."""


def missing_binaries() -> list[str]:
    """The Slurm/munge programs a lab needs that this host lacks (empty: a lab can run)."""
    missing = [str(SBIN / d) for d in REQUIRED_DAEMONS if not (SBIN / d).exists()]
    missing += [c for c in REQUIRED_CLIENTS if shutil.which(c) is None]
    if not Path("/usr/sbin/munged").exists():
        missing.append("/usr/sbin/munged")
    return missing


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_port_low(default: int = 32768) -> int:
    """The first port Linux hands to outgoing connections (ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_port_block(count: int, low: int = 20000, high: int = 60000, tries: int = 200) -> int:
    """First port of `count` consecutive free TCP ports on 127.0.0.1 (random start, so that
    several labs started at once rarely collide), below the kernel's ephemeral range: a port
    free now but in that range may be taken by any outgoing connection (a client of another
    lab) before the daemon binds it."""
    high = min(high, ephemeral_port_low())
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(low, high - count)
        if all(_port_free(p) for p in range(base, base + count)):
            return base
    raise LabError(f"no block of {count} free ports found in {low}-{high}")


@dataclass
class LabCluster:
    """A running lab: where it lives, how to reach it, and small job helpers."""

    lab_dir: Path
    env: dict[str, str]  # client environment: SLURM_CONF (+ LAB, ports)
    nodes: tuple[str, ...]
    gpus_per_node: int
    script_env: dict[str, str] = field(repr=False, default_factory=dict)
    start_seconds: float = 0.0

    @property
    def slurm_conf(self) -> str:
        return self.env["SLURM_CONF"]

    @property
    def runner(self) -> CommandRunner:
        return CommandRunner(slurm_conf=self.slurm_conf)

    @cached_property
    def reader(self) -> SlurmReader:
        """One reader per lab: it detects the Slurm release once."""
        return SlurmReader(self.runner)

    @property
    def actuator(self) -> SlurmActuator:
        return SlurmActuator(self.runner)

    def client_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """os.environ + this lab's client variables (for subprocesses such as sbatch)."""
        env = dict(os.environ)
        env.update(self.env)
        env.update(extra or {})
        return env

    # ---- jobs ------------------------------------------------------------------------
    def sbatch(self, *args: str, wrap: str | None = None, script: str | None = None) -> int:
        """Submit a batch job; returns its id. Output goes to `<lab>/out/<id>.out` unless
        `args` set -o/--output. Give either `wrap` (a shell command) or `script` (text)."""
        argv = ["sbatch", "--parsable"]
        if not any(a == "-o" or a.startswith("--output") for a in args):
            argv.append(f"--output={self.lab_dir}/out/%j.out")
        argv += list(args)
        if wrap is not None:
            argv += ["--wrap", wrap]
        path = None
        if script is not None:
            path = self.lab_dir / "out" / f"script-{time.monotonic_ns()}.sh"
            path.write_text(script if script.startswith("#!") else "#!/bin/bash\n" + script)
            argv.append(str(path))
        out = self.runner.run(argv).strip()
        return int(out.split(";")[0])

    def job_state(self, job_id: int) -> str:
        return parse_show_job(
            self.runner.run(["scontrol", "-o", "show", "job", str(job_id)])
        ).state

    def wait_job(
        self, job_id: int, timeout: float = 30.0, states: Iterable[str] = TERMINAL_STATES
    ) -> str:
        """Poll until the job reaches one of `states` (default: finished); returns the state."""
        wanted = frozenset(states)
        deadline = time.monotonic() + timeout
        state = "?"
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state in wanted:
                return state
            time.sleep(0.1)
        raise LabError(f"job {job_id} still {state} after {timeout:g} s (wanted {sorted(wanted)})")

    def job_output(self, job_id: int) -> str:
        """The job's stdout file (default location), or '' if it has none yet."""
        path = self.lab_dir / "out" / f"{job_id}.out"
        return path.read_text() if path.exists() else ""

    def cancel_all(self, timeout: float = 20.0) -> None:
        """Cancel every job in the lab and wait until all nodes are idle again."""
        self.runner.run(["scancel", "--partition=gpu"])
        self.wait_idle(timeout)

    def wait_idle(self, timeout: float = 20.0) -> None:
        """Wait until no job runs or completes and every node is idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nodes = self.reader.nodes()
            busy = [j for j in self.reader.jobs() if j.state in ("RUNNING", "COMPLETING", "CONFIGURING")]
            if not busy and all(n.state == "idle" and not n.state_flags for n in nodes):
                return
            time.sleep(0.1)
        raise LabError(f"lab not idle after {timeout:g} s")

    def log(self, name: str = "slurmctld") -> str:
        """A daemon log: 'slurmctld', 'slurmd-gpu01', 'munged'."""
        path = self.lab_dir / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # ---- lifecycle ---------------------------------------------------------------------
    def stop(self) -> float:
        """Kill every process of this lab (by PID); returns the seconds it took."""
        t0 = time.monotonic()
        subprocess.run(
            ["bash", str(LAB_SCRIPT), "stop"],
            env=self.script_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return time.monotonic() - t0


def stop_lab_dir(lab_dir: str | os.PathLike[str]) -> None:
    """Stop a lab left running in `lab_dir` (an interrupted demo or test) by the PIDs its script
    recorded; nothing to do when no lab was ever set up there."""
    lab = Path(lab_dir)
    if (lab / "etc" / "slurm.conf").exists():
        subprocess.run(["bash", str(LAB_SCRIPT), "stop"], env={**os.environ, "LAB": str(lab)},
                       capture_output=True, timeout=60)


def start_lab(
    lab_dir: str | os.PathLike[str],
    hook: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    nodes: int = 4,
    gpus: int = 4,
    cpus: int = 16,
    prolog: str | os.PathLike[str] | None = None,
    epilog: str | os.PathLike[str] | None = None,
    task_prolog: str | os.PathLike[str] | None = None,
    gres: str = "typed",
    uts: bool = True,
    timeout: float = 60.0,
    features: Mapping[str, str] | None = None,
    extra_conf: str = "",
    gpu_models: Mapping[str, str] | None = None,
    topology: str = "",
) -> LabCluster:
    """Start a lab cluster in `lab_dir` on free ports and return it (running).

    hook: a job_submit.lua (default: a pass-through hook); the other *.lua files next to it
        are linked too, so the hook can `require` its modules.
    env: extra variables for the daemons, e.g. the pald socket path the hook reads with
        os.getenv (slurmctld inherits them).
    prolog/epilog/task_prolog: optional scripts (Prolog=/Epilog=/TaskProlog=).
    gres: "typed" (per-slot types, exact GPU binding), "plain" (Gres=gpu:N), "from-plain" (the
    plain lab's gres.conf made per-slot by `palctl slurm gres-conf --from`) or "model" (GPU
        model types as sites use them, Gres=gpu:<model>:N; models from `gpu_models`) or
        "model-slots" (that model gres.conf made per-slot by `gres-conf --from`, models as node
        features; the hook needs PAL_GPU_MODELS in `env`).
    gpu_models: node -> GPU model for gres="model"/"model-slots" (nodes not named: a100).
    features: node -> Slurm Features= value (e.g. {"gpu04": "f4,big"}), for sites' constraints.
    extra_conf: lines appended to slurm.conf (more PartitionName= lines, limits).
    topology: the text of topology.conf next to slurm.conf (with `TopologyPlugin=` in
        `extra_conf`: topology/tree's SwitchName= lines, topology/block's BlockName= lines).
    Raises LabError (with the log tail) if the cluster does not come up.
    """
    for what, path in (("hook", hook), ("prolog", prolog), ("epilog", epilog),
                       ("task_prolog", task_prolog)):
        if path is not None and not Path(path).is_file():
            raise LabError(f"{what} {path}: no such file")
    if gres not in ("typed", "plain", "model", "from-plain", "model-slots"):
        raise LabError(f"gres must be 'typed', 'plain', 'model', 'from-plain' or 'model-slots', not {gres!r}")
    missing = missing_binaries()
    if missing:
        raise LabError("Slurm lab needs: " + ", ".join(missing))
    lab = Path(lab_dir).resolve()
    lab.mkdir(parents=True, exist_ok=True)
    if topology:
        (lab / "etc").mkdir(exist_ok=True)
        (lab / "etc" / "topology.conf").write_text(topology)
    error: LabError | None = None
    for _attempt in range(2):  # a second try on fresh ports: another lab may have taken ours
        cluster = _launch(lab, nodes, gpus, cpus, hook, env, prolog, epilog, task_prolog,
                          gres, uts, timeout, _site_env(features, extra_conf, gpu_models))
        if isinstance(cluster, LabCluster):
            return cluster
        error = cluster
    assert error is not None
    raise error


def _site_env(features: Mapping[str, str] | None, extra_conf: str,
              gpu_models: Mapping[str, str] | None = None) -> dict[str, str]:
    """The lab script's knobs for a site's own configuration (features, partitions, models)."""
    def pairs(what: str, mapping: Mapping[str, str] | None) -> str:
        for node, value in (mapping or {}).items():
            if not value or any(c.isspace() for c in node + value) or "=" in node:
                raise LabError(f"bad {what} {node!r}: {value!r}")
        return " ".join(f"{n}={v}" for n, v in (mapping or {}).items())

    return {"LAB_FEATURES": pairs("feature list", features), "LAB_EXTRA_CONF": extra_conf,
            "LAB_GPU_MODELS": pairs("GPU model", gpu_models)}


def _launch(lab: Path, nodes: int, gpus: int, cpus: int, hook: str | os.PathLike[str] | None,
            env: Mapping[str, str] | None, prolog: str | os.PathLike[str] | None,
            epilog: str | os.PathLike[str] | None, task_prolog: str | os.PathLike[str] | None, gres: str,
            uts: bool, timeout: float, site_env: Mapping[str, str]) -> "LabCluster | LabError":
    """One start attempt on fresh ports: the running lab, or the error (lab stopped)."""
    ports = free_port_block(nodes + 1)
    script_env = dict(os.environ)
    script_env.update(env or {})
    script_env.update(site_env)
    script_env.update(
        LAB=str(lab),
        NNODES=str(nodes),
        NGPUS=str(gpus),
        NCPUS=str(cpus),
        CTLD_PORT=str(ports),
        NODE_PORT0=str(ports + 1),
        LAB_GRES=gres,
        UTS="1" if uts else "0",
        LAB_HOOK=str(Path(hook).resolve()) if hook else "",
        LAB_PROLOG=str(Path(prolog).resolve()) if prolog else "",
        LAB_EPILOG=str(Path(epilog).resolve()) if epilog else "",
        LAB_TASK_PROLOG=str(Path(task_prolog).resolve()) if task_prolog else "",
    )
    client_env = {
        "SLURM_CONF": str(lab / "etc" / "slurm.conf"),
        "LAB": str(lab),
        "CTLD_PORT": str(ports),
        "NODE_PORT0": str(ports + 1),
    }
    cluster = LabCluster(
        lab_dir=lab,
        env=client_env,
        nodes=tuple(f"gpu{i:02d}" for i in range(1, nodes + 1)),
        gpus_per_node=gpus,
        script_env=script_env,
    )
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", str(LAB_SCRIPT), "start"],
            env=script_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        cluster.stop()
        return LabError(f"lab start did not finish in {timeout:g} s")
    except BaseException:  # interrupted while starting (Ctrl-C, palctl replay's SIGTERM): leave nothing running
        cluster.stop()
        raise
    cluster.start_seconds = time.monotonic() - t0
    if proc.returncode != 0:
        tail = "\n".join(cluster.log().splitlines()[-15:])
        cluster.stop()
        return LabError(
            f"lab start failed (rc={proc.returncode}):\n{proc.stderr.strip()}\n"
            f"--- slurmctld.log tail ---\n{tail}"
        )
    return cluster
