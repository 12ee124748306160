"""pald's checks on a compute node's samples, with a fake MUNGE decoder (no munged needed):
who signed (uid), from where (ENCODE_HOST against the node's NodeAddr/NodeHostname), what
(one node's batch), and whether pald took the batch before."""

from __future__ import annotations

import logging

import pytest

from pal_slurm.daemon.sample_intake import Refused, SampleIntake, normal_ip
from pal_slurm.model.sample import Sample
from pal_slurm.model.sample_batch import encode_payload
from pal_slurm.slurm.munge import Decoded, MungeError

NODES = {"gpu01": ("10.0.0.1", "gpu01.site"), "gpu02": ("gpu02.site", "gpu02.site")}
DNS = {"10.0.0.1": {"10.0.0.1"}, "gpu01.site": {"10.0.0.1"}, "gpu02.site": {"10.0.0.2", "fd00::2"}}
SLURMD_UID = 64030


def sample(node: str, slot: int = 0, value: float = 2.0) -> Sample:
    return Sample(node=node, slot=slot, perf_class="B", backend="replay", value=value, higher_is_better=False,
                  job_id="11", taken_at=50.0)


class FakeMunge:
    """Credentials are keys into a table of what unmunge would vouch for; anything else is
    what unmunge refuses (garbage, another key, a replay)."""

    def __init__(self) -> None:
        self.table: dict[str, Decoded] = {}

    def sign(self, payload: bytes, host: str, uid: int = 0) -> str:
        cred = f"MUNGE:{len(self.table)}:"
        self.table[cred] = Decoded(uid=uid, gid=uid, encode_host=host, payload=payload)
        return cred

    def __call__(self, credential: str) -> Decoded:
        if credential not in self.table:
            raise MungeError("Invalid credential format")
        return self.table.pop(credential)  # munged: a credential decodes once


@pytest.fixture
def rig():
    munge = FakeMunge()
    stored: list[Sample] = []
    counts: dict[str, int] = {}

    def count(name: str, n: int) -> None:
        counts[name] = counts.get(name, 0) + n

    intake = SampleIntake(munge, NODES.get, {0, SLURMD_UID}, stored.extend, count,
                          resolver=lambda name: frozenset(DNS.get(name, ())))
    return munge, intake, stored, counts


def test_a_node_signing_its_own_samples_is_stored(rig):
    munge, intake, stored, counts = rig
    batch = [sample("gpu01", 0), sample("gpu01", 1)]
    taken = intake.take(munge.sign(encode_payload("gpu01", batch), "10.0.0.1"))
    assert (taken.node, taken.stored, taken.duplicate) == ("gpu01", 2, False)
    assert stored == batch
    assert counts == {"samples_stored": 2}


def test_node_hostname_resolving_to_several_addresses_and_slurmd_user(rig):
    munge, intake, stored, _ = rig
    intake.take(munge.sign(encode_payload("gpu02", [sample("gpu02")]), "fd00:0:0::2", uid=SLURMD_UID))
    assert [s.node for s in stored] == ["gpu02"]


@pytest.mark.parametrize("claimed, host, uid, reason", [
    ("gpu02", "10.0.0.1", 0, "wrong_node"),  # gpu01's host sends samples in gpu02's name
    ("gpu01", "10.0.0.9", 0, "wrong_node"),  # a host that is no node of the name
    ("gpu07", "10.0.0.1", 0, "unknown_node"),  # a name Slurm does not list
    ("gpu01", "10.0.0.1", 1000, "bad_uid"),  # a user logged into gpu01 signs with their own uid
])
def test_refusals_are_typed_logged_counted_and_store_nothing(rig, caplog, claimed, host, uid, reason):
    munge, intake, stored, counts = rig
    cred = munge.sign(encode_payload(claimed, [sample(claimed)]), host, uid)
    with caplog.at_level(logging.WARNING, logger="pald.samples"), pytest.raises(Refused) as err:
        intake.take(cred)
    assert err.value.reason == reason
    assert stored == []
    assert counts == {"samples_refused": 1}
    assert f"samples refused ({reason}): {host}" in caplog.text


