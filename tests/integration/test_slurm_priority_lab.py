"""pald's copy of Slurm's multifactor priority against Slurm's own, on the lab (Slurm 22.05,
`PriorityType=priority/multifactor`).

Ordinary pending jobs (not held: a held job shows 0, docs/decisions/site-priority.md) of
different sizes, partitions, CPU counts and nice values wait behind a job that holds every GPU;
for each, pald's `model.priority` from what `slurm.priority` reads must give the priority squeue
shows, and the weighted job size and partition factors sprio shows; and for a held job, the
priority Slurm gives it once released is what pald computed while it was held.

The instant compared: without slurmdbd this lab's slurmctld computes a job's priority when it is
submitted and does not recompute it (sprio's AGE stays 0 while the jobs wait minutes), so
pald's number is taken at each job's submit time. The second test runs the accounting lab
(slurmdbd): fair share of two accounts with equal shares, one using every GPU, QOS priority and
age, where slurmctld recomputes every PriorityCalcPeriod. Association priorities are covered by
tests/unit/slurm/test_priority.py only. The third runs pald with `queue = "slurm"` and the hook
on the accounting lab: of two held PAL jobs wanting the same GPUs, the light account's, though
submitted later, starts first. The fourth runs a mixed workload of both accounts there, as
ordinary jobs under stock Slurm and as PAL jobs under pald: every held PAL job that went ahead
of a higher-priority one did so as Slurm's backfill allows, and the two accounts' waits compare
as under stock Slurm. The fifth runs it mixed, some jobs PAL and the others ordinary: every job
that went ahead of a higher-priority ordinary one did so as Slurm's backfill allows, by Slurm's
own plan for the ordinary job, and no ordinary job waits much longer than under stock Slurm.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pal_lab.lab import missing_binaries, start_lab
from pal_slurm.config import PolicyConfig
from pal_slurm.model.priority import factors, priority
from pal_slurm.slurm.priority import priority_job, read_site_priority
from tests.support.accounting_pald import hooked_accounting_lab
from tests.support.site_order_workload import (
    MIXED_PAL,
    NOT_BACKFILL,
    WORKLOAD,
    WorkloadRun,
    ordinary_passes,
    run_workload,
    site_order_lines,
)

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


@pytest.mark.each_release
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


# Slurm's backfill every second (its own default: every 30 s, bf_interval): the lab's jobs run
# seconds, a site's hours, and a pass every 30 s would hold a job a backfill slot pald fills at
# its next cycle for several of these jobs' lengths (slurm.conf keeps the last of two lines)
LAB_BACKFILL = "SchedulerParameters=batch_sched_delay=0,bf_interval=1\n"
FAIR_SHARE_WEIGHTS = ("PriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightFairshare=10000\n"
                      "PriorityWeightJobSize=1000\nPriorityWeightQOS=2000\nPriorityMaxAge=01:00:00\n"
                      "PriorityCalcPeriod=1\nPriorityDecayHalfLife=1-0\n" + LAB_BACKFILL)
CALC_PERIOD_S = 60.0  # PriorityCalcPeriod=1 (minutes): how old Slurm's last computation may be


def sprio_all(env: dict[str, str]) -> dict[int, tuple[int, ...]]:
    """job -> (priority, age, fair share, job size, QOS), weighted, as sprio prints them."""
    out = subprocess.run(["sprio", "-h", "-o", "%i|%Y|%A|%F|%J|%Q"], env=env, capture_output=True, text=True,
                         check=True).stdout
    return {int(r[0]): tuple(int(x) for x in r[1:]) for r in (line.split("|") for line in out.split())}


@pytest.fixture(scope="module")
def fair_share_lab():
    """One accounting lab (2 nodes x 4 GPUs, the hook pointed at a pald started later) where
    accounts heavy and light have equal shares and heavy uses every GPU, once Slurm's decay
    pass has charged heavy's use; four ordinary jobs of both accounts and QOS wait. Its
    recompute period is a minute, so the tests share the wait."""
    with hooked_accounting_lab("pal-priority-fs-", nodes=2, gpus=4, extra_conf=FAIR_SHARE_WEIGHTS,
                               qos=("high",)) as rig:
        env = rig.lab.client_env()
        for argv in (["modify", "qos", "high", "set", "priority=100"], ["add", "account", "heavy,light"],
                     ["add", "user", "root", "account=heavy,light", "qos=normal,high"]):
            subprocess.run(["sacctmgr", "-i", *argv], env=env, check=True, capture_output=True)
        blocker = rig.lab.sbatch("--account=heavy", "--gres=gpu:4", "-N", "2", wrap="sleep 600")  # every GPU
        time.sleep(1)
        pending = [rig.lab.sbatch("--account=heavy", "--gres=gpu:1", wrap="true"),
                   rig.lab.sbatch("--account=light", "--gres=gpu:1", wrap="true"),
                   rig.lab.sbatch("--account=light", "--qos=high", "--gres=gpu:2", "-c", "4", wrap="true"),
                   rig.lab.sbatch("--account=heavy", "--qos=high", "--gres=gpu:1", "-c", "8", wrap="true")]
        # until Slurm's decay pass has charged heavy's use and recomputed the waiting jobs
        deadline = time.monotonic() + 4 * CALC_PERIOD_S
        while time.monotonic() < deadline:
            shown = sprio_all(env)
            if all(j in shown for j in pending) and shown[pending[0]][2] < shown[pending[1]][2]:
                break
            time.sleep(5)
        else:
            pytest.fail(f"Slurm's fair share did not tell the accounts apart: {sprio_all(env)}")
        yield rig, blocker, pending


@pytest.mark.each_release
def test_fair_share_qos_and_age_through_slurmdbd(fair_share_lab) -> None:
    """Two accounts with equal shares, one of them using every GPU: pald's fair-share, QOS, job
    size and age factors against sprio's, and its total against squeue's. slurmctld recomputes
    every PriorityCalcPeriod (here a minute), so its age may be up to a minute behind pald's,
    computed at the read."""
    rig, _, pending = fair_share_lab
    lab = rig.lab
    env = lab.client_env()
    for _attempt in range(5):  # one instant: no decay pass between the reads
        before = sprio_all(env)
        read = read_site_priority(lab.runner, lab.reader.nodes())
        jobs = {j.job_id: j for j in lab.reader.jobs()}
        now = time.time()
        if sprio_all(env) == before:
            break
    assert read is not None and read.missing == {}
    w = read.site.weights
    report = {}
    for job_id in pending:
        job = jobs[job_id]
        mine = priority_job(job, read.partitions)
        f = factors(mine, read.site, now)
        total, age, fair, size, qos = before[job_id]
        assert abs(w.fairshare * f.fairshare - fair) <= 1, (job_id, f, before[job_id])
        assert abs(w.qos * f.qos - qos) <= 0.5 and abs(w.job_size * f.job_size - size) <= 0.5, (job_id, f)
        lag = w.age * (CALC_PERIOD_S + 5) / w.max_age_s  # Slurm's age may be this much behind
        assert -1 <= w.age * f.age - age <= lag + 1, (job_id, f.age, age)
        ours = priority(mine, read.site, now)
        assert -2 <= ours - job.priority <= lag + 2, (job_id, ours, job.priority)
        report[job_id] = (ours, job.priority)
    assert report[pending[1]][1] > report[pending[0]][1]  # the light account's job goes first
    print("pald vs squeue (fair share, QOS, age):", report,
          "max diff", max(abs(a - b) for a, b in report.values()))


def fair_share(env: dict[str, str]) -> dict[str, float]:
    """account -> its user's FairShare in sshare (root is the lab's one user)."""
    out = subprocess.run(["sshare", "-P", "-a"], env=env, capture_output=True, text=True, check=True).stdout
    rows = [line.split("|") for line in out.splitlines()[1:]]
    return {r[0].strip(): float(r[-1]) for r in rows if r[1] == "root" and r[-1]}


def start_time(env: dict[str, str], job_id: int) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return next(w.split("=", 1)[1] for w in out.split() if w.startswith("StartTime="))


QUEUE = os.environ.get("PAL_TEST_PRIORITY_QUEUE", "slurm")  # "fifo": the control the test must fail on
MIXED_TRIES = 3  # mixed runs of the workload until one makes a PAL job go ahead of an ordinary one


@pytest.mark.each_release
def test_pald_releases_held_pal_jobs_in_slurms_priority_order(fair_share_lab) -> None:
    """pald (queue order `slurm`, the real hook) holds heavy's whole-cluster PAL job, then
    light's, submitted later; once the cluster frees, light's starts first."""
    rig, blocker, pending = fair_share_lab
    lab = rig.lab
    env = lab.client_env()
    subprocess.run(["scancel", *map(str, pending)], env=env, check=True)  # only the PAL jobs wait
    assert fair_share(env)["heavy"] < fair_share(env)["light"]
    rig.start_pald(policy=f'queue = "{QUEUE}"')
    whole = ("--gres=gpu:4", "-N", "2", "--comment=pal:class=resnet")  # one at a time
    heavy = lab.sbatch("--account=heavy", *whole, wrap="sleep 2")
    time.sleep(1)
    light = lab.sbatch("--account=light", *whole, wrap="sleep 2")
    time.sleep(2)  # both held by the hook, seen by pald's cycle
    held = {j.job_id: j for j in lab.reader.jobs()}
    assert held[heavy].held and held[light].held, (held[heavy], held[light])
    subprocess.run(["scancel", str(blocker)], env=env, check=True)
    for job in (heavy, light):
        assert lab.wait_job(job, timeout=120) == "COMPLETED", job
    started = {"heavy": start_time(env, heavy), "light": start_time(env, light)}
    assert started["light"] < started["heavy"], started  # ISO times of one day compare as text
    print("fair share", fair_share(env), "started", started)


# How far the heavy-to-light ratio of mean waits under pald may be from stock Slurm's, as a
# fraction of stock's, in one run. The target is 0.10 on the mean; over runs of this workload
# (benchmarks/site_order_waits.py, docs/decisions/site-priority.md) the difference was -0.067 on
# average with a standard deviation of 0.066 (pald releases a wave of jobs about a second after
# stock Slurm starts it, which weighs on the light account's few-second waits): one run is held
# to the measured mean difference plus two standard deviations (0.067 + 2 x 0.066).
WAIT_RATIO_BOUND = 0.20
START_SLACK_S = 1  # Slurm's start times are whole seconds


def test_held_pal_jobs_start_in_slurms_order_or_as_its_backfill_allows(fair_share_lab) -> None:
    """The same mixed workload (tests/support/site_order_workload.py) as ordinary jobs under stock
    Slurm, then as PAL jobs held by the hook and released by pald (`queue = "slurm"`). For
    every PAL job released while a higher-priority one stayed held (pald's log names both, each
    with the priority it computed, and the held one's reservation), the pass is one Slurm's
    backfill allows: the passer's time limit ends by the held job's planned start, or it holds
    none of the GPUs reserved for it. A job released in an earlier cycle than a lower-priority
    one starts no later. And the heavy account's mean wait over the light one's is within
    WAIT_RATIO_BOUND of the same ratio under stock Slurm."""
    rig, blocker, pending = fair_share_lab
    lab = rig.lab
    env = lab.client_env()
    subprocess.run(["scancel", str(blocker), *map(str, pending)], env=env, check=False)
    lab.wait_idle(60)
    rig.start_pald(policy=f'queue = "{QUEUE}"', placement=PolicyConfig().placement)  # pald's default: pal-fit
    stock = run_workload(lab, pal=False)
    log = rig.root / "pald.log"
    offset = log.stat().st_size
    pal = run_workload(lab, pal=True)
    lines = site_order_lines(log, offset)
    ran = pal.jobs
    released_at = {}  # job -> the line (cycle) that released it
    for i, line in enumerate(lines):
        assert [r.priority for r in line] == sorted((r.priority for r in line), reverse=True), line
        for r in line:
            if r.released:
                released_at.setdefault(r.job_id, i)
    assert set(ran) <= set(released_at), ("every PAL job released in the site's order", set(ran) - set(released_at))
    passes = []
    for low in ran:
        line = lines[released_at[low]]
        me = next(r for r in line if r.job_id == low)
        for high in line[:line.index(me)]:
            if high.released or high.job_id not in ran or high.priority <= me.priority:
                continue
            # `low` went ahead of a higher-priority job: the exception Slurm's backfill makes
            by_limit = high.planned_in_s is not None and ran[low].limit_s <= high.planned_in_s + START_SLACK_S
            disjoint = high.planned_in_s is not None and high.reserved is not None and not (
                ran[low].gpus & high.reserved)
            passes.append((low, high.job_id, "ends by its planned start" if by_limit else
                           "outside its reservation" if disjoint else "NOT ALLOWED"))
            assert by_limit or disjoint, (low, me, high, ran[low])
    for high in ran:
        for low in ran:
            if released_at[high] < released_at[low]:
                assert ran[high].start <= ran[low].start + START_SLACK_S, (high, low, ran[high], ran[low])
    assert any(not r.released for line in lines for r in line), "the workload made no job wait"
    ratio_pal, ratio_stock = pal.wait_ratio(), stock.wait_ratio()
    print("passes (low, high, why):", passes, "\nmean waits heavy/light: pald",
          (round(pal.mean_wait("heavy"), 1), round(pal.mean_wait("light"), 1)), "stock",
          (round(stock.mean_wait("heavy"), 1), round(stock.mean_wait("light"), 1)),
          f"ratios pald {ratio_pal:.3f} stock {ratio_stock:.3f}, off by {ratio_pal / ratio_stock - 1:+.3f}")
    assert len(pal.jobs) == len(stock.jobs) == len(WORKLOAD)
    assert abs(ratio_pal / ratio_stock - 1) <= WAIT_RATIO_BOUND, (ratio_pal, ratio_stock)


def started_priorities(run: WorkloadRun, pald_computed: dict[int, int]) -> dict[int, int]:
    """job -> its priority when it started: Slurm's last read before (an ordinary job), else
    the one pald computed (a PAL job Slurm started at its release, never shown unheld)."""
    out = {}
    for job in run.jobs:
        seen = run.last_priority(job)
        out[job] = seen if seen is not None else pald_computed[job]
    return out


def test_ordinary_jobs_beside_pal_jobs_wait_only_as_slurms_backfill_allows(fair_share_lab) -> None:
    """The workload (tests/support/site_order_workload.py) as ordinary jobs under stock Slurm,
    then mixed: MIXED_PAL's jobs as PAL jobs (held by the hook, released by pald with
    `queue = "slurm"`), the others ordinary. For each ordinary job O and each job X that
    started before it while O waited with a higher priority, the pass is one Slurm's backfill
    allows, by Slurm's own plan for O read before X started (ordinary_passes): X's time limit
    ends by O's planned start, or X is off O's planned nodes. The same check on the stock run
    holds Slurm's own passes to the rule (the check reads Slurm's plan as its backfill does).
    The mix must make a PAL job go ahead of a waiting ordinary one (heavy's small PAL jobs
    before its 2-node ordinary job), else the check saw nothing: whether it does depends on
    which of Slurm's start and pald's first release comes first once the blocker ends (light's
    small ordinary jobs can take the node heavy's 2-node job would reserve), so the mixed run is
    repeated, up to MIXED_TRIES times, until it does; every run is held to the rule. Each
    ordinary job's wait, mixed against stock: none longer by more than the longest time limit
    in the workload (a passer Slurm's backfill admits may hold GPUs an ordinary job would have
    taken when earlier jobs end before their limits, for at most its own limit)."""
    rig, blocker, pending = fair_share_lab
    lab = rig.lab
    env = lab.client_env()
    subprocess.run(["scancel", str(blocker), *map(str, pending)], env=env, check=False)
    lab.wait_idle(60)
    rig.start_pald(policy=f'queue = "{QUEUE}"', placement=PolicyConfig().placement)
    stock = run_workload(lab, pal=False)
    stock_passes = ordinary_passes(stock, started_priorities(stock, {}), START_SLACK_S)
    assert not [p for p in stock_passes if p.why == NOT_BACKFILL], stock_passes
    longest_limit = max(limit_min for _, _, limit_min, _ in WORKLOAD) * 60
    log = rig.root / "pald.log"
    pal_went_ahead = []
    for attempt in range(1, MIXED_TRIES + 1):
        offset = log.stat().st_size
        mixed = run_workload(lab, pal=MIXED_PAL)
        computed = {r.job_id: r.priority for line in site_order_lines(log, offset) for r in line if r.released}
        assert {j for j, r in mixed.jobs.items() if r.pal} <= set(computed), "every PAL job released by pald"
        priorities = started_priorities(mixed, computed)
        passes = ordinary_passes(mixed, priorities, START_SLACK_S)
        stock_by, mixed_by = stock.by_index(), mixed.by_index()
        extra = {i: mixed.wait(mixed_by[i].job_id) - stock.wait(stock_by[i].job_id)
                 for i in range(len(WORKLOAD)) if i not in MIXED_PAL}
        print(f"mixed run {attempt}: passes (ahead, behind ordinary, why):",
              {arm: [(p.ahead, p.behind, p.why) for p in ps] for arm, ps in
               (("stock", stock_passes), ("mixed", passes))},
              "\nordinary waits stock", {i: round(stock.wait(stock_by[i].job_id), 1) for i in extra},
              "mixed", {i: round(mixed.wait(mixed_by[i].job_id), 1) for i in extra},
              f"\nmixed - stock: mean {sum(extra.values()) / len(extra):+.1f} s, worst {max(extra.values()):+.1f} s",
              "\nmixed: job -> (index, PAL, priority, start, nodes, Slurm's planned starts)",
              {j: (r.index, r.pal, priorities[j], round(r.start - mixed.t0), sorted(r.nodes),
                   sorted({round(p.start - mixed.t0) for p in mixed.plans.get(j, []) if p.start is not None}))
               for j, r in sorted(mixed.jobs.items(), key=lambda jr: jr[1].start)})
        assert len(mixed.jobs) == len(stock.jobs) == len(WORKLOAD)
        assert not [p for p in passes if p.why == NOT_BACKFILL], passes
        assert max(extra.values()) <= longest_limit + START_SLACK_S, extra
        pal_went_ahead = [p for p in passes if mixed.jobs[p.ahead].pal]
        if pal_went_ahead:
            break
    assert pal_went_ahead, f"no PAL job went ahead of a waiting ordinary one in {MIXED_TRIES} mixed runs"
