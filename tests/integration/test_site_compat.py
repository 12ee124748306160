"""pal-slurm on a site that already uses Slurm's own restrictions: a real Slurm lab
with several partitions, node features, an advance reservation and a drained node (and, on a lab with accounting, partitions
gated by QOS); the real hook and the real pald.

For every restriction and job shape users already type, the same jobs are submitted with a
`pal:` spec and without (the control). Counted: sbatch rejections because of PAL (must be 0),
jobs that did not run, jobs that ran outside what Slurm allows, and PAL-placed jobs that ran
anywhere but where PAL pinned them.

Lab (5 nodes x 4 GPUs):
  gpu01  drained
  gpu02  features big                 partitions gpu
  gpu03  features f3,big              partitions gpu, two (MaxNodes=1, MaxTime=60)
  gpu04  features f4                  partitions gpu, one, two
  gpu05  features f4, in reservation r1
"""

from __future__ import annotations

import subprocess
import time

import pytest

from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.intake.hostlist import expand
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

NODES = ("gpu01", "gpu02", "gpu03", "gpu04", "gpu05")
FEATURES = {"gpu02": "big", "gpu03": "f3,big", "gpu04": "f4", "gpu05": "f4"}
EXTRA_CONF = ("PartitionName=one Nodes=gpu04 MaxTime=INFINITE State=UP\n"
              "PartitionName=two Nodes=gpu[03-04] MaxNodes=1 MaxTime=60 State=UP\n")
OPEN = {"gpu02", "gpu03", "gpu04"}  # usable by a job outside r1 (gpu01 drained, gpu05 reserved)
PAL = "--comment=pal:class=resnet"
RUN = "sleep 1"
PER_CASE = 2

# (case, sbatch arguments, nodes Slurm may run it on, what PAL must do: place / pass:<reason>)
CASES = [
    ("default partition", ["--gres=gpu:1"], OPEN, "place"),
    ("-p one", ["-p", "one", "--gres=gpu:1"], {"gpu04"}, "place"),
    ("-p one,gpu minus one's node", ["-p", "one,gpu", "-x", "gpu04", "--gres=gpu:1"], {"gpu02", "gpu03"}, "place"),
    ("-p two -t 30", ["-p", "two", "-t", "30", "--gres=gpu:2"], {"gpu03", "gpu04"}, "place"),
    ("--constraint=f4", ["--constraint=f4", "--gres=gpu:1"], {"gpu04"}, "place"),
    ("--constraint=f3|f4", ["--constraint=f3|f4", "--gres=gpu:1"], {"gpu03", "gpu04"}, "place"),
    ("--constraint=(f3|f4)&big", ["--constraint=(f3|f4)&big", "--gres=gpu:1"], {"gpu03"}, "place"),
    ("--constraint=[f3|f4]", ["--constraint=[f3|f4]", "--gres=gpu:1"], {"gpu03", "gpu04"}, "place"),
    ("--constraint mixed & and |", ["--constraint=f3&big|f4", "--gres=gpu:1"], {"gpu03", "gpu04"},
     "pass:constraint_not_evaluated"),
    ("--exclude", ["--exclude=gpu[02-03]", "--gres=gpu:1"], {"gpu04"}, "place"),
    ("--nodelist", ["-w", "gpu03", "--gres=gpu:1"], {"gpu03"}, "place"),
    ("--reservation=r1", ["--reservation=r1", "--gres=gpu:1"], {"gpu05"}, "place"),
    ("--exclusive", ["--exclusive", "--gres=gpu:1"], OPEN, "place"),
    ("--mem --cpus-per-gpu", ["--mem=500", "--cpus-per-gpu=4", "--gres=gpu:2"], OPEN, "place"),
    ("-N2", ["-N", "2", "--gres=gpu:1"], OPEN, "place"),
    ("--gpus=2", ["--gpus=2"], OPEN, "place"),
    ("--gpus-per-task", ["--gpus-per-task=1", "-n", "2"], OPEN, "pass:gpus_per_task"),
    ("--gpus-per-socket", ["--gpus-per-socket=1", "--sockets-per-node=1"], OPEN, "pass:gpus_per_socket"),
    ("--ntasks-per-gpu", ["--ntasks-per-gpu=2", "--gres=gpu:1"], OPEN, "pass:ntasks_per_gpu"),
    # a begin far enough ahead that it is still in the future when the hook sees the job on a
    # loaded slurmctld (now+2 had passed by then on CI: the job was then, rightly, a normal one)
    ("--begin", ["--begin=now+12", "--gres=gpu:1"], OPEN, "pass:begin"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory, lab_factory):
    tmp = tmp_path_factory.mktemp("pald")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)},
                      nodes=len(NODES), features=FEATURES, extra_conf=EXTRA_CONF)
    lab.runner.run(["scontrol", "update", "nodename=gpu01", "state=drain", "reason=site-compat"])
    lab.runner.run(["scontrol", "create", "reservation", "reservationname=r1", "nodes=gpu05", "users=root",
                    "starttime=now", "duration=60"])
    pald = start_pald(tmp, lab, {(n, s, c): 1.0 + 0.1 * s for n in NODES for s in range(4) for c in "ABCD"})
    yield lab, pald
    pald.stop()


