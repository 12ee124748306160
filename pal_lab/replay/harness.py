"""Drive one replay arm on a freshly started lab: the one place that wires lab, pald and jobs.

An arm: start an identical lab (N nodes x G emulated GPUs, `nodes_per_rack` nodes per leaf
switch in topology.conf with topology/tree, per-slot GRES, sched/backfill with the parameters
below, jobcomp/filetxt), for pal-slurm arms start pald with the hook and a ranking MEASURED
with `palctl profile-nodes --backend replay` (replaying the event simulator's per-GPU draw),
find the phase of Slurm's backfill passes with a probe job and start the trace at the same
phase in every arm (ALIGN_AFTER_PASS_S), submit every planned job at its compressed time, wait
until Slurm recorded every job, stop everything, and return the per-job results (metrics.py,
`measure_arm`).

Scheduler parameters (the lab's defaults are overridden through `start_lab(extra_conf=...)`):
bf_interval=1 and bf_resolution=1 so backfill plans in one-second steps (the default 60 s would
round a compressed job's minutes-long limit to whole plan steps), sched_min_interval=0 and
batch_sched_delay=0 so a submission is considered at once, OverTimeLimit=UNLIMITED so a slow job
is never killed at its limit (see plan.py for how limits are set).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from pal_slurm.config import PolicyConfig
from pal_slurm.daemon.process import REPO, PaldProcess
from pal_slurm.model import ClusterView
from pal_slurm.ranking.profiles import gpu_profiles
from pal_lab.replay.ctldlog import PassClock, pass_clock, slurm_ends, slurm_starts
from pal_lab.replay.jobcomp import CompRecord, parse_jobcomp
from pal_lab.replay.metrics import ArmSummary, JobResult, ReplayIncomplete, job_results, summarise
from pal_lab.replay.plan import ReplayPlan, payload_spec
from pal_slurm.sim.network import NetworkModel
from pal_lab.lab import LabCluster, start_lab

if TYPE_CHECKING:
    from pal_lab.replay.payload import PayloadRecord

ARMS = {"stock": None, "pal": "pal", "pal-net": "pal-net", "pal-fit": "pal-fit",
        "pal-fit-aged": "pal-fit", "pal-fit-slurm": "pal-fit"}  # arm -> pald placement (None: no hook)
# arm -> pald's queue order of its held jobs (`[policy] queue`), where it is not FIFO:
# pal-fit-slurm keeps Slurm's priority order (the lab's priority/basic: submit order under
# Slurm's backfill rule, `Engine.keeps_order`)
ARM_QUEUE = {"pal-fit-aged": "srtf-aged", "pal-fit-slurm": "slurm"}


def arm_queue(arm: str) -> str:
    """The registered queue order pald runs with in `arm` (FIFO unless ARM_QUEUE says otherwise)."""
    return ARM_QUEUE.get(arm, "fifo")


@dataclass(frozen=True)
class PaldTimes:
    """pald's policy durations in a replay, wall seconds: how long a multi-node job waits for one
    leaf switch (`[policy] rack_wait_s`), a held job before it reserves (`reserve_after_s`) and
    the most its waits may add (`starvation_bound_s`)."""

    rack_wait_s: float
    reserve_after_s: float
    starvation_bound_s: float


def pald_times(scale: float) -> PaldTimes:
    """A site's defaults (`config.PolicyConfig`, in its seconds) compressed as the trace is: a
    held job waits as long in trace time as it would at a site. Why: pald reads its own clock,
    and unscaled, the default hour before a reservation would be 150 trace hours at 150x, so no held
    job would ever reserve where a site's does after an hour. In the replay's model the first 40
    jobs of every trace and workload-1 at 80 are placed the same either way; workload-3 at 80
    is not (docs/results/slurm/)."""
    site = PolicyConfig()
    return PaldTimes(rack_wait_s=site.rack_wait_s / scale, reserve_after_s=site.reserve_after_s / scale,
                     starvation_bound_s=site.starvation_bound_s / scale)


PALD_CYCLE_S = 0.3  # pald's cycle in the replay (wall seconds; the simulator's model uses the same)
# where in its cycle pald's read of Slurm stands (wall seconds after the tick): sinfo --json
# returns after 0.018 s and squeue --json after 0.039 s on an idle 16x4 lab (median of 40
# syncs), so squeue's record is about 0.03 s in; and how old that read is when the cycle
# decides, where a replay's releases do not say (the median release 0.13 s after the tick)
PALD_READ_S = 0.03
PALD_VIEW_AGE_S = 0.1
BF_INTERVAL_S = 1  # Slurm's backfill pass (wall seconds; the stock model's pass, sim.stock_slurm)
# how far apart the lab and the model may start a job and still count as running it alike: a
# Slurm pass and a pald cycle, twice (wall seconds; x the scale in trace seconds; replay.compare)
ALIKE_WITHIN_WALL_S = 2 * (BF_INTERVAL_S + PALD_CYCLE_S)
SCHEDULER_PARAMETERS = (f"batch_sched_delay=0,sched_min_interval=0,bf_interval={BF_INTERVAL_S},bf_resolution=1,"
                        "bf_continue,default_queue_depth=1000,bf_max_job_test=1000")


# The trace's first submission comes this long after one of Slurm's backfill passes, in every
# arm (`_pass_aligned_start`): the passes run on slurmctld's own clock, and a trace whose first
# jobs come in a burst waits for the first pass, so a phase left to chance moved an arm's avg JCT
# by several percent (workload-1, in the model: 0.995-1.038 of stock over six phases).
ALIGN_AFTER_PASS_S = 0.5
PROBE_JOB_NAME = "pass-probe"


class ReplayError(RuntimeError):
    """An arm could not be run (lab, pald or profiling failed, or jobs went missing)."""


@dataclass(frozen=True)
class LabShape:
    num_nodes: int = 16
    gpus_per_node: int = 4
    nodes_per_rack: int = 4

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"gpu{i:02d}" for i in range(1, self.num_nodes + 1))

    @property
    def hostlist(self) -> str:
        return f"gpu[01-{self.num_nodes:02d}]"

    def racks(self) -> dict[str, str]:
        return {n: f"leaf{i // self.nodes_per_rack + 1}" for i, n in enumerate(self.node_names)}

    def cluster(self) -> ClusterView:
        return ClusterView.from_layout([(n, self.gpus_per_node) for n in self.node_names], racks=self.racks())

    def topology_conf(self) -> str:
        leaves: dict[str, list[str]] = {}
        for node, leaf in self.racks().items():
            leaves.setdefault(leaf, []).append(node)
        lines = [f"SwitchName={leaf} Nodes={','.join(nodes)}" for leaf, nodes in leaves.items()]
        lines.append(f"SwitchName=spine Switches={','.join(leaves)}")
        return "\n".join(lines) + "\n"


@dataclass
class ArmRun:
    arm: str
    jobs: list[JobResult]
    summary: ArmSummary
    lab_dir: Path
    payload_vs_slurm_s: float  # largest |Slurm's run time - the payload's own| (wall seconds)
    launch_wall_s: float  # Slurm's own cost per job: its start -> payload running, + payload end -> Slurm's end
    release_wall_s: float | None = None  # pald arms: a held job's GPUs free -> pald releases it (median)
    slurm_pass: PassClock | None = None  # the lab's backfill passes (phase vs the first submission, period)
    pald_cycle: PassClock | None = None  # pald arms: pald's cycle as it ran (`pald_clock`)

    def measured_inputs(self) -> dict[str, float | list[float] | None]:
        """What the prediction takes from this run (`predict.predict_measured`), as the replay's
        JSON rows name it (wall seconds; `release_wall_s` is reported, the model runs pald's
        cycle instead)."""
        clock, cycle = self.slurm_pass, self.pald_cycle
        return {"launch_wall_s": self.launch_wall_s, "release_wall_s": self.release_wall_s,
                "slurm_pass_phase_s": clock.phase_s if clock else None,
                "slurm_pass_period_s": clock.period_s if clock else None,
                "slurm_pass_offset_p10_p90_s": ([clock.jitter_quantile(0.1), clock.jitter_quantile(0.9)]
                                                if clock and clock.jitter_s else None),
                "pald_cycle_phase_s": cycle.phase_s if cycle else None}


def _palctl(config: Path, *args: str, timeout: float = 300.0) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "pal_slurm.cli", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=str(REPO))
    if proc.returncode != 0:
        raise ReplayError(f"palctl {' '.join(args)} failed: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


def _pald_config(path: Path, work: Path, lab: LabCluster, placement: str, shape: LabShape, seed: int,
                 queue: str = "fifo", times: PaldTimes | None = None) -> Path:
    """pald's config in an arm; `times`: its policy durations (default: a site's, uncompressed)."""
    times = times or pald_times(1.0)
    path.write_text(f"""
