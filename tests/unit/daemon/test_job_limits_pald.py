"""Slurm's job-count limits in pald: a held job whose user is at MaxJobs stays held, unpinned,
and the job behind it is placed (intake.job_limits, engine.held, daemon.sync)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.sync import LIMITS_READ_EVERY_S
from pal_slurm.engine import ManualClock
from pal_slurm.intake.job_limits import AssocLimit, JobLimits
from pal_slurm.slurm.errors import SlurmCommandFailed
from pal_slurm.slurm.readers import JobInfo, JobPlacementRequest

from .builders import FakeActuator, FakeReader, held_job, node_info

ANA_AT_ONE = JobLimits.of([AssocLimit("team", parent="root"), AssocLimit("team", "ana", max_jobs=1),
                           AssocLimit("team", "bob")], [])


def of(job: JobInfo, user: str) -> JobInfo:
    return replace(job, placement_request=JobPlacementRequest(account="team"), user_name=user)


class Limits:
    def __init__(self, limits: JobLimits | None) -> None:
        self.limits, self.calls = limits, 0
        self.fail: Exception | None = None

    def __call__(self) -> JobLimits | None:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.limits


def run(tmp_path: Any, limits: Limits, clock: ManualClock | None = None) -> tuple[Pald, FakeActuator, list[str]]:
    """One node of 4 GPUs; ana runs a job on one; held: ana's 1-GPU job 1, then bob's 3-GPU job 2
    (it fits only if job 1 takes no GPU)."""
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    running = replace(of(held_job(9, gpn=1), "ana"), state="RUNNING", reason="None", priority=1, admin_comment="",
                      nodes=("gpu01",), gpu_slots={"gpu01": frozenset({0})}, start_time=50)
    reader = FakeReader([node_info("gpu01", used=(0,))],
                        [running, of(held_job(1, gpn=1, submit=0), "ana"), of(held_job(2, gpn=3, submit=60), "bob")])
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=clock or ManualClock(100.0), limits=limits)
    records: list[str] = []
    pald.state.record = lambda job_id, kind, reason, nodes, cls: records.append(f"{job_id} {kind.value} {reason}")  # type: ignore[method-assign]
    return pald, act, records


def placed(act: FakeActuator) -> list[object]:
    return [c[1] for c in act.calls if c[0] == "place"]


def test_a_held_job_at_its_limit_gets_no_pin_and_the_job_behind_it_is_placed(tmp_path: Any) -> None:
    pald, act, records = run(tmp_path, Limits(ANA_AT_ONE))
    pald.sync_and_cycle()
    assert placed(act) == [2]
    assert "1 defer limit:AssocMaxJobsLimit" in records
    assert not any(r.startswith("1 ") and "released" in r for r in records)
    assert pald.health().details["limited"] == {"1": "AssocMaxJobsLimit"}
    pald.sync_and_cycle()  # still at the limit: kept held, recorded once
    assert records.count("1 defer limit:AssocMaxJobsLimit") == 1


def test_without_limits_the_job_is_released_first(tmp_path: Any) -> None:
    pald, act, records = run(tmp_path, Limits(None))  # slurmctld does not enforce limits
    pald.sync_and_cycle()
    assert placed(act) == [1]
    assert not any("limit:" in r for r in records)


def test_limits_read_at_most_every_period_and_a_failed_read_knows_none(tmp_path: Any) -> None:
    limits = Limits(ANA_AT_ONE)
    clock = ManualClock(100.0)
    pald, act, _ = run(tmp_path, limits, clock)
    pald.sync()
    clock.set(100.0 + LIMITS_READ_EVERY_S / 2)
    pald.sync()
    assert limits.calls == 1 and pald.state.service.limit_count is not None
    limits.fail = SlurmCommandFailed(["sacctmgr"], 1, "Problem talking to the database")
    clock.set(100.0 + LIMITS_READ_EVERY_S * 1.5)
    pald.sync_and_cycle()
    assert limits.calls == 2 and pald.state.service.limit_count is None  # fail open
    assert [e["what"] for e in pald.state.recent_errors] == ["limits"]
    assert placed(act) == [1]
