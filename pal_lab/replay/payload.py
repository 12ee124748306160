"""The replayed job itself: run as long as the GPUs Slurm gave it make it run.

Run by Slurm as the batch script of a replayed job (`python -m pal_lab.replay.payload SPEC
OUT_DIR`). It reads its own nodes and GPU indices FROM SLURM (`scontrol show job -d`, parsed
by the prolog's parser in bench/gpuset.py), never from pald, then sleeps

    base_s x (slowest of its GPUs' slowdown for its class) x (network factor of the tiers it
    spans) / scale

wall seconds (the event simulator's progress model, `sim/event.py`), and writes one JSON record
(`OUT_DIR/<name>.json`: where it ran, the factors, its own start/end) so the harness can check
Slurm's records against what the job saw. The spec comes from `plan.payload_spec`.
"""

from __future__ import annotations

import time

T0 = time.time()  # before the imports below: their cost is part of the job's run time

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, TypedDict  # noqa: E402

from pal_slurm.bench.gpuset import gpus_from_scontrol  # noqa: E402
from pal_slurm.bench.hook import scontrol_show_job  # noqa: E402

if TYPE_CHECKING:  # the plan's imports would count in the job's run time
    from pal_lab.replay.plan import PayloadSpec


class PayloadRecord(TypedDict):
    """What a replayed job writes as it ends (the harness reads them back): epoch seconds."""

    job: int
    name: str
    slurm_job_id: int
    placement: dict[str, list[int]]  # node -> slots Slurm gave it
    gpu_slowdown: float
    net_factor: float
    base_s: float
    gpus: int
    planned_wall_s: float
    start: float
    end: float


def run_factors(spec: PayloadSpec, placement: dict[str, tuple[int, ...]]) -> tuple[float, float]:
    """(GPU slowdown, network factor) of a placement {node: slots} under `spec` (pure)."""
    if not placement or not any(placement.values()):
        raise ValueError("the job holds no GPU")
    slow = max(spec["slowdown"][node][slot] for node, slots in placement.items() for slot in slots)
    nodes = [n for n, slots in placement.items() if slots]
    racks = {spec["rack"][n] for n in nodes}
    net = spec["net"][f"{len(nodes)},{len(racks)}"]
    return float(slow), float(net)


def run(spec_path: str, out_dir: str) -> PayloadRecord:
    start = T0
    spec: PayloadSpec = json.loads(Path(spec_path).read_text())
    job_id = os.environ.get("SLURM_JOB_ID", "")
    placement = gpus_from_scontrol(scontrol_show_job(job_id, timeout_s=10.0))
    slow, net = run_factors(spec, placement)
    wall = spec["base_s"] * slow * net / spec["scale"]
    time.sleep(max(0.0, wall - (time.time() - start)))
    record: PayloadRecord = {"job": spec["job"], "name": spec["name"], "slurm_job_id": int(job_id or 0),
              "placement": {n: list(s) for n, s in sorted(placement.items())},
              "gpu_slowdown": slow, "net_factor": net, "base_s": spec["base_s"], "gpus": spec["gpus"],
              "planned_wall_s": wall, "start": start, "end": time.time()}
    tmp = Path(out_dir) / f".{spec['name']}.json"
    tmp.write_text(json.dumps(record))
    tmp.rename(Path(out_dir) / f"{spec['name']}.json")
    return record


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pal_lab.replay.payload SPEC.json OUT_DIR", file=sys.stderr)
        return 2
    run(args[0], args[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