[store]
url = "sqlite:///{work}/pal.db"

[daemon]
socket = "{work}/pald.sock"
cycle_s = {PALD_CYCLE_S}
slurm_user = "root"
heartbeat_file = "{work}/heartbeat"

[policy]
placement = "{placement}"
queue = "{queue}"
rack_wait_s = {times.rack_wait_s!r}
reserve_after_s = {times.reserve_after_s!r}
starvation_bound_s = {times.starvation_bound_s!r}

[slurm]
conf = "{lab.slurm_conf}"
topology_conf = "{lab.lab_dir}/etc/topology.conf"

[profiling]
backend = "replay"
replay_seed = {seed}
replay_cluster = "{shape.hostlist}x{shape.gpus_per_node}"
""")
    return path


def _start_arm_lab(work: Path, shape: LabShape, hook: bool) -> LabCluster:
    lab_dir = work / "lab"
    (lab_dir / "etc").mkdir(parents=True, exist_ok=True)
    (lab_dir / "etc" / "topology.conf").write_text(shape.topology_conf())
    extra = "\n".join([
        "TopologyPlugin=topology/tree",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={lab_dir}/jobcomp.txt",
        f"SchedulerParameters={SCHEDULER_PARAMETERS}",
        "OverTimeLimit=UNLIMITED",
        "MinJobAge=3600",
        # each backfill start in slurmctld's log (ctldlog.slurm_starts): Slurm 26.05 logs it only
        # under this flag, at the verbose level; before, at info, whatever the flags
        "DebugFlags=HetJob",
        "SlurmctldDebug=verbose",
    ])
    return start_lab(lab_dir, nodes=shape.num_nodes, gpus=shape.gpus_per_node, extra_conf=extra, timeout=120.0,
                     hook=str(REPO / "job_submit_lua" / "job_submit.lua") if hook else None,
                     env={"PAL_SOCKET": str(work / "pald.sock")} if hook else None)


def run_arm(plan: ReplayPlan, arm: str, work: Path, seed: int = 0, shape: LabShape = LabShape(),
            on_progress: Callable[[float], None] | None = None, slack_wall_s: float = 120.0) -> ArmRun:
    """Replay `plan` on a fresh lab under `arm` (see module docstring); the lab is stopped after."""
    if arm not in ARMS:
        raise ReplayError(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    placement = ARMS[arm]
    cluster = shape.cluster()
    slowdowns = gpu_profiles(cluster.size, seed)
    network = NetworkModel()
    specs, results = work / "specs", work / "results"
    specs.mkdir(exist_ok=True)
    results.mkdir(exist_ok=True)
    lab = _start_arm_lab(work, shape, hook=placement is not None)
    pald = None
    try:
        if placement is not None:
            config = _pald_config(work / "pal.toml", work, lab, placement, shape, seed, arm_queue(arm),
                                  pald_times(plan.scale))
            _palctl(config, "db", "upgrade")
            _palctl(config, "profile-nodes", "--local", "--backend", "replay", "--nodes", shape.hostlist,
                    "--gpus-per-node", str(shape.gpus_per_node), "--seed", str(seed))
            _palctl(config, "rank")
            pald = PaldProcess(config, work / "pald.sock", work / "pald.log").start(timeout=60.0)
        argv_payload = [sys.executable, "-m", "pal_lab.replay.payload"]
        for job in plan.jobs:
            (specs / f"{job.name}.json").write_text(json.dumps(payload_spec(job, cluster, slowdowns, network)))
        start_at = _pass_aligned_start(lab)
        submitted = _submit_all(lab, plan, specs, results, argv_payload, on_progress, start_at)
        (work / "submitted.json").write_text(json.dumps(submitted))  # kept for re-analysis
        comp = _wait_records(lab, plan, results, slack_wall_s, on_progress)
    finally:
        if pald is not None:
            pald.stop()
        lab.stop()
    return measure_arm(plan, arm, work, cluster.size, comp)


def arm_submissions(work: Path) -> dict[str, float]:
    """{job name: epoch seconds it was submitted} as an arm's run kept them in its work dir."""
    submitted: dict[str, float] = json.loads((Path(work) / "submitted.json").read_text())
    return submitted


