"""sbatch latency per hook path (place / pass / non-PAL) on the lab, with a stand-in pald.

benchmarks/hook_overhead.py is the end-to-end figure (real pald, two labs alternating). This
one isolates the hook: pald is a stand-in that answers at once, so what differs between the
cases is the hook's socket + JSON work and Slurm's cost of a job pinned to nodes and typed GRES.

    PYTHONPATH=. python3 benchmarks/hook_paths.py [--calls 400]     (from the repo root;
    it borrows the tests' stand-in pald, tests/support/tiny_pald.py)

Two real Slurm 22.05 labs (scripts/slurm-lab.sh), one after the other:
  baseline  the lab's pass-through job_submit.lua (returns slurm.SUCCESS at once)
  pal       job_submit_lua/job_submit.lua, asking a stand-in pald over a unix socket that
            decodes each request with the real protocol module and answers `place` (exact
            node + GPU slots) or, for class `passjob`, `pass` (nothing written but the tag)
In the pal lab, PAL jobs placed, PAL jobs passed and non-PAL jobs (no socket call) alternate,
so all see the same machine load; place - pass separates Slurm's cost of validating a job
pinned to nodes and typed GRES from the hook's own (socket + JSON). Every job is submitted with --hold, so none runs
and the scheduler stays out of the figures. Prints p50/p90/p99 of sbatch's wall time per case,
the median overhead of the hook (pal - baseline), and the round trip the hook measured inside
slurmctld (its `rtt_ms` log field). pald's own placement time is not in here: see
benchmarks/place_latency.py.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pal_lab.lab import missing_binaries, start_lab
from pal_slurm.daemon.protocol import PlaceReply, decode_request, encode_reply
from pal_slurm.model.decision import DecisionKind
from tests.support.tiny_pald import TinyPald

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "job_submit_lua" / "job_submit.lua"


PLACE = encode_reply(PlaceReply(DecisionKind.PLACE, "pal", {"gpu03": (2, 3)},
                                "gres:gpu:s2:1,gres:gpu:s3:1", rank=7))
PASS = encode_reply(PlaceReply(DecisionKind.PASS, "bench", rank=7))


def answer(line: bytes) -> bytes:
    """Decode like pald; class `passjob` gets `pass` (no job fields written), others `place`."""
    req = decode_request(line)
    return PASS if req.pal.perf_class == "passjob" else PLACE


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def sbatch_ms(lab, comment: str | None) -> float:
    argv = ["sbatch", "--parsable", "--hold", "--gres=gpu:1", f"--output={lab.lab_dir}/out/%j.out"]
    if comment:
        argv.append(f"--comment={comment}")
    argv += ["--wrap", "true"]
    env = lab.client_env()
    t0 = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    took = (time.perf_counter() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"sbatch failed: {out.stderr.strip()}")
    return took


def row(name: str, values: list[float]) -> str:
    return (f"{name:<22} {pct(values, 50):8.2f} {pct(values, 90):8.2f} {pct(values, 99):8.2f} "
            f"{statistics.fmean(values):8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="sbatch calls per case")
    args = parser.parse_args()
    if missing_binaries():
        print("Slurm lab binaries missing:", ", ".join(missing_binaries()))
        return 1
    with tempfile.TemporaryDirectory(prefix="pal-hook-bench-") as tmp:
        tmp = Path(tmp)
        lab = start_lab(tmp / "baseline", nodes=4, gpus=4)
        try:
            for _ in range(5):
                sbatch_ms(lab, None)  # warm up
            baseline = [sbatch_ms(lab, None) for _ in range(args.calls)]
        finally:
            lab.stop()

        sock = tmp / "pald.sock"
        lab = start_lab(tmp / "pal", nodes=4, gpus=4, hook=HOOK,
                        env={"PAL_SOCKET": str(sock), "PAL_TIMEOUT_MS": "150"})
        try:
            with TinyPald(sock, answer=answer) as pald:
                for _ in range(5):
                    sbatch_ms(lab, "pal:class=resnet")
                    sbatch_ms(lab, None)
                pal, pal_pass, non_pal = [], [], []
                for _ in range(args.calls):
                    pal.append(sbatch_ms(lab, "pal:class=resnet"))
                    pal_pass.append(sbatch_ms(lab, "pal:class=passjob"))
                    non_pal.append(sbatch_ms(lab, "not a pal job"))
                answered = len(pald.received)
            log = lab.log()
        finally:
            lab.stop()
    rtts = [float(m) for m in re.findall(r"pal: place .* rtt_ms=([0-9.]+)", log)]
    passes = len(re.findall(r"pal: pass reason=(?!bench)", log))
    print("sbatch --hold wall time on the lab cluster (real slurmctld + job_submit/lua), ms")
    print(f"calls per case: {args.calls}; pald answered {answered}; hook passes: {passes}; "
          f"load avg {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'case':<22} {'p50':>8} {'p90':>8} {'p99':>8} {'mean':>8}")
    print(row("baseline (no-op hook)", baseline))
    print(row("pal hook, non-PAL job", non_pal))
    print(row("pal hook, PAL -> pass", pal_pass))
    print(row("pal hook, PAL -> place", pal))
    print(f"median overhead, PAL job vs no-op hook: {pct(pal, 50) - pct(baseline, 50):+.2f} ms")
    print(f"median overhead, PAL job vs non-PAL job (same lab): "
          f"{pct(pal, 50) - pct(non_pal, 50):+.2f} ms (place), "
          f"{pct(pal_pass, 50) - pct(non_pal, 50):+.2f} ms (pass: socket + JSON only)")
    if rtts:
        print(f"in-hook round trip to pald (inside slurmctld, {len(rtts)} calls): "
              f"p50 {pct(rtts, 50):.3f} ms, p99 {pct(rtts, 99):.3f} ms, max {max(rtts):.3f} ms")
    return 0 if passes == 0 and rtts else 1


if __name__ == "__main__":
    sys.exit(main())