def start_pald(tmp, lab, slowdowns):
    """The real pald on SQLite for `lab`, serving a ranking of {(node, slot, class): slowdown}."""
    db = f"sqlite:///{tmp}/pal.db"
    store = open_store(db)
    store.write_ranking("optimal", [RankingEntry(n, s, c, sf, sf, 0) for (n, s, c), sf in slowdowns.items()])
    store.close()
    cfg = write_config(tmp / "pal.toml", socket=tmp / "pald.sock", db_url=db, slurm_conf=lab.slurm_conf,
                       heartbeat=tmp / "hb")
    return PaldProcess(cfg, tmp / "pald.sock", tmp / "pald.log").start()


def sbatch(lab, args, pal: bool, run: str = RUN):
    """(job id or None, stderr): None when sbatch refused the job."""
    argv = ["sbatch", "--parsable", f"--output={lab.lab_dir}/out/%j.out", *args, *([PAL] if pal else []),
            "--wrap", run]
    p = subprocess.run(argv, env=lab.client_env(), capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return int(p.stdout.strip().split(";")[0]), ""


def wait_all(lab, ids, timeout=180.0):
    """{job id: JobInfo} once every job has finished (squeue keeps them for MinJobAge)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = {j.job_id: j for j in lab.reader.jobs() if j.job_id in ids}
        if len(jobs) == len(ids) and all(j.state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
                                         for j in jobs.values()):
            return jobs
        if time.monotonic() > deadline:
            stuck = {i: (j.state, j.reason) for i, j in jobs.items() if j.state in ("PENDING", "RUNNING")}
            raise AssertionError(f"jobs not finished after {timeout:g} s: {stuck}")
        time.sleep(0.5)


def pal_outcome(job) -> tuple[str, frozenset[str] | None]:
    """('place', nodes PAL pinned) / ('pass:<reason>', None) / ('none', None) from admin_comment
    and the pinned ReqNodeList (a deferred job is pinned by pald's cycle)."""
    tag = next((t for t in job.admin_comment.split() if t.startswith("pal:")), "")
    if tag.startswith("pal:placed="):
        return "place", frozenset(expand(tag[len("pal:placed="):].split(";")[0]))
    if tag.startswith("pal:defer"):
        return ("place", frozenset(job.required_nodes)) if job.required_nodes else ("pass:released", None)
    if tag.startswith("pal:pass="):
        return "pass:" + tag[len("pal:pass="):].split(";")[0], None
    return "none", None


def run_cases(lab, cases, per_case=PER_CASE):
    """Submit every case with and without PAL; returns (problems by kind, counts, job infos)."""
    submitted, rejected = [], []  # (case, pal?, job id) / (case, pal?, sbatch's error)
    for case, args, _allowed, _want in cases:
        for pal in (True, False):
            for _ in range(per_case):
                job, err = sbatch(lab, args, pal)
                if job is None:
                    rejected.append((case, pal, err))
                else:
                    submitted.append((case, pal, job))
    jobs = wait_all(lab, {j for _, _, j in submitted})
    by_case = {c: (set(allowed), want) for c, _, allowed, want in cases}
    problems = {"rejected": rejected, "not_run": [], "outside": [], "off_pal": [], "wrong_outcome": []}
    counts = {"jobs": len(submitted) + len(rejected), "place": 0, "pass": 0}
    for case, pal, job_id in submitted:
        job = jobs[job_id]
        allowed, want = by_case[case]
        if job.state != "COMPLETED":
            problems["not_run"].append((case, pal, job_id, job.state, job.reason))
            continue
        if not set(job.nodes) <= allowed:
            problems["outside"].append((case, pal, job_id, job.nodes))
        if not pal:
            continue
        outcome, pinned = pal_outcome(job)
        counts[outcome if outcome == "place" else "pass"] += 1
        if outcome == "place" and set(job.nodes) != pinned:
            problems["off_pal"].append((case, job_id, job.nodes, sorted(pinned)))
        if outcome != want:
            problems["wrong_outcome"].append((case, job_id, outcome, want, job.admin_comment))
    print(f"{counts['jobs']} jobs ({len(cases)} cases x {per_case} x PAL/control): "
          + ", ".join(f"{len(v)} {k}" for k, v in problems.items())
          + f"; PAL placed {counts['place']}, passed {counts['pass']}")
    return problems, jobs, submitted


def test_every_restriction_and_shape_runs_where_slurm_allows(site):
    lab, _ = site
    problems, _, _ = run_cases(lab, CASES)
    assert problems == {k: [] for k in problems}, problems


def test_user_hold_and_dependency_stay_the_users(site):
    lab, _ = site
    first, _ = sbatch(lab, ["--gres=gpu:1"], pal=True)
    held, _ = sbatch(lab, ["--hold", "--gres=gpu:1"], pal=True)
    after, _ = sbatch(lab, [f"--dependency=afterok:{first}", "--gres=gpu:1"], pal=True)
    time.sleep(2.0)  # several pald cycles: pald must not release the user's hold
    jobs = {j.job_id: j for j in lab.reader.jobs()}
    assert jobs[held].state == "PENDING" and jobs[held].held
    assert pal_outcome(jobs[held])[0] == "pass:user_hold"
    assert pal_outcome(jobs[after])[0] == "pass:dependency"
    lab.runner.run(["scontrol", "release", str(held)])
    done = wait_all(lab, {first, held, after}, timeout=60)
    assert {j.state for j in done.values()} == {"COMPLETED"}
    assert done[after].start_time >= done[first].start_time


def unfinished_elements(lab, array_id: int, outs: list) -> str:
    """Each element whose output has no END line yet, with what Slurm says of it (in full: a
    tuple's repr is cut short in pytest's report)."""
    jobs = {str(ref): j for j in lab.reader.jobs() if j.array_job_id == array_id for ref in j.element_refs()}
    lines = []
    for i, out in enumerate(outs, start=1):
        if out.exists() and "END=" in out.read_text():
            continue
        j = jobs.get(f"{array_id}_{i}")
        said = "no such job in squeue" if j is None else (
            f"{j.state} ({j.reason}) nodes {j.required_nodes} tres {j.tres_per_node} comment {j.admin_comment!r}")
        lines.append(f"element {i}: output {'has no END' if out.exists() else 'missing'}; {said}")
    return "array elements did not finish:\n" + "\n".join(lines)


def test_array_elements_run_side_by_side(site):
    """8 elements of 4 s on an idle lab with 12 usable GPUs: they run at once, as without PAL,
    each on the GPU pald chose for it (the hook holds the array, pald's cycle places and
    releases each element: Slurm splits it off under a job id of its own)."""
    lab, pald = site
    argv = ["sbatch", "--parsable", f"--output={lab.lab_dir}/out/arr-%A_%a.out", "--array=1-8", "--gres=gpu:1",
            PAL, "--wrap", 'echo "NODE=$SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES START=$(date +%s.%N)"; '
            'sleep 4; echo "END=$(date +%s.%N)"']
    t0 = time.monotonic()
    p = subprocess.run(argv, env=lab.client_env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    array_id = int(p.stdout.strip().split(";")[0])
    outs = [lab.lab_dir / "out" / f"arr-{array_id}_{i}.out" for i in range(1, 9)]
    deadline = time.monotonic() + 90
    while not all(o.exists() and "END=" in o.read_text() for o in outs):
        assert time.monotonic() < deadline, unfinished_elements(lab, array_id, outs)
        time.sleep(0.3)
    wall = time.monotonic() - t0
    runs = [dict(kv.split("=", 1) for kv in o.read_text().split()) for o in outs]
    starts = [float(r["START"]) for r in runs]
    ends = [float(r["END"]) for r in runs]
    gpus = {(r["NODE"], r["CVD"]) for r in runs}
    assert len(gpus) == 8, f"elements shared GPUs: {sorted(gpus)}"
    assert max(starts) < min(ends), f"not all 8 ran at once: starts {starts}, ends {ends}"
    assert {r["NODE"] for r in runs} <= OPEN
    elements = {j.array_task_id: j for j in lab.reader.jobs() if j.array_job_id == array_id}
    assert sorted(elements) == list(range(1, 9))
    for task, run in enumerate(runs, start=1):  # on PAL's choice: pald pinned it to the GPU it ran on
        j = elements[task]
        assert "pal:defer" in j.admin_comment and j.required_nodes == (run["NODE"],), (j.ref, j.required_nodes, run)
        assert j.tres_per_node == f"gres:gpu:s{run['CVD']}:1", (j.ref, j.tres_per_node, run)
    print("slots:", sorted(int(r["CVD"]) for r in runs))
    print(f"array of 8 x 4 s: {wall:.1f} s wall, {len(gpus)} distinct GPUs")


# ---- a heterogeneous site: GPU model types (Gres=gpu:a100:4 / gpu:v100:4) ------------------------
MODELS = {"gpu01": "a100", "gpu02": "a100", "gpu03": "v100", "gpu04": "v100"}
MODEL_CASES = [
    ("--gres=gpu:a100:2", ["--gres=gpu:a100:2"], {"gpu01", "gpu02"}, "place"),
    ("--gpus=v100:1", ["--gpus=v100:1"], {"gpu03", "gpu04"}, "place"),
    ("--gres=gpu:v100:1 -N2", ["-N", "2", "--gres=gpu:v100:1"], {"gpu03", "gpu04"}, "place"),
    ("--gres=gpu:2 (any model)", ["--gres=gpu:2"], set(MODELS), "place"),
    ("--gres=gpu:v100:1 -x gpu04", ["--gres=gpu:v100:1", "-x", "gpu04"], {"gpu03"}, "place"),
]


@pytest.fixture(scope="module")
def model_site(tmp_path_factory, lab_factory):
    tmp = tmp_path_factory.mktemp("pald-models")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)},
                      gres="model", gpu_models=MODELS)
    # gpu03 (the v100 node Slurm fills first) is slow for class A: PAL prefers gpu04
    pald = start_pald(tmp, lab, {(n, s, c): 2.5 if (n, c) == ("gpu03", "A") else 1.0
                                 for n in MODELS for s in range(4) for c in "ABCD"})
    yield lab, pald
    pald.stop()