def arm_ctld_log(work: Path) -> str:
    """slurmctld's log of an arm's lab ("" when it left none)."""
    path = Path(work) / "lab" / "log" / "slurmctld.log"
    return path.read_text(errors="replace") if path.exists() else ""


def measure_arm(plan: ReplayPlan, arm: str, work: Path, cluster_gpus: int,
                comp: list[CompRecord] | None = None) -> ArmRun:
    """An arm's results from what its run left in `work` (the payloads' records, submitted.json,
    slurmctld's log, Slurm's jobcomp file, pald's store): `run_arm` ends with it, and a kept
    work dir can be measured again (benchmarks/slurm_replay.py --predict-only)."""
    work = Path(work)
    lab_dir = work / "lab"
    if comp is None:
        path = lab_dir / "jobcomp.txt"
        comp = parse_jobcomp(path.read_text()) if path.exists() else []
    payloads: dict[str, PayloadRecord] = {p.stem: json.loads(p.read_text()) for p in (work / "results").glob("*.json")}
    submitted = arm_submissions(work)
    try:
        jobs = job_results(plan, comp, payloads, submitted)
    except ReplayIncomplete as exc:
        raise ReplayError(f"{arm}: {exc}") from None
    by_name = {r.name: r for r in comp}
    diff = max(abs((by_name[n].end - by_name[n].start) - (p["end"] - p["start"])) for n, p in payloads.items()
               if n in by_name)
    releases = _pald_releases(work / "pal.db") if ARMS[arm] is not None else []
    log = arm_ctld_log(work)
    starts = slurm_starts(log)
    t0 = min(submitted.values()) if submitted else None
    return ArmRun(arm, jobs, summarise(plan.trace, arm, jobs, cluster_gpus), lab_dir, diff,
                  launch_cost(payloads, comp, starts, slurm_ends(log)),
                  release_latency(releases, payloads),
                  pass_clock(starts, t0, BF_INTERVAL_S) if t0 is not None else None,
                  pald_clock([at for at, _ in releases], t0, PALD_CYCLE_S)
                  if t0 is not None and ARMS[arm] is not None else None)


