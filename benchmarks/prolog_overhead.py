#!/usr/bin/env python3
"""Wall time of one `sbin/pal-prolog` run, as slurmd would start it (a fresh Python process).

No lab needed: the prolog runs against a temporary spool/state directory, a SQLite store and
stand-in `sinfo`/`squeue` commands (shell scripts printing a Slurm 22.05 version and the
job's `squeue --json` record: the job holds GPUs 0..N-1 of node gpu01), replay backend, so no
GPU either; the figures are the prolog's own cost, not a backend's start or measuring time,
which are [profiling] duration_s and more on top. Cases:

  every-job    prolog_every_h = 0 (each GPU job measured, as without a budget): the baseline
  not-due      the default policy, the job's GPUs measured an hour ago: the due check only
  due          the default policy, nothing measured yet (the state file removed each run)
  store-down   every-job, the store URL points at a closed port: measure, fail, spool
  spool-drain  every-job, N queued samples waiting: store, then drain the spool
  python-start `python -c pass`: the interpreter's start, which no prolog can go below
  no-gpus      a job without GPUs (interpreter start, imports, the squeue read)

Prints p50 / p99 (nearest rank) / max in milliseconds per case, and not-due's p50 and p99
against every-job's, both from this one run.

--lab: the same every-job / due / not-due cases on a real Slurm lab (pal_lab.lab: one node,
typed GPUs), each run a real job (`sbatch -w gpu01 --gres=gpu:s0:1,...`) whose prolog slurmd
starts; a wrapper around sbin/pal-prolog records the prolog's wall time as slurmd runs it (with
slurmd's environment and the real `squeue`), plus one `date` call on each side.

Usage: python3 benchmarks/prolog_overhead.py [--n 30] [--fast-n 200] [--gpus 4] [--queued 200] [--lab]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pal_slurm.bench import spool  # noqa: E402
from pal_slurm.bench.base import GpuTarget  # noqa: E402
from pal_slurm.bench.measured import STATE_FILE, record_measured  # noqa: E402
from pal_slurm.bench.replay import ReplayBackend  # noqa: E402
from pal_slurm.bench.repository import StoreProfilingRepository  # noqa: E402
from pal_slurm.store import open_store  # noqa: E402

NODE = "gpu01"


def fake_slurm(bindir: Path, gpus: int) -> None:
    """`sinfo --version` and `squeue --json --jobs=N` as Slurm 22.05 prints them for job N,
    running on NODE with typed GPUs 0..gpus-1 (one GRES type per slot, as pal-slurm binds)."""
    slots = range(gpus)
    record = {"job_id": 0, "name": "wrap", "job_state": "RUNNING", "nodes": NODE, "node_count": 1,
              "job_resources": {"allocated_nodes": [{"nodename": NODE}]},
              "gres_detail": [",".join(f"gpu:s{s}:1(IDX:{s})" for s in slots)],
              "tres_per_node": ",".join(f"gres:gpu:s{s}:1" for s in slots),
              "start_time": int(time.time()), "end_time": int(time.time()) + 3600}
    head, tail = json.dumps({"jobs": [record]}).split('"job_id": 0', 1)
    bindir.mkdir()
    (bindir / "sinfo").write_text("#!/bin/sh\necho 'slurm 22.05.8'\n")
    (bindir / "squeue").write_text(
        "#!/bin/sh\nid=0\nfor a in \"$@\"; do case $a in --jobs=*) id=${a#--jobs=};; esac; done\n"
        f"printf '%s' '{head}\"job_id\": '\"$id\"'{tail}'\n")
    for tool in ("sinfo", "squeue"):
        (bindir / tool).chmod(0o755)


def run_once(env: dict[str, str], argv: list[str] | None = None) -> float:
    """Milliseconds of one fresh `python sbin/pal-prolog` (or `python *argv`)."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, *(argv or [str(REPO / "sbin" / "pal-prolog")])], env=env,
                         capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"prolog exited {res.returncode}: {res.stderr}")
    return dt * 1000