def test_gpu_model_requests_keep_working_and_get_pals_nodes(model_site):
    lab, _ = model_site
    problems, jobs, submitted = run_cases(lab, MODEL_CASES)
    assert problems == {k: [] for k in problems}, problems
    v100_single = [jobs[j] for case, pal, j in submitted if pal and case == "--gpus=v100:1"]
    assert all(j.nodes == ("gpu04",) for j in v100_single), [j.nodes for j in v100_single]


# ---- the same site with pal-slurm's per-slot types: models as node features ---------------------
# `palctl slurm gres-conf --from` the model gres.conf above (Type=s0..s3, Features=a100/v100) and
# PAL_GPU_MODELS for the hook: the users' model requests are rewritten into counts on the model's
# nodes (PAL jobs and the control alike), and PAL binds exact GPUs on them
SLOT_MODEL_CASES = MODEL_CASES + [
    ("--gres=gpu:a100:1 -C a100|v100", ["--gres=gpu:a100:1", "--constraint=a100|v100"], {"gpu01", "gpu02"}, "place"),
]


@pytest.fixture(scope="module")
def slot_model_site(tmp_path_factory, lab_factory):
    tmp = tmp_path_factory.mktemp("pald-slot-models")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                      env={"PAL_SOCKET": str(sock), "PAL_GPU_MODELS": "a100,v100"},
                      gres="model-slots", gpu_models=MODELS)
    pald = start_pald(tmp, lab, {(n, s, c): 2.5 if (n, c) == ("gpu03", "A") else 1.0 + 0.1 * s
                                 for n in MODELS for s in range(4) for c in "ABCD"})
    yield lab, pald
    pald.stop()


