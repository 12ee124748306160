"""Event-mode results do not change when the simulator or a placement is only made faster.

Every registered placement runs a few small cases (a loaded synthetic trace on a 4-node-rack
cluster, the same with per-node shapes, and Slurm's rule that started jobs stay put); each
run's fingerprint (a hash of every job's start, finish, communication seconds and preemptions,
the busy GPU-seconds, the utilisation series and the event/plan counts, all floats by `repr`)
must equal the one recorded in tests/golden/event-results.json.

The file was recorded from main's code *before* the simulator's speed work:

    .venv/bin/python tests/unit/sim/test_event_golden.py --record

Re-record only a placement whose behaviour changed on purpose (say which and why in the commit):

    .venv/bin/python tests/unit/sim/test_event_golden.py --record --only pal-net
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script (--record): the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from pal_slurm.model.shape import JobShape  # noqa: E402
from pal_slurm.policy import PLACEMENTS  # noqa: E402
from pal_slurm.sim.event import EventConfig, EventSimulator  # noqa: E402
from pal_slurm.sim.metrics import RunResult  # noqa: E402
from pal_slurm.sim.trace import Trace, rate_for_load, synthetic_trace  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "event-results.json"
CLUSTER = dict(num_nodes=16, gpus_per_node=4, nodes_per_rack=4)


def loaded_trace(seed: int = 11) -> Trace:
    """240 jobs asking for 1.1x the 64 GPUs' hours: a queue builds, every policy decision counts."""
    return synthetic_trace(240, seed=seed, jobs_per_hour=rate_for_load(1.1, 64), max_gpus=32, name="loaded")


def shaped_trace(seed: int = 11) -> Trace:
    """The loaded trace with every third multi-node job asking for whole nodes (-N k --gres=gpu:4)
    and every third 2-GPU job for one GPU on each of two nodes (benchmarks/shaped_draws.py runs
    it over many seeds)."""
    jobs = []
    for j in loaded_trace(seed).jobs:
        if j.num_gpus % 4 == 0 and j.num_gpus > 4 and j.job_id % 3 == 0:
            j = replace(j, shape=JobShape(j.num_gpus, nodes=j.num_gpus // 4, per_node=4))
        elif j.num_gpus == 2 and j.job_id % 3 == 1:
            j = replace(j, shape=JobShape(2, nodes=2, per_node=1))
        jobs.append(j)
    return Trace("shaped", tuple(jobs))


CASES = {
    "loaded": (loaded_trace, EventConfig(**CLUSTER, seed=3, variability_seed=1)),
    "shaped": (shaped_trace, EventConfig(**CLUSTER, seed=4, variability_seed=2)),
    "stay-put": (loaded_trace, EventConfig(**CLUSTER, seed=5, variability_seed=0, jobs_stay_put=True)),
}


def fingerprint(run: RunResult) -> dict:
    rows = [(j.job_id, j.num_gpus, j.first_start, j.finish, j.comm_overhead_s, j.preemptions) for j in run.jobs]
    text = repr((rows, run.busy_gpu_s, run.util_series, run.extra["events"], run.extra["plans"],
                 run.extra["restarts"], run.extra["timers"]))
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(),
            "avg_jct_s": repr(run.summary()["avg_jct_s"]), "plans": run.extra["plans"]}


def run_case(case: str, policy: str) -> dict:
    make, cfg = CASES[case]
    return fingerprint(EventSimulator(cfg).run(make(), policy))


def _recorded() -> dict:
    return json.loads(GOLDEN.read_text())["results"]


@pytest.mark.parametrize("policy", sorted(PLACEMENTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_results_are_the_recorded_ones(case, policy):
    want = _recorded().get(f"{case}/{policy}")
    if want is None:
        pytest.fail(f"no recorded result for {case}/{policy}: record it (see this module's docstring)")
    got = run_case(case, policy)
    assert got == want, f"{case}/{policy}: the results changed (avg JCT {got['avg_jct_s']} vs {want['avg_jct_s']})"


def _record(only: set[str]) -> None:
    data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    results = data.get("results", {})
    for case in sorted(CASES):
        for policy in sorted(PLACEMENTS):
            if only and policy not in only:
                continue
            results[f"{case}/{policy}"] = run_case(case, policy)
            print(case, policy, results[f"{case}/{policy}"], flush=True)
    data = {"made_by": "python tests/unit/sim/test_event_golden.py --record (see its docstring)",
            "results": dict(sorted(results.items()))}
    GOLDEN.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "--record":
        sys.exit(__doc__)
    _record(set(args[2].split(",")) if len(args) > 2 and args[1] == "--only" else set())
