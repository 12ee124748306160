"""Observability for real: Debian's Prometheus server scrapes a real pald on the lab cluster.

Real slurmctld + 4 slurmd (4 emulated GPUs each), the real hook, the real pald process with
its metrics endpoint on a free port, and `prometheus` (Debian package) started on another free
port with the project's own alert rules. After a few PAL submissions, the numbers are read back
through Prometheus' HTTP API, as an operator's dashboard would read them. A new ranking with a
slower GPU is then counted as drift, and `palctl rankings --changed --action comment` marks the
node in the real Slurm.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_lab.lab import free_port_block
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

pytestmark = [pytest.mark.slurm, pytest.mark.alone]  # the place latency's p99 is part of what it checks

RULES = REPO / "etc" / "prometheus" / "pal-alerts.yml"


def _need_prometheus() -> None:
    missing = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if missing:
        pytest.skip(f"Debian's prometheus package missing ({', '.join(missing)}): run scripts/install-deps.sh")


def ranking(lab, slow=frozenset()):
    return [RankingEntry(n, s, c, 1.5 if (n, s) in slow else 1.0, 1.5 if (n, s) in slow else 1.0,
                         1 if (n, s) in slow else 0)
            for n in lab.nodes for s in range(4) for c in "ABCD"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, lab_factory):
    _need_prometheus()
    tmp = tmp_path_factory.mktemp("metrics")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    db = f"sqlite:///{tmp}/pal.db"
    store = open_store(db)
    store.write_ranking("optimal", ranking(lab))
    store.close()
    metrics_port = free_port_block(1)
    cfg = write_config(tmp / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf, heartbeat=tmp / "hb",
                       metrics_listen=f"127.0.0.1:{metrics_port}")
    pald = PaldProcess(cfg, sock, tmp / "pald.log").start()
    try:
        prom, base = _start_prometheus(tmp, metrics_port)
    except Exception:
        pald.stop()
        raise
    try:
        yield lab, pald, base, cfg, db, metrics_port
    finally:
        prom.terminate()
        try:
            prom.wait(15)
        except subprocess.TimeoutExpired:
            prom.kill()
        pald.stop()


def _start_prometheus(tmp, metrics_port: int, attempts: int = 2) -> tuple[subprocess.Popen, str]:
    """A Prometheus server scraping pald every second, ready, and its URL. A server that exits
    before it is ready (its port taken meanwhile) is started again on another port; one that
    fails or is not ready in 120 s fails the test with the end of its own log (a full suite in
    the Debian 13 root once waited 60 s for it in vain, and its log was lost with the root)."""
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: pald\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
    attempt = 0
    while True:
        attempt += 1
        prom_port = free_port_block(1)
        log_path = tmp / f"prometheus-{attempt}.log"
        with open(log_path, "wb") as prom_log:
            prom = subprocess.Popen(["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
                                     f"--storage.tsdb.path={tmp / f'tsdb-{attempt}'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                                    stdout=prom_log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{prom_port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and prom.poll() is None:
            try:
                if urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200:
                    return prom, base
            except OSError:
                pass  # not up yet
            time.sleep(0.5)
        tail = log_path.read_text(errors="replace")[-2000:]
        if prom.poll() is None:
            prom.kill()
            raise AssertionError(f"prometheus not ready in 120 s on port {prom_port}; its log ends:\n{tail}")
        if attempt == attempts:
            raise AssertionError(f"prometheus exited ({prom.returncode}) before it was ready; its log ends:\n{tail}")


def _wait(check, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # noqa: BLE001 - not up yet
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} ({last})")


def query(base: str, promql: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    doc = json.loads(urllib.request.urlopen(url, timeout=5).read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def scalar(base: str, promql: str) -> float | None:
    res = query(base, promql)
    return float(res[0]["value"][1]) if res else None


def test_prometheus_scrapes_decisions_latency_and_cluster_state(stack):
    lab, pald, base, *_ = stack
    jobs = [lab.sbatch("--gres=gpu:1", "--comment=pal:class=resnet", wrap="sleep 1") for _ in range(4)]
    jobs.append(lab.sbatch("--gres=gpu:1", wrap="true"))  # not a PAL job: counted nowhere
    for j in jobs:
        assert lab.wait_job(j, timeout=90) == "COMPLETED"
    _wait(lambda: scalar(base, "sum(pal_decisions_total)") == 4, 30, "4 decisions scraped")
    assert scalar(base, 'sum(pal_decisions_total{outcome="placed"})') == 4
    assert scalar(base, "pal_place_duration_seconds_count") == 4
    p99 = scalar(base, "histogram_quantile(0.99, sum by (le) (pal_place_duration_seconds_bucket))")
    assert p99 is not None and 0 < p99 <= 0.15  # within the hook's deadline
    assert scalar(base, "pal_gpus") == 16
    assert scalar(base, "count(pal_gpu_slowdown)") == 64  # 16 GPUs x 4 classes
    assert scalar(base, "pal_ranking_version") == 1
    assert scalar(base, "pal_store_up") == 1 and scalar(base, "pal_slurm_up") == 1
    assert scalar(base, "time() - pal_last_sync_timestamp_seconds") < 30
    # the hook's own tags, read from squeue: the 4 PAL jobs were placed at submit
    _wait(lambda: scalar(base, 'sum(pal_hook_outcomes_total{outcome="placed"})') == 4, 30, "hook outcomes")
    assert scalar(base, 'up{job="pald"}') == 1
    rules = json.loads(urllib.request.urlopen(f"{base}/api/v1/rules", timeout=5).read())
    names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
    assert {"PaldDown", "PaldSyncStale", "PalStoreDegraded", "PalHeldJobsOld", "PalGpuDrift"} <= names
    firing = json.loads(urllib.request.urlopen(f"{base}/api/v1/alerts", timeout=5).read())["data"]["alerts"]
    assert [a for a in firing if a["state"] == "firing"] == []  # a healthy stack raises nothing


def test_a_slower_gpu_in_a_new_ranking_is_counted_as_drift_and_marked_in_slurm(stack):
    from pal_slurm.daemon.client import PaldClient

    lab, pald, base, cfg, db, _ = stack
    store = open_store(db)
    store.write_ranking("optimal", ranking(lab, slow={("gpu03", 2)}))
    store.close()
    PaldClient(str(pald.socket), timeout_s=5).reload()
    _wait(lambda: scalar(base, "sum(pal_gpu_drift_total)") == 4, 30, "drift counted (4 classes)")
    assert scalar(base, 'pal_gpu_drift_total{perf_class="A"}') == 1
    assert scalar(base, "pal_ranking_version") == 2
    env = lab.client_env({"PAL_CONFIG": str(cfg)})
    p = subprocess.run([sys.executable, "-m", "pal_slurm.cli", "rankings", "--changed", "--action", "comment"],
                       env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "gpu03:2 class A" in p.stdout and "marked gpu03 (comment)" in p.stdout
    node = subprocess.run(["scontrol", "show", "node", "gpu03"], env=lab.client_env(), capture_output=True,
                          text=True, check=True).stdout
    assert "Comment=pal drift: GPU 2 class A +50.0%" in node
    other = subprocess.run(["scontrol", "show", "node", "gpu01"], env=lab.client_env(), capture_output=True,
                           text=True, check=True).stdout
    assert "pal drift" not in other
