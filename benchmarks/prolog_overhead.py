#!/usr/bin/env python3
"""Wall time of one `sbin/pal-prolog` run, as slurmd would start it (a fresh Python process).

Cases (replay backend, so no GPU is needed; the figures are the prolog's own cost, not a
benchmark's measuring time, which is [profiling] duration_s on top):
  store-up     a migrated SQLite store: measure, store, done
  store-down   the store URL points at a closed port: measure, fail to store, spool
  spool-drain  store up again with N queued samples waiting: store, then drain the spool
Each case runs --n times; prints min / median / p95 in milliseconds.

Usage: python3 benchmarks/prolog_overhead.py [--n 20] [--gpus 4]
"""

from __future__ import annotations

import argparse
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
from pal_slurm.bench.replay import ReplayBackend  # noqa: E402
from pal_slurm.store import open_store  # noqa: E402


def run_once(env: dict) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, str(REPO / "sbin" / "pal-prolog")], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"prolog exited {res.returncode}: {res.stderr}")
    return dt * 1000


def summary(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"{name:<12} n={len(ms):<3} min {ms[0]:7.1f} ms  median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--queued", type=int, default=200, help="samples waiting in the spool (spool-drain case)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        url = f"sqlite:///{tmp / 'pal.db'}"
        open_store(url).close()  # migrate once, as pald/palctl would
        (tmp / "spool").mkdir()
        conf = tmp / "pal.toml"
        base = dict(os.environ, PYTHONPATH=str(REPO), PAL_CONFIG=str(conf), SLURMD_NODENAME="gpu01",
                    CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(args.gpus)))

        def configure(store_url: str) -> None:
            conf.write_text(f'[store]\nurl = "{store_url}"\n[profiling]\nbackend = "replay"\n'
                            f'duration_s = 0.0\nspool_dir = "{tmp / "spool"}"\n')

        print(f"pal-prolog, replay backend, {args.gpus} GPU(s) per job, {os.cpu_count()} CPU(s)")
        configure(url)
        up = [run_once(dict(base, SLURM_JOB_ID=str(1000 + i))) for i in range(args.n)]
        print(summary("store-up", up))
        configure("postgresql://pal@127.0.0.1:1/pal")
        down = [run_once(dict(base, SLURM_JOB_ID=str(2000 + i))) for i in range(args.n)]
        print(summary("store-down", down))
        configure(url)
        drain = []
        for i in range(args.n):
            spool.append(tmp / "spool", ReplayBackend(seed=i).sample(
                [GpuTarget("gpu02", s % 4) for s in range(args.queued)], "A"))
            drain.append(run_once(dict(base, SLURM_JOB_ID=str(3000 + i))))
            assert spool.pending(tmp / "spool") == 0
        print(summary("spool-drain", drain) + f"  ({args.queued} queued samples each)")
        no_gpu = {k: v for k, v in base.items() if k != "CUDA_VISIBLE_DEVICES"}
        floor = [run_once(dict(no_gpu, SLURM_JOB_ID="")) for _ in range(max(3, args.n // 4))]
        print(summary("no-gpus", floor) + "  (interpreter start + imports; a job without GPUs)")


if __name__ == "__main__":
    main()
