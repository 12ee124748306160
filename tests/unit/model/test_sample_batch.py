"""The payload a node signs with MUNGE: one node's samples, round-trip, and what it refuses."""

from __future__ import annotations

import json

import pytest

from pal_slurm.model.sample import Sample
from pal_slurm.model.sample_batch import (
    BATCH_SAMPLES,
    MAX_PAYLOAD_BYTES,
    BatchError,
    batch_key,
    decode_payload,
    encode_payload,
    split,
)


def sample(node: str = "gpu01", slot: int = 0, value: float = 1.5, **kw) -> Sample:
    return Sample(node=node, slot=slot, perf_class="A", backend="replay", value=value, higher_is_better=False,
                  metrics={"wall_s": value}, job_id="7", taken_at=1000.0 + slot, **kw)


def test_round_trip_keeps_every_field_and_the_key():
    samples = [sample(slot=s, value=1.0 + s) for s in range(4)]
    batch = decode_payload(encode_payload("gpu01", samples))
    assert batch.node == "gpu01"
    assert list(batch.samples) == samples
    assert batch.key == batch_key("gpu01", samples)


def test_key_depends_on_node_and_content_not_on_encoding_run():
    a = [sample(slot=0), sample(slot=1)]
    assert batch_key("gpu01", a) == batch_key("gpu01", list(a))
    assert batch_key("gpu01", a) != batch_key("gpu02", a)
    assert batch_key("gpu01", a) != batch_key("gpu01", [a[0], sample(slot=1, value=9.0)])
    assert batch_key("gpu01", a) != batch_key("gpu01", a[::-1])


def test_encode_refuses_a_sample_of_another_node():
    with pytest.raises(BatchError, match="gpu02"):
        encode_payload("gpu01", [sample(), sample(node="gpu02")])


def test_decode_refuses_a_payload_whose_sample_names_another_node():
    body = json.loads(encode_payload("gpu01", [sample()]))
    body["samples"].append(json.loads(sample(node="gpu02").to_json()))
    with pytest.raises(BatchError, match="gpu02"):
        decode_payload(json.dumps(body).encode())


@pytest.mark.parametrize("data, why", [
    (b"\xff\xfe", "not JSON"),
    (b"[1,2]", "not a JSON object"),
    (b'{"v":2,"node":"gpu01","samples":[]}', "version"),
    (b'{"v":1,"samples":[{}]}', "no node"),
    (b'{"v":1,"node":"gpu01","samples":[]}', "no samples"),
    (b'{"v":1,"node":"gpu01","samples":[{"node":"gpu01"}]}', "sample 0"),
    (b"x" * (MAX_PAYLOAD_BYTES + 1), "over"),
])
def test_decode_names_what_is_wrong(data, why):
    with pytest.raises(BatchError, match=why):
        decode_payload(data)


def test_split_is_deterministic_and_fits_one_payload_each():
    samples = [sample(slot=i % 8, value=1.0 + i) for i in range(BATCH_SAMPLES * 2 + 3)]
    parts = split(samples)
    assert [len(p) for p in parts] == [BATCH_SAMPLES, BATCH_SAMPLES, 3]
    assert [x for p in parts for x in p] == samples
    assert split(samples) == parts
    for p in parts:
        assert len(encode_payload("gpu01", p)) <= MAX_PAYLOAD_BYTES


def test_encode_refuses_a_payload_over_the_limit():
    big = [sample(slot=i, **{}) for i in range(3)]
    big = [Sample(**{**s.__dict__, "metrics": {"blob": "x" * MAX_PAYLOAD_BYTES}}) for s in big]
    with pytest.raises(BatchError, match="over"):
        encode_payload("gpu01", big)