def test_gpu_model_requests_keep_working_with_per_slot_types(slot_model_site):
    lab, _ = slot_model_site
    conf = (lab.lab_dir / "etc" / "gres.conf").read_text()
    assert "Type=s3" in conf and "a100" not in conf  # per-slot: the models are features now
    assert {n.name: n.gres for n in lab.reader.nodes()} == {n: "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1" for n in MODELS}
    problems, jobs, submitted = run_cases(lab, SLOT_MODEL_CASES)
    assert problems == {k: [] for k in problems}, problems
    v100_single = [jobs[j] for case, pal, j in submitted if pal and case == "--gpus=v100:1"]
    assert all(j.nodes == ("gpu04",) for j in v100_single), [j.nodes for j in v100_single]
    # the (a100|v100)&a100 case ran on a100 nodes although its own constraint allowed both
    anded = [jobs[j] for case, _, j in submitted if case.startswith("--gres=gpu:a100:1 -C")]
    assert anded and all(set(j.nodes) <= {"gpu01", "gpu02"} for j in anded), [j.nodes for j in anded]
    # PAL's jobs got exact slots (slot types in their GRES), the control jobs Slurm's count
    pal_bound = [jobs[j] for case, pal, j in submitted if pal and case == "--gres=gpu:a100:2"]
    assert all("gpu:s" in (j.tres_per_node or "") for j in pal_bound), [j.tres_per_node for j in pal_bound]


