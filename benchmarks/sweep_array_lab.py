"""docs/whatif.md's sweep figure: a `palctl simulate` sweep run as a lab job array gives the
serial run's JSON, byte for byte, and its wall time beside the serial one's.

    python3 benchmarks/sweep_array_lab.py [--work DIR] [--synthetic 4000] [--seeds 3] [--throttle N]

`--array` promises the report a serial run gives, number for number, only the time taken
differing (meta.elapsed_s: the elements' seconds added up). The lab test checks that on a
2 x 2 sweep of a 6-job trace; this checks it on 36 elements, 6 placements x 3 seeds x 2 traces
(workload-3 and a synthetic trace of 4,000 jobs, event mode on 64x4 GPUs), about a minute of
CPU in all.

Starts the lab (slurmctld and 4 slurmd of 4 emulated GPUs each, all on this host), runs
`palctl simulate ... --json` here and times it, then the same sweep with `--array` (elements
at most --throttle at once, default the lab's node count), timed from the submission to the
merge job's end. Both documents, less meta.elapsed_s, dumped with sort_keys must be equal:
exit status 1 otherwise (the two sorted documents are left in the folder to diff), or when the
merge job does not complete (the sweep's `--status` is printed). The palctl run is this
checkout's (PYTHONPATH), on the interpreter that runs this script. Needs Slurm and munge
(scripts/install-deps.sh); the lab is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from pal_lab.lab import start_lab  # noqa: E402

POLICIES = "pal,pmfirst,pal-fit,packed-sticky,firstfit,slurm"
TRACE = "workload-3"
DIFFERS = ("elapsed_s",)  # meta fields a serial run and a merge must not agree on: the time taken


def palctl(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[str, float]:
    """Run `palctl ARGV` (this checkout's); its stdout and wall seconds. Fails loudly."""
    cmd = [sys.executable, "-m", "pal_slurm.cli", *argv]
    print("$ palctl " + shlex.join(argv), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"palctl failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout, wall


def canonical(doc: dict) -> bytes:
    """The document less the fields that must differ, as sorted-key JSON bytes."""
    for key in DIFFERS:
        doc["meta"].pop(key)
    return json.dumps(doc, sort_keys=True, indent=1).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="folder for the lab and the outputs (default: a temporary one)")
    ap.add_argument("--synthetic", type=int, default=4000, help="jobs of the synthetic trace")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--throttle", type=int, default=None, help="elements at once (default: the lab's nodes)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the merge job")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="sweep-array-lab-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    lab = start_lab(work / "lab")
    jobs: list[int] = []
    try:
        throttle = args.throttle or len(lab.nodes)
        (work / "pal.toml").write_text(f'[store]\nurl = "sqlite:///{work}/pal.db"\n[slurm]\nconf = "{lab.slurm_conf}"\n')
        # the elements inherit it (sbatch exports the environment): they run this checkout too
        env = {**lab.client_env(), "PYTHONPATH": REPO}
        sweep = ["--config", str(work / "pal.toml"), "simulate", "--mode", "event", "--cluster", "64x4",
                 "--trace", TRACE, "--synthetic", str(args.synthetic), "--policies", POLICIES,
                 "--seeds", str(args.seeds), "--json"]
        out, serial_s = palctl(sweep, env, work)
        serial = json.loads(out)
        t0 = time.monotonic()
        out, _ = palctl([*sweep, "--output", "merged.json", "--array", "--array-dir", "sweep", "--partition", "gpu",
                         "--time", "10:00", "--array-throttle", str(throttle)], env, work)
        submitted = json.loads(out)
        jobs = [submitted["array_job"], submitted["merge_job"]]
        state = lab.wait_job(submitted["merge_job"], timeout=args.timeout)
        array_s = time.monotonic() - t0
        if state != "COMPLETED":
            status = subprocess.run([sys.executable, "-m", "pal_slurm.cli", "--config", str(work / "pal.toml"),
                                     "simulate", "--status", "sweep"], env=env, cwd=work, capture_output=True, text=True)
            raise SystemExit(f"merge job {submitted['merge_job']} ended {state}:\n{status.stdout}{status.stderr}")
        jobs = []  # all ended: nothing to cancel
        merged = json.loads((work / "merged.json").read_text())
        own = serial["meta"]["elapsed_s"], merged["meta"]["elapsed_s"]
        a, b = canonical(serial), canonical(merged)
        print(f"elements: {submitted['elements']} (throttle {throttle}, lab of {len(lab.nodes)} slurmd on "
              f"{os.cpu_count()} CPUs)")
        print(f"serial wall: {serial_s:.1f} s")
        print(f"array wall: {array_s:.1f} s (submission to the merge job's end)")
        print(f"simulating seconds: serial {own[0]:.1f}, elements added up {own[1]:.1f}")
        print(f"array / serial: {array_s / serial_s:.2f}")
        print(f"bytes: serial {len(a)}, array {len(b)} (sort_keys, less meta.{', meta.'.join(DIFFERS)})")
        print(f"identical: {'yes' if a == b else 'no'}")
        if a != b:
            (work / "serial.sorted.json").write_bytes(a)
            (work / "array.sorted.json").write_bytes(b)
            raise SystemExit(f"differ: diff {work}/serial.sorted.json {work}/array.sorted.json")
    finally:
        if jobs:
            lab.runner.run(["scancel", *map(str, jobs)])
        lab.stop()


if __name__ == "__main__":
    main()
