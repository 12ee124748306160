"""The product's main path on a real Slurm: sbatch --comment=pal:class=... -> job_submit.lua ->
pald -> the job runs on the GPUs PAL chose. Real slurmctld + 4 slurmd (4 emulated GPUs each,
per-slot GRES), the real hook, the real pald process on SQLite."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

from pal_slurm.daemon.process import REPO, PaldProcess, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

JOB = 'echo "CVD=$CUDA_VISIBLE_DEVICES NODE=$SLURMD_NODENAME START=$(date +%s.%N)"; sleep {sleep}; echo "END=$(date +%s.%N)"'


@pytest.fixture(scope="module")
def env(tmp_path_factory, lab_factory):
    tmp = tmp_path_factory.mktemp("pald")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    db = f"sqlite:///{tmp}/pal.db"
    store = open_store(db)
    # gpu01's slots 0 and 1 are slow for class A (resnet): PAL must avoid them.
    entries = [RankingEntry(n, s, c, 2.5 if (n, s, c) in {("gpu01", 0, "A"), ("gpu01", 1, "A")} else 1.0,
                            2.5 if (n, s, c) in {("gpu01", 0, "A"), ("gpu01", 1, "A")} else 1.0, 0)
               for n in lab.nodes for s in range(4) for c in "ABCD"]
    store.write_ranking("optimal", entries)
    store.close()
    cfg = write_config(tmp / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf, heartbeat=tmp / "hb")
    pald = PaldProcess(cfg, sock, tmp / "pald.log").start()
    yield lab, pald, db
    pald.stop()


def squeue_job(lab, job_id):
    out = subprocess.run(["squeue", "--json"], env=lab.client_env(), capture_output=True, text=True, check=True).stdout
    for j in json.loads(out)["jobs"]:
        if j["job_id"] == job_id:
            return j
    return None


def admin_comment(lab, job_id) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=lab.client_env(),
                         capture_output=True, text=True).stdout
    for field in out.split():
        if field.startswith("AdminComment="):
            return field[len("AdminComment="):]
    return ""


def parse_out(text):
    vals = dict(kv.split("=", 1) for line in text.splitlines() for kv in line.split() if "=" in kv)
    return vals


def sbatch_capture(lab, *args, wrap):
    p = subprocess.run(["sbatch", "--parsable", f"--output={lab.lab_dir}/out/%j.out", *args, "--wrap", wrap],
                       env=lab.client_env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip().split(";")[0]), p.stderr


def test_pal_job_runs_on_the_gpus_pal_chose(env):
    lab, pald, _ = env
    job = lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet", wrap=JOB.format(sleep=0))
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    out = parse_out(lab.job_output(job))
    # Stock Slurm would give gpu01 slots 0,1 (lowest node, lowest slots): the slow ones.
    assert (out["NODE"], out["CVD"]) == ("gpu01", "2,3")
    assert admin_comment(lab, job).startswith("pal:placed=gpu01")


def test_non_pal_job_is_untouched(env):
    lab, _, _ = env
    job = lab.sbatch("--gres=gpu:2", wrap=JOB.format(sleep=0))
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    assert "pal:" not in admin_comment(lab, job)
    assert parse_out(lab.job_output(job))["CVD"] == "0,1"


def test_malformed_comment_gets_a_message_and_runs(env):
    lab, _, _ = env
    job, stderr = sbatch_capture(lab, "--gres=gpu:1", "--comment=pal:class=", wrap="true")
    assert "pal:" in stderr  # slurm.log_user reaches sbatch's stderr
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    assert admin_comment(lab, job).startswith("pal:pass=")


def test_unknown_class_is_placed_as_the_default_with_a_warning(env):
    lab, _, _ = env
    job, stderr = sbatch_capture(lab, "--gres=gpu:1", "--comment=pal:class=mystery", wrap="true")
    assert "unknown class 'mystery'" in stderr
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    assert admin_comment(lab, job).startswith("pal:placed=")


def test_deferred_job_is_released_onto_the_policys_gpus(env):
    lab, _, _ = env
    job = lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet,mode=defer", wrap=JOB.format(sleep=0))
    assert admin_comment(lab, job).startswith("pal:defer")
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    out = parse_out(lab.job_output(job))
    assert (out["NODE"], out["CVD"]) == ("gpu01", "2,3")


def test_fifty_concurrent_submissions_never_share_a_gpu(env):
    lab, _, _ = env
    ids, errors = [], []
    lock = threading.Lock()

    def submit(i):
        try:
            j = lab.sbatch("--gres=gpu:1", f"--comment=pal:class={'resnet' if i % 2 else 'bert'}",
                           wrap=JOB.format(sleep=1))
            with lock:
                ids.append(j)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(ids) == 50
    runs = []
    for j in ids:
        assert lab.wait_job(j, timeout=240) == "COMPLETED", j
        out = parse_out(lab.job_output(j))
        runs.append((out["NODE"], out["CVD"], float(out["START"]), float(out["END"])))
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            na, ga, sa, ea = runs[a]
            nb, gb, sb, eb = runs[b]
            if (na, ga) == (nb, gb):
                assert ea <= sb or eb <= sa, f"GPU {na}:{ga} shared by two running jobs"


def test_pald_stopped_jobs_pass(env):
    lab, pald, _ = env
    pald.stop()
    try:
        job = lab.sbatch("--gres=gpu:1", "--comment=pal:class=resnet", wrap="true")
        assert lab.wait_job(job, timeout=60) == "COMPLETED"
        assert admin_comment(lab, job).startswith("pal:pass=")
    finally:
        pald.start()


def test_pald_hanging_the_hook_times_out_and_jobs_pass(env):
    lab, pald, _ = env
    pald.send(signal.SIGSTOP)
    try:
        t = time.monotonic()
        job = lab.sbatch("--gres=gpu:1", "--comment=pal:class=resnet", wrap="true")
        elapsed = time.monotonic() - t
        assert elapsed < 2.0  # the hook gave up after its 150 ms deadline
        assert "timeout" in admin_comment(lab, job)
    finally:
        pald.send(signal.SIGCONT)
    assert lab.wait_job(job, timeout=60) == "COMPLETED"


def wait_quiet(lab, pald, timeout=15.0):
    """Until the lab is idle and pald, from a Slurm read taken after that, sees the whole
    cluster free and holds no reservation.

    Why the read must be newer: pald's view is up to a sync old. A view read just before the
    previous test's last job started shows every GPU free while that job still runs; the next
    test's first placements then see it (a Debian 13 CI run: the hanging test's job on gpu01
    when the blockers came, so one blocker passed and a "held" job was placed)."""
    lab.wait_idle(timeout)
    idle_at = time.monotonic()
    deadline = idle_at + timeout
    while time.monotonic() < deadline:
        d = pald.health().details
        age = d["last_sync_age_s"]
        fresh = age is not None and time.monotonic() - idle_at > age + 0.1  # age is rounded to 0.1 s
        if fresh and d["free_gpus"] == d["gpus"] and d["reservations"] == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"pald never quiet: {pald.health().details}")


def test_pald_restarted_midway_loses_no_held_job(env):
    lab, pald, _ = env
    wait_quiet(lab, pald)
    blockers = [lab.sbatch("--gres=gpu:4", "--comment=pal:class=bert,mode=now", wrap="sleep 4") for _ in range(4)]
    held = [lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet", wrap=JOB.format(sleep=0)) for _ in range(3)]
    comments = [admin_comment(lab, j) for j in blockers + held]
    assert all(c.startswith("pal:defer") for c in comments[4:]), comments[4:]
    pald.stop(signal.SIGKILL)  # crash, not a clean stop
    time.sleep(1)
    pald.start()
    for j in blockers + held:
        assert lab.wait_job(j, timeout=120) == "COMPLETED", j
    for j in held:
        assert "NODE" in parse_out(lab.job_output(j))


def test_decisions_are_recorded_in_the_store(env):
    _, pald, db = env
    time.sleep(1.0)  # one cycle flushes buffered decisions
    store = open_store(db)
    try:
        kinds = {d.kind.value for d in store.decisions(limit=500)}
    finally:
        store.close()
    assert {"place", "defer"} <= kinds


def test_explain_tells_why_a_job_got_its_gpus(env):
    from click.testing import CliRunner

    from pal_slurm.cli.main import cli

    lab, pald, _ = env
    wait_quiet(lab, pald)
    job = lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet", wrap="true")
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    time.sleep(1.0)  # decisions are flushed by the next cycle
    r = CliRunner().invoke(cli, ["--config", str(pald.config), "explain", str(job)], env=lab.client_env())
    assert r.exit_code == 0, r.output
    assert "gpu01:2  score 1.000" in r.output and "gpu01:0" in r.output  # chose 2,3; the slow 0 avoided


def racked_pald(lab, pald, tmp_path, placement: str) -> PaldProcess:
    """Stop the module's pald (once the cluster is quiet) and start one with `placement` and
    two leaf switches from a topology.conf (gpu01-02, gpu03-04); the caller stops it and
    starts the module's pald again."""
    wait_quiet(lab, pald)
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=leaf1 Nodes=gpu[01-02]\nSwitchName=leaf2 Nodes=gpu[03-04]\n"
                    "SwitchName=spine Switches=leaf[1-2]\n")
    cfg = tmp_path / "pal.toml"
    cfg.write_text(pald.config.read_text().replace("[slurm]", f'[slurm]\ntopology_conf = "{topo}"')
                   .replace('placement = "pal"', f'placement = "{placement}"'))
    pald.stop()
    return PaldProcess(cfg, pald.socket, tmp_path / "pald.log").start()


