"""Samples handed to pald instead of the store ([samples] send = "pald"): over a real TCP
listener (pald's SamplesServer and request handler), signed by a fake MUNGE. The store is
never opened on the node; pald down means spooled, and the spool arrives once."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from pal_slurm.bench import hook, prolog, spool
from pal_slurm.bench.handoff import HandoffError, PaldSink
from pal_slurm.bench.settings import ProfilingSettings
from pal_slurm.daemon.protocol import ErrorReply, HealthRequest, decode_reply, encode_request
from pal_slurm.daemon.requests import Requests
from pal_slurm.daemon.sample_intake import SampleIntake
from pal_slurm.daemon.server import SamplesServer
from pal_slurm.model.sample import Sample
from tests.unit.daemon.test_sample_intake import FakeMunge

from .test_prolog import ENV, ctx


class Listener:
    """pald's samples listener on 127.0.0.1 (a free port) in a thread of its own."""

    def __init__(self, port: int = 0) -> None:
        self.munge = FakeMunge()
        self.stored: list[Sample] = []
        self.intake = SampleIntake(self.munge, {"n1": ("127.0.0.1", "")}.get, {0}, self.stored.extend,
                                   resolver=lambda name: frozenset({name}))
        requests = Requests(None, None, lambda: None, samples=self.intake)  # type: ignore[arg-type]
        self.server = SamplesServer(requests.answer, "127.0.0.1", port)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(5)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def sink(self, host: str = "127.0.0.1") -> PaldSink:
        return PaldSink(self.address, timeout_s=2.0, encode=lambda payload: self.munge.sign(payload, host))

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def pald():
    listener = Listener()
    yield listener
    listener.close()


def sample(slot: int, value: float = 1.0, node: str = "n1") -> Sample:
    return Sample(node=node, slot=slot, perf_class="A", backend="replay", value=value, higher_is_better=False,
                  job_id="41", taken_at=100.0 + value)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_samples_in_several_batches_arrive_once_even_when_sent_twice(pald):
    samples = [sample(i % 4, value=1.0 + i) for i in range(70)]  # three batches
    pald.sink().add_samples(samples)
    pald.sink().add_samples(samples)  # a spool sent again after a lost reply
    assert pald.stored == samples


def test_a_node_sending_in_another_nodes_name_gets_an_error_and_nothing_is_stored(pald):
    with pytest.raises(HandoffError, match="refused.*wrong_node"):
        pald.sink(host="127.0.0.9").add_samples([sample(0)])
    assert pald.stored == []


def test_the_listener_answers_only_samples_requests(pald):
    with socket.create_connection(("127.0.0.1", pald.server.port), timeout=2) as s:
        s.sendall(encode_request(HealthRequest()))
        reply = decode_reply(s.makefile("rb").readline(), "health")
    assert isinstance(reply, ErrorReply) and reply.code == "forbidden"


def test_a_silent_connection_is_closed_by_the_listener(pald):
    pald.server.idle_s = 0.2
    with socket.create_connection(("127.0.0.1", pald.server.port), timeout=10) as s:
        assert s.recv(1) == b""  # closed by pald, not by our timeout (which would raise)


def test_nobody_listening_is_a_handoff_error():
    with pytest.raises(HandoffError, match="unreachable"):
        PaldSink(f"127.0.0.1:{dead_port()}", encode=lambda p: "cred").add_samples([sample(0)])


def test_pald_mode_never_opens_the_store(monkeypatch):
    import pal_slurm.store as store

    monkeypatch.setattr(store, "open_store", lambda url, **kw: pytest.fail(f"opened the store {url}"))
    settings = ProfilingSettings(send="pald", pald_address="127.0.0.1:1", store_url="sqlite:////nonexistent/x.db")
    assert isinstance(hook._default_sink(settings), PaldSink)


def test_prolog_with_pald_down_spools_then_delivers_once_when_it_is_back(tmp_path):
    port = dead_port()
    signer = FakeMunge()

    def sink_for(_settings):
        return PaldSink(f"127.0.0.1:{port}", timeout_s=1.0, encode=lambda p: signer.sign(p, "127.0.0.1"))

    down = ctx(tmp_path)
    down.sink = sink_for
    assert prolog.main(ctx=down) == 0
    again = ctx(tmp_path, env={**ENV, "SLURM_JOB_ID": "42"})
    again.sink = sink_for
    assert prolog.main(ctx=again) == 0
    assert spool.pending(tmp_path / "spool") == 4
    listener = Listener(port)
    try:
        listener.munge = signer
        listener.intake.decoder = signer
        back = ctx(tmp_path, env={**ENV, "SLURM_JOB_ID": "43"})
        back.sink = sink_for
        assert prolog.main(ctx=back) == 0
        assert sorted(s.job_id for s in listener.stored) == ["41", "41", "42", "42", "43", "43"]
        assert spool.pending(tmp_path / "spool") == 0
        assert spool.drain(sink_for(None), tmp_path / "spool").delivered == 0
    finally:
        listener.close()
