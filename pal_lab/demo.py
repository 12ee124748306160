"""`make demo`: pal-slurm's main job on one machine, start to finish, then clean up.

1. a real Slurm lab cluster (slurmctld + 4 slurmd, 4 emulated GPUs each, per-slot GRES) with
   the real job_submit.lua hook;
2. pald on the embedded SQLite store;
3. `palctl profile-nodes --backend replay` (each GPU replays a real Longhorn V100's measured
   profile), then `palctl rank`;
4. the same mixed workload twice: as plain Slurm jobs (stock placement) and with
   `--comment=pal:class=...` (PAL placement); a table of where each job ran and the slowdown
   its GPUs imply for its class;
5. a simulated comparison of PAL and the baselines on a bundled trace, with its plot;
6. stops everything it started, by process id.

Run from a source checkout (it uses scripts/slurm-lab.sh): `python3 -m pal_lab.demo`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from pal_slurm.config import PolicyConfig
from pal_slurm.daemon.client import PaldClient
from pal_slurm.model.classes import AppClassMap
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_lab.lab import LabCluster, missing_binaries, start_lab, stop_lab_dir
from pal_slurm.ranking.snapshot import RankingSnapshot

# (name, application, GPUs per node, seconds): a mixed workload, more GPUs than the cluster has.
WORKLOAD = [
    ("resnet-a", "resnet50", 4, 6),
    ("bert-a", "bert", 2, 6),
    ("vgg-a", "vgg19", 1, 6),
    ("resnet-b", "resnet50", 2, 6),
    ("pagerank", "pagerank", 1, 6),
    ("resnet-c", "resnet50", 2, 6),
    ("gpt2", "gpt2", 4, 6),
    ("resnet-d", "resnet50", 1, 6),
    ("vgg-b", "vgg19", 2, 6),
    ("resnet-e", "resnet50", 4, 6),
]


class DemoError(RuntimeError):
    pass


def step(msg: str) -> float:
    print(f"\n== {msg}", flush=True)
    return time.monotonic()


def done(t0: float) -> None:
    print(f"   ({time.monotonic() - t0:.1f} s)", flush=True)


def palctl(env: Mapping[str, str], *args: str, echo: bool = True) -> str:
    p = subprocess.run([sys.executable, "-c", "from pal_slurm.cli.main import main; main()", *args],
                       env=env, capture_output=True, text=True, cwd=str(REPO))
    if p.returncode != 0:
        raise DemoError(f"palctl {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    if echo:
        print(p.stdout.rstrip())
    return p.stdout


def run_workload(lab: LabCluster, pal: bool) -> dict[str, tuple[str, str]]:
    """Submit the workload in one burst; {job name: (node, CUDA_VISIBLE_DEVICES)}."""
    ids = {}
    for name, app, gpus, secs in WORKLOAD:
        args = [f"--gres=gpu:{gpus}", f"--job-name={name}"]
        if pal:
            args.append(f"--comment=pal:class={app}")
        ids[name] = lab.sbatch(*args, wrap=f'echo "NODE=$SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES"; sleep {secs}')
    out = {}
    for name, job in ids.items():
        state = lab.wait_job(job, timeout=300)
        if state != "COMPLETED":
            raise DemoError(f"job {name} ({job}) ended {state}: {lab.job_output(job)}")
        text = lab.job_output(job)
        m = re.search(r"NODE=(\S+) CVD=(\S+)", text)
        if not m:
            raise DemoError(f"job {name} printed no placement: {text!r}")
        out[name] = (m.group(1), m.group(2))
    return out


def slowdown(snapshot: RankingSnapshot, perf_class: str, node: str, cvd: str) -> float:
    scores = {(e.node, e.slot): e.score for e in snapshot.entries if e.perf_class == perf_class}
    return max(scores.get((node, int(s)), 1.0) for s in cvd.split(","))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pal-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(REPO / ".pal-demo"), help="work directory (wiped first)")
    ap.add_argument("--trace", default="workload-1", help="bundled trace for the simulated comparison")
    args = ap.parse_args(argv)
    work = Path(args.dir).resolve()
    started = time.monotonic()
    missing = missing_binaries()
    if missing:
        print(f"demo: missing {', '.join(missing)}: run `make deps` (or scripts/install-deps.sh) as root",
              file=sys.stderr)
        return 1
    stop_lab_dir(work / "lab")  # a previous demo that was interrupted
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lab = pald = None
    try:
        t = step("1. starting a Slurm lab cluster: 4 nodes x 4 emulated GPUs, per-slot GRES, PAL hook")
        sock = work / "pald.sock"
        lab = start_lab(work / "lab", hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                        env={"PAL_SOCKET": str(sock)})
        print(f"   nodes {', '.join(lab.nodes)}; SLURM_CONF={lab.slurm_conf}")
        done(t)

        t = step("2. starting pald on the embedded SQLite store")
        db = f"sqlite:///{work}/pal.db"
        cfg = write_config(work / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf,
                           heartbeat=work / "pald.heartbeat", cycle_s=0.5,
                           placement=PolicyConfig().placement,  # what a site gets by default
                           extra=f'\n[profiling]\nbackend = "replay"\nspool_dir = "{work}/spool"\n')
        pald = PaldProcess(cfg, sock, work / "pald.log").start()
        assert pald.proc is not None, "start() runs it"
        print(f"   pald pid {pald.proc.pid}, socket {sock}")
        done(t)
        env = {**os.environ, "PAL_CONFIG": str(cfg), "SLURM_CONF": lab.slurm_conf,
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}

        t = step("3. profiling every GPU (replay backend: real Longhorn V100 profiles) and ranking")
        palctl(env, "profile-nodes", "--nodes", "gpu[01-04]", "--backend", "replay")
        palctl(env, "rank")
        palctl(env, "rankings", "--class", "A")
        reply = PaldClient(str(sock)).reload()
        print(f"   pald now serves ranking v{reply.rank}")
        done(t)
        from pal_slurm.store.bootstrap import open_store

        repo = open_store(db)
        snapshot = repo.latest_ranking()
        repo.close()
        if snapshot is None:
            raise DemoError("palctl rank stored no ranking")

        t = step("4a. the workload as plain Slurm jobs (stock placement)")
        stock = run_workload(lab, pal=False)
        lab.wait_idle()
        done(t)
        t = step("4b. the same workload with --comment=pal:class=<app> (PAL placement)")
        pal = run_workload(lab, pal=True)
        done(t)

        print("\n   job        class GPUs  PAL chose              slowdown | stock Slurm chose      slowdown")
        tot_pal = tot_stock = 0.0
        for name, app, gpus, _secs in WORKLOAD:
            cls = AppClassMap().class_of(app)  # the default app -> class map
            pn, pc = pal[name]
            sn, sc = stock[name]
            sp, ss = slowdown(snapshot, cls, pn, pc), slowdown(snapshot, cls, sn, sc)
            tot_pal += sp * gpus
            tot_stock += ss * gpus
            print(f"   {name:10s} {cls:5s} {gpus:4d}  {pn + ':' + pc:20s} {sp:8.3f} | {sn + ':' + sc:20s} {ss:8.3f}")
        n = sum(g for *_x, g, _s in [(w[0], w[1], w[2], w[3]) for w in WORKLOAD])
        print(f"   GPU-weighted mean slowdown: PAL {tot_pal / n:.3f}, stock Slurm {tot_stock / n:.3f} "
              f"(1.0 = a median GPU for the job's class; a synchronous job runs at its slowest GPU)")

        t = step(f"5. simulated comparison on the bundled trace {args.trace} (compat mode, 16x4 GPUs)")
        palctl(env, "simulate", "--trace", args.trace, "--policies", "pal,pmfirst,packed-sticky,random-sticky,firstfit",
               "--plots", str(work / "plots"), "--output", str(work / "simulate.json"))
        print(f"   plots: {work / 'plots'}")
        done(t)
    except DemoError as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        t = step("6. stopping everything this demo started (by process id)")
        if pald is not None:
            pald.stop()
        if lab is not None:
            lab.stop()
        done(t)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s; files in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
