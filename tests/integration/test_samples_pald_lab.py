"""Samples through pald on a REAL Slurm lab: compute nodes with no store URL in their
configuration ([samples] send = "pald"), the lab's munged, the real pald on SQLite.

- every node's prolog and epilog samples arrive in pald's store, and no node configuration
  names a store;
- pald refuses, logs and counts: garbage, a credential made with another MUNGE key, one made
  by an ordinary user, a replayed one, and samples sent in another node's name (a munged whose
  credentials come from 127.0.0.2, an address of no lab node); a batch sent again in a fresh
  credential is acknowledged and stored once.

pald down during a prolog storm is a fault of the fault suite (test_faults.py,
`test_fault_prolog_storm_pald_down`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pal_lab.lab import free_port_block
from pal_slurm.bench.handoff import HandoffError, PaldSink
from pal_slurm.bench.repository import StoreProfilingRepository
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.model.sample import Sample
from pal_slurm.slurm import munge
from pal_slurm.store import open_store

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]


def start_munged(d: Path, key: Path, origin: str) -> tuple[subprocess.Popen, Path]:
    """A munged of the test's own (stopped by PID at the end), as another host would run one."""
    d.mkdir(parents=True, exist_ok=True)
    sock = d / "munge.sock"
    proc = subprocess.Popen(["/usr/sbin/munged", "--foreground", f"--socket={sock}", f"--key-file={key}",
                             f"--pid-file={d / 'munged.pid'}", f"--seed-file={d / 'munged.seed'}",
                             f"--log-file={d / 'munged.log'}", f"--origin={origin}", "--force"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while not sock.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"munged for {origin} did not start: {(d / 'munged.log').read_text(errors='replace')}")
        time.sleep(0.05)
    return proc, sock


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    d = tmp_path_factory.mktemp("handoff")
    d.chmod(0o755)
    node_conf = d / "node.toml"  # what every compute node reads: no [store], no database
    wrappers = {}
    for kind in ("prolog", "epilog"):
        w = d / f"{kind}.sh"
        w.write_text("#!/bin/sh\n"
                     f"export PYTHONPATH={REPO} PAL_CONFIG={node_conf}\n"
                     f'export PAL_PROFILING_SPOOL_DIR="{d}/spool-$SLURMD_NODENAME"\n'
                     f"exec {sys.executable} {REPO / 'sbin' / ('pal-' + kind)} 2>>{d / (kind + '.log')}\n")
        w.chmod(0o755)
        wrappers[kind] = w
    cluster = lab_factory(prolog=wrappers["prolog"], epilog=wrappers["epilog"])
    for n in cluster.nodes:
        (d / f"spool-{n}").mkdir(mode=0o700)
    lab_sock = cluster.lab_dir / "run" / "munge.sock"
    port = free_port_block(1)
    node_conf.write_text(f'[profiling]\nbackend = "replay"\nduration_s = 0.0\nreplay_seed = 3\nprolog_every_h = 0.0\n'
                         f'[samples]\nsend = "pald"\npald = "127.0.0.1:{port}"\nmunge_socket = "{lab_sock}"\n')
    db = f"sqlite:///{d / 'pal.db'}"
    sock = d / "pald.sock"
    cfg = write_config(d / "pal.toml", socket=sock, db_url=db, slurm_conf=cluster.slurm_conf, heartbeat=d / "hb",
                       extra=f'[samples]\nlisten = "127.0.0.1:{port}"\nmunge_socket = "{lab_sock}"\n')
    pald = PaldProcess(cfg, sock, d / "pald.log").start()
    others = []
    # not under pytest's 0700 tmp: an ordinary user must reach the "peer" munged's socket
    root = Path(tempfile.mkdtemp(prefix="pal-handoff-"))
    root.chmod(0o755)
    try:
        key = cluster.lab_dir / "etc" / "munge.key"
        peer = start_munged(root / "peer", key, "127.0.0.1")  # the lab's key, on gpu01's address
        others.append(peer[0])
        impostor = start_munged(root / "impostor", key, "127.0.0.2")  # the lab's key, another host
        others.append(impostor[0])
        other_key = root / "other.key"
        other_key.write_bytes(os.urandom(1024))
        other_key.chmod(0o600)
        foreign = start_munged(root / "foreign", other_key, "127.0.0.1")  # another cluster's key
        others.append(foreign[0])
        yield {"dir": d, "cluster": cluster, "pald": pald, "db": db, "address": f"127.0.0.1:{port}",
               "node_conf": node_conf, "lab_sock": str(lab_sock), "peer": str(peer[1]),
               "impostor": str(impostor[1]), "foreign": str(foreign[1])}
    finally:
        for p in others:
            p.kill()
            p.wait(5)
        pald.stop()
        shutil.rmtree(root, ignore_errors=True)


def stored_samples(db: str) -> list[Sample]:
    repo = StoreProfilingRepository(open_store(db, upgrade=False))
    try:
        return repo.samples()
    finally:
        repo.close()


def wait_for(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def sample(node: str, slot: int, value: float) -> Sample:
    return Sample(node=node, slot=slot, perf_class="A", backend="replay", value=value, higher_is_better=False,
                  job_id="handoff-test", taken_at=time.time())


def test_every_nodes_samples_arrive_in_the_controllers_store(lab):
    text = lab["node_conf"].read_text()
    assert "[store]" not in text and "url" not in text and "sqlite" not in text
    cluster = lab["cluster"]
    jobs = {n: str(cluster.sbatch("-w", n, "--gres=gpu:s1:1", "--comment=pal:class=bert", wrap="sleep 1"))
            for n in cluster.nodes}
    for job in jobs.values():
        assert cluster.wait_job(int(job), timeout=90) == "COMPLETED"

    def arrived():
        got = [s for s in stored_samples(lab["db"]) if s.job_id in jobs.values()]
        # prolog (bench) and epilog (bench + walltime) on GPU 1 of each node
        return got if all(len([s for s in got if s.job_id == j and s.node == n]) >= 3 for n, j in jobs.items()) else []

    got = wait_for(arrived)
    by_node = {n: sorted((s.slot, s.kind) for s in got if s.job_id == j and s.node == n) for n, j in jobs.items()}
    assert all(slots and {slot for slot, _ in slots} == {1} for slots in by_node.values()), (
        by_node, (lab["dir"] / "prolog.log").read_text()[-2000:], lab["pald"].log.read_text()[-2000:])
    assert {s.node for s in got} == set(cluster.nodes)
    for n in cluster.nodes:  # nothing waits in any node's spool
        assert not list((lab["dir"] / f"spool-{n}").glob("*.jsonl"))
    counts = lab["pald"].health().details["counts"]
    assert counts["samples_stored"] >= len(got) and counts["samples_refused"] == 0


def _refused(lab, sink: PaldSink, samples: list[Sample]) -> str:
    with pytest.raises(HandoffError) as err:
        sink.add_samples(samples)
    return str(err.value)


def test_forged_foreign_replayed_and_misnamed_samples_are_refused_and_logged(lab):
    address, lab_sock = lab["address"], lab["lab_sock"]
    before = lab["pald"].health().details["counts"]["samples_refused"]
    mine = [sample("gpu01", 0, 7.25), sample("gpu01", 1, 7.5)]

    # garbage in place of a credential
    assert "bad_credential" in _refused(lab, PaldSink(address, encode=lambda p: "MUNGE:garbage:"), mine)
    # a credential made with another cluster's MUNGE key
    assert "bad_credential" in _refused(lab, PaldSink(address, lab["foreign"]), mine)
    # a user logged into a node signs with their own uid
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "munge", "--socket", lab["peer"]]

    def nobody_encode(payload: bytes) -> str:
        return subprocess.run(as_nobody, input=payload, capture_output=True, check=True, timeout=10).stdout.decode().strip()

    assert "bad_uid" in _refused(lab, PaldSink(address, encode=nobody_encode), mine)
    # another host (127.0.0.2: no lab node's address) sends samples in gpu01's name
    assert "wrong_node" in _refused(lab, PaldSink(address, lab["impostor"]), mine)
    # a credential seen before: munged's replay check
    replayed = [sample("gpu01", 2, 8.0)]
    made: list[str] = []

    def once(payload: bytes) -> str:
        if not made:
            made.append(munge.encode(payload, lab_sock))
        return made[0]

    PaldSink(address, encode=once).add_samples(replayed)  # taken
    assert "bad_credential" in _refused(lab, PaldSink(address, encode=once), replayed)  # the same credential again

    stored = wait_for(lambda: [s for s in stored_samples(lab["db"]) if s.job_id == "handoff-test"], 10)
    assert sorted((s.slot, s.value) for s in stored) == [(2, 8.0)]
    # the same batch in a fresh credential: acknowledged, stored once
    PaldSink(address, lab_sock).add_samples(replayed)
    PaldSink(address, lab_sock).add_samples(mine)  # and gpu01's own host may send gpu01's samples
    time.sleep(1.0)  # pald's store link writes within its poll period
    stored = [s for s in stored_samples(lab["db"]) if s.job_id == "handoff-test"]
    assert sorted((s.slot, s.value) for s in stored) == [(0, 7.25), (1, 7.5), (2, 8.0)]

    log = lab["pald"].log.read_text()
    for reason in ("bad_credential", "bad_uid", "wrong_node"):
        assert f"refused ({reason})" in log, log[-3000:]
    assert "127.0.0.2 sent samples in the name of 'gpu01'" in log
    assert lab["pald"].health().details["counts"]["samples_refused"] - before == 5
