"""pald's loop reads Slurm as daemon.read_plan says: the nodes every nodes_every_s, the jobs on
events and at least every jobs_every_s, the site on its period (sync.SlurmSync.read_when_due via
Pald.turn)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from pal_slurm.config import Config, DaemonConfig, SlurmConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.sync import SETTLE_READS
from pal_slurm.engine import ManualClock
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.errors import SlurmCommandTimeout
from pal_slurm.slurm.site import parse_partitions, parse_reservations, site_view

from .builders import FakeActuator, FakeReader, held_job, node_info, request


class CountingReader(FakeReader):
    def __init__(self, nodes, jobs=()):
        super().__init__(nodes, jobs)
        self.calls: Counter[str] = Counter()
        self.with_site = False  # False: no site (every GPU node eligible), as FakeReader
        self.reservations = {}

    def nodes(self):
        self.calls["nodes"] += 1
        return super().nodes()

    def jobs(self):
        self.calls["jobs"] += 1
        return super().jobs()

    def site(self, nodes, earlier=None):
        """One default partition of every node read, and `self.reservations` (`with_site`)."""
        self.calls["reservations"] += 1
        self.calls["partitions"] += earlier is None
        if not self.with_site:
            return None
        names = ",".join(n.name for n in nodes)
        partitions = (parse_partitions(f"PartitionName=debug Nodes={names} Default=YES State=UP") if earlier is None
                      else earlier.partitions)
        return site_view(nodes, partitions, self.reservations)


def make(tmp_path, jobs=(), nodes_every_s=5.0):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")),
                 slurm=SlurmConfig(read_floor_s=2.0, jobs_every_s=30.0, site_every_s=60.0,
                                   nodes_every_s=nodes_every_s))
    clock = ManualClock(1000.0)
    reader = CountingReader([node_info(f"gpu{i:02d}") for i in range(1, 5)], jobs)
    return Pald(cfg, None, reader, FakeActuator(), clock=clock), reader, clock


def turns(pald, clock, seconds, step=1.0):
    for _ in range(int(seconds / step)):
        clock.set(clock.t + step)
        pald.turn()


def test_a_quiet_cluster_costs_a_node_read_a_node_period_and_a_job_read_a_job_period(tmp_path):
    pald, reader, clock = make(tmp_path)
    reader.with_site = True
    pald.turn()
    first = {"nodes": 1, "jobs": 1, "reservations": 1, "partitions": 1}
    assert reader.calls == first  # the first turn reads everything
    turns(pald, clock, 29)
    assert reader.calls == {**first, "nodes": 6, "reservations": 6}  # reservations with each node read
    assert pald.state.last_cycle == clock.t  # a quiet turn is a complete one (the heartbeat)
    turns(pald, clock, 1)
    assert reader.calls == {**first, "nodes": 7, "jobs": 2, "reservations": 7}  # jobs_every_s
    assert pald.slurm_sync.job_reads == {"first": 1, "period": 1}
    turns(pald, clock, 30)
    assert reader.calls["partitions"] == 2  # site_every_s


def test_a_view_the_nodes_confirm_stays_fresh_for_place(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    turns(pald, clock, 20)  # older than max_view_age_s, but confirmed by each node read
    assert reader.calls["jobs"] == 1
    assert pald.health().details["last_sync_age_s"] == 0.0
    assert pald.handle(request("resnet", gpn=1, rid="a")).decision is DecisionKind.PLACE


def test_a_node_change_calls_for_a_job_read_at_the_next_node_read(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    reader._nodes[0] = node_info("gpu01", used=(0,))  # a job started there
    reader._jobs.append(replace(held_job(9, gpn=1), state="RUNNING", reason="None", nodes=("gpu01",),
                                gpu_slots={"gpu01": frozenset({0})}, time_limit_s=3600))
    turns(pald, clock, 4)
    assert reader.calls["jobs"] == 1  # the nodes are not due yet
    turns(pald, clock, 1)
    assert reader.calls["jobs"] == 2 and pald.slurm_sync.job_reads["nodes"] == 1
    turns(pald, clock, 10)
    assert reader.calls["jobs"] == 2  # the new allocation is the reference now


def test_squeue_and_sinfo_disagreeing_calls_for_reads_at_the_floor_a_few_times(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    reader._nodes[0] = node_info("gpu01", used=(0,))  # GPUs in use that no job in squeue holds
    turns(pald, clock, 5)
    assert pald.slurm_sync.job_reads["nodes"] == 1
    turns(pald, clock, 20)
    assert pald.slurm_sync.job_reads["settle"] == SETTLE_READS  # then it is taken for how things are


def test_a_node_change_within_the_floor_is_read_when_the_floor_has_passed(tmp_path):
    pald, reader, clock = make(tmp_path, nodes_every_s=1.0)
    pald.turn()
    reader._nodes[0] = node_info("gpu01", used=(0,))
    turns(pald, clock, 1)
    assert reader.calls == {"nodes": 2, "jobs": 1, "reservations": 1, "partitions": 1}
    turns(pald, clock, 1)
    assert reader.calls["jobs"] == 2 and pald.slurm_sync.job_reads["nodes"] == 1


def test_an_answer_calls_for_a_job_read_and_its_promise_for_reads_until_settled(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    turns(pald, clock, 5)
    assert pald.handle(request("resnet", gpn=1, rid="a")).decision is DecisionKind.PLACE
    turns(pald, clock, 1)
    assert pald.slurm_sync.job_reads["answered"] == 1
    assert pald.service.reservations  # read 1 s after the answer: within submit_grace_s
    turns(pald, clock, 2)
    assert pald.slurm_sync.job_reads["promises"] == 1  # the promise's job never came: dropped
    assert not pald.service.reservations
    turns(pald, clock, 10)
    assert sum(pald.slurm_sync.job_reads.values()) == 3  # first, answered, promises


def test_a_held_pal_job_is_read_each_floor_and_released_when_it_fits(tmp_path):
    pald, reader, clock = make(tmp_path, jobs=[held_job(7, gpn=1)])
    pald.turn()
    assert pald.actuator.calls  # the first turn's cycle placed it
    pald, reader, clock = make(tmp_path, jobs=[held_job(7, gpn=8)])  # never fits one node
    pald.turn()
    turns(pald, clock, 10)
    assert pald.slurm_sync.job_reads["held"] == 5


def test_a_failed_read_is_retried_at_the_floor_and_confirms_nothing_meanwhile(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    turns(pald, clock, 5)
    reader.fail = SlurmCommandTimeout(["sinfo", "--json"], 15.0, "")
    turns(pald, clock, 5)  # the next node read fails
    assert pald.state.slurm_ok is False
    reader.fail = None
    turns(pald, clock, 1)
    assert pald.slurm_sync.job_reads["retry"] == 1 and pald.state.slurm_ok is True


def test_a_node_added_reads_the_site_with_the_jobs(tmp_path):
    pald, reader, clock = make(tmp_path)
    reader.with_site = True
    pald.turn()
    reader._nodes.append(node_info("gpu05"))
    turns(pald, clock, 5)
    assert reader.calls["partitions"] == 2 and pald.service.site is not None
    assert set(pald.service.site.nodes) == {f"gpu0{i}" for i in range(1, 6)}


def test_a_reservation_made_is_seen_at_the_next_node_read_and_read_with_the_jobs(tmp_path):
    pald, reader, clock = make(tmp_path)
    reader.with_site = True
    pald.turn()
    reader.reservations = parse_reservations(
        "ReservationName=theirs Nodes=gpu04 StartTime=2030-01-01T00:00:00 EndTime=2030-01-01T01:00:00 "
        "State=ACTIVE Users=root")
    turns(pald, clock, 4)
    assert "theirs" not in pald.service.site.reservations
    turns(pald, clock, 1)
    assert "theirs" in pald.service.site.reservations and pald.slurm_sync.job_reads["nodes"] == 1
    assert reader.calls["partitions"] == 1


def test_an_action_pald_took_on_a_job_calls_for_a_job_read(tmp_path):
    pald, reader, clock = make(tmp_path)
    pald.turn()
    turns(pald, clock, 5)
    assert sum(pald.slurm_sync.job_reads.values()) == 1  # a quiet cluster: the first read only
    for kind in ("reheld", "released", "released_outside"):  # pald's own `scontrol hold`/`release`
        pald.state.count(kind)
        turns(pald, clock, 2)
        assert pald.slurm_sync.job_reads["answered"] == 1 + ("reheld", "released", "released_outside").index(kind)
