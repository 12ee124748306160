"""A storm of PAL submissions with hostile ones among them, on a real lab: one user's job text
must not stall pald or slurmctld's hook for anyone else.

Used by tests/integration/test_hostile_storm.py (a short storm that asserts the counts) and
benchmarks/hostile_storm.py (the full-size storm that prints the figures). The lab is the
project's own: slurmctld + 4 slurmd x 4 emulated GPUs, the real job_submit.lua, the real pald
on SQLite.

Submissions go from one thread, in order, so the hook's log lines (one per PAL submission, in
the order slurmctld ran the hook: it runs under slurmctld's job write lock) map one to one onto
the submissions. Each ordinary submission must get pald's answer in time: its hook line is
`place` or `defer`, never `pass reason=timeout` or `pald-down`. Hostile ones must be answered
too (a pass with a reason, or a placement), and they are allowed to be rejected by Slurm after
the hook (a node list naming nodes that do not exist). While the storm runs a watcher reads
pald's heartbeat file and its RSS.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from pal_slurm.daemon.failsafe import heartbeat_age
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_lab.lab import LabCluster, start_lab
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

ORDINARY_WRAP = "true"
_HOOK_LINE = re.compile(r"pal: (place|defer|pass)\b(.*)$")
_REASON = re.compile(r"\breason=(\S+)")
_RUN_MS = re.compile(r"\brun_ms=([0-9.]+)")
NOT_ANSWERED = ("timeout", "pald-down")


def _fill(item: Callable[[int], str], size: int) -> str:
    """item(0),item(1),... comma-joined, `size` bytes at most (names no lab node)."""
    items, total, i = [], 0, 0
    while total + len(item(i)) + 1 <= size:
        items.append(item(i))
        total += len(item(i)) + 1
        i += 1
    return ",".join(items)


def _ranges_exclude(size: int) -> str:
    """A --exclude of distinct bracketed ranges."""
    return _fill(lambda i: f"x{i}[{i}-{i + 99999}]", size)


def _names_exclude(size: int) -> str:
    """A --exclude of node names written one by one."""
    return _fill(lambda i: f"n{i:06d}", size)


# name -> the sbatch arguments of one hostile PAL submission. The node names are none of the
# lab's, so Slurm rejects most after the hook; sbatch itself refuses some before it (the GRES
# index list, a --nodelist of a million names): those never reach the hook.
HOSTILE: dict[str, list[str]] = {
    "exclude-10x-n[0-99999]": ["--exclude=" + ",".join(["n[0-99999]"] * 10)],
    # Two bracket groups: small here, because Slurm itself expands them after the hook, under
    # its locks (`a[0-999]b[0-1999]` stalls a stock slurmctld, no hook at all, for over 10 s).
    "exclude-a[0-9]b[0-199]": ["--exclude=a[0-9]b[0-199]"],
    # The longest lists the hook reads by default (PAL_MAX_JOB_LIST_BYTES, 8 KiB) ...
    "exclude-8KiB-ranges": ["--exclude=" + _ranges_exclude(8 * 1024)],
    "exclude-8KiB-names": ["--exclude=" + _names_exclude(8 * 1024)],
    # ... and longer ones, which it passes unread.
    "exclude-60KiB-ranges": ["--exclude=" + _ranges_exclude(60 * 1024)],
    "exclude-64KiB-names": ["--exclude=" + _names_exclude(64 * 1024)],
    "nodelist-10x-n[0-99999]": ["--nodelist=" + ",".join(["n[0-99999]"] * 10)],
    "constraint-600-deep": ["--constraint=" + "(" * 600 + "f1" + ")" * 600],
    "constraint-16KiB": ["--constraint=" + "&".join(["f1"] * 5000)],
    "gres-idx-3M": ["--gres=gpu:a100:1(IDX:0-2999999)"],
}


def ordinary_args(i: int) -> list[str]:
    """1 or 2 GPUs, half of them in pald's default mode (placed or deferred), half bert."""
    gres = "--gres=gpu:2" if i % 5 == 0 else "--gres=gpu:1"
    return [gres, "--comment=pal:class=" + ("resnet" if i % 2 else "bert")]


@dataclass
class Submission:
    kind: str  # "ordinary" or a HOSTILE name
    rc: int
    wall_s: float
    job_id: int | None
    hook_line: str | None  # the hook's decision line for it (None: it never reached the hook)


