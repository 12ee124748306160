"""PaldClient against a tiny real unix-socket server speaking the real protocol."""

import time

import pytest

from pal_slurm.daemon.client import (
    PaldClient,
    PaldRequestError,
    PaldTimeout,
    PaldUnavailable,
)
from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import (
    MAX_LINE_BYTES,
    ErrorCode,
    ErrorReply,
    HealthReply,
    HealthRequest,
    JobFields,
    PlaceReply,
    PlaceRequest,
    ProtocolError,
    ReloadReply,
    decode_request,
    encode_reply,
)
from pal_slurm.model.decision import DecisionKind
from tests.support.tiny_pald import TinyPald, protocol_answer

REQUEST = PlaceRequest(JobFields(uid=1000, comment="pal:class=bert", gpus_per_node=2),
                       CommentSpec("bert"), request_id="t1")


def by_op(line):
    req = decode_request(line)
    if isinstance(req, HealthRequest):
        return encode_reply(HealthReply("ok", rank=4, details={"uptime_s": 12.5}))
    if isinstance(req, PlaceRequest):
        return encode_reply(PlaceReply(DecisionKind.DEFER, "cluster full", rank=4))
    return encode_reply(ReloadReply(rank=5, message="ranking v5"))


def test_place_health_reload_round_trip(tmp_path):
    with TinyPald(tmp_path / "p.sock", answer=by_op) as pald:
        client = PaldClient(tmp_path / "p.sock", timeout_s=2)
        assert client.place(REQUEST) == PlaceReply(DecisionKind.DEFER, "cluster full", rank=4)
        assert client.health() == HealthReply("ok", rank=4, details={"uptime_s": 12.5})
        assert client.reload() == ReloadReply(rank=5, message="ranking v5")
    assert decode_request(pald.received[0]) == REQUEST


def test_default_protocol_answer_places(tmp_path):
    with TinyPald(tmp_path / "p.sock", answer=protocol_answer()):
        reply = PaldClient(tmp_path / "p.sock").place(REQUEST)
    assert reply.decision is DecisionKind.PLACE and reply.nodes == {"gpu03": (2, 3)}


def test_error_reply_is_raised_with_its_code(tmp_path):
    answer = lambda line: encode_reply(ErrorReply(ErrorCode.FORBIDDEN, "uid 1000 may not"))
    with TinyPald(tmp_path / "p.sock", answer=answer):
        client = PaldClient(tmp_path / "p.sock")
        with pytest.raises(PaldRequestError) as info:
            client.health()
        assert info.value.code == "forbidden" and "uid 1000" in info.value.message
        assert client.request(HealthRequest()) == ErrorReply("forbidden", "uid 1000 may not")


def test_no_server_is_unavailable(tmp_path):
    with pytest.raises(PaldUnavailable):
        PaldClient(tmp_path / "missing.sock").health()


def test_stale_socket_file_is_unavailable(tmp_path):
    import socket

    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    with pytest.raises(PaldUnavailable):
        PaldClient(path).health()


def test_hanging_server_times_out_on_the_deadline(tmp_path):
    with TinyPald(tmp_path / "p.sock", answer=by_op, delay_s=1.0):
        t0 = time.monotonic()
        with pytest.raises(PaldTimeout):
            PaldClient(tmp_path / "p.sock", timeout_s=0.1).health()
        assert time.monotonic() - t0 < 0.5


def test_closed_without_answer_is_unavailable(tmp_path):
    with TinyPald(tmp_path / "p.sock", answer=lambda line: None):
        with pytest.raises(PaldUnavailable):
            PaldClient(tmp_path / "p.sock").health()


@pytest.mark.parametrize(
    "raw, code",
    [
        (b"not json\n", ErrorCode.NOT_JSON),
        (b'{"v":9,"ok":true}\n', ErrorCode.BAD_VERSION),
        (b'{"v":1,"ok":true}\n', ErrorCode.BAD_FIELD),  # health without status
        (b'{"v":1,"ok":true,"status":"ok"', ErrorCode.NOT_JSON),  # closed mid-line
        (b"x" * (MAX_LINE_BYTES + 10), ErrorCode.TOO_LONG),
    ],
)
def test_malformed_replies_are_protocol_errors(tmp_path, raw, code):
    with TinyPald(tmp_path / "p.sock", answer=lambda line: raw):
        with pytest.raises(ProtocolError) as info:
            PaldClient(tmp_path / "p.sock").health()
    assert info.value.code == code


def test_timeout_must_be_positive():
    with pytest.raises(ValueError):
        PaldClient("/x", timeout_s=0)


def test_socket_path_too_long_is_unavailable_not_a_crash(tmp_path):
    with pytest.raises(PaldUnavailable):
        PaldClient("/tmp/" + "x" * 200 + ".sock").health()
