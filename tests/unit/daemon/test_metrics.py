"""pald's metrics in process: a real HTTP endpoint, scraped and parsed with prometheus_client's
own parser; fake Slurm (the real pald + lab + Prometheus server path is in tests/integration)."""

import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pal_slurm.daemon.metrics import PaldMetrics, Publisher, instrument, reason_label, serve_metrics
from pal_slurm.store.memory import MemoryRepository

from tests.support.waiting import wait_until

from .builders import ServerThread, held_job, request, snapshot
from .test_app_server import _defer_request, make_pald


def scrape(port: int) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def endpoint():
    metrics = PaldMetrics()
    server = serve_metrics(metrics, "127.0.0.1", 0)
    yield metrics, server.server_port
    server.shutdown()


def test_reason_labels_stay_few_and_clean():
    assert reason_label("bad_comment:E_GPUS") == "bad_comment"
    assert reason_label("no room for 4 GPUs") == "no_room_for_4_gpus"
    assert set(reason_label("\x1b[31mX;\n" * 40)) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-")
    assert len(reason_label("a" * 100)) == 32
    assert reason_label(None) == reason_label("") == "none"


def test_place_decisions_latency_state_and_hook_tags_are_scraped(tmp_path, endpoint):
    metrics, port = endpoint
    jobs = [held_job(11, submit=1000), held_job(12, tag="pal:pass=timeout;req=a"),
            held_job(13, tag="pal:pass=pald-down"), held_job(14, tag="pal:placed=gpu01;rank=v3;req=b"),
            held_job(15, tag="")]
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store, jobs=jobs)
    pald.check_leadership()  # the default AlwaysLeader: leading
    pald.refresh_store()
    pald.service.set_snapshot(snapshot({"A": {("gpu01", 0): (1.3, 1.4), ("gpu01", 1): (0.9, 1.0)}}, version=7))
    pald.sync_and_cycle()
    handle = instrument(pald.answer, pald.settle, metrics).handle
    for _ in range(3):
        handle(request(gpn=2))
    publisher = Publisher(metrics, drift_threshold=0.05)
    publisher.publish(pald)
    publisher.publish(pald)  # the same jobs seen again are not counted twice
    m = scrape(port)
    placed = {k: v for k, v in m.items() if k[0] == "pal_decisions_total"}
    assert placed == {("pal_decisions_total", (("outcome", "placed"), ("reason", "pal-fit"))): 3}
    assert m[("pal_place_duration_seconds_count", ())] == 3
    assert 0 < m[("pal_place_duration_seconds_sum", ())] < 1
    assert m[("pal_hook_outcomes_total", (("outcome", "passed"), ("reason", "timeout")))] == 1
    assert m[("pal_hook_outcomes_total", (("outcome", "passed"), ("reason", "pald-down")))] == 1
    assert m[("pal_hook_outcomes_total", (("outcome", "placed"), ("reason", "none")))] == 1
    assert m[("pal_ranking_version", ())] == 7
    assert m[("pal_gpu_slowdown", (("gpu", "0"), ("node", "gpu01"), ("perf_class", "A")))] == pytest.approx(1.4)
    assert m[("pal_gpus", ())] == 16
    assert m[("pal_store_up", ())] == 1 and m[("pal_leader", ())] == 1
    assert m[("pal_held_job_oldest_age_seconds", ())] > 0  # job 11 is still held in the view
    assert ("pal_rack_wait_timer_seconds", (("sensitivity", "high"),)) in m


def test_an_answer_the_hook_never_got_is_counted_late_not_placed(tmp_path, endpoint):
    """pald takes back an answer the server could not write (the hook gave up and closed its
    socket): the scraped decisions must say so too, or an operator's placed count would hold
    placements that never reached a job. Through the real socket server: one request read and
    answered normally, one whose hook closed before the write."""
    import socket
    import threading
    import time

    from pal_slurm.daemon.protocol import encode_request

    metrics, port = endpoint
    pald = make_pald(tmp_path)
    pald.sync_and_cycle()
    counted = instrument(pald.answer, pald.settle, metrics)
    gone = threading.Event()

    def answer(request):
        reply = counted.answer(request)
        if request.request_id == "gave-up":
            gone.wait(5)  # pald frozen between its answer and the write, until the hook has closed
            time.sleep(0.05)
        return reply

    path = str(tmp_path / "pald.sock")
    deadline_ms = int(time.time() * 1000) + 60_000
    with ServerThread(answer, path, settle=counted.settle):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(encode_request(_defer_request("read", deadline_ms)))
            assert s.makefile().readline()  # the hook read its reply
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(encode_request(_defer_request("gave-up", deadline_ms)))
        gone.set()  # the hook closed without a reply
        wait = time.monotonic() + 5
        while pald.counts["late"] == 0 and time.monotonic() < wait:
            time.sleep(0.01)
    assert pald.counts["place"] == 1 and pald.counts["late"] == 1
    m = scrape(port)
    decisions = {k[1]: v for k, v in m.items() if k[0] == "pal_decisions_total"}
    assert decisions == {(("outcome", "placed"), ("reason", "pal-fit")): 1,
                         (("outcome", "passed"), ("reason", "late")): 1}
    assert m[("pal_place_duration_seconds_count", ())] == 2