# A QOS gate needs Slurm accounting (slurmdbd): partition qp admits only QOS q1, nq refuses it.
QOS_NODES = ("gpu01", "gpu02", "gpu03")
QOS_CONF = ("PartitionName=qp Nodes=gpu03 AllowQos=q1 MaxTime=INFINITE State=UP\n"
            "PartitionName=nq Nodes=gpu02 DenyQos=q1 MaxTime=INFINITE State=UP\n")
QOS_CASES = [
    ("-p qp --qos=q1", ["-p", "qp", "--qos=q1", "--gres=gpu:1"], {"gpu03"}, "place"),
    ("-p nq,qp --qos=q1", ["-p", "nq,qp", "--qos=q1", "--gres=gpu:1"], {"gpu03"}, "place"),
    ("default partition --qos=q1", ["--qos=q1", "--gres=gpu:2"], set(QOS_NODES), "place"),
    # the user's default QOS is the association's, which the hook does not see: pald passes
    ("-p nq (default QOS)", ["-p", "nq", "--gres=gpu:1"], {"gpu02"}, "pass:partition_qos"),
]


@pytest.fixture(scope="module")
def qos_site(tmp_path_factory):
    from pal_lab.accounting_lab import missing_binaries, start_accounting_lab
    missing = missing_binaries()
    if missing:
        pytest.skip("accounting lab unavailable, missing: " + ", ".join(missing) + " (run scripts/install-deps.sh)")
    tmp = tmp_path_factory.mktemp("pald-qos")
    acct = start_accounting_lab(tmp_path_factory.mktemp("acct-qos"), nodes=len(QOS_NODES), gpus=4, qos=("q1",),
                                hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                                env={"PAL_SOCKET": str(tmp / "pald.sock")}, extra_conf=QOS_CONF)
    try:
        pald = start_pald(tmp, acct.lab, {(n, s, c): 1.0 + 0.1 * s for n in QOS_NODES for s in range(4)
                                          for c in "ABCD"})
        try:
            yield acct.lab, pald
        finally:
            pald.stop()
    finally:
        acct.stop()