def _pald_releases(db: Path) -> list[tuple[float, dict[str, tuple[int, ...]]]]:
    """(epoch seconds, node -> slots) of every held job pald released (its store's decisions)."""
    from datetime import timezone

    from pal_slurm.model import DecisionKind
    from pal_slurm.store.bootstrap import open_store

    store = open_store(f"sqlite:///{db}", upgrade=False)
    out = []
    for d in store.decisions(limit=1_000_000):
        if d.kind is DecisionKind.PLACE and d.job_id.isdigit():  # the cycle's (a Slurm job id), not the hook's
            at = d.created_at if d.created_at.tzinfo else d.created_at.replace(tzinfo=timezone.utc)
            out.append((at.timestamp(), dict(d.nodes)))
    return out


def pald_clock(releases: list[float], t0: float, cycle_s: float) -> PassClock:
    """pald's cycle in an arm, against `t0` (the first submission, epoch seconds): its period
    `cycle_s`, the phase of the instants it released held jobs (`releases`, epoch seconds; the
    circular mean of their phases), and how old its view was then. pald cycles at the
    multiples of `cycle_s` on the epoch clock (`daemon.cycle.until_next_tick`): each cycle
    reads Slurm first (squeue's record is `PALD_READ_S` into the cycle) and releases a tenth
    of a second after its tick (three 160-job replays: median 0.13 s over 277 releases,
    0.05-0.29 s), so a job that ends between the read and the release is
    still running to that cycle (`view_age_s`: the model's pald decides at the phase, on a read
    that old; without it the model saw ends up to 0.1 wall s sooner than pald could, 15 trace s
    at 150, and released held jobs a Slurm pass sooner than the lab). Without releases: the
    multiples of `cycle_s` themselves, with the typical age (`PALD_VIEW_AGE_S`)."""
    tick = (-t0) % cycle_s  # the epoch multiples, against t0
    if not releases:
        return PassClock(phase_s=(tick + PALD_VIEW_AGE_S + PALD_READ_S) % cycle_s, period_s=cycle_s,
                         view_age_s=PALD_VIEW_AGE_S)
    angles = [2.0 * math.pi * (((at - t0) % cycle_s) / cycle_s) for at in releases]
    mean = math.atan2(sum(math.sin(a) for a in angles), sum(math.cos(a) for a in angles))
    phase = (mean / (2.0 * math.pi) * cycle_s) % cycle_s
    age = max(0.0, (phase - tick) % cycle_s - PALD_READ_S)
    return PassClock(phase_s=phase, period_s=cycle_s, view_age_s=age)