def test_a_new_ranking_with_a_slower_gpu_counts_drift(tmp_path, endpoint):
    metrics, port = endpoint
    pald = make_pald(tmp_path)
    publisher = Publisher(metrics, drift_threshold=0.05)
    pald.service.set_snapshot(snapshot({"A": {("gpu01", 0): (1.0, 1.0), ("gpu01", 1): (1.0, 1.0)}}, version=1))
    publisher.publish(pald)
    pald.service.set_snapshot(snapshot({"A": {("gpu01", 0): (1.5, 1.5), ("gpu01", 1): (1.01, 1.0)}}, version=2))
    publisher.publish(pald)
    m = scrape(port)
    assert m[("pal_gpu_drift_total", (("perf_class", "A"),))] == 1
    assert m[("pal_ranking_version", ())] == 2


def test_metrics_listen_config_and_a_busy_port_does_not_stop_pald(tmp_path):
    import socket

    from pal_slurm.config import ConfigError, from_mapping, parse_listen
    from pal_slurm.daemon.main import with_metrics

    assert parse_listen("") is None
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    with pytest.raises(ConfigError):
        from_mapping({"metrics": {"listen": "localhost"}})
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    cfg = from_mapping({"metrics": {"listen": f"127.0.0.1:{busy.getsockname()[1]}"}})
    pald = make_pald(tmp_path)
    handler, settle, http = with_metrics(cfg, pald)
    assert http is None and handler == pald.requests.answer and settle == pald.requests.settle  # logged, pald goes on without metrics
    busy.close()


def _closed_by_server(conn: socket.socket, within_s: float) -> bool:
    """Whether the server closes `conn` (EOF or reset) within `within_s` seconds."""
    conn.settimeout(within_s)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_a_silent_connection_is_dropped_and_does_not_hold_a_thread():
    server = serve_metrics(PaldMetrics(), "127.0.0.1", 0, timeout_s=0.5, max_connections=4)
    try:
        before = threading.active_count()
        silent = socket.create_connection(("127.0.0.1", server.server_port))
        started = time.monotonic()
        assert _closed_by_server(silent, within_s=5.0)
        assert time.monotonic() - started < 3.0
        silent.close()
        assert wait_until(lambda: threading.active_count() <= before, timeout=5.0)
        assert scrape(server.server_port)  # the endpoint still serves
    finally:
        server.shutdown()


def test_silent_connections_over_the_bound_are_closed_at_once_and_scrapes_resume():
    server = serve_metrics(PaldMetrics(), "127.0.0.1", 0, timeout_s=4.0, max_connections=2)
    port = server.server_port
    try:
        before = threading.active_count()
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        assert wait_until(lambda: threading.active_count() >= before + 2, timeout=5.0)
        extra = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        assert all(_closed_by_server(c, within_s=1.0) for c in extra)  # refused, not queued
        # 22 peers, 2 connections served: each has its handler thread and its deadline timer
        assert threading.active_count() <= before + 2 * 2
        assert all(_closed_by_server(c, within_s=5.0) for c in held)  # then the silent ones time out
        for c in held + extra:
            c.close()
        assert wait_until(lambda: threading.active_count() <= before, timeout=5.0)
        assert scrape(port)
    finally:
        server.shutdown()


def test_a_peer_trickling_bytes_is_cut_off_at_the_connection_deadline():
    server = serve_metrics(PaldMetrics(), "127.0.0.1", 0, timeout_s=1.0, deadline_s=1.5, max_connections=4)
    try:
        slow = socket.create_connection(("127.0.0.1", server.server_port))
        slow.settimeout(0.05)
        started, closed = time.monotonic(), False
        while time.monotonic() - started < 6.0 and not closed:
            try:
                slow.sendall(b"G")  # never a whole request line, never silent for 1 s
                closed = slow.recv(1) == b""
            except socket.timeout:
                time.sleep(0.25)
            except OSError:  # reset or broken pipe: cut off
                closed = True
        assert closed and time.monotonic() - started < 4.0
        slow.close()
        assert scrape(server.server_port)
    finally:
        server.shutdown()


def test_node_samples_taken_and_refused_are_counted_and_scraped(tmp_path, endpoint):
    """pald as assembled (app.sample_intake over its store link), its decoder a fake MUNGE."""
    import asyncio
    from datetime import datetime, timezone

    from pal_slurm.daemon.protocol import ErrorReply, SamplesReply, SamplesRequest
    from pal_slurm.model.sample import Sample
    from pal_slurm.model.sample_batch import encode_payload

    from .test_sample_intake import FakeMunge

    metrics, port = endpoint
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    munge = FakeMunge()
    pald.requests.samples.decoder = munge
    pald.state.node_names = {"gpu01": ("127.0.0.1", "")}
    batch = [Sample(node="gpu01", slot=s, perf_class="A", backend="replay", value=1.0 + s, higher_is_better=False)
             for s in range(3)]

    def send(cred: str):
        return asyncio.run(pald.answer(SamplesRequest(cred)))

    assert send(munge.sign(encode_payload("gpu01", batch), "127.0.0.1")) == SamplesReply(stored=3)
    assert send(munge.sign(encode_payload("gpu01", batch), "127.0.0.1")) == SamplesReply(stored=0, duplicate=True)
    refused = send(munge.sign(encode_payload("gpu01", batch), "127.0.0.7"))
    assert isinstance(refused, ErrorReply) and refused.code == "refused" and "wrong_node" in refused.message
    pald.flush_decisions()
    assert len(store.recent_samples(datetime.fromtimestamp(0, timezone.utc), include_busy=True)) == 3
    Publisher(metrics, drift_threshold=0.05).publish(pald)
    m = scrape(port)
    assert [m[("pal_node_samples_total", (("outcome", o),))] for o in ("stored", "duplicate", "refused")] == [3, 3, 1]