def test_qos_gated_partitions_run_where_slurm_allows(qos_site):
    lab, _ = qos_site
    problems, jobs, submitted = run_cases(lab, QOS_CASES)
    assert problems == {k: [] for k in problems}, problems
    gated = [jobs[j] for case, pal, j in submitted if pal and case.startswith("-p ") and "q1" in case]
    assert len(gated) == 2 * PER_CASE and all(j.nodes == ("gpu03",) for j in gated), [j.nodes for j in gated]
    # Slurm ran them under the QOS they asked for; the default-QOS ones under the default
    assert {case: jobs[j].placement_request.qos for case, _, j in submitted} == {
        case: "q1" if "q1" in case else "normal" for case, *_ in QOS_CASES}


def test_heterogeneous_job_components_pass_and_run(site):
    lab, _ = site
    script = ("#!/bin/bash\n"
              f"#SBATCH --gres=gpu:1 {PAL}\n"
              "#SBATCH hetjob\n"
              f"#SBATCH --gres=gpu:1 {PAL}\n"
              "echo NODE=$SLURMD_NODENAME\n")
    job = lab.sbatch(script=script)
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    shown = lab.runner.run(["scontrol", "-o", "show", "job", str(job)]).splitlines()
    assert len(shown) == 2  # the two components
    assert all("AdminComment=pal:pass=hetjob" in line for line in shown), shown


# ---- a requeued PAL job is placed again (daemon/requeue.py) -------------------------------------
def wait_for(what, check, timeout=60.0, every=0.3):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def test_a_requeued_pal_job_is_placed_again_not_left_on_its_old_busy_slot(site):
    """`scontrol requeue` of a running PAL job while a job without PAL takes the exact GPU slot it
    had: pald takes the job back, holds it through Slurm's requeue delay, then places it on
    another free GPU, where it runs (left pinned, it would wait for the busy slot)."""
    lab, _ = site
    jobs = lambda: {j.job_id: j for j in lab.reader.jobs()}  # noqa: E731
    job, err = sbatch(lab, ["--gres=gpu:1", "--requeue"], pal=True, run="sleep 20")
    assert job is not None, err
    first = wait_for("the PAL job to run", lambda: (j := jobs()[job]).state == "RUNNING" and j.gpu_slots and j)
    assert pal_outcome(first)[0] == "place"
    [(node, slots)] = first.gpu_slots.items()
    [slot] = slots
    lab.runner.run(["scontrol", "requeue", str(job)])
    blocker, err = sbatch(lab, ["-w", node, f"--gres=gpu:s{slot}:1"], pal=False, run="sleep 60")
    assert blocker is not None, err
    wait_for("the blocker on the old slot", lambda: jobs()[blocker].state == "RUNNING")
    taken = wait_for("pald to take the requeued job back",
                     lambda: (j := jobs()[job]).held and "pal:defer;requeued=1" in j.admin_comment and j)
    assert taken.reason == "JobHeldAdmin" and taken.restart_count == 1
    time.sleep(3.0)  # several pald cycles inside Slurm's requeue delay (about 2 minutes)
    assert jobs()[job].held, "pald released the job before Slurm's requeue delay was over"
    lab.runner.run(["scontrol", "update", f"jobid={job}", "StartTime=now"])  # an admin skips the delay
    again = wait_for("the requeued job to run again", lambda: (j := jobs()[job]).state == "RUNNING" and j, 60)
    [(node2, slots2)] = again.gpu_slots.items()
    assert (node2, set(slots2)) != (node, {slot}), "it ran on its old slot"
    assert set(again.required_nodes) == {node2}  # where pald pinned it
    assert node2 in OPEN and jobs()[blocker].state == "RUNNING"
    lab.runner.run(["scancel", str(job), str(blocker)])