def release_latency(releases: Sequence[tuple[float, Mapping[str, Sequence[int]]]],
                    payloads: Mapping[str, PayloadRecord]) -> float | None:
    """Wall seconds from a held job's GPUs coming free to pald releasing it onto them: per
    release, its time minus the latest end, before it, of a payload on any of its GPUs (releases
    onto GPUs nobody used before are left out); the median over releases, None without any.
    Slurm's and pald's latency in one figure (Slurm shows the end, pald's next sync and cycle
    see it), a held job's wait that stock Slurm does not have; the prediction's pald cycle."""
    waits = []
    for at, nodes in releases:
        mine = {(n, s) for n, slots in nodes.items() for s in slots}
        ends = [p["end"] for p in payloads.values() if p["end"] <= at
                and any((n, s) in mine for n, slots in p["placement"].items() for s in slots)]
        if ends:
            waits.append(at - max(ends))
    waits.sort()
    return waits[len(waits) // 2] if waits else None


def launch_cost(payloads: Mapping[str, PayloadRecord], comp: Sequence[CompRecord], started: dict[int, tuple[float, str]],
                ended: dict[int, float] | None = None) -> float:
    """Wall seconds Slurm adds to a job once a scheduling pass starts it: the median, over the
    jobs, of Slurm's start (slurmctld's log, `ctldlog.slurm_starts`) -> the payload running
    (step launch, interpreter start), plus the median of Slurm's end - the payload's end
    (teardown: until slurmctld completes the job, its log's `ctldlog.slurm_ends`, to the ms).
    Without the log's ends, Slurm's whole-second records +0.5 s stand in (their rounding is a
    mean of +-0.5 s a job: on 40 jobs it moved the figure by up to 0.14 s, 80 trace s at 600x).
    The wait for the pass itself is not in it: the prediction models the passes
    (sim.stock_slurm, replay.pald_model). Medians over many jobs, not one job's time, so a
    moment of host load does not set it."""
    by_name = {r.name: r for r in comp}
    lags = sorted(p["start"] - started[by_name[n].job_id][0] for n, p in payloads.items()
                  if n in by_name and by_name[n].job_id in started)
    if not lags:
        raise ReplayError("slurmctld's log names no job start (LogTimeFormat must keep milliseconds)")
    ended = ended or {}
    exact = sorted(ended[by_name[n].job_id] - p["end"] for n, p in payloads.items()
                   if n in by_name and by_name[n].job_id in ended)
    if exact:
        tail = exact[len(exact) // 2]
    else:
        rounded = [by_name[n].end + 0.5 - p["end"] for n, p in payloads.items() if n in by_name]
        tail = sum(rounded) / len(rounded)
    return max(0.0, lags[len(lags) // 2]) + max(0.0, tail)


def _pass_aligned_start(lab: LabCluster, timeout_s: float = 30.0, tries: int = 3) -> float | None:
    """The monotonic instant, ALIGN_AFTER_PASS_S after a backfill pass of this lab, at which the
    trace's first job goes in: a probe job (one GPU, `true`) is started by a pass, its start in
    slurmctld's log says when passes run, and the instant is the first such phase at least
    0.2 s ahead. None (the trace starts at once) when no pass started a probe within
    `timeout_s` in `tries` tries: the main scheduler's start is no pass. The probe's record is
    no replayed job's (results join by job name)."""
    for _ in range(tries):
        job_id = lab.sbatch(f"--job-name={PROBE_JOB_NAME}", "-N", "1", "--gres=gpu:1", "--time=1", wrap="true")
        deadline = time.monotonic() + timeout_s
        started = None
        while started is None and time.monotonic() < deadline:
            started = slurm_starts(lab.log()).get(job_id)
            if started is None:
                time.sleep(0.05)
        if started is None:
            return None
        lab.wait_job(job_id, timeout=timeout_s)
        at, by = started
        if by != "backfill":
            continue
        pass_mono = time.monotonic() - (time.time() - at)
        ahead = time.monotonic() + 0.2 - (pass_mono + ALIGN_AFTER_PASS_S)
        return pass_mono + ALIGN_AFTER_PASS_S + max(0, math.ceil(ahead / BF_INTERVAL_S)) * BF_INTERVAL_S
    return None


def _submit_all(lab: LabCluster, plan: ReplayPlan, specs: Path, results: Path, argv_payload: list[str],
                on_progress: Callable[[float], None] | None, start_at: float | None = None) -> dict[str, float]:
    """Submit each job at its compressed time from `start_at` (monotonic; None: now); returns
    {job name: epoch seconds of its sbatch}."""
    if start_at is not None and start_at > time.monotonic():
        time.sleep(start_at - time.monotonic())
    t0 = time.monotonic()
    submitted = {}
    span = max(plan.span_wall, 1e-9)
    for job in plan.jobs:
        delay = t0 + job.submit_wall - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        cmd = " ".join([*argv_payload, str(specs / f"{job.name}.json"), str(results)])
        submitted[job.name] = time.time()
        lab.sbatch(*job.sbatch_args(), f"--chdir={REPO}", wrap=cmd)
        if on_progress:
            on_progress(0.5 * min(1.0, job.submit_wall / span))
    return submitted


def _wait_records(lab: LabCluster, plan: ReplayPlan, results: Path, slack_wall_s: float,
                  on_progress: Callable[[float], None] | None) -> list[CompRecord]:
    """Until Slurm recorded every job (or the plan's longest possible wait has passed)."""
    path = lab.lab_dir / "jobcomp.txt"
    budget = sum(j.limit_minutes * 60.0 for j in plan.jobs) + slack_wall_s  # jobs back to back
    deadline = time.monotonic() + budget
    names = {j.name for j in plan.jobs}
    comp = []
    while time.monotonic() < deadline:
        comp = parse_jobcomp(path.read_text()) if path.exists() else []
        done = {r.name for r in comp} & names
        if on_progress:
            on_progress(0.5 + 0.5 * len(done) / len(names))
        if done == names:
            # the payload writes its record just before exiting: give the last ones a moment
            if all((results / f"{n}.json").exists() for n in names):
                return comp
        time.sleep(0.5)
    return comp
