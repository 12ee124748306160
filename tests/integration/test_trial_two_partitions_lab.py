"""The trial path with two partitions on the lab (real Slurm, the real hook and pald): one in
`shadow`, one `on`, one workload. The workload runs twice: with PAL `off` everywhere (stock
Slurm) and with the two modes. In the shadow partition every job runs where stock Slurm ran it
(same nodes and GPUs, same start order, never held); in the `on` partition PAL places every
job. `palctl trial report` covers both, and for each job the slowdown it gives of the GPUs the
job ran on (Slurm's in the shadow partition, PAL's in the other) is what the job's payload
measured, within 1%.

The jobs are the replay's (pal_lab/replay): each payload reads the GPUs Slurm gave it and runs
`base_s x` the slowest one's slowdown; the ranking pald and the report read holds those same
slowdowns, so the report's figure and the payload's wall time measure one thing two ways."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest

from pal_lab.replay.ctldlog import slurm_starts
from pal_lab.replay.harness import LabShape
from pal_lab.replay.plan import ReplayJob, payload_spec, plan_replay
from pal_slurm.daemon.process import REPO
from pal_slurm.model import DecisionKind
from pal_slurm.model.classes import AppClassMap
from pal_slurm.ranking.profiles import gpu_profiles
from pal_slurm.ranking.snapshot import RankingEntry
from pal_slurm.sim.network import NetworkModel
from pal_slurm.sim.trace import Trace, TraceJob
from pal_slurm.store.bootstrap import open_store
from tests.integration.test_faults import Rig, quiet, rig_in, wait_for

pytestmark = pytest.mark.slurm

SHADOW, ON = "trial", "placed"  # the two partitions, two of the lab's 4 nodes each
PARTITIONS = (f"PartitionName={SHADOW} Nodes=gpu[01-02] MaxTime=INFINITE State=UP\n"
              f"PartitionName={ON} Nodes=gpu[03-04] MaxTime=INFINITE State=UP\n")
GPUS = (1, 2, 1, 3)  # each partition's jobs: 7 of its 8 GPUs, all running at once
BASE_S = 8.0  # a job's run time on the median GPU (wall seconds): 1% of it leaves room for a loaded host's late wake-ups
PERF_CLASS = "A"  # pald's default class: the `on` jobs' started records carry none
SHAPE = LabShape(num_nodes=4, gpus_per_node=4, nodes_per_rack=4)
SEED = 5
TOLERANCE = 0.01  # the report's slowdown against the payload's measured one


@pytest.fixture(scope="module")
def rig():
    with rig_in("typed", extra_conf=PARTITIONS) as r:
        yield r


def workload() -> tuple[ReplayJob, ...]:
    """The replay's jobs, one-node shapes, in submission order."""
    trace = Trace("two-partitions", tuple(TraceJob(i, n, 0.0, BASE_S, "resnet50", iter_s=1.0)
                                          for i, n in enumerate(GPUS)))
    return plan_replay(trace, 1.0, SHAPE.gpus_per_node, SHAPE.num_nodes * SHAPE.gpus_per_node,
                       classes=AppClassMap({}, default=PERF_CLASS)).jobs


@dataclass(frozen=True)
class Ran:
    """One job of one arm: Slurm's id, its admin comment, where its payload saw it run (node ->
    slots), when Slurm started it (slurmctld's log, epoch s) and the slowdown its run time
    measured (wall time / the median GPU's)."""

    job_id: int
    comment: str
    placement: dict[str, list[int]]
    started: float
    measured: float


def run_arm(rig: Rig, arm: str, specs: dict[str, str]) -> dict[str, list[Ran]]:
    """Submit the workload to both partitions (the shadow one first, each job right after the
    one before), wait until every job has ended; partition -> its jobs in submission order."""
    out = {p: rig.root / f"results-{arm}-{p}" for p in (SHADOW, ON)}  # the payloads' records, by job name
    for d in out.values():
        d.mkdir()
    submitted = {p: [rig.lab.sbatch(*job.sbatch_args(), f"--partition={p}", f"--chdir={REPO}",
                                    wrap=f"{sys.executable} -m pal_lab.replay.payload {specs[job.name]} {out[p]}")
                     for job in workload()] for p in (SHADOW, ON)}
    for ids in submitted.values():
        for job_id in ids:
            assert rig.lab.wait_job(job_id, timeout=90) == "COMPLETED", rig.lab.job_output(job_id)
    comments = {j.job_id: j.admin_comment for j in rig.lab.reader.jobs()}
    starts = slurm_starts(rig.lab.log())
    ran: dict[str, list[Ran]] = {}
    for p, ids in submitted.items():
        for job_id, job in zip(ids, workload()):
            rec = json.loads((out[p] / f"{job.name}.json").read_text())
            assert rec["slurm_job_id"] == job_id
            median_s = rec["base_s"] * rec["net_factor"] / job.scale
            ran.setdefault(p, []).append(Ran(job_id, comments[job_id], rec["placement"], starts[job_id][0],
                                             (rec["end"] - rec["start"]) / median_s))
    return ran