def test_multi_node_job_waits_for_one_rack_while_a_small_job_passes(env, tmp_path):
    """Delay scheduling through pald (the network-aware placement's delay rule, the one the
    simulator runs): racks from a topology.conf; a 2-node job waits for two nodes under one
    leaf switch instead of taking one free node in each rack."""
    lab, pald, db = env
    racked = racked_pald(lab, pald, tmp_path, "pal-net")
    try:
        blockers = [lab.sbatch("--gres=gpu:4", f"--nodelist={n}", wrap="sleep 5") for n in ("gpu01", "gpu03")]
        for b in blockers:
            assert lab.wait_job(b, timeout=30, states=("RUNNING",)) == "RUNNING"
        big = lab.sbatch("-N2", "--gres=gpu:4", "--comment=pal:class=bert,mode=defer",
                         wrap='echo "NODE=$SLURMD_NODENAME"; srun -N2 hostname')
        small = lab.sbatch("--gres=gpu:1", "--comment=pal:class=vgg19,mode=defer", wrap="true")
        assert lab.wait_job(small, timeout=30) == "COMPLETED"  # released while the big one waits
        assert lab.job_state(big) == "PENDING"  # it could have had gpu02 + gpu04 (two racks)
        assert lab.wait_job(big, timeout=60) == "COMPLETED"
        assert admin_comment(lab, big).startswith("pal:defer")
        assert racked.health().details["rack_timers_s"]["medium"] > 0
    finally:
        racked.stop()
        pald.start()
    out = lab.job_output(big)
    hosts = {line.strip() for line in out.splitlines() if line.startswith("gpu")}
    assert hosts in ({"gpu01", "gpu02"}, {"gpu03", "gpu04"}), out