def test_a_requeued_multi_node_pal_job_runs_again_on_its_own_slots(site):
    """A `-N 2 --gres=gpu:2` PAL job first placed while s0-s1 were busy everywhere (so bound to
    s2-s3) is requeued once they are free. Slurm 22.05 keeps a retyped job's old slot types
    (count 0) and does not start it where they are busy, so pald places it again on s2-s3 of
    nodes that have them free (gpu03, gpu04: a job without PAL holds gpu02's s2), where it runs
    at once. (Rebound to PAL's otherwise best s0-s1 on gpu02 and gpu03, it waited with
    Reason=Resources until the blocker on gpu02's s2 ended.)"""
    lab, pald = site
    jobs = lambda: {j.job_id: j for j in lab.reader.jobs()}  # noqa: E731
    fillers = []
    for node in sorted(OPEN):
        filler, err = sbatch(lab, ["-w", node, "--gres=gpu:s0:1,gpu:s1:1"], pal=False, run="sleep 300")
        assert filler is not None, err
        fillers.append(filler)
    blocker = job = None
    try:
        wait_for("the fillers", lambda: all(jobs()[f].state == "RUNNING" for f in fillers))
        time.sleep(2.0)  # pald's view (a Slurm read every second) shows them too
        job, err = sbatch(lab, ["-N", "2", "--gres=gpu:2", "--requeue"], pal=True, run="sleep 60")
        assert job is not None, err
        first = wait_for("the PAL job to run", lambda: (j := jobs()[job]).state == "RUNNING" and j.gpu_slots and j)
        assert {frozenset(s) for s in first.gpu_slots.values()} == {frozenset({2, 3})}, (
            first.gpu_slots, first.tres_per_node, first.admin_comment, [(jobs()[f].state, jobs()[f].gpu_slots) for f in fillers])
        lab.runner.run(["scancel", *map(str, fillers)])
        lab.runner.run(["scontrol", "requeue", str(job)])
        blocker, err = sbatch(lab, ["-w", "gpu02", "--gres=gpu:s2:1"], pal=False, run="sleep 60")
        assert blocker is not None, err
        wait_for("the blocker", lambda: jobs()[blocker].state == "RUNNING")
        wait_for("pald to take the requeued job back",
                 lambda: (j := jobs()[job]).held and "pal:defer;requeued=1" in j.admin_comment)
        # an admin skips the requeue delay; not within the requeue's own second: slurmd refuses
        # to launch a job on a node it was requeued from with a credential of that second
        # ("Job credential revoked"), which is what the delay is for
        time.sleep(2.0)
        lab.runner.run(["scontrol", "update", f"jobid={job}", "StartTime=now"])
        try:
            again = wait_for("the requeued job to run again", lambda: (j := jobs()[job]).state == "RUNNING" and j, 40)
        except AssertionError:
            j = jobs()[job]
            raise AssertionError(f"job {job}: {j.state} {j.reason} {j.admin_comment!r} {j.tres_per_node} "
                                 f"{j.required_nodes}; pald's log:\n{pald.log.read_text()[-3000:]}") from None
        assert {n: set(s) for n, s in again.gpu_slots.items()} == {"gpu03": {2, 3}, "gpu04": {2, 3}}, again.gpu_slots
        assert again.restart_count == 1 and jobs()[blocker].state == "RUNNING"
    finally:
        lab.runner.run(["scancel", *(str(x) for x in (*fillers, blocker, job) if x is not None)])


