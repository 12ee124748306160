"""What we prove is what we run: one trace through pald's service and through the simulator gives
the same placements, job by job.

The simulator runs the trace in event mode under Slurm's rule (a started job keeps its GPUs),
with jobs of Slurm shapes (`--gpus=N`, `-N k --gres=gpu:g`). In the second run pald decides
instead of the simulator's engine: the simulator's cluster is pald's Slurm (a fake reader and
actuator in process), its clock is pald's clock, every new job goes through the submit hook's
request (`Pald.handle(PlaceRequest)`), and held jobs through pald's cycle. At each instant pald
first syncs (a fresh view, as if Slurm answered instantly), then answers the new jobs, then runs
its cycle. Both runs must start the same jobs at the same times on the same GPUs.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

from pal_slurm.config import Config, DaemonConfig, PolicyConfig, SlurmConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import JobFields, PlaceRequest
from pal_slurm.engine import ManualClock
from pal_slurm.model import ClusterView, DecisionKind, JobRequest, RoundPlan
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.shape import JobShape
from pal_slurm.policy.shapes import shape_of
from pal_slurm.ranking import Ranking
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.trace import Trace, TraceJob
from pal_slurm.intake.hostlist import compress
from pal_slurm.slurm.readers import JobInfo, NodeInfo
from pal_slurm.store.records import RankingEntry, RankingSnapshot

# Models whose iteration time is 1 s (so a job's length is whole minutes, as --time is), with
# a class each and, through the simulator's network model, a network sensitivity each.
CLASSES = AppClassMap({"resnet": "A", "bert": "B", "vgg": "C", "alexnet": "D"}, default="A")
SHAPES = [JobShape.anywhere(n) for n in (1, 2, 3, 4, 6, 8)] + [
    JobShape.on_nodes(1, 2), JobShape.on_nodes(1, 4), JobShape.on_nodes(2, 2), JobShape.on_nodes(2, 4),
    JobShape.on_nodes(3, 1), JobShape.on_nodes(4, 2)]


def trace(seed: int, n: int = 60) -> Trace:
    rng = random.Random(seed)
    jobs, t = [], 0
    for i in range(n):
        t += rng.randint(20, 900)  # distinct instants: one arrival at a time
        shape = rng.choice(SHAPES)
        jobs.append(TraceJob(i, shape.total, float(t), 60.0 * rng.randint(5, 240), rng.choice(sorted(CLASSES.mapping)),
                             shape=shape))
    return Trace(f"shapes-{seed}", tuple(jobs))


# the simulator's placements with a site's starvation bound, as pald runs them ([policy])
CONFIG = EventConfig(num_nodes=8, gpus_per_node=4, nodes_per_rack=4, network=False, jobs_stay_put=True,
                     classes=CLASSES, variability_seed=3, starvation_bound_s=PolicyConfig().starvation_bound_s)


class PaldDecider:
    """The simulator's cluster as pald's Slurm; pald decides."""

    def __init__(self, tmp_path, placement: str):
        self.tmp_path = tmp_path
        self.placement = placement
        self.clock = ManualClock()
        self.seen: set[int] = set()
        self.held: dict[int, JobRequest] = {}
        self.active: dict[int, JobRequest] = {}  # the simulator's jobs at the last decision
        self.submitted: dict[int, float] = {}
        self.acted: list[tuple] = []

    # ---- the simulator's side --------------------------------------------------------------
    def start(self, cluster: ClusterView, ranking: Ranking) -> None:
        self.cluster = cluster
        self.where = cluster.gpu_by_location()
        racks: dict[str, list[str]] = {}
        for node in cluster.nodes:
            racks.setdefault(node.rack, []).append(node.name)
        topo = self.tmp_path / "topology.conf"
        topo.write_text("".join(f"SwitchName={r} Nodes={compress(ns)}\n" for r, ns in racks.items())
                        + f"SwitchName=spine Switches={','.join(racks)}\n")
        cfg = Config(daemon=DaemonConfig(socket=str(self.tmp_path / "s"), heartbeat_file=str(self.tmp_path / "hb")),
                     policy=PolicyConfig(placement=self.placement), slurm=SlurmConfig(topology_conf=str(topo)))
        self.pald = Pald(cfg, None, self, self, clock=self.clock)
        entries = tuple(RankingEntry(g.node, g.slot, c, cr.scores[g.gpu_id], cr.sf[g.gpu_id], 0)
                        for c, cr in ranking.classes.items() for g in cluster.gpus)
        self.pald.service.set_snapshot(RankingSnapshot(1, ranking.method, datetime.now(timezone.utc), entries))
        self.pald.service.set_class_map(dict(CLASSES.mapping))

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan:
        self.clock.set(now)
        self.active = {j.job_id: j for j in jobs}
        self.held = {k: v for k, v in self.held.items() if k in self.active and not self.active[k].running_on}
        launch: dict[int, tuple[int, ...]] = {}
        self.pald.sync()
        assert self.pald.service.view.free == view.free  # pald sees the simulator's cluster
        for job in sorted((j for j in jobs if j.job_id not in self.seen), key=lambda j: j.submit_time):
            self.seen.add(job.job_id)
            self.submitted[job.job_id] = now
            reply = self.pald.handle(self.place_request(job))
            if reply.decision is DecisionKind.PLACE:
                launch[job.job_id] = self.gpus(reply.nodes)
            else:
                assert reply.decision is DecisionKind.DEFER, reply
                self.held[job.job_id] = job
        held = self.pald.sync()
        for rel in self.pald.cycle(held) if held else ():
            assert rel.choice is not None, rel
            launch[rel.job_id] = self.gpus(rel.choice.nodes)
            self.held.pop(rel.job_id)
        return RoundPlan(frozenset(), launch)

    def next_wakeup(self, now: float) -> None:
        return None  # pald's cycle runs at the simulator's every instant here

    def gpus(self, nodes) -> tuple[int, ...]:
        return tuple(sorted(self.where[(n, s)] for n, slots in nodes.items() for s in slots))

    def place_request(self, job: JobRequest) -> PlaceRequest:
        shape = shape_of(job)
        comment = f"pal:class={job.app},net={job.net_sensitivity}"
        if shape.is_per_node:
            fields = JobFields(uid=1000, comment=comment, gpus_per_node=shape.per_node, min_nodes=shape.nodes,
                               tres_per_node=f"gres:gpu:{shape.per_node}")
        else:
            fields = JobFields(uid=1000, comment=comment, gpus_per_job=shape.total, tres_per_job=f"gres:gpu:{shape.total}")
        fields = JobFields(**{**fields.__dict__, "time_limit": int(job.remaining_time // 60)})
        return PlaceRequest(fields, CommentSpec(job.app, net=job.net_sensitivity), request_id=f"sim{job.job_id}")

    # ---- pald's Slurm ------------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        used: dict[str, set[int]] = {}
        for job in self.active.values():
            for g in job.running_on:
                used.setdefault(self.cluster.gpus[g].node, set()).add(self.cluster.gpus[g].slot)
        return [NodeInfo(n.name, "mixed" if n.name in used else "idle", (), len(n.gpu_ids), len(used.get(n.name, ())),
                         frozenset(used.get(n.name, ())), 1, (), ("gpu",)) for n in self.cluster.nodes]

    def jobs_info(self, job: JobRequest) -> JobInfo:
        shape = shape_of(job)
        running = bool(job.running_on)
        slots: dict[str, set[int]] = {}
        for g in job.running_on:
            slots.setdefault(self.cluster.gpus[g].node, set()).add(self.cluster.gpus[g].slot)
        # a running job's limit less its run time is what pald takes as left of it: here the
        # simulator's own estimate, so both engines plan around the same ends
        now = self.clock.now()
        start = int(job.waiting_since) if running else 0  # (a running request's waiting_since: its start)
        limit = job.remaining_time + (now - start) if running else job.remaining_time
        return JobInfo(
            job_id=job.job_id, name="sim", state="RUNNING" if running else "PENDING",
            reason="None" if running else "JobHeldUser", user_id=1000,
            comment=f"pal:class={job.app},net={job.net_sensitivity}",
            admin_comment=f"pal:defer;req=sim{job.job_id}", nodes=tuple(slots), required_nodes=(),
            node_count=shape.nodes or 1, tres_per_node=f"gres:gpu:{shape.per_node}" if shape.is_per_node else "",
            gpu_slots={n: frozenset(s) for n, s in slots.items()}, priority=1 if running else 0,
            submit_time=self.submitted[job.job_id], start_time=start, time_limit_s=limit,
            tres_per_job="" if shape.is_per_node else f"gres:gpu:{shape.total}")

    def site(self, nodes, partitions=None):
        return None  # no partitions: every GPU node is eligible

    def jobs(self) -> list[JobInfo]:
        return [self.jobs_info(j) for j in self.active.values() if j.running_on or j.job_id in self.held]

    def place_held_job(self, job_id, nodes, gres_spec, release=True, partition=None):
        self.acted.append(("gres", job_id, tuple(nodes), gres_spec))

    def place_nodes(self, job_id, nodes, release=True, partition=None):
        self.acted.append(("nodes", job_id, tuple(nodes)))

    def release(self, job_id):
        raise AssertionError(f"job {job_id} released untouched: every job here has a shape")


@pytest.mark.parametrize("placement", ["pal", "pmfirst", "pal-net", "pal-fit"])
@pytest.mark.parametrize("seed", [1, 2])
def test_pald_and_the_simulator_place_every_job_alike(tmp_path, placement, seed):
    tr = trace(seed)
    sim_starts, pald_starts = [], []
    EventSimulator(CONFIG).run(tr, placement, on_start=lambda t, j, g: sim_starts.append((t, j, tuple(sorted(g)))))
    decider = PaldDecider(tmp_path, placement)
    EventSimulator(CONFIG).run(tr, placement, decider=decider,
                               on_start=lambda t, j, g: pald_starts.append((t, j, tuple(sorted(g)))))
    assert len(sim_starts) == len(tr.jobs)  # Slurm's rule: every job starts exactly once
    for ours, theirs in zip(sim_starts, pald_starts):
        assert ours == theirs, f"first difference: simulator {ours}, pald {theirs}"
    assert sim_starts == pald_starts
    # the trace exercised both submit-time placements and held jobs released by the cycle,
    # per-node shapes over several nodes, and pald acted on Slurm for every release
    counts = decider.pald.counts
    assert counts["place"] > 0 and counts["defer"] > 0 and counts["pass"] == 0
    assert counts["place"] + counts["released"] == len(tr.jobs) == counts["place"] + len(decider.acted)
    multi = [j for j in tr.jobs if j.shape.is_per_node and j.shape.nodes > 1]
    assert multi and all(len({decider.cluster.gpus[g].node for g in gpus}) == tr.jobs[j].shape.nodes
                         for _t, j, gpus in pald_starts if tr.jobs[j] in multi)
