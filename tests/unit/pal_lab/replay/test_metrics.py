import pytest

from pal_lab.replay.jobcomp import JobCompError, parse_jobcomp
from pal_lab.replay.metrics import ReplayIncomplete, job_results, percentile, summarise
from pal_lab.replay.plan import plan_replay
from pal_slurm.sim.trace import Trace, TraceJob

LINE = ("JobId={id} UserId=root(0) GroupId=root(0) Name={name} JobState={state} Partition=gpu TimeLimit=1 "
        "StartTime=2026-11-23T17:29:{start:02d} EndTime=2026-11-23T17:29:{end:02d} NodeList=gpu[01-02] NodeCnt=2 "
        "ProcCnt=2 WorkDir=/w ReservationName= Tres=cpu=2 Account= QOS= WcKey= Cluster=unknown "
        "SubmitTime=2026-11-23T17:29:{sub:02d} EligibleTime=2026-11-23T17:29:{sub:02d} DerivedExitCode=0:0 ExitCode=0:0")


def test_parse_reads_slurms_fields():
    recs = parse_jobcomp(LINE.format(id=4, name="replay-1", state="COMPLETED", start=10, end=20, sub=5) + "\n\n")
    (r,) = recs
    assert (r.job_id, r.name, r.state, r.end - r.start, r.start - r.submit, r.time_limit_min) == (4, "replay-1", "COMPLETED", 10, 5, 1)


def test_parse_names_the_bad_line():
    with pytest.raises(JobCompError, match="line 2: no JobState"):
        parse_jobcomp(LINE.format(id=1, name="x", state="COMPLETED", start=1, end=2, sub=0) + "\nJobId=2 Name=y\n")


def _plan():
    return plan_replay(Trace("t", (TraceJob(1, 4, 0.0, 100.0, "BERT"), TraceJob(2, 1, 10.0, 10.0, "BERT"))), 10.0, 4, 8)


def _payload(slow, net, placement):
    return {"gpu_slowdown": slow, "net_factor": net, "placement": placement}


def test_results_scale_slurm_times_back_to_trace_seconds():
    comp = parse_jobcomp("\n".join([
        LINE.format(id=1, name="replay-1", state="COMPLETED", start=2, end=6, sub=1),
        LINE.format(id=2, name="replay-2", state="COMPLETED", start=3, end=4, sub=2)]))
    payloads = {"replay-1": _payload(1.1, 1.0, {"gpu01": [0, 1, 2, 3]}), "replay-2": _payload(1.0, 1.0, {"gpu02": [0]})}
    jobs = job_results(_plan(), comp, payloads)
    assert [j.jct_s for j in jobs] == [50.0, 20.0]
    s = summarise("t", "stock", jobs, total_gpus=8)
    assert s.avg_jct_s == 35.0 and s.makespan_s == 50.0
    assert s.utilization == pytest.approx((4 * 40 + 1 * 10) / (8 * 50))
    assert s.gpu_weighted_slowdown == pytest.approx((4 * 1.1 + 1.0) / 5)
    assert s.comm_overhead_s == 0.0


def test_missing_or_failed_jobs_are_named():
    comp = parse_jobcomp(LINE.format(id=1, name="replay-1", state="TIMEOUT", start=2, end=6, sub=1))
    with pytest.raises(ReplayIncomplete, match=r"1 job\(s\) without records \['replay-2'\].*replay-1=TIMEOUT"):
        job_results(_plan(), comp, {"replay-1": _payload(1, 1, {})})


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5


def test_sub_second_clocks_replace_slurms_whole_seconds():
    # Slurm's records say 1 s for each job (600 trace s at scale 600); the harness's sbatch
    # clock and the payloads' own times say how long each job really took.
    comp = parse_jobcomp("\n".join([
        LINE.format(id=1, name="replay-1", state="COMPLETED", start=2, end=6, sub=1),
        LINE.format(id=2, name="replay-2", state="COMPLETED", start=3, end=4, sub=2)]))
    payloads = {"replay-1": {**_payload(1.1, 1.0, {"gpu01": [0, 1, 2, 3]}), "start": 101.25, "end": 104.75},
                "replay-2": {**_payload(1.0, 1.0, {"gpu02": [0]}), "start": 102.5, "end": 103.0}}
    submitted = {"replay-1": 101.0, "replay-2": 102.0}
    jobs = job_results(_plan(), comp, payloads, submitted)
    assert [j.jct_s for j in jobs] == pytest.approx([37.5, 10.0])  # x scale 10
    assert [j.submit_s for j in jobs] == pytest.approx([0.0, 10.0])
    assert [j.run_s for j in jobs] == pytest.approx([35.0, 5.0])
    # a job the harness has no clock for: every job falls back to Slurm's records
    assert [j.jct_s for j in job_results(_plan(), comp, payloads, {"replay-1": 101.0})] == [50.0, 20.0]