@dataclass
class StormResult:
    submissions: list[Submission]
    heartbeat_max_age_s: float
    rss_start_mb: float
    rss_max_mb: float
    wall_s: float
    heartbeat_ages: list[tuple[float, float]]  # (monotonic time, heartbeat age) as watched
    pald_log_bytes: int = 0
    per_kind: dict[str, list[tuple[str, str | None, float | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """(decision, pass reason, run_ms) of each submission, by kind."""
        for sub in self.submissions:
            line = sub.hook_line or ""
            m = _HOOK_LINE.search(line)
            decision = m.group(1) if m else "no-hook"
            reason = _REASON.search(line)
            run_ms = _RUN_MS.search(line)
            self.per_kind.setdefault(sub.kind, []).append(
                (decision, reason.group(1) if reason else None, float(run_ms.group(1)) if run_ms else None))

    def ordinary_not_answered(self) -> int:
        """Ordinary submissions the hook passed because pald did not answer in time."""
        return sum(1 for d, r, _ in self.per_kind.get("ordinary", []) if d == "pass" and r in NOT_ANSWERED)

    def ordinary_placed_or_deferred(self) -> int:
        return sum(1 for d, _, _ in self.per_kind.get("ordinary", []) if d in ("place", "defer"))

    def hostile_not_answered(self) -> int:
        return sum(1 for kind, rows in self.per_kind.items() if kind != "ordinary"
                   for d, r, _ in rows if d == "pass" and r in NOT_ANSWERED)

    def run_ms(self, kind: str) -> list[float]:
        return [ms for _, _, ms in self.per_kind.get(kind, []) if ms is not None]

    def ordinary_rejected(self) -> int:
        return sum(1 for s in self.submissions if s.kind == "ordinary" and s.rc != 0)


@dataclass
class StormRig:
    lab: LabCluster
    pald: PaldProcess
    heartbeat: Path
    root: Path

    def stop(self) -> None:
        self.pald.stop()
        self.lab.stop()


def start_storm_rig(root: Path, placement: str = "pal") -> StormRig:
    """A lab with the real hook and pald (SQLite, a ranking for every GPU and class)."""
    sock, db, heartbeat = root / "pald.sock", f"sqlite:///{root}/pal.db", root / "hb"
    lab = start_lab(root / "lab", hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                    env={"PAL_SOCKET": str(sock)})
    try:
        store = open_store(db)
        store.write_ranking("optimal", [RankingEntry(n, s, c, 1.0 + 0.1 * s, 1.0 + 0.1 * s, 0)
                                        for n in lab.nodes for s in range(4) for c in "ABCD"])
        store.close()
        cfg = write_config(root / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf,
                           heartbeat=heartbeat, placement=placement)
        pald = PaldProcess(cfg, sock, root / "pald.log").start()
    except Exception:
        lab.stop()
        raise
    return StormRig(lab, pald, heartbeat, root)


def plan(n_ordinary: int, n_hostile: int) -> list[str]:
    """The kinds in submission order: hostile ones spread evenly among the ordinary ones,
    cycling through HOSTILE."""
    names = list(HOSTILE)
    kinds: list[str] = []
    every = max(1, n_ordinary // max(1, n_hostile))
    h = 0
    for i in range(n_ordinary):
        kinds.append("ordinary")
        if h < n_hostile and (i + 1) % every == 0:
            kinds.append(names[h % len(names)])
            h += 1
    kinds.extend(names[k % len(names)] for k in range(h, n_hostile))
    return kinds


def run_storm(rig: StormRig, n_ordinary: int, n_hostile: int) -> StormResult:
    """Submit the plan from one thread; watch pald's heartbeat and RSS meanwhile."""
    proc = psutil.Process(rig.pald.proc.pid)  # type: ignore[union-attr]
    rss_start = proc.memory_info().rss / 2**20
    watch = {"age": 0.0, "rss": rss_start}
    ages: list[tuple[float, float]] = []
    done = threading.Event()

    def watcher() -> None:
        while not done.is_set():
            age = heartbeat_age(str(rig.heartbeat))
            if age is not None:
                watch["age"] = max(watch["age"], age)
                ages.append((time.monotonic(), age))
            watch["rss"] = max(watch["rss"], proc.memory_info().rss / 2**20)
            time.sleep(0.2)

    ctld_log = open(rig.lab.lab_dir / "log" / "slurmctld.log", "rb")
    ctld_log.seek(0, 2)
    pald_log_offset = rig.pald.log.stat().st_size
    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    subs: list[Submission] = []
    t0 = time.monotonic()
    ordinary_index = 0
    for kind in plan(n_ordinary, n_hostile):
        if kind == "ordinary":
            args = ordinary_args(ordinary_index)
            ordinary_index += 1
        else:
            args = [*HOSTILE[kind], "--gres=gpu:1", "--comment=pal:class=resnet"]
            if kind == "gres-idx-3M":
                args = [*HOSTILE[kind], "--comment=pal:class=resnet"]
        argv = ["sbatch", "--parsable", "--output=/dev/null", *args, "--wrap", ORDINARY_WRAP]
        s0 = time.monotonic()
        p = subprocess.run(argv, env=rig.lab.client_env(), capture_output=True, text=True,
                           errors="replace", cwd="/tmp")
        job_id = int(p.stdout.strip().split(";")[0]) if p.returncode == 0 and p.stdout.strip() else None
        wall_s = time.monotonic() - s0
        # The hook ran (and logged) before slurmctld answered sbatch: its line, if any, is in
        # the log now. sbatch refuses some hostile texts itself, and then there is none.
        lines = [ln for ln in ctld_log.read().decode(errors="replace").splitlines() if _HOOK_LINE.search(ln)]
        subs.append(Submission(kind, p.returncode, wall_s, job_id, lines[-1] if lines else None))
    wall = time.monotonic() - t0
    time.sleep(1.0)  # a heartbeat after the storm
    done.set()
    thread.join()
    ctld_log.close()
    return StormResult(subs, watch["age"], rss_start, watch["rss"], wall, ages,
                       pald_log_bytes=rig.pald.log.stat().st_size - pald_log_offset)


def settle(rig: StormRig, job_ids: list[int], timeout_s: float) -> dict[str, int]:
    """Wait until none of `job_ids` is pending or running (or the timeout); count how they
    ended (squeue --json with every state: completed jobs stay MinJobAge) and the drained
    nodes."""
    wanted = set(job_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = {j.job_id: j for j in rig.lab.reader.jobs() if j.job_id in wanted}
        live = [j for j in jobs.values() if j.state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
        if not live or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    states: dict[str, int] = {}
    for job_id in wanted:
        state = jobs[job_id].state if job_id in jobs else "LOST"
        states[state] = states.get(state, 0) + 1
    states["drained_nodes"] = sum(1 for n in rig.lab.reader.nodes()
                                  if any("DRAIN" in f.upper() for f in n.state_flags))
    return states


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100 * len(v)))]
