"""Two pald on one host: the second must leave the live one's socket alone.

Real `pald` processes (python -m pal_slurm.daemon.main) on a memory store; no Slurm is needed,
since the socket is claimed before pald reads Slurm (pald answers health without a sync).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from pal_slurm.daemon.main import EXIT_SOCKET_IN_USE
from pal_slurm.daemon.process import REPO, PaldProcess, write_config


def _run_second(config) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PAL_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "pal_slurm.daemon.main", "--config", str(config)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=60)


def _config(tmp_path, sock):
    return write_config(tmp_path / "pal.toml", socket=sock, db_url="memory://",
                        slurm_conf=str(tmp_path / "no-slurm.conf"), heartbeat=tmp_path / "hb")


def test_a_second_pald_refuses_and_the_first_keeps_its_socket(tmp_path):
    sock = tmp_path / "pald.sock"
    cfg = _config(tmp_path, sock)
    first = PaldProcess(cfg, sock, tmp_path / "first.log").start(synced=False)
    try:
        inode = os.stat(sock).st_ino
        second = _run_second(cfg)
        assert second.returncode == EXIT_SOCKET_IN_USE, second.stderr
        assert "answers on" in second.stderr
        assert os.stat(sock).st_ino == inode  # the same socket file, never unlinked
        assert first.health().status in ("ok", "degraded")  # the first pald still answers on it
    finally:
        first.stop()


def test_a_stale_socket_is_replaced(tmp_path):
    sock = tmp_path / "pald.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock))  # bound, never listening, then closed: what a killed pald leaves
    dead.close()
    pald = PaldProcess(_config(tmp_path, sock), sock, tmp_path / "pald.log").start(synced=False)
    try:
        assert pald.health().status in ("ok", "degraded")
    finally:
        pald.stop()


def test_a_path_that_is_not_a_socket_is_left_alone(tmp_path):
    sock = tmp_path / "pald.sock"
    sock.write_text("not a socket")
    second = _run_second(_config(tmp_path, sock))
    assert second.returncode == EXIT_SOCKET_IN_USE, second.stderr
    assert sock.read_text() == "not a socket"


def test_socket_group_gives_the_socket_that_group_and_mode_0660(tmp_path):
    import grp
    import stat

    sock = tmp_path / "pald.sock"
    cfg = _config(tmp_path, sock)
    group = grp.getgrgid(os.getgid()).gr_name  # a group this process is in, as pald's user is in SlurmUser's
    cfg.write_text(cfg.read_text().replace("[daemon]\n", f'[daemon]\nsocket_group = "{group}"\n'))
    pald = PaldProcess(cfg, sock, tmp_path / "pald.log").start(synced=False)
    try:
        st = os.stat(sock)
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == os.getgid()
    finally:
        pald.stop()


def test_an_unknown_socket_group_is_a_configuration_error(tmp_path):
    sock = tmp_path / "pald.sock"
    cfg = _config(tmp_path, sock)
    cfg.write_text(cfg.read_text().replace("[daemon]\n", '[daemon]\nsocket_group = "no-such-group-here"\n'))
    second = _run_second(cfg)
    assert second.returncode == 2 and "socket_group" in second.stderr
    assert not sock.exists()
