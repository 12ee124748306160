"""Store faults on the real thing: the real pald process, a real
Slurm lab with the real job_submit.lua, a real private PostgreSQL or SQLite files.

For each fault: `place` answers stay fast (every one well inside the hook's 150 ms timeout),
PAL stays on (0 standby passes, jobs submitted through the hook are placed), health says the
store is not ok while it is not, and once the store is back every decision pald made during
the fault is in it (counted).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.client import PaldClient
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry
from tests.fixtures.store_faults import delete_sqlite_file, frozen_postgres, read_only_dir
from tests.support.waiting import wait_until
from tests.unit.daemon.builders import request

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

HOOK_TIMEOUT_S = 0.150
STORE_DEADLINE_S = 5.0  # pal_slurm.daemon.store_link.DEADLINE_S


@pytest.fixture(scope="module")
def lab(lab_factory, tmp_path_factory):
    sock = tmp_path_factory.mktemp("sock") / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    lab.pald_socket = sock
    return lab


def seed(url: str, nodes) -> None:
    repo = open_store(url)
    try:
        repo.write_ranking("optimal", [RankingEntry(n, s, c, 1.0, 1.0, 0) for n in nodes for s in range(4) for c in "ABCD"])
    finally:
        repo.close()


def start_pald(lab, tmp_path: Path, url: str) -> PaldProcess:
    cfg = write_config(tmp_path / "pal.toml", socket=lab.pald_socket, db_url=url, slurm_conf=lab.slurm_conf,
                       heartbeat=tmp_path / "hb")
    return PaldProcess(cfg, lab.pald_socket, tmp_path / "pald.log").start()


def pald_on_postgres(lab, postgres_factory, tmp_path: Path):
    """A private PostgreSQL (that the test may stop or freeze), seeded, and a pald on it."""
    server = postgres_factory()
    server.create_database("pal")
    url = server.url("pal")
    seed(url, lab.nodes)
    return server, url, start_pald(lab, tmp_path, url)


def place_burst(sock, prefix: str, n: int) -> list[float]:
    """n placements over the socket (1 GPU each); returns each round trip in seconds."""
    client = PaldClient(str(sock), timeout_s=2.0)
    times = []
    for i in range(n):
        t = time.perf_counter()
        reply = client.place(request(gpn=1, rid=f"{prefix}-{i}"))
        times.append(time.perf_counter() - t)
        assert reply.reason != "standby", f"PAL switched off: {reply}"
    return times


def p99(times: list[float]) -> float:
    return sorted(times)[min(len(times) - 1, int(0.99 * len(times)))]


def store_caught_up(pald: PaldProcess) -> bool:
    """The store is ok again and pald has written everything it buffered."""
    details = pald.health().details
    return details["store"] == "ok" and details["buffered_decisions"] == 0


def req_decisions(url: str, prefix: str) -> set[str]:
    repo = open_store(url, upgrade=False)
    try:
        return {d.job_id for d in repo.decisions(limit=100_000) if d.job_id.startswith(f"req:{prefix}-")}
    finally:
        repo.close()


def submit_pal_jobs(lab, n: int) -> list[int]:
    return [lab.sbatch("--gres=gpu:1", "--comment=pal:class=resnet", wrap="true") for _ in range(n)]


def admin_comments(lab, jobs) -> list[str]:
    out = []
    for job in jobs:
        text = lab.runner.run(["scontrol", "-o", "show", "job", str(job)])
        out.append(next((f[len("AdminComment="):] for f in text.split() if f.startswith("AdminComment=")), ""))
    return out


@pytest.mark.postgres
def test_frozen_postgres_does_not_freeze_pald(lab, postgres_factory, tmp_path):
    """#4: SIGSTOP the whole PostgreSQL; `reload` used to block the event loop (every
    submission passed by timeout) and the cycle stalled while health said `store ok`."""
    server, url, pald = pald_on_postgres(lab, postgres_factory, tmp_path)
    try:
        place_burst(lab.pald_socket, "warm", 20)
        with frozen_postgres(server):
            reload_done: list[float] = []
            started = time.monotonic()
            reloader = threading.Thread(
                target=lambda: (PaldClient(str(lab.pald_socket), timeout_s=30).reload(),
                                reload_done.append(time.monotonic() - started)), daemon=True)
            reloader.start()  # waits for the frozen store, off the event loop
            times = place_burst(lab.pald_socket, "frozen", 200)
            assert p99(times) < HOOK_TIMEOUT_S, f"place p99 {p99(times) * 1000:.1f} ms with the store frozen"
            assert wait_until(lambda: pald.health().details["store"] in ("stalled", "unreachable"),
                            timeout=STORE_DEADLINE_S * 3)
            health = pald.health()
            assert health.status == "degraded" and health.details["leader"] is True
            sync_age = health.details["last_sync_age_s"]
            assert sync_age is not None and sync_age < 3, f"the cycle stalled: last sync {sync_age} s ago"
            jobs = submit_pal_jobs(lab, 10)
            reloader.join(STORE_DEADLINE_S * 3)
            assert reload_done and reload_done[0] < STORE_DEADLINE_S * 3  # bounded, not forever
        comments = admin_comments(lab, jobs)
        assert all(c.startswith(("pal:placed=", "pal:defer")) for c in comments), comments
        assert wait_until(lambda: store_caught_up(pald), timeout=30)
        assert req_decisions(url, "frozen") == {f"req:frozen-{i}" for i in range(200)}
        assert pald.health().details["counts"]["standby"] == 0
    finally:
        pald.stop()
        lab.cancel_all()


@pytest.mark.postgres
def test_postgres_stopped_keeps_pal_on_and_loses_no_decision(lab, postgres_factory, tmp_path):
    """#5: `pg_ctl stop` used to cost the only pald its leadership: 94/100 jobs pass=standby."""
    server, url, pald = pald_on_postgres(lab, postgres_factory, tmp_path)
    try:
        place_burst(lab.pald_socket, "warm", 10)
        server.stop()
        times = place_burst(lab.pald_socket, "down", 100)
        jobs = submit_pal_jobs(lab, 10)
        assert wait_until(lambda: pald.health().details["store"] == "unreachable", timeout=STORE_DEADLINE_S * 2)
        health = pald.health().details
        assert health["leader"] is True and health["counts"]["standby"] == 0, health
        assert p99(times) < HOOK_TIMEOUT_S
        comments = admin_comments(lab, jobs)
        assert not [c for c in comments if "standby" in c] and all(c.startswith("pal:") for c in comments)
        server.start()
        assert wait_until(lambda: store_caught_up(pald), timeout=30)
        assert req_decisions(url, "down") == {f"req:down-{i}" for i in range(100)}
    finally:
        pald.stop()
        lab.cancel_all()


