"""A node's batch of samples as it travels to pald inside a MUNGE credential. Pure: no I/O.

The payload is one JSON object: `{"v": 1, "node": "gpu03", "samples": [<Sample.to_json()>...]}`.
MUNGE signs it and says which host and which user encoded it; the payload says which Slurm
node the samples are of. pald stores a batch only when every sample names the payload's node
(a node cannot slip in samples of another), and recognises a batch it has seen by
`batch_key`: a digest of the node and the samples' canonical JSON, computed the same way on
both sides, so a spooled batch sent again after a lost reply is stored once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence

from pal_slurm.model.sample import Sample

PAYLOAD_VERSION = 1
# samples per batch: one batch is one MUNGE credential on one protocol line (64 KiB, base64 of
# the payload included); a spool file of a few hundred samples goes as several batches
BATCH_SAMPLES = 32
MAX_PAYLOAD_BYTES = 40 * 1024


class BatchError(ValueError):
    """A payload that is not a batch of samples of one node; the message says what is wrong."""


@dataclass(frozen=True)
class SampleBatch:
    """Samples of one node, and the key that names this batch."""

    node: str
    samples: tuple[Sample, ...]

    @property
    def key(self) -> str:
        return batch_key(self.node, self.samples)


def batch_key(node: str, samples: Sequence[Sample]) -> str:
    """sha256 over the node and each sample's canonical JSON, in order (hex)."""
    h = hashlib.sha256(node.encode("utf-8", "surrogatepass"))
    for s in samples:
        h.update(b"\n")
        h.update(s.to_json().encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def split(samples: Sequence[Sample], size: int = BATCH_SAMPLES) -> list[tuple[Sample, ...]]:
    """The samples in batches of at most `size`, in order (the same input splits the same way,
    so a spool file sent again yields the same batch keys)."""
    return [tuple(samples[i:i + size]) for i in range(0, len(samples), size)]


def encode_payload(node: str, samples: Sequence[Sample]) -> bytes:
    """The payload of one batch; BatchError when a sample is of another node or it is too big."""
    if not node:
        raise BatchError("a batch needs a node name")
    for s in samples:
        if s.node != node:
            raise BatchError(f"sample of node {s.node!r} in a batch of {node!r}")
    body = {"v": PAYLOAD_VERSION, "node": node, "samples": [json.loads(s.to_json()) for s in samples]}
    try:
        data = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:  # NaN or infinity in a sample's metrics
        raise BatchError(f"a sample does not encode as JSON: {exc}") from None
    if len(data) > MAX_PAYLOAD_BYTES:
        raise BatchError(f"payload of {len(data)} bytes over {MAX_PAYLOAD_BYTES}: send fewer samples per batch")
    return data


def decode_payload(data: bytes) -> SampleBatch:
    """A payload back into a batch; BatchError names what is wrong (never another exception)."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise BatchError(f"payload of {len(data)} bytes over {MAX_PAYLOAD_BYTES}")
    try:
        body: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BatchError(f"payload is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BatchError("payload is not a JSON object")
    if body.get("v") != PAYLOAD_VERSION:
        raise BatchError(f"payload version {body.get('v')!r}, expected {PAYLOAD_VERSION}")
    node, raw = body.get("node"), body.get("samples")
    if not isinstance(node, str) or not node:
        raise BatchError("payload names no node")
    if not isinstance(raw, list) or not raw:
        raise BatchError("payload carries no samples")
    samples = []
    for i, item in enumerate(raw):
        try:
            sample = Sample.from_dict(item)
        except ValueError as exc:
            raise BatchError(f"sample {i}: {exc}") from None
        if sample.node != node:
            raise BatchError(f"sample {i} is of node {sample.node!r}, the batch of {node!r}")
        samples.append(sample)
    return SampleBatch(node, tuple(samples))
