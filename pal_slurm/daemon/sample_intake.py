"""pald's intake of samples from compute nodes: a MUNGE credential in, samples into the store.

Compute nodes then need no store URL and no database credentials, only munged (which every
Slurm node runs). A batch is stored when all of these hold, else it is refused, logged (one
warning line naming the reason, the credential's address and what was wrong) and counted:

1. `unmunge` accepts the credential: signed with the cluster's key, not expired, not decoded
   before (munged's own replay check);
2. the credential's UID is root or SlurmdUser (the prolog's and epilog's user): a user logged
   into a node can make credentials too, under their own uid;
3. the payload is a batch of one node's samples (`model.sample_batch`);
4. the credential's ENCODE_HOST is an address of that node: NodeAddr or NodeHostname as pald's
   last node read shows them, resolved to IP addresses. A node cannot send samples in another
   node's name; where several Slurm nodes share one host and address (front-end or emulated
   nodes), any of them can speak for the others, as the host's root could anyway.

A batch whose key (`batch_key`) pald has taken before is acknowledged again without storing it:
a node that spooled a batch after a lost reply sends it once more. Keys are remembered in
memory (the newest `SEEN_KEYS`), so a batch re-sent after pald restarted is stored a second
time; a duplicate sample moves no median.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from pal_slurm.model.sample import Sample
from pal_slurm.model.sample_batch import BatchError, decode_payload
from pal_slurm.slurm.munge import Decoder, MungeError

log = logging.getLogger("pald.samples")

SEEN_KEYS = 65536


class Refused(Exception):
    """A batch pald will not store; `reason` is a short label (counted), the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Taken:
    """A batch accepted: how many samples were queued for the store (0 for a batch seen before)."""

    node: str
    key: str
    stored: int
    duplicate: bool


def resolve(name: str) -> frozenset[str]:
    """The IP addresses a host name or address stands for (empty when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return frozenset()
    return frozenset(normal_ip(str(info[4][0])) for info in infos)


def normal_ip(text: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 as IPv4, zone ids dropped."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


class SampleIntake:
    """Checks one credential at a time (module docstring) and hands accepted samples to `sink`.

    `node_names(node)`: the node's NodeAddr and NodeHostname from pald's last node read, None
    for a node Slurm does not know. `count(label)`: pald's counters (samples_stored,
    samples_duplicate, samples_refused)."""

    def __init__(self, decoder: Decoder, node_names: Callable[[str], Iterable[str] | None],
                 allowed_uids: Iterable[int], sink: Callable[[Sequence[Sample]], None],
                 count: Callable[[str, int], None] = lambda _name, _n: None,
                 resolver: Callable[[str], frozenset[str]] = resolve, seen_max: int = SEEN_KEYS,
                 room: Callable[[], bool] = lambda: True) -> None:
        self.decoder = decoder
        self.room = room  # False: the store's queue is too full to take a batch without losing one
        self.node_names = node_names
        self.allowed_uids = frozenset(allowed_uids)
        self.sink = sink
        self.count = count
        self.resolver = resolver
        self.seen_max = seen_max
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()  # takes run on worker threads (unmunge is a subprocess)

    def take(self, credential: str) -> Taken:
        """Store the credential's batch (or recognise it); Refused (logged, counted) otherwise."""
        try:
            return self._take(credential)
        except Refused as exc:
            self.count("samples_refused", 1)
            log.warning("samples refused (%s): %s", exc.reason, exc)
            raise

    def _take(self, credential: str) -> Taken:
        try:
            decoded = self.decoder(credential)
        except MungeError as exc:
            raise Refused("bad_credential", f"invalid MUNGE credential: {exc}") from None
        if decoded.uid not in self.allowed_uids:
            raise Refused("bad_uid", f"{decoded.encode_host} sent a credential of uid {decoded.uid}, not root or SlurmdUser "
                                     f"(allowed: {sorted(self.allowed_uids)})")
        try:
            batch = decode_payload(decoded.payload)
        except BatchError as exc:
            raise Refused("bad_payload", f"uid {decoded.uid} at {decoded.encode_host}: {exc}") from None
        names = self.node_names(batch.node)
        if names is None:
            raise Refused("unknown_node", f"{decoded.encode_host} sent samples of {batch.node!r}, "
                                          "a node Slurm does not list")
        addresses: set[str] = set()
        for name in names:
            if name:
                addresses |= self.resolver(name)
        sender = normal_ip(decoded.encode_host)
        if sender not in addresses:
            raise Refused("wrong_node", f"{sender} sent samples in the name of {batch.node!r}, whose "
                                        f"addresses are {sorted(addresses) or 'unknown'}")
        key = batch.key
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                self.count("samples_duplicate", len(batch.samples))
                log.info("samples of %s: batch %s seen before, not stored again", batch.node, key[:12])
                return Taken(batch.node, key, 0, True)
            if not self.room():  # a batch taken and then dropped from a full queue would be lost:
                # the node keeps it spooled and sends it again
                raise Refused("store_busy", f"samples of {batch.node!r}: pald's store queue is full; "
                                            "the node keeps them spooled")
            self.sink(batch.samples)
            self._seen[key] = None
            while len(self._seen) > self.seen_max:
                self._seen.popitem(last=False)
        self.count("samples_stored", len(batch.samples))
        log.info("samples of %s: %d taken (batch %s)", batch.node, len(batch.samples), key[:12])
        return Taken(batch.node, key, len(batch.samples), False)