def test_read_only_sqlite_directory_at_start_keeps_pal_on(lab, tmp_path):
    """#5: a read-only store directory at start used to make pald a standby: 100/100 passes."""
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    url = f"sqlite:///{store_dir}/pal.db"
    seed(url, lab.nodes)
    with read_only_dir(store_dir):
        pald = start_pald(lab, tmp_path, url)
        try:
            times = place_burst(lab.pald_socket, "ro", 100)
            health = pald.health().details
            assert health["leader"] is True and health["counts"]["standby"] == 0, health
            assert health["store"] == "unreachable" and p99(times) < HOOK_TIMEOUT_S
        except BaseException:
            pald.stop()
            raise
    try:  # the directory is writable again: everything buffered reaches the store
        assert wait_until(lambda: store_caught_up(pald), timeout=30)
        assert req_decisions(url, "ro") == {f"req:ro-{i}" for i in range(100)}
    finally:
        pald.stop()


def test_deleted_sqlite_file_is_reported_and_no_decision_is_lost(lab, tmp_path):
    """#6: pald used to keep writing to the unlinked inode while health said ok."""
    path = tmp_path / "pal.db"
    url = f"sqlite:///{path}"
    seed(url, lab.nodes)
    pald = start_pald(lab, tmp_path, url)
    try:
        place_burst(lab.pald_socket, "kept", 10)
        delete_sqlite_file(path)
        place_burst(lab.pald_socket, "gone", 50)
        assert wait_until(lambda: pald.health().status == "degraded", timeout=STORE_DEADLINE_S * 2)
        assert "was deleted while in use" in pald.health().details["store_error"]
        assert not path.exists()
        open_store(url).close()  # `palctl db upgrade`: a new, empty store
        assert wait_until(lambda: store_caught_up(pald), timeout=30)
        assert req_decisions(url, "gone") == {f"req:gone-{i}" for i in range(50)}
    finally:
        pald.stop()
