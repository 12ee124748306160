"""pald as an unprivileged user with Slurm Administrator rights places PAL jobs on a real Slurm.

A real lab with real accounting (MariaDB + slurmdbd: AdminLevel lives there), the real hook in
slurmctld, and the real pald process started as a system user created here (setpriv: no
capability, not SlurmUser) whose only Slurm right is `sacctmgr ... adminlevel=admin`
(Operator cannot write a job's AdminComment, where pald marks each release `pal:released`). PAL
jobs are held by the hook, held again by pald (admin hold), then pinned to the policy's GPUs
and released by pald, each marked released; every job completes (jobs lost = 0) and pald's log
shows no Slurm permission error. Needs root (to create the user and run pald as it); skipped otherwise.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_lab.accounting_lab import missing_binaries as accounting_missing
from pal_lab.accounting_lab import start_accounting_lab
from pal_lab.lab import missing_binaries as lab_missing
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

pytestmark = pytest.mark.slurm

USER = "pal-lab-operator"
JOB = 'echo "CVD=$CUDA_VISIBLE_DEVICES NODE=$SLURMD_NODENAME"; sleep {sleep}'
PERMISSION_ERRORS = ("Access/permission denied", "Invalid user id", "Permission denied")


def _uid_of(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


@pytest.fixture(scope="module")
def operator_user():
    if os.geteuid() != 0:
        pytest.skip("creating a system user and running pald as it needs root")
    missing = lab_missing() + accounting_missing() + [c for c in ("useradd", "userdel", "setpriv")
                                                      if shutil.which(c) is None]
    if missing:
        pytest.skip("needs: " + ", ".join(missing))
    created = _uid_of(USER) is None
    if created:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True, capture_output=True)
    # pald runs from this checkout with this Python: the user must be able to read both (a
    # checkout under root's 0700 home, as in the Debian root the suite also runs in, is not)
    probe = subprocess.run(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "--",
                            sys.executable, "-c", "import pal_slurm"], cwd=str(REPO),
                           env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=60)
    if probe.returncode != 0:
        if created:
            subprocess.run(["userdel", USER], capture_output=True)
        pytest.skip(f"{USER} cannot run pald from {REPO} with {sys.executable} (not readable by it)")
    yield USER
    if created:
        subprocess.run(["userdel", USER], capture_output=True)


@pytest.fixture(scope="module")
def rig(operator_user):
    # pytest's tmp dirs are 0700 root: the user could reach neither the lab's slurm.conf nor
    # its munge socket there
    root = Path(tempfile.mkdtemp(prefix="pal-unprivileged-", dir="/tmp"))
    root.chmod(0o755)
    state = root / "state"
    state.mkdir()
    sock = state / "pald.sock"
    acct = start_accounting_lab(root / "acct", nodes=2, gpus=4,
                                hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    try:
        lab = acct.lab
        env = lab.client_env()
        for cmd in (["add", "account", "pal"], ["add", "user", operator_user, "account=pal"],
                    ["modify", "user", operator_user, "set", "adminlevel=admin"]):
            subprocess.run(["sacctmgr", "-i", *cmd], env=env, check=True, capture_output=True, timeout=30)
        db = f"sqlite:///{state}/pal.db"
        store = open_store(db)
        slow = {("gpu01", 0, "A"), ("gpu01", 1, "A")}  # PAL must avoid these for class A
        store.write_ranking("optimal", [RankingEntry(n, s, c, 2.5 if (n, s, c) in slow else 1.0,
                                                     2.5 if (n, s, c) in slow else 1.0, 0)
                                        for n in lab.nodes for s in range(4) for c in "ABCD"])
        store.close()
        uid = pwd.getpwnam(operator_user).pw_uid
        for p in [state, *state.iterdir()]:
            os.chown(p, uid, uid)
        cfg = write_config(root / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf,
                           heartbeat=state / "hb")
        cfg.chmod(0o644)
        pald = PaldProcess(cfg, sock, root / "pald.log", user=operator_user).start(timeout=40)
        try:
            yield lab, pald, uid
        finally:
            pald.stop()
    finally:
        acct.stop()
        shutil.rmtree(root, ignore_errors=True)


def _euid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])
    raise AssertionError("no Uid line")


def _show(lab, job: int) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job)], env=lab.client_env(),
                         capture_output=True, text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def test_an_unprivileged_pald_holds_places_and_releases_pal_jobs(rig):
    lab, pald, uid = rig
    assert pald.proc is not None and _euid(pald.proc.pid) == uid != 0
    blockers = [lab.sbatch("--gres=gpu:4", "--comment=pal:class=bert,mode=now", wrap="sleep 6") for _ in range(2)]
    deferred = [lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet", wrap=JOB.format(sleep=0)) for _ in range(3)]
    comments = {j: _show(lab, j).get("AdminComment", "") for j in deferred}
    assert all(c.startswith("pal:defer") for c in comments.values()), comments
    admin_held = set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(admin_held) < len(deferred):
        for j in deferred:  # pald turns the hook's user hold into an admin hold
            if _show(lab, j).get("Reason") == "JobHeldAdmin":
                admin_held.add(j)
        time.sleep(0.2)
    states = {j: lab.wait_job(j, timeout=120) for j in [*blockers, *deferred]}
    placed_now = lab.sbatch("--gres=gpu:2", "--comment=pal:class=resnet", wrap=JOB.format(sleep=0))
    tag = _show(lab, placed_now).get("AdminComment", "")
    assert tag.startswith("pal:placed="), tag
    states[placed_now] = lab.wait_job(placed_now, timeout=60)
    lost = [j for j, s in states.items() if s != "COMPLETED"]
    assert lost == [], states  # jobs lost = 0
    # an admin hold is lifted only by an Operator or above: pald released these (no failsafe runs)
    assert admin_held == set(deferred), admin_held
    out = dict(kv.split("=", 1) for kv in lab.job_output(placed_now).split() if "=" in kv)
    assert out["NODE"] == tag.split("=", 1)[1].split(";")[0].split(":")[0]  # where pald placed it
    log = pald.log.read_text(errors="replace")
    assert not [e for e in PERMISSION_ERRORS if e in log], log[-3000:]
    # pald's releases, marked as such (the mark follows a space: read scontrol's whole line)
    lines = {j: subprocess.run(["scontrol", "-o", "show", "job", str(j)], env=lab.client_env(),
                               capture_output=True, text=True).stdout for j in deferred}
    assert all(" pal:released" in line for line in lines.values()), lines
    health = pald.health().details
    assert health.get("leader") is True