def pct(ms: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ms = sorted(ms)
    return ms[max(0, math.ceil(q * len(ms)) - 1)]


def summary(name: str, ms: list[float], note: str = "") -> str:
    return (f"{name:<12} n={len(ms):<4} p50 {statistics.median(ms):7.1f} ms  p99 {pct(ms, 0.99):7.1f} ms  "
            f"max {max(ms):7.1f} ms{note}")


def lab_runs(args: argparse.Namespace) -> None:
    """every-job / due / not-due with real jobs on a one-node lab; see the module docstring."""
    from pal_lab.lab import start_lab

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        url = f"sqlite:///{tmp / 'pal.db'}"
        open_store(url).close()
        sp = tmp / "spool"
        sp.mkdir(mode=0o700)
        conf, times = tmp / "pal.toml", tmp / "times"
        wrapper = tmp / "prolog.sh"
        wrapper.write_text(
            "#!/bin/sh\nt0=$(date +%s%N)\n"
            f"if [ -e {tmp / 'floor'} ]; then {sys.executable} -c pass; else\n"
            f"PYTHONPATH={REPO} PAL_CONFIG={conf} {sys.executable} {REPO / 'sbin' / 'pal-prolog'} 2>>{tmp / 'prolog.log'}; fi\n"
            f't1=$(date +%s%N)\necho "$SLURM_JOB_ID $t0 $t1" >> {times}\nexit 0\n')
        wrapper.chmod(0o755)
        lab = start_lab(tmp / "lab", prolog=wrapper, nodes=1, gpus=args.gpus)
        gres = ",".join(f"gpu:s{g}:1" for g in range(args.gpus))
        try:
            def job() -> str:
                out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "-w", NODE, f"--gres={gres}",
                                      "--wrap", "true"], env=lab.client_env(), capture_output=True, text=True,
                                     timeout=30, check=True).stdout.strip().split(";")[0]
                lab.wait_job(int(out), timeout=60)
                return out

            def case(every_h: float, n: int, fresh: bool) -> list[float]:
                conf.write_text(f'[store]\nurl = "{url}"\n[profiling]\nbackend = "replay"\nduration_s = 0.0\n'
                                f'spool_dir = "{sp}"\nprolog_every_h = {every_h}\n')
                ids = []
                for _ in range(n):
                    if fresh:
                        (sp / STATE_FILE).unlink(missing_ok=True)
                    ids.append(job())
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    rows = {r.split()[0]: r.split() for r in times.read_text().splitlines()} if times.exists() else {}
                    if all(i in rows for i in ids):
                        return [(int(rows[i][2]) - int(rows[i][1])) / 1e6 for i in ids]
                    time.sleep(0.2)
                raise SystemExit(f"prolog times missing; prolog.log: {(tmp / 'prolog.log').read_text()[-800:]}")

            print(f"pal-prolog on a Slurm lab (1 node, {args.gpus} typed GPUs per job), replay backend, "
                  f"{os.cpu_count()} CPU(s)")
            every = case(0.0, args.n, fresh=False)
            print(summary("every-job", every, "  (prolog_every_h = 0: the baseline)"))
            due = case(24.0, args.n, fresh=True)
            print(summary("due", due, "  (default policy, nothing measured yet)"))
            job()  # measures the GPUs: the jobs below find them measured
            fast = case(24.0, args.fast_n, fresh=False)
            print(summary("not-due", fast, "  (default policy, GPUs measured by the job before)"))
            print(f"{'':<12} not-due / every-job: p50 {statistics.median(fast) / statistics.median(every):.3f}  "
                  f"p99 {pct(fast, 0.99) / pct(every, 0.99):.3f}")
            (tmp / "floor").touch()
            floor = case(24.0, args.fast_n, fresh=False)
            print(summary("python-start", floor, "  (the prolog replaced by `python -c pass`: the floor)"))
        finally:
            lab.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30, help="runs of each measuring case")
    ap.add_argument("--fast-n", type=int, default=200, help="runs of the not-due case")
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--queued", type=int, default=200, help="samples waiting in the spool (spool-drain case)")
    ap.add_argument("--lab", action="store_true", help="real jobs on a Slurm lab (pal_lab.lab)")
    args = ap.parse_args()
    if args.lab:
        lab_runs(args)
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        url = f"sqlite:///{tmp / 'pal.db'}"
        open_store(url).close()  # migrate once, as pald/palctl would
        sp = tmp / "spool"
        sp.mkdir(mode=0o700)
        fake_slurm(tmp / "bin", args.gpus)
        conf = tmp / "pal.toml"
        gpus = list(range(args.gpus))
        base = dict(os.environ, PYTHONPATH=str(REPO), PAL_CONFIG=str(conf), SLURMD_NODENAME=NODE,
                    PATH=f"{tmp / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                    SLURM_JOB_GPUS=",".join(str(g) for g in gpus))

        def configure(store_url: str, every_h: float) -> None:
            conf.write_text(f'[store]\nurl = "{store_url}"\n[profiling]\nbackend = "replay"\n'
                            f'duration_s = 0.0\nspool_dir = "{sp}"\nprolog_every_h = {every_h}\n')

        def job(i: int) -> dict[str, str]:
            return dict(base, SLURM_JOB_ID=str(i))

        print(f"pal-prolog, replay backend, {args.gpus} GPU(s) per job, {os.cpu_count()} CPU(s)")
        configure(url, 0.0)
        every = [run_once(job(1000 + i)) for i in range(args.n)]
        stored = len(StoreProfilingRepository(open_store(url)).samples())
        assert stored == args.n * args.gpus, f"every-job stored {stored} samples, not {args.n * args.gpus}"
        print(summary("every-job", every, "  (prolog_every_h = 0: the baseline)"))

        configure(url, 24.0)
        due = []
        for i in range(args.n):
            (sp / STATE_FILE).unlink(missing_ok=True)
            due.append(run_once(job(2000 + i)))
            assert (sp / STATE_FILE).exists(), "the due job's GPUs were not noted measured"
        print(summary("due", due, "  (default policy, nothing measured yet)"))

        record_measured(sp, NODE, gpus, time.time() - 3600)
        stamp = (sp / STATE_FILE).read_bytes()
        fast = [run_once(job(3000 + i)) for i in range(args.fast_n)]
        assert (sp / STATE_FILE).read_bytes() == stamp, "a not-due job measured its GPUs"
        print(summary("not-due", fast, "  (default policy, GPUs measured an hour ago)"))
        print(f"{'':<12} not-due / every-job: p50 {statistics.median(fast) / statistics.median(every):.3f}  "
              f"p99 {pct(fast, 0.99) / pct(every, 0.99):.3f}")
        floor = [run_once(base, ["-c", "pass"]) for _ in range(args.fast_n)]
        print(summary("python-start", floor, "  (`python -c pass`: the interpreter's start, the floor)"))

        configure("postgresql://pal@127.0.0.1:1/pal", 0.0)
        down = [run_once(job(4000 + i)) for i in range(args.n)]
        print(summary("store-down", down))
        configure(url, 0.0)
        drain = []
        for i in range(args.n):
            spool.append(sp, ReplayBackend(seed=i).sample(
                [GpuTarget("gpu02", s % 4) for s in range(args.queued)], "A"))
            drain.append(run_once(job(5000 + i)))
            assert spool.pending(sp) == 0
        print(summary("spool-drain", drain, f"  ({args.queued} queued samples each)"))
        no_gpu = {k: v for k, v in base.items() if k != "SLURM_JOB_GPUS"}
        (tmp / "bin" / "squeue").write_text("#!/bin/sh\necho '{\"jobs\": []}'\n")
        floor = [run_once(dict(no_gpu, SLURM_JOB_ID="9")) for _ in range(max(3, args.n // 2))]
        print(summary("no-gpus", floor, "  (interpreter start, imports, the squeue read)"))


if __name__ == "__main__":
    main()
