"""The wire protocol: named malformed cases, round trips, and hypothesis garbage."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import (
    MAX_LINE_BYTES,
    OPS,
    ErrorCode,
    ErrorReply,
    HealthReply,
    HealthRequest,
    JobFields,
    PlaceReply,
    PlaceRequest,
    ProtocolError,
    ReloadReply,
    ReloadRequest,
    SamplesReply,
    SamplesRequest,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)
from pal_slurm.model.decision import DecisionKind


def place_line(**changes):
    obj = {"v": 1, "op": "place", "id": "h1",
           "job": {"uid": 1000, "comment": "pal:class=resnet", "gpus_per_node": 2},
           "pal": {"class": "resnet"}}
    for key, value in changes.items():
        target, _, name = key.rpartition("__")
        where = obj[target] if target else obj
        if value is DELETE:
            del where[name]
        else:
            where[name] = value
    return json.dumps(obj).encode() + b"\n"


DELETE = object()


# ----------------------------------------------------------------------------- named cases


@pytest.mark.parametrize(
    "line, code",
    [
        (b"", ErrorCode.NOT_JSON),
        (b"hello\n", ErrorCode.NOT_JSON),
        (b'{"v":1,"op":"health"', ErrorCode.NOT_JSON),
        (b'{"v":1,"op":"health"}\n{"v":1}\n', ErrorCode.NOT_JSON),
        (b'{"v":1,"op":"health","x":NaN}', ErrorCode.NOT_JSON),
        (b'{"v":1,"op":"health","x":1e400}', ErrorCode.NOT_JSON),
        (b'{"v":1,"v":1,"op":"health"}', ErrorCode.NOT_JSON),
        (b"[" * 5000 + b"]" * 5000, ErrorCode.NOT_JSON),
        (b"[1,2]", ErrorCode.NOT_OBJECT),
        (b'"place"', ErrorCode.NOT_OBJECT),
        (b"null", ErrorCode.NOT_OBJECT),
        (b'{"op":"health"}', ErrorCode.BAD_VERSION),
        (b'{"v":2,"op":"health"}', ErrorCode.BAD_VERSION),
        (b'{"v":"1","op":"health"}', ErrorCode.BAD_VERSION),
        (b'{"v":true,"op":"health"}', ErrorCode.BAD_VERSION),
        (b'{"v":1.0,"op":"health"}', ErrorCode.BAD_VERSION),
        (b'{"v":1}', ErrorCode.UNKNOWN_OP),
        (b'{"v":1,"op":"shutdown"}', ErrorCode.UNKNOWN_OP),
        (b'{"v":1,"op":["place"]}', ErrorCode.UNKNOWN_OP),
        (place_line(job=DELETE), ErrorCode.BAD_FIELD),
        (place_line(job=[]), ErrorCode.BAD_FIELD),
        (place_line(pal=DELETE), ErrorCode.BAD_FIELD),
        (place_line(job__uid=DELETE), ErrorCode.BAD_FIELD),
        (place_line(job__uid="1000"), ErrorCode.BAD_FIELD),
        (place_line(job__uid=True), ErrorCode.BAD_FIELD),
        (place_line(job__uid=-1), ErrorCode.BAD_FIELD),
        (place_line(job__uid=1.5), ErrorCode.BAD_FIELD),
        (place_line(job__comment=None), ErrorCode.BAD_FIELD),
        (place_line(job__gpus_per_node="2"), ErrorCode.BAD_FIELD),
        (place_line(job__min_nodes=-3), ErrorCode.BAD_FIELD),
        (place_line(job__partition=7), ErrorCode.BAD_FIELD),
        (place_line(pal={"gpus": 2}), ErrorCode.BAD_FIELD),  # a spec without its class (empty: default-on)
        (place_line(pal__class=3), ErrorCode.BAD_FIELD),
        (place_line(pal__gpus=0), ErrorCode.BAD_FIELD),
        (place_line(pal__mode=False), ErrorCode.BAD_FIELD),
        (place_line(id=5), ErrorCode.BAD_FIELD),
        (b'{"v":1,"op":"health","pad":"' + b"x" * MAX_LINE_BYTES + b'"}', ErrorCode.TOO_LONG),
    ],
)
def test_malformed_request_gives_typed_error(line, code):
    with pytest.raises(ProtocolError) as info:
        decode_request(line)
    assert info.value.code == code
    assert info.value.message


def test_line_exactly_at_the_limit_is_accepted_and_one_more_byte_is_not():
    head = b'{"v":1,"op":"health","pad":"'
    tail = b'"}\n'
    fill = MAX_LINE_BYTES - len(head) - len(tail)
    assert decode_request(head + b"x" * fill + tail) == HealthRequest()
    with pytest.raises(ProtocolError) as info:
        decode_request(head + b"x" * (fill + 1) + tail)
    assert info.value.code == ErrorCode.TOO_LONG


def test_unknown_extra_fields_are_ignored_for_forward_compatibility():
    assert decode_request(b'{"v":1,"op":"health","new_field":{"a":[1]}}') == HealthRequest()
    req = decode_request(place_line(job__cgroup="x", pal__future=1))
    assert req.job.uid == 1000 and req.pal == CommentSpec("resnet")


def test_crlf_and_missing_newline_are_both_one_line():
    assert decode_request(b'{"v":1,"op":"reload"}\r\n') == ReloadRequest()
    assert decode_request('{"v":1,"op":"reload"}') == ReloadRequest()


def test_invalid_utf8_in_a_comment_is_replaced_not_rejected():
    line = place_line(job__comment="caf\u00e9 pal:class=resnet").replace(b"\\u00e9", b"\xe9")
    assert b"\xe9" in line
    req = decode_request(line)
    assert req.job.comment == "caf\ufffd pal:class=resnet"


def test_place_request_from_the_hook_decodes_with_nulls_absent():
    # What pal.lua sends: Lua tables cannot hold nil, so unknown fields are simply absent.
    line = (b'{"v":1,"op":"place","id":"h-17","job":{"uid":0,"comment":"x pal:class=bert,gpus=4",'
            b'"name":"train","user":"root","tres_per_node":"gres:gpu:4","gpus_per_node":4,'
            b'"min_nodes":1},"pal":{"class":"bert","gpus":4}}\n')
    req = decode_request(line)
    assert req == PlaceRequest(
        job=JobFields(uid=0, comment="x pal:class=bert,gpus=4", name="train", user="root",
                      tres_per_node="gres:gpu:4", gpus_per_node=4, min_nodes=1),
        pal=CommentSpec("bert", gpus=4), request_id="h-17")


def test_deadline_is_optional_and_checked():
    assert decode_request(place_line()).deadline_ms is None  # old hooks still work
    req = decode_request(place_line(deadline_ms=1732380000150))
    assert req.deadline_ms == 1732380000150
    assert not req.expired(1732380000.149) and req.expired(1732380000.151)
    assert decode_request(encode_request(req)) == req
    for bad in ("soon", -1, 1.5, True):
        with pytest.raises(ProtocolError) as err:
            decode_request(place_line(deadline_ms=bad))
        assert err.value.code is ErrorCode.BAD_FIELD and "deadline_ms" in err.value.message


@pytest.mark.parametrize(
    "obj, code",
    [
        ({"v": 1}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": "yes"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "maybe"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": []}, ErrorCode.BAD_FIELD),  # found by hypothesis
        ({"v": 1, "ok": True, "decision": {"place": 1}}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place", "nodes": {"gpu03": []}, "gres": "gres:gpu:1"},
         ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place", "nodes": {"gpu[01-02]": [0]},
          "gres": "gres:gpu:1"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place", "nodes": {"gpu03": [-1]},
          "gres": "gres:gpu:1"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place", "nodes": {"gpu03": [0]},
          "gres": "gpu:1"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "place", "nodes": {"gpu03": [0]},
          "gres": "gres:gpu:s0:1;rm -rf"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "defer", "nodes": {"gpu03": [0]}}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "pass", "rank": "v3"}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": True, "decision": "pass", "warning": 3}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": False}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": False, "error": {"code": "x"}}, ErrorCode.BAD_FIELD),
        ({"v": 1, "ok": False, "error": {"code": "", "message": "m"}}, ErrorCode.BAD_FIELD),
        ({"v": 3, "ok": True, "decision": "pass"}, ErrorCode.BAD_VERSION),
    ],
)
def test_malformed_place_reply_gives_typed_error(obj, code):
    with pytest.raises(ProtocolError) as info:
        decode_reply(json.dumps(obj), "place")
    assert info.value.code == code


def test_decode_reply_needs_a_known_op():
    with pytest.raises(ProtocolError) as info:
        decode_reply(b'{"v":1,"ok":true}', "dance")
    assert info.value.code == ErrorCode.UNKNOWN_OP


def test_error_reply_keeps_codes_it_does_not_know():
    reply = decode_reply(b'{"v":1,"ok":false,"error":{"code":"new_code","message":"m"}}', "health")
    assert reply == ErrorReply("new_code", "m")


def test_error_reply_from_a_protocol_error():
    err = ProtocolError(ErrorCode.UNKNOWN_OP, "no such op")
    line = encode_reply(ErrorReply.from_error(err))
    assert json.loads(line) == {"v": 1, "ok": False,
                                "error": {"code": "unknown_op", "message": "no such op"}}


def test_encoding_a_request_over_the_limit_is_refused():
    huge = PlaceRequest(JobFields(uid=1, comment="pal:class=a " + "x" * MAX_LINE_BYTES),
                        CommentSpec("a"))
    with pytest.raises(ProtocolError) as info:
        encode_request(huge)
    assert info.value.code == ErrorCode.TOO_LONG


def test_encoded_lines_are_one_ascii_line():
    req = PlaceRequest(JobFields(uid=1, comment="line\nbreak caf\u00e9 pal:class=a"),
                       CommentSpec("a"))
    line = encode_request(req)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.isascii()


def test_decision_kind_string_is_coerced_to_the_enum():
    assert PlaceReply("defer").decision is DecisionKind.DEFER


# ------------------------------------------------------------------------ hypothesis: garbage

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
    allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)
KEYS = ["v", "op", "ok", "job", "pal", "id", "decision", "nodes", "gres", "rank", "error",
        "uid", "comment", "class", "gpus", "status", "details"]
near_objects = st.dictionaries(
    st.sampled_from(KEYS) | st.text(max_size=5),
    json_values | st.sampled_from([1, "place", "health", "reload", "pass", "defer", True]),
    max_size=8,
)


def _decode_everything(line):
    """Every decoder on one line: each must return a value or raise ProtocolError only."""
    for decode in [decode_request] + [lambda l, op=op: decode_reply(l, op) for op in OPS]:
        try:
            decode(line)
        except ProtocolError as err:
            assert isinstance(err.code_str, str) and err.message


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_decoder(data):
    _decode_everything(data)


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes_the_decoder(text):
    _decode_everything(text)


@settings(max_examples=300)
@given(json_values)
def test_arbitrary_json_never_crashes_the_decoder(value):
    _decode_everything(json.dumps(value))


@settings(max_examples=1500)
@given(near_objects, st.sampled_from([None, 1, 2]))
def test_objects_that_look_like_messages_never_crash_the_decoder(obj, version):
    if version is not None:
        obj = {**obj, "v": version}
    _decode_everything(json.dumps(obj))


@settings(max_examples=300)
@given(st.sampled_from(["job", "pal"]), st.sampled_from(
    ["uid", "comment", "name", "gpus_per_node", "min_nodes", "class", "gpus", "mode"]), json_values)
def test_one_bad_field_in_a_good_request_is_a_typed_error_or_accepted(part, key, value):
    obj = json.loads(place_line())
    obj[part][key] = value
    try:
        req = decode_request(json.dumps(obj))
    except ProtocolError as err:
        assert err.code == ErrorCode.BAD_FIELD
    else:
        assert encode_request(req)  # whatever was accepted can be sent again


GOOD_PLACE_REPLY = {"v": 1, "ok": True, "decision": "place", "reason": "pal",
                    "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1", "rank": 7,
                    "class": "A", "warning": "w"}


@settings(max_examples=500)
@given(st.sampled_from(sorted(GOOD_PLACE_REPLY) + ["error", "status", "details", "message"]),
       json_values, st.sampled_from(OPS))
def test_one_bad_field_in_a_good_reply_is_a_typed_error_or_accepted(key, value, op):
    obj = {**GOOD_PLACE_REPLY, key: value}
    try:
        reply = decode_reply(json.dumps(obj), op)
    except ProtocolError as err:
        assert err.code in (ErrorCode.BAD_FIELD, ErrorCode.BAD_VERSION)
    else:
        assert encode_reply(reply)  # whatever was accepted can be sent again


# ---------------------------------------------------------------------- hypothesis: round trip

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
opt_int = st.none() | st.integers(0, 10**6)
specs = st.builds(
    CommentSpec,
    perf_class=st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True),
    gpus=st.none() | st.integers(1, 999999),
    mode=st.sampled_from([None, "now", "defer"]),
    net=st.none() | st.from_regex(r"[a-z]{1,10}", fullmatch=True),
)
jobs = st.builds(
    JobFields, uid=st.integers(0, 2**32), comment=names, name=st.none() | names,
    user=st.none() | names, partition=st.none() | names, gpus_per_node=opt_int,
    gpus_per_job=opt_int, tres_per_node=st.none() | names, tres_per_job=st.none() | names,
    min_nodes=opt_int, max_nodes=opt_int)
requests = st.builds(PlaceRequest, job=jobs, pal=specs, request_id=st.none() | names,
                     deadline_ms=st.none() | st.integers(0, 2**53)) | st.just(
    HealthRequest()) | st.just(ReloadRequest()) | st.builds(SamplesRequest, credential=st.from_regex(
        r"MUNGE:[A-Za-z0-9+/=]{1,200}:", fullmatch=True))

node_names = st.from_regex(r"[a-z][a-z0-9\-]{0,10}", fullmatch=True)
slots = st.lists(st.integers(0, 63), min_size=1, max_size=8).map(tuple)
gres_items = st.from_regex(r"gres:gpu(:s[0-9]{1,2})?:[1-8]", fullmatch=True)
place_replies = st.builds(
    PlaceReply, decision=st.just(DecisionKind.PLACE), reason=names,
    nodes=st.dictionaries(node_names, slots, min_size=1, max_size=4),
    gres=st.lists(gres_items, min_size=1, max_size=4).map(",".join), rank=opt_int,
    perf_class=st.none() | names, warning=st.none() | names)
other_replies = st.builds(
    PlaceReply, decision=st.sampled_from([DecisionKind.DEFER, DecisionKind.PASS]), reason=names,
    rank=opt_int, perf_class=st.none() | names, warning=st.none() | names)
health_replies = st.builds(HealthReply, status=st.sampled_from(["ok", "degraded"]), rank=opt_int,
                           details=st.dictionaries(st.text(max_size=5), json_values, max_size=3))
reload_replies = st.builds(ReloadReply, rank=opt_int, message=names)
samples_replies = st.builds(SamplesReply, stored=st.integers(0, 10_000), duplicate=st.booleans())
error_replies = st.builds(ErrorReply, code=st.sampled_from([c.value for c in ErrorCode]),
                          message=names)


@settings(max_examples=300)
@given(requests)
def test_request_round_trip(request):
    line = encode_request(request)
    assert decode_request(line) == request


@settings(max_examples=300)
@given(st.one_of(
    st.tuples(place_replies | other_replies | error_replies, st.just("place")),
    st.tuples(health_replies | error_replies, st.just("health")),
    st.tuples(reload_replies | error_replies, st.just("reload")),
    st.tuples(samples_replies | error_replies, st.just("samples")),
))
def test_reply_round_trip(pair):
    reply, op = pair
    line = encode_reply(reply)
    decoded = decode_reply(line, op)
    assert decoded == reply


def test_samples_request_needs_a_credential():
    with pytest.raises(ProtocolError, match="credential: missing"):
        decode_request(b'{"v":1,"op":"samples"}\n')
    with pytest.raises(ProtocolError, match="credential: empty"):
        decode_request(b'{"v":1,"op":"samples","credential":""}\n')


def test_place_reply_without_gres_pins_nodes_only():
    from pal_slurm.daemon.protocol import decode_reply

    reply = decode_reply(b'{"v":1,"ok":true,"decision":"place","nodes":{"gpu03":[2]}}\n', "place")
    assert reply.nodes == {"gpu03": (2,)} and reply.gres is None


def test_an_empty_pal_object_is_a_default_on_request():
    """The hook's request for a job of a default-on partition: no spec, pald's rules give the class."""
    from pal_slurm.model.comment_grammar import DEFAULT_ON_CLASS

    req = decode_request(place_line(pal={}, job__comment=""))
    assert req.pal.perf_class == DEFAULT_ON_CLASS and req.pal.to_wire() == {}
    assert decode_request(encode_request(req)) == req
