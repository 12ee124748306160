"""The protocol's fields for where a job may run: round trips and bad values."""

from __future__ import annotations

import pytest

from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import (
    ErrorCode,
    JobFields,
    PlaceReply,
    PlaceRequest,
    ProtocolError,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)
from pal_slurm.model import DecisionKind


def test_site_fields_round_trip():
    job = JobFields(uid=5, comment="pal:class=a", partition="one,gpu", usable_partitions=("gpu", "one"),
                    features="f4", exc_nodes="gpu01", req_nodes="gpu04", reservation="r1", account="x",
                    qos="normal", shared=0, time_limit=30, cpus_per_task=2, ntasks_per_node=1, num_tasks=1,
                    pn_min_cpus=2, min_cpus=2, cpus_per_tres="gres:gpu:2", min_mem_per_node=10,
                    min_mem_per_cpu=None, mem_per_tres="gres:gpu:5", array_inx="1-3", het_job_offset=0,
                    dependency="afterok:1", begin_time=0, priority=0, ntasks_per_tres=2)
    req = PlaceRequest(job, CommentSpec("a"), "id1")
    assert decode_request(encode_request(req)) == req


@pytest.mark.parametrize("field, value", [("usable_partitions", "gpu"), ("usable_partitions", [1]),
                                          ("shared", -1), ("features", 3), ("time_limit", "30")])
def test_bad_site_fields_are_typed_errors(field, value):
    with pytest.raises(ProtocolError) as err:
        JobFields(uid=5, comment="c", **{field: value})
    assert err.value.code is ErrorCode.BAD_FIELD


def test_reply_partition_round_trips_and_only_goes_with_place():
    reply = PlaceReply(DecisionKind.PLACE, "pal", {"gpu04": (0,)}, "gres:gpu:s0:1", partition="one")
    assert decode_reply(encode_reply(reply), "place") == reply
    with pytest.raises(ProtocolError):
        PlaceReply(DecisionKind.PASS, "x", partition="one")
    with pytest.raises(ProtocolError):
        PlaceReply(DecisionKind.PLACE, "pal", {"gpu04": (0,)}, partition="one two")
