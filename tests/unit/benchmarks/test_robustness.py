"""benchmarks/robustness.py's accounts: the rule that gives the synthetic traces' jobs an
account, and the mean wait per account it reports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from pal_slurm.sim.metrics import JobOutcome, RunResult

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "robustness.py"


def _script():
    spec = importlib.util.spec_from_file_location("robustness_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _job(job_id: int, submit: float, start: float) -> JobOutcome:
    return JobOutcome(job_id, 1, "m", submit, start, start + 10.0, 10.0, 10.0)


def test_every_third_job_in_submission_order_is_the_light_accounts():
    r = _script()
    jobs = [_job(i, submit=100.0 - i, start=200.0) for i in range(9)]  # submitted in reverse id order
    account = r.accounts(jobs)
    order = sorted(account, key=lambda i: -i)  # submission order: 8, 7, ..., 0
    assert [account[i] for i in order] == [r.HEAVY, r.HEAVY, r.LIGHT] * 3
    assert account == r.accounts(list(reversed(jobs)))  # the rule reads the jobs, not their listing


def test_the_mean_wait_per_account_is_first_start_less_submit():
    r = _script()
    jobs = [_job(0, 0.0, 10.0), _job(1, 0.0, 30.0), _job(2, 5.0, 105.0)]
    result = RunResult("t", "p", 0, "event", 4, jobs, 0.0)
    waits = r.mean_waits(result, {0: r.HEAVY, 1: r.HEAVY, 2: r.LIGHT})
    assert waits == {r.HEAVY: 20.0, r.LIGHT: 100.0}
