"""The load pald adds to slurmctld: RPC counts and time by message type, from `sdiag`.

    python3 benchmarks/slurmctld_load.py [--jobs 1000] [--window-s 30] [--baseline-code /work/main]
    (after `make install`; from a plain checkout: PYTHONPATH=. python3 benchmarks/...)

Starts a lab cluster (4 nodes x 4 GPUs, MaxJobCount raised), queues `--jobs` held batch jobs
(`sbatch --hold`, one job each: a job array's pending elements are one record in slurmctld's
job list and would understate the read), then for each phase resets slurmctld's statistics
(`sdiag --reset`), waits `--window-s` and reads them back (`sdiag`):

- none: no pald (the lab's own clients only: the figure the others are compared with);
- baseline: pald of the checkout `--baseline-code` (its own code, same config), if given;
- this: pald of this checkout;
- this+: pald of this checkout with `--this-slurm` lines added to its [slurm] table, if given
  (e.g. `--this-slurm 'nodes_every_s = 5.0'`).

Each pald runs with `cycle_s = 1` and the [slurm] read periods at their defaults, on SQLite,
and is given `--warmup-s` after it first answers before the window opens. Nothing runs and
nothing is submitted meanwhile: the figures are a quiet queue's. Prints, per phase, every
message type's count (and per second), total and mean time, the added load (phase less `none`) in RPC time per second of wall clock, and the ratio of
this checkout's added load to the baseline's. sdiag's own REQUEST_STATS_INFO is left out.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pal_lab.lab import LabCluster, missing_binaries, start_lab
from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.daemon.process import REPO, write_config

LAB_CONF = "MaxJobCount=60000\nMaxArraySize=10001\nMinJobAge=300"
RPC_LINE = re.compile(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)")
SDIAG_OWN = "REQUEST_STATS_INFO"


@dataclass(frozen=True)
class Rpc:
    count: int
    total_us: int


def parse_sdiag(text: str) -> dict[str, Rpc]:
    """`sdiag`'s "by message type" section -> {message type: Rpc}."""
    out: dict[str, Rpc] = {}
    section = False
    for line in text.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = True
            continue
        if section and line and not line[0].isspace():
            break
        m = RPC_LINE.match(line) if section else None
        if m and m.group(1) != SDIAG_OWN:
            out[m.group(1)] = Rpc(int(m.group(2)), int(m.group(3)))
    return out


def queue_held_jobs(lab: LabCluster, n: int, workers: int = 4) -> float:
    """Submit `n` held one-task jobs; the seconds it took."""
    argv = ["sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap", "true"]
    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _i: lab.runner.run(argv), range(n)))
    return time.monotonic() - t0


def start_pald(code: Path, config: Path, socket: Path, log: Path, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """pald of the checkout `code`, answering on `socket` and synced once."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code)
    env.pop("PAL_CONFIG", None)
    out = open(log, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "pal_slurm.daemon.main", "--config", str(config)],
                            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(code),
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pald ({code}) exited: {log.read_text()[-2000:]}")
        try:
            if PaldClient(str(socket), timeout_s=2.0).health().details.get("last_sync_age_s") is not None:
                return proc
        except PaldError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"pald ({code}) did not come up: {log.read_text()[-2000:]}")


def sdiag(lab: LabCluster, *args: str) -> str:
    return subprocess.run(["sdiag", *args], env=lab.client_env(), capture_output=True, text=True,
                          check=True, timeout=30).stdout


def window(lab: LabCluster, seconds: float) -> dict[str, Rpc]:
    sdiag(lab, "--reset")
    time.sleep(seconds)
    return parse_sdiag(sdiag(lab))


def measure(lab: LabCluster, tmp: Path, label: str, code: Path | None, args: argparse.Namespace) -> dict[str, Rpc]:
    if code is None:
        return window(lab, args.window_s)
    run = tmp / label
    run.mkdir()
    socket = run / "pald.sock"
    config = write_config(run / "pal.toml", socket=socket, db_url=f"sqlite:///{run}/pal.db",
                          slurm_conf=lab.slurm_conf, heartbeat=run / "hb", cycle_s=1.0)
    if label == "this+":
        text = config.read_text()
        config.write_text(text.replace("[slurm]\n", "[slurm]\n" + "\n".join(args.this_slurm) + "\n", 1))
    proc = start_pald(code, config, socket, run / "pald.log")
    try:
        time.sleep(args.warmup_s)
        return window(lab, args.window_s)
    finally:
        proc.terminate()
        proc.wait(20)


def ms_per_s(rpcs: dict[str, Rpc], seconds: float) -> float:
    return sum(r.total_us for r in rpcs.values()) / 1000.0 / seconds


def report(label: str, rpcs: dict[str, Rpc], none: dict[str, Rpc], seconds: float) -> float:
    print(f"{label}:")
    for name in sorted(rpcs, key=lambda n: -rpcs[n].total_us):
        r = rpcs[name]
        print(f"  {name:<32} count {r.count:>6} ({r.count / seconds:.2f}/s)  total {r.total_us / 1000.0:>9.1f} ms"
              f"  ({r.total_us / 1000.0 / max(r.count, 1):.2f} ms each)")
    added = ms_per_s(rpcs, seconds) - ms_per_s(none, seconds)
    print(f"  total {ms_per_s(rpcs, seconds):.2f} ms/s; added over none {added:.2f} ms/s "
          f"({added / 10.0:.2f}% of one core)")
    return added


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000, help="held jobs in the queue")
    ap.add_argument("--window-s", type=float, default=60.0,
                    help="sdiag window per phase (a multiple of [slurm] jobs_every_s reads whole periods)")
    ap.add_argument("--warmup-s", type=float, default=5.0, help="pald's time before the window")
    ap.add_argument("--baseline-code", type=Path, default=None, metavar="DIR",
                    help="a checkout whose pald is measured as the baseline")
    ap.add_argument("--this-slurm", action="append", default=[], metavar="LINE",
                    help="a [slurm] line for a second run of this checkout's pald (repeatable)")
    args = ap.parse_args()
    if missing_binaries():
        print("Slurm lab binaries missing:", ", ".join(missing_binaries()))
        return 1
    with tempfile.TemporaryDirectory(prefix="pal-ctld-load-") as tmp_name:
        tmp = Path(tmp_name)
        lab = start_lab(tmp / "lab", extra_conf=LAB_CONF)
        try:
            took = queue_held_jobs(lab, args.jobs)
            print(f"queued {args.jobs} held jobs in {took:.1f} s; window {args.window_s:g} s per phase")
            phases: list[tuple[str, Path | None]] = [("none", None)]
            if args.baseline_code is not None:
                phases.append(("baseline", args.baseline_code.resolve()))
            phases.append(("this", REPO))
            if args.this_slurm:
                phases.append(("this+", REPO))
            results = {label: measure(lab, tmp, label, code, args) for label, code in phases}
        finally:
            lab.stop()
    none = results["none"]
    added = {label: report(f"{label} ({code or 'no pald'}{'; ' + '; '.join(args.this_slurm) if label == 'this+' else ''})",
                           results[label], none, args.window_s)
             for label, code in phases}
    if "baseline" in added and added["baseline"] > 0:
        for label in ("this", "this+"):
            if label in added:
                print(f"{label} / baseline added load: {added[label] / added['baseline']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
