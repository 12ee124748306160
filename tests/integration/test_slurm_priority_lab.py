"""pald's copy of Slurm's multifactor priority against Slurm's own, on the lab (Slurm 22.05,
`PriorityType=priority/multifactor`, no slurmdbd).

Ordinary pending jobs (not held: a held job shows 0, docs/decisions/site-priority.md) of
different sizes, partitions, CPU counts and nice values wait behind a job that holds every GPU;
for each, pald's `model.priority` from what `slurm.priority` reads must give the priority squeue
shows, and the weighted job size and partition factors sprio shows; and for a held job, the
priority Slurm gives it once released is what pald computed while it was held.

The instant compared: without slurmdbd this lab's slurmctld computes a job's priority when it is
submitted and does not recompute it (sprio's AGE stays 0 while the jobs wait minutes), so
pald's number is taken at each job's submit time. Fair share, QOS and association factors
need slurmdbd and are covered by tests/unit/slurm/test_priority.py only.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pal_lab.lab import missing_binaries, start_lab
from pal_slurm.model.priority import factors, priority
from pal_slurm.slurm.priority import priority_job, read_site_priority

pytestmark = pytest.mark.slurm

WEIGHTS = ("PriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightJobSize=1000\n"
           "PriorityWeightPartition=1000\nPriorityMaxAge=01:00:00\nPriorityCalcPeriod=1\n"
           "PartitionName=hi Nodes=ALL MaxTime=INFINITE State=UP PriorityJobFactor=4\n")


def sprio(env: dict[str, str]) -> dict[int, tuple[int, int, int]]:
    """job -> (priority, weighted job size, weighted partition) as sprio prints them (rounded)."""
    out = subprocess.run(["sprio", "-h", "-o", "%i|%Y|%J|%P"], env=env, capture_output=True, text=True,
                         check=True).stdout
    rows = [line.split("|") for line in out.split()]
    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def test_pald_computes_the_priority_slurm_gives_pending_jobs() -> None:
    if missing_binaries():
        pytest.skip("Slurm lab cluster unavailable, missing: " + ", ".join(missing_binaries()))
    root = Path(tempfile.mkdtemp(prefix="pal-priority-"))
    lab = start_lab(root / "lab", extra_conf=WEIGHTS)
    try:
        env = lab.client_env()
        lab.sbatch("--gres=gpu:4", "-N", "4", wrap="sleep 300")  # every GPU: the rest wait
        time.sleep(1)
        pending = [
            lab.sbatch("--gres=gpu:1", "-c", "2", wrap="true"),
            lab.sbatch("--gres=gpu:2", "-N", "2", "-c", "8", "-p", "hi", wrap="true"),
            lab.sbatch("--gres=gpu:1", "-t", "10", "--nice=50", wrap="true"),
            lab.sbatch("--gres=gpu:4", "-N", "3", "-c", "16", wrap="true"),
            lab.sbatch("--gpus=3", "-n", "5", "-p", "hi", wrap="true"),
        ]
        held = lab.sbatch("--hold", "--gres=gpu:2", "-c", "6", "-p", "hi", "--nice=7", wrap="true")
        time.sleep(2)
        read = read_site_priority(lab.runner, lab.reader.nodes())
        assert read is not None and read.site.cluster_cpus == 64 and read.site.node_count == 4
        jobs = {j.job_id: j for j in lab.reader.jobs()}
        shown = sprio(env)
        diffs = []
        for job_id in pending:
            job = jobs[job_id]
            assert job.state == "PENDING" and not job.held, job
            mine = priority_job(job, read.partitions)
            ours = priority(mine, read.site, now=job.submit_time)
            f = factors(mine, read.site, now=job.submit_time)
            w = read.site.weights
            diffs.append(abs(ours - job.priority))
            assert ours == job.priority, (job_id, ours, job.priority, mine)
            assert shown[job_id][0] == job.priority
            assert abs(shown[job_id][1] - w.job_size * f.job_size) <= 0.5, (job_id, shown[job_id], f)
            assert abs(shown[job_id][2] - w.partition * f.partition) <= 0.5, (job_id, shown[job_id], f)
        # a held job shows 0 and is not in sprio; released, Slurm gives it what pald computed
        assert jobs[held].held and jobs[held].priority == 0 and held not in shown
        expected = priority(priority_job(jobs[held], read.partitions), read.site, now=jobs[held].submit_time)
        subprocess.run(["scontrol", "release", str(held)], env=env, check=True)
        time.sleep(1)
        released = next(j for j in lab.reader.jobs() if j.job_id == held)
        diffs.append(abs(expected - released.priority))
        assert released.priority == expected, (expected, released)
        print("pald vs squeue priorities:", {j: (jobs[j].priority, shown[j]) for j in pending},
              "held then released:", (expected, released.priority), "max diff", max(diffs))
    finally:
        lab.stop()
