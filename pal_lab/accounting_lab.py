"""A lab cluster with real Slurm accounting: MariaDB + slurmdbd + the lab's slurmctld, so that
`sacct --json` / `sacct -P` return what a site's accounting returns (for `palctl whatif` tests).

What works on Debian 12 (Slurm 22.05.8), found by trying:
- `sacct` needs slurmdbd (packages `slurmdbd`, `mariadb-server`); `jobcomp/filetxt` alone
  records neither GPUs (its Tres field lacks gres/gpu: that needs AccountingStorageTRES, which
  needs slurmdbd) nor the job comment, so it cannot feed the simulator.
- slurmctld must find slurmdbd up when it starts (else "fatal: You are running with a database
  but for some reason we have no TRES from it"), and the cluster must exist in the database
  (`sacctmgr add cluster`) first. slurmdbd authenticates with munge: it gets its own munged on
  the lab's key (written before the lab starts; the lab script keeps an existing key).
- `AccountingStorageTRES=gres/gpu` puts GPUs in AllocTRES; `AccountingStoreFlags=job_comment`
  keeps `--comment` (sacct's Comment field, `comment.job` in JSON).
- The database exists before slurmdbd starts (as a site creates it when granting slurmdbd's
  user): Debian 13's slurmdbd 24.11 with libmariadb 3.4 (MariaDB 11.8) dies at its first start
  when it has to create the database itself ("fatal: _check_mysql_concat_is_sane: null result",
  mysql error 5027): it reconnects the connection handle whose connect failed on the missing
  database, and libmariadb 3.4 then refuses every result set on it.
MariaDB runs as a private server (own datadir, 127.0.0.1 on a free port, no password); every
process started here is stopped by PID in `stop`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pal_lab.lab import LabCluster, LabError, free_port_block, start_lab

REQUIRED = ("/usr/sbin/slurmdbd", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db", "/usr/bin/mariadb",
            "/usr/sbin/munged")
ACCOUNTING_DB = "slurm_acct_db"
SACCT_FORMAT = "JobID,JobName,Account,Partition,Submit,Start,End,Timelimit,AllocTRES,NNodes,State,Comment,ReqTRES"


def missing_binaries() -> list[str]:
    missing = [p for p in REQUIRED if not Path(p).exists()]
    return missing + [c for c in ("sacct", "sacctmgr") if shutil.which(c) is None]


def _wait_port(port: int, what: str, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
    raise LabError(f"{what} did not listen on 127.0.0.1:{port} in {timeout:g} s:\n{tail}")


@dataclass
class AccountingLab:
    """The lab plus its accounting daemons; `env` is the client environment (SLURM_CONF)."""

    lab: LabCluster
    root: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> Mapping[str, str]:
        return self.lab.env

    def sacct(self, *args: str, timeout: float = 30.0) -> str:
        """sacct's stdout for all users' allocations (-a -X) plus `args`; LabError on failure."""
        proc = subprocess.run(["sacct", "-a", "-X", *args], env={**os.environ, **self.env},
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise LabError(f"sacct failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def wait_recorded(self, job_ids: Iterable[int | str], timeout: float = 30.0) -> None:
        """Until accounting has an End time for each job (slurmctld sends records asynchronously)."""
        want = {str(j) for j in job_ids}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.sacct("-n", "-P", "--format=JobID,End").splitlines()
            done = {r.split("|")[0] for r in rows if "|" in r and r.split("|")[1] not in ("", "Unknown")}
            if want <= done:
                return
            time.sleep(0.5)
        raise LabError(f"accounting did not record {sorted(want)} in {timeout:g} s")

    def stop(self) -> None:
        self.lab.stop()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def start_accounting_lab(root: str | os.PathLike[str], nodes: int = 2, gpus: int = 4, qos: Sequence[str] = (),
                         tres: str = "gres/gpu", **lab_kw: Any) -> AccountingLab:
    """MariaDB, munged, slurmdbd, `sacctmgr add cluster lab`, then the lab cluster on top.

    qos: QOS names created in the database before slurmctld starts, so that a partition's
    AllowQos/DenyQos in `extra_conf` names QOS that exist (no association enforcement: any
    user may ask for any of them, as on a site where the partition is the gate).
    tres: AccountingStorageTRES; a GPU model reaches accounting only when named there
    (`gres/gpu,gres/gpu:a100`: sacct's requested TRES then says which jobs asked for it).
    """
    missing = missing_binaries()
    if missing:
        raise LabError("accounting lab needs: " + ", ".join(missing))
    root = Path(root).resolve()
    for sub in ("db", "run", "log", "etc", "lab/etc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    mysql_port = free_port_block(2)  # the first of two free ports
    dbd_port = mysql_port + 1
    out = AccountingLab(lab=None, root=root)  # type: ignore[arg-type]
    try:
        subprocess.run(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={root}/db",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True, timeout=120)
        out.procs.append(subprocess.Popen(
            ["/usr/sbin/mariadbd", "--no-defaults", "--user=root", f"--datadir={root}/db",
             f"--socket={root}/run/mysql.sock", f"--port={mysql_port}", "--bind-address=127.0.0.1",
             "--skip-name-resolve", f"--pid-file={root}/run/mariadb.pid", f"--log-error={root}/log/mariadb.err"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        _wait_port(mysql_port, "mariadbd", root / "log" / "mariadb.err")
        made = subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(mysql_port), "-u", "root",
                               "-e", f"CREATE DATABASE IF NOT EXISTS {ACCOUNTING_DB}"],
                              capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            raise LabError(f"create database {ACCOUNTING_DB}: {made.stderr.strip()}")
        key = root / "lab" / "etc" / "munge.key"  # the lab script keeps an existing key
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        out.procs.append(subprocess.Popen(
            ["/usr/sbin/munged", "--foreground", f"--socket={root}/run/munge.sock", f"--key-file={key}",
             f"--pid-file={root}/run/munged.pid", f"--seed-file={root}/run/munged.seed",
             f"--log-file={root}/log/munged.log", "--force"],
            stdout=subprocess.DEVNULL, stderr=open(root / "log" / "munged.stderr", "w"), start_new_session=True))
        for _ in range(50):
            if (root / "run" / "munge.sock").exists():
                break
            time.sleep(0.1)
        conf = root / "etc" / "slurmdbd.conf"  # slurmdbd reads slurmdbd.conf next to $SLURM_CONF
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={root}/run/munge.sock", "DbdHost=localhost",
            f"DbdPort={dbd_port}", "SlurmUser=root", f"PidFile={root}/run/slurmdbd.pid",
            f"LogFile={root}/log/slurmdbd.log", "DebugLevel=info", "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1", f"StoragePort={mysql_port}", "StorageUser=root", f"StorageLoc={ACCOUNTING_DB}", "",
        ]))
        conf.chmod(0o600)  # slurmdbd refuses a readable config (it holds the storage password)
        out.procs.append(subprocess.Popen(["/usr/sbin/slurmdbd", "-D"], stdout=subprocess.DEVNULL,
                                         stderr=open(root / "log" / "slurmdbd.stderr", "w"), start_new_session=True,
                                         env={**os.environ, "SLURM_CONF": str(root / "etc" / "slurm.conf")}))
        _wait_port(dbd_port, "slurmdbd", root / "log" / "slurmdbd.log")
        accounting = "\n".join([
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={dbd_port}", f"AccountingStorageTRES={tres}", "AccountingStoreFlags=job_comment",
            # the munge socket for slurmdbd connections (Slurm reads it from this key): our munged, the lab's key
            f"AccountingStoragePass={root}/run/munge.sock",
        ])
        client_conf = root / "sacctmgr.conf"  # the lab's slurm.conf does not exist yet
        client_conf.write_text(f"ClusterName=lab\nSlurmctldHost=localhost\nAuthType=auth/munge\nAuthInfo=socket={root}/run/munge.sock\n"
                               f"{accounting}\n")
        reg = subprocess.run(["sacctmgr", "-i", "add", "cluster", "lab"], capture_output=True, text=True,
                             env={**os.environ, "SLURM_CONF": str(client_conf)}, timeout=30)
        if reg.returncode != 0:
            raise LabError(f"sacctmgr add cluster lab: {reg.stderr.strip() or reg.stdout.strip()}")
        for name in qos:
            made_qos = subprocess.run(["sacctmgr", "-i", "add", "qos", name], capture_output=True, text=True,
                                      env={**os.environ, "SLURM_CONF": str(client_conf)}, timeout=30)
            if made_qos.returncode != 0:
                raise LabError(f"sacctmgr add qos {name}: {made_qos.stderr.strip() or made_qos.stdout.strip()}")
        extra = "\n".join(x for x in (lab_kw.pop("extra_conf", ""), accounting) if x)
        out.lab = start_lab(root / "lab", nodes=nodes, gpus=gpus, extra_conf=extra, **lab_kw)
        return out
    except BaseException:
        if out.lab is not None:
            out.lab.stop()
        out.lab = _NoLab()  # type: ignore[assignment]
        out.stop()
        raise


class _NoLab:
    def stop(self) -> float:
        return 0.0
