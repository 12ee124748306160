"""docs/whatif.md's worked example: `palctl whatif` on the lab cluster with real Slurm accounting.

    python3 benchmarks/whatif_lab.py [--work DIR] [--draws 3] [--samples 2]

Starts the accounting lab (MariaDB, slurmdbd, slurmctld and 2 slurmd of 4 GPUs each), submits a
small mixed workload (1 to 8 GPUs, with comments naming classes, time limits of 1 or 2 minutes,
tens of seconds each, more GPUs asked at once than the lab has), waits for accounting to record
it, then runs what an administrator runs on a site, printing each command and its output:

    sacct -a -X --json > acct.json
    palctl import-variability 32gpu-variability.csv --map-to-nodes gpu[01-02] --rank
    palctl whatif --accounting acct.json --samples 2 --draws 3 --plots DIR

palctl reads the lab's `scontrol show config` (SLURM_CONF is the lab's). Needs Slurm, slurmdbd
and MariaDB (scripts/install-deps.sh); the lab is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.accounting_lab import start_accounting_lab  # noqa: E402
from pal_slurm.ranking.datasets import bundled_path  # noqa: E402

# (name, sbatch options, seconds it sleeps): 7 GPU jobs (23 GPUs at once on 8) and one CPU job
WORKLOAD = (
    ("resnet-a", ("--gres=gpu:4", "--comment=pal:class=A", "-t", "2"), 40),
    ("bert-b", ("-N", "2", "--gres=gpu:4", "--comment=pal:class=B,gpus=8", "-t", "2"), 30),
    ("vgg-a", ("--gres=gpu:2", "--comment=pal:class=A", "-t", "1"), 20),
    ("notebook", ("--gres=gpu:1", "-t", "1"), 15),
    ("gpt-c", ("--gres=gpu:4", "--comment=pal:class=C", "-t", "2"), 45),
    ("lstm-d", ("--gres=gpu:2", "--comment=pal:class=D", "-t", "1"), 25),
    ("resnet-a2", ("--gres=gpu:2", "--comment=pal:class=A", "-t", "1"), 30),
    ("cpu-only", (), 5),
)


def run(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    print(proc.stdout + proc.stderr, flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="folder for the lab and the outputs (default: a temporary one)")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--samples", type=int, default=2)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="whatif-lab-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    acct = start_accounting_lab(work / "lab", nodes=2, gpus=4)
    try:
        lab = acct.lab
        ids = [lab.sbatch(*opts, "-J", name, wrap=f"sleep {secs}") for name, opts, secs in WORKLOAD]
        for j in ids:
            lab.wait_job(j, timeout=600)
        acct.wait_recorded(ids)
        env = {**os.environ, **acct.env, "PAL_CONFIG": str(work / "pal.toml"), "PAL_DB_URL": f"sqlite:///{work / 'pal.db'}"}
        (work / "pal.toml").write_text("")
        print(f"$ sacct -a -X --json > acct.json   # in {work}", flush=True)
        (work / "acct.json").write_text(acct.sacct("--json"))
        palctl = [sys.executable, "-m", "pal_slurm.cli.main"]
        run(palctl + ["import-variability", str(bundled_path("32gpu-variability.csv")), "--map-to-nodes",
                      ",".join(lab.nodes), "--rank"], env, work)
        run(palctl + ["whatif", "--accounting", "acct.json", "--samples", str(args.samples), "--draws",
                      str(args.draws), "--plots", str(work)], env, work)
    finally:
        acct.stop()


if __name__ == "__main__":
    main()
