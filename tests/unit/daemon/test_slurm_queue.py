"""The `slurm` queue order in pald: held jobs go in the multifactor priority pald computes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import pytest

from pal_slurm.config import Config, DaemonConfig, PolicyConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.sync import PRIORITY_READ_EVERY_S
from pal_slurm.engine import ManualClock
from pal_slurm.model.priority import PriorityWeights, SitePriority
from pal_slurm.slurm.errors import SlurmCommandFailed
from pal_slurm.slurm.priority import SitePriorityRead
from pal_slurm.slurm.readers import JobInfo, JobPlacementRequest, NodeInfo

from .builders import FakeActuator, FakeReader, held_job, node_info

# equal shares, "heavy" already used most of its share: its fair-share factor is lower
SHARES = {("heavy", "ana"): 0.25, ("light", "bob"): 1.0}


def of(job: JobInfo, account: str, user: str) -> JobInfo:
    return replace(job, placement_request=JobPlacementRequest(account=account), user_name=user)


class PriorityInputs:
    def __init__(self) -> None:
        self.calls = 0
        self.fail: Exception | None = None

        self.missing: dict[str, str] = {}

    def __call__(self, nodes: Sequence[NodeInfo]) -> SitePriorityRead:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        site = SitePriority(weights=PriorityWeights(fairshare=10000, age=1000, max_age_s=3600), fairshare=SHARES)
        return SitePriorityRead(site, {}, dict(self.missing))


def run(tmp_path: Any, queue: str, inputs: PriorityInputs, clock: ManualClock | None = None,
        ) -> tuple[Pald, FakeActuator, FakeReader]:
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")),
                 policy=PolicyConfig(queue=queue))
    # one node of 4 GPUs, two held 4-GPU jobs: one goes
    reader = FakeReader([node_info("gpu01")], [of(held_job(1, gpn=4, submit=0), "heavy", "ana"),
                                               of(held_job(2, gpn=4, submit=60), "light", "bob")])
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=clock or ManualClock(100.0), priority=inputs)
    return pald, act, reader


def placed(act: FakeActuator) -> list[object]:
    return [c[1] for c in act.calls if c[0] == "place"]


@pytest.mark.parametrize(("queue", "first"), [("fifo", 1), ("slurm", 2)])
def test_the_lighter_accounts_job_goes_first_under_slurm_order(tmp_path: Any, queue: str, first: int) -> None:
    inputs = PriorityInputs()
    pald, act, _ = run(tmp_path, queue, inputs)
    pald.sync_and_cycle()
    assert placed(act) == [first]
    assert inputs.calls == (1 if queue == "slurm" else 0)  # read only for the `slurm` order


def test_scores_count_from_now(tmp_path: Any) -> None:
    pald, _, reader = run(tmp_path, "slurm", PriorityInputs())
    pald.sync_and_cycle()
    service = pald.state.service
    # job 2: fair share 1.0 * 10000 + age 40 s of 3600 * 1000 = 10011.1 -> 10011
    assert service.slurm_priority(reader._jobs[1], now=100.0) == 10011
    assert service.slurm_priority(reader._jobs[0], now=100.0) == 2500 + 27  # 0.25 * 10000 + 100/3600 * 1000


def test_inputs_read_at_most_every_period_and_kept_when_a_read_fails(tmp_path: Any) -> None:
    inputs = PriorityInputs()
    clock = ManualClock(100.0)
    pald, _, _ = run(tmp_path, "slurm", inputs, clock)
    pald.sync_and_cycle()
    clock.set(100.0 + PRIORITY_READ_EVERY_S / 2)
    pald.sync_and_cycle()
    assert inputs.calls == 1
    inputs.fail = SlurmCommandFailed(["sshare"], 1, "no slurmdbd")
    clock.set(100.0 + PRIORITY_READ_EVERY_S * 1.5)
    pald.sync_and_cycle()
    assert inputs.calls == 2 and pald.state.service.site_priority is not None  # the last inputs stay


def test_a_source_slurm_could_not_give_is_reported(tmp_path: Any) -> None:
    inputs = PriorityInputs()
    inputs.missing = {"sshare": "sshare: Problem talking to the database"}
    pald, _, _ = run(tmp_path, "slurm", inputs)
    pald.sync_and_cycle()
    errors = list(pald.state.recent_errors)
    assert [e["what"] for e in errors] == ["priority:sshare"] and "database" in str(errors[0]["error"])


def test_a_cycle_that_releases_logs_the_held_jobs_in_the_sites_order(tmp_path: Any, caplog: Any) -> None:
    pald, _, _ = run(tmp_path, "slurm", PriorityInputs())
    with caplog.at_level("INFO", logger="pald.cycle"):
        pald.sync_and_cycle()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("site order: ")]
    # light's released; heavy's held behind it, reserving the node light's frees (no time limit:
    # pald counts it ending at once)
    assert lines == ["site order: 2=10011+ 1=2527@0[gpu01:0.1.2.3]"]


def test_the_site_order_line_names_a_held_jobs_reservation() -> None:
    from pal_slurm.daemon.cycle import site_order_line
    from pal_slurm.model import ClusterView, PlannedStart

    view = ClusterView.from_layout([("gpu01", 4), ("gpu02", 4)])
    planned = {7: PlannedStart(130.0, frozenset({1, 2, 4})), 8: PlannedStart(160.0, None)}
    line = site_order_line([(7, 900.0), (5, 800.0), (8, 700.0), (9, 600.0)], {5}, planned, view, 100.0)
    assert line == "7=900@30[gpu01:1.2;gpu02:0] 5=800+ 8=700@60[any] 9=600"