def start_order(jobs: list[Ran]) -> list[int]:
    """The jobs' submission indices in the order Slurm started them."""
    return sorted(range(len(jobs)), key=lambda i: (jobs[i].started, i))


def write_ranking(rig: Rig) -> dict[str, str]:
    """The replay's per-GPU slowdowns (the simulator's draw) as the store's ranking, and each
    job's payload spec holding the same slowdowns; job name -> spec path."""
    cluster = SHAPE.cluster()
    slowdowns = gpu_profiles(cluster.size, SEED)
    specs = {}
    for job in workload():
        spec = payload_spec(job, cluster, slowdowns, NetworkModel())
        path = rig.root / f"{job.name}.spec.json"
        path.write_text(json.dumps(spec))
        specs[job.name] = str(path)
    store = open_store(rig.db)
    try:
        store.write_ranking("optimal", [RankingEntry(node, slot, PERF_CLASS, score, score, 0)
                                        for node, scores in spec["slowdown"].items()
                                        for slot, score in enumerate(scores)])
    finally:
        store.close()
    return specs


def report(rig: Rig) -> dict:
    p = rig.palctl("trial", "report", "--json")
    assert p.returncode == 0, p.stderr
    doc: dict = json.loads(p.stdout)
    return doc


def test_a_shadow_partition_runs_as_stock_slurm_and_its_report_matches_the_payloads_beside_an_on_one(rig):
    quiet(rig)
    specs = write_ranking(rig)
    assert rig.palctl("mode", "*", "off").returncode == 0
    stock = run_arm(rig, "stock", specs)
    assert all(r.comment.startswith("pal:pass=partition_off") for rs in stock.values() for r in rs), stock

    for partition, mode in ((SHADOW, "shadow"), (ON, "on")):
        p = rig.palctl("mode", partition, mode)
        assert p.returncode == 0 and "pald follows it" in p.stdout, p.stdout + p.stderr
    quiet(rig)  # pald sees every GPU free again: the `on` jobs are placed at once
    trial = run_arm(rig, "trial", specs)
    shadow, on = trial[SHADOW], trial[ON]
    # the shadow partition: where stock Slurm ran each job, in its order, never held or pinned
    assert [r.placement for r in shadow] == [r.placement for r in stock[SHADOW]]
    assert start_order(shadow) == start_order(stock[SHADOW])
    assert all(r.comment.startswith("pal:pass=shadow") and "pal:defer" not in r.comment for r in shadow), shadow
    # the `on` partition: PAL placed every job (at submission, or held it and released it onto
    # better GPUs), on the GPUs its decision names
    assert all(r.comment.startswith("pal:placed=") or "pal:released" in r.comment for r in on), on

    def runs_recorded() -> bool:
        ran = report(rig)["ran_jobs"]
        return all(len(ran.get(m, [])) == len(GPUS) and all(j["run_s"] is not None for j in ran[m])
                   for m in ("shadow", "on"))

    wait_for(runs_recorded, 30, "pald never recorded every job's start and end")
    doc = report(rig)
    by_job = {int(j["job_id"]): j for m in ("shadow", "on") for j in doc["ran_jobs"][m]}
    assert {by_job[r.job_id]["partition"] for r in shadow} == {SHADOW}
    assert {by_job[r.job_id]["partition"] for r in on} == {ON}
    assert doc["shadowed"] == len(GPUS) and doc["ran"]["on"]["jobs"] == len(GPUS)
    store = open_store(rig.db)
    try:
        decided = {d.job_id: d for d in store.decisions(limit=1000) if d.kind is DecisionKind.PLACE}
    finally:
        store.close()
    for r in on:  # the hook's decision for the job (its request) or the cycle's release, as the job ran
        pal = decided.get(str(r.job_id)) or decided[f"req:{by_job[r.job_id]['request']}"]
        assert not pal.reason.startswith("shadow") and dict(pal.nodes) == {n: tuple(s) for n, s in r.placement.items()}

    worst = 0.0  # each job's slowdown in the report (shadow: of Slurm's GPUs; on: of PAL's) against its payload's
    for r in shadow + on:
        reported = by_job[r.job_id]["slowdown"]
        worst = max(worst, abs(reported / r.measured - 1))
        print(f"{by_job[r.job_id]['partition']} job {r.job_id} on {r.placement}: report {reported:.4f}, "
              f"payload {r.measured:.4f}")
    print(f"largest relative difference {worst:.5f}")
    assert worst <= TOLERANCE
    text = rig.palctl("trial", "report").stdout
    assert "Slurm (shadow)" in text and "PAL (on)" in text
