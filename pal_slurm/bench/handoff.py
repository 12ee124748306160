"""A compute node's way to the store through pald: samples signed with MUNGE, sent over TCP.

With `[samples] send = "pald"` the prolog, epilog, spool drain and `palctl profile-nodes
--local` use `PaldSink` where they would open `[store] url`: the node needs munged (which Slurm
runs on it anyway) and pald's samples address, no database URL or credentials. Each batch
(`model.sample_batch.split`) becomes one MUNGE credential (`munge`, as the hook's user: root or
SlurmdUser) in one `samples` request of pald's line protocol; pald checks it
(`daemon.sample_intake`) and answers.

`add_samples` succeeds only when pald took every batch (stored, or recognised as one it took
before); otherwise it raises `HandoffError` and the caller spools the samples, exactly as when
the store is away (`bench.hook.deliver`). A batch pald refused (its credential, user or node)
stays spooled too, and pald's log says why: once the cause is fixed (munged's key, `[samples]
slurmd_user`, the node's address in slurm.conf) the next hook delivers it.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Callable, Sequence

from pal_slurm.config import parse_listen
from pal_slurm.daemon.protocol import (
    MAX_LINE_BYTES,
    ErrorReply,
    ProtocolError,
    SamplesReply,
    SamplesRequest,
    decode_reply,
    encode_request,
)
from pal_slurm.model.sample import Sample
from pal_slurm.model.sample_batch import BatchError, encode_payload, split
from pal_slurm.slurm import munge

log = logging.getLogger("pal.hook")


class HandoffError(OSError):
    """pald did not take the samples (unreachable, slow, refused, or munge failed)."""


class PaldSink:
    """A SampleSink that hands samples to pald's samples listener (module docstring)."""

    def __init__(self, address: str, munge_socket: str = "", timeout_s: float = 2.0,
                 encode: Callable[[bytes], str] | None = None) -> None:
        where = parse_listen(address) if address else None
        if where is None:
            raise HandoffError("no pald samples address ([samples] pald) to send samples to")
        self.host, self.port = where
        self.timeout_s = timeout_s
        self.encode = encode or (lambda payload: munge.encode(payload, munge_socket, timeout_s=timeout_s))

    def add_samples(self, samples: Sequence[Sample]) -> None:
        """Send every sample, batch by batch, grouped by node; HandoffError at the first batch
        pald did not take (the caller spools them all: batches pald took are recognised when
        they come again)."""
        by_node: dict[str, list[Sample]] = {}
        for s in samples:
            by_node.setdefault(s.node, []).append(s)
        for node, mine in by_node.items():
            for batch in split(mine):
                self._send(node, batch)

    def _send(self, node: str, batch: Sequence[Sample]) -> None:
        try:
            payload = encode_payload(node, batch)
            credential = self.encode(payload)
        except (BatchError, munge.MungeError) as exc:
            raise HandoffError(f"cannot sign samples of {node}: {exc}") from None
        line = encode_request(SamplesRequest(credential))
        raw = self._exchange(line)
        try:
            reply = decode_reply(raw, "samples")
        except ProtocolError as exc:
            raise HandoffError(f"pald at {self.host}:{self.port} answered garbage: {exc}") from None
        if isinstance(reply, ErrorReply):
            raise HandoffError(f"pald at {self.host}:{self.port} refused samples of {node}: {reply.code}: {reply.message}")
        assert isinstance(reply, SamplesReply)

    def _exchange(self, line: bytes) -> bytes:
        deadline = time.monotonic() + self.timeout_s
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout_s) as sock:
                sock.sendall(line)
                buf = bytearray()
                while b"\n" not in buf and len(buf) <= MAX_LINE_BYTES:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"no answer in {self.timeout_s:g} s")
                    sock.settimeout(left)
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as exc:
            raise HandoffError(f"pald at {self.host}:{self.port} unreachable: {exc}") from None
        if b"\n" not in buf:
            raise HandoffError(f"pald at {self.host}:{self.port} closed without an answer")
        return bytes(buf[: buf.index(b"\n") + 1])
