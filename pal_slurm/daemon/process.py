"""Run the real `pald` (python -m pal_slurm.daemon.main) as a child process, for the demo, the
integration tests and the benchmarks: write a pal.toml, start the process, wait until it
answers health, stop it by PID (or freeze / kill it to test failure paths)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.daemon.protocol import HealthReply

REPO = Path(__file__).resolve().parents[2]  # source checkout (PYTHONPATH for the child)


def write_config(path: Path, *, socket: Path, db_url: str, slurm_conf: str, heartbeat: Path,
                 cycle_s: float = 0.3, metrics_listen: str = "", extra: str = "",
                 slurm_bin_dir: str = "", placement: str = "pal") -> Path:
    """pald's config for a lab. `placement` is "pal" for the tests written against PAL's own
    held-queue behaviour; the demo passes the site default (`PolicyConfig().placement`)."""
    path.write_text(f"""
[store]
url = "{db_url}"

[daemon]
socket = "{socket}"
cycle_s = {cycle_s}
slurm_user = "root"
heartbeat_file = "{heartbeat}"
heartbeat_stale_s = 5.0

[policy]
placement = "{placement}"

[slurm]
conf = "{slurm_conf}"
{f'bin_dir = "{slurm_bin_dir}"' if slurm_bin_dir else ""}

[metrics]
listen = "{metrics_listen}"
{extra}
""")
    return path


class PaldProcess:
    def __init__(self, config: Path, socket: Path, log: Path, user: str | None = None):
        """`user`: run pald as this user (root only; setpriv execs pald itself, so the PID
        signalled is pald's, as without it)."""
        self.config, self.socket, self.log, self.user = config, socket, log, user
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0, synced: bool = True) -> "PaldProcess":
        """Start pald; return once it answers health and (`synced`) has read Slurm once."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("PAL_CONFIG", None)
        self.logfile = open(self.log, "ab")
        as_user = (["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", "--"]
                   if self.user else [])
        self.proc = subprocess.Popen([*as_user, sys.executable, "-m", "pal_slurm.daemon.main", "--config", str(self.config)],
                                     stdout=self.logfile, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pald exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                h = PaldClient(str(self.socket), timeout_s=1.0).health()
                if not synced or h.details.get("last_sync_age_s") is not None:
                    return self
            except PaldError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"pald did not come up: {self.log.read_text()[-2000:]}")

    def health(self) -> HealthReply:
        return PaldClient(str(self.socket), timeout_s=1.0).health()

    def send(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.send(signal.SIGCONT)
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.logfile.close()
        self.proc = None