def test_a_talkative_job_waits_for_a_running_job_s_limit_instead_of_spreading_over_switches(env, tmp_path):
    """pal-fit under pald plans around the running jobs (their limit less their run time):
    a 2-node `net=high` job whose only placement now spans both leaf switches waits for the
    job whose limit ends soonest to free a node in the leaf it can share, instead of starting
    across the spine. Before pald read the running jobs it spread it at once."""
    lab, pald, _ = env
    fitting = racked_pald(lab, pald, tmp_path, "pal-fit")
    blockers = []
    try:
        # free: 2 GPUs on gpu02 (leaf1) and 2 on gpu04 (leaf2); gpu01's job ends within its 1 min
        for node, gpus, limit, sleep in (("gpu01", 4, 1, 6), ("gpu02", 2, 60, 120), ("gpu03", 4, 60, 120),
                                         ("gpu04", 2, 60, 120)):
            blockers.append(lab.sbatch(f"--gres=gpu:{gpus}", f"--nodelist={node}", f"--time={limit}",
                                       wrap=f'sleep {sleep}; echo "END=$(date +%s.%N)"'))
        for b in blockers:
            assert lab.wait_job(b, timeout=30, states=("RUNNING",)) == "RUNNING"
        time.sleep(2.5)  # pald's syncs see them running
        big, _ = sbatch_capture(lab, "-N2", "--gres=gpu:2", "--time=60", "--comment=pal:class=bert,net=high",
                                wrap=JOB.format(sleep=0) + '; srun -N2 hostname')
        time.sleep(2.0)
        assert lab.job_state(big) == "PENDING"  # it could have had gpu02 + gpu04 (two leaves)
        assert admin_comment(lab, big).startswith("pal:defer")
        assert lab.wait_job(big, timeout=60) == "COMPLETED"
        first_end = float(parse_out(lab.job_output(blockers[0]))["END"])
    finally:
        for b in blockers:
            subprocess.run(["scancel", str(b)], env=lab.client_env(), capture_output=True)
        fitting.stop()
        pald.start()
    out = lab.job_output(big)
    hosts = {line.strip() for line in out.splitlines() if line.startswith("gpu")}
    assert hosts == {"gpu01", "gpu02"}, out  # in leaf1, once gpu01's job ended
    assert float(parse_out(out)["START"]) >= first_end