@pytest.mark.parametrize("payload", [b"not json", encode_payload("gpu01", [sample("gpu01")]).replace(b'"v":1', b'"v":3')])
def test_a_valid_credential_with_a_bad_payload_is_refused(rig, payload):
    munge, intake, stored, _ = rig
    with pytest.raises(Refused) as err:
        intake.take(munge.sign(payload, "10.0.0.1"))
    assert err.value.reason == "bad_payload" and stored == []


def test_garbage_and_a_replayed_credential_are_refused(rig):
    munge, intake, stored, counts = rig
    with pytest.raises(Refused) as err:
        intake.take("garbage")
    assert err.value.reason == "bad_credential"
    cred = munge.sign(encode_payload("gpu01", [sample("gpu01")]), "10.0.0.1")
    intake.take(cred)
    with pytest.raises(Refused) as err:
        intake.take(cred)  # the same credential again: munged's replay check
    assert err.value.reason == "bad_credential"
    assert len(stored) == 1 and counts["samples_refused"] == 2


def test_a_batch_sent_again_in_a_new_credential_is_acknowledged_not_stored(rig):
    munge, intake, stored, counts = rig
    batch = [sample("gpu01", s) for s in range(3)]
    first = intake.take(munge.sign(encode_payload("gpu01", batch), "10.0.0.1"))
    again = intake.take(munge.sign(encode_payload("gpu01", batch), "10.0.0.1"))
    assert (again.duplicate, again.stored, again.key) == (True, 0, first.key)
    assert stored == batch
    other = intake.take(munge.sign(encode_payload("gpu01", [sample("gpu01", 0, value=3.0)]), "10.0.0.1"))
    assert not other.duplicate and len(stored) == 4
    assert counts == {"samples_stored": 4, "samples_duplicate": 3}


def test_a_sink_failure_leaves_the_batch_unseen_so_a_resend_stores_it(rig):
    munge, intake, stored, _ = rig
    calls = []

    def flaky(samples):
        calls.append(samples)
        if len(calls) == 1:
            raise OSError("outbox full")
        stored.extend(samples)

    intake.sink = flaky
    batch = [sample("gpu01")]
    with pytest.raises(OSError):
        intake.take(munge.sign(encode_payload("gpu01", batch), "10.0.0.1"))
    assert not intake.take(munge.sign(encode_payload("gpu01", batch), "10.0.0.1")).duplicate
    assert stored == batch


def test_seen_keys_are_bounded(rig):
    munge, intake, stored, _ = rig
    intake.seen_max = 2
    batches = [[sample("gpu01", value=v)] for v in (1.0, 2.0, 3.0)]
    for b in batches:
        intake.take(munge.sign(encode_payload("gpu01", b), "10.0.0.1"))
    assert intake.take(munge.sign(encode_payload("gpu01", batches[2]), "10.0.0.1")).duplicate
    assert not intake.take(munge.sign(encode_payload("gpu01", batches[0]), "10.0.0.1")).duplicate  # forgotten


def test_normal_ip_spells_each_address_one_way():
    assert normal_ip("::ffff:10.0.0.1") == "10.0.0.1"
    assert normal_ip("fe80::1%eth0") == "fe80::1"
    assert normal_ip("FD00:0:0::2") == "fd00::2"


def test_a_full_store_queue_refuses_the_batch_so_the_node_keeps_it_and_sends_it_again():
    munge, stored, full = FakeMunge(), [], [True]
    intake = SampleIntake(munge, NODES.get, {0}, stored.extend, resolver=lambda name: frozenset(DNS.get(name, ())),
                          room=lambda: not full[0])
    payload = encode_payload("gpu01", [sample("gpu01", 0)])
    with pytest.raises(Refused) as refused:
        intake.take(munge.sign(payload, "10.0.0.1"))
    assert refused.value.reason == "store_busy" and stored == []
    full[0] = False  # the queue drained: the same batch, sent again, is stored (not taken for a duplicate)
    taken = intake.take(munge.sign(payload, "10.0.0.1"))
    assert (taken.stored, taken.duplicate) == (1, False) and len(stored) == 1