def test_cpus_pald_promised_are_not_promised_twice(site):
    """Two PAL jobs that each need 10 of the 16 CPUs of partition one's only node, submitted
    back to back (no Slurm read in between, or one that does not show the first running yet):
    the first is placed there, the second waits in pald's queue (pald counts the CPUs it
    promised) and is released when the first is done; both run, neither is pinned to CPUs
    that are taken."""
    lab, _ = site
    ids = []
    for _ in range(2):
        job, err = sbatch(lab, ["-p", "one", "--cpus-per-gpu=10", "--gres=gpu:1"], pal=True, run="sleep 3")
        assert job is not None, err
        ids.append(job)
    done = wait_all(lab, set(ids), timeout=90)
    first, second = (done[i] for i in ids)
    assert first.state == second.state == "COMPLETED"
    assert pal_outcome(first)[0] == "place" and first.nodes == ("gpu04",)
    assert "pal:defer" in second.admin_comment, second.admin_comment  # not pinned onto promised CPUs
    assert second.nodes == ("gpu04",)  # (24.11's squeue shows no ReqNodeList once a job is done)


def test_a_pal_job_requeued_by_a_node_failure_runs_again_on_another_node(site):
    """A running `--requeue` PAL job whose node goes DOWN is requeued by Slurm; pinned to the
    dead node it would wait for ever (ReqNodeNotAvail). pald places it again on a live node."""
    lab, _ = site
    jobs = lambda: {j.job_id: j for j in lab.reader.jobs()}  # noqa: E731
    job, err = sbatch(lab, ["--gres=gpu:1", "--requeue"], pal=True, run="sleep 20")
    assert job is not None, err
    first = wait_for("the PAL job to run", lambda: (j := jobs()[job]).state == "RUNNING" and j)
    [node] = first.nodes
    lab.runner.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=compat-test"])
    try:  # drained too: ReturnToService=2 would bring a node that is only DOWN back at once
        lab.runner.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=compat-test"])
        wait_for("pald to take the requeued job back",
                 lambda: (j := jobs()[job]).held and "pal:defer;requeued=1" in j.admin_comment)
        lab.runner.run(["scontrol", "update", f"jobid={job}", "StartTime=now"])  # skip the requeue delay
        again = wait_for("the job to run again", lambda: (j := jobs()[job]).state == "RUNNING" and j, 60)
        assert again.nodes != (node,) and set(again.nodes) <= OPEN - {node}
        assert again.restart_count == 1 and set(again.required_nodes) == set(again.nodes)
    finally:
        lab.runner.run(["scontrol", "update", f"nodename={node}", "state=resume"])
        lab.runner.run(["scancel", str(job)])
        wait_for(f"{node} back in service", lambda: any(
            n.name == node and n.state in ("idle", "mixed", "allocated") for n in lab.reader.nodes()), 30)

# ---- palctl slurm gres-conf --from the site's gres.conf -----------------------------------------
def test_a_per_slot_gres_conf_made_from_a_sites_plain_one_binds_exact_gpus(lab_factory):
    """The lab's plain gres.conf (`NodeName=gpu[01-02] Name=gpu File=.../nvidia[0-3]`) turned
    per-slot by `palctl slurm gres-conf --from`: Slurm starts with it, a job asking for slot s2
    gets GPU 2, and a plain count request still runs."""
    lab = lab_factory(gres="from-plain", nodes=2)
    site_conf = (lab.lab_dir / "etc" / "gres.conf.site").read_text()
    assert "Type=" not in site_conf and "File=" in site_conf
    assert "Type=s3" in (lab.lab_dir / "etc" / "gres.conf").read_text()
    assert {n.name: n.gres for n in lab.reader.nodes()} == {
        n: "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1" for n in ("gpu01", "gpu02")}
    bound = lab.sbatch("-w", "gpu02", "--gres=gpu:s2:1", wrap="echo CVD=$CUDA_VISIBLE_DEVICES")
    plain = lab.sbatch("--gres=gpu:3", wrap="echo CVD=$CUDA_VISIBLE_DEVICES")
    assert lab.wait_job(bound, timeout=60) == "COMPLETED" and lab.wait_job(plain, timeout=60) == "COMPLETED"
    assert "CVD=2" in lab.job_output(bound)
    assert lab.job_output(plain).strip().split("=")[1].count(",") == 2
