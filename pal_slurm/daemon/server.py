"""pald's unix-socket server: one JSON request per line, one reply per line; and its TCP
listener for compute nodes' samples (`SamplesServer`).

The socket is created mode 0600 and handed to SlurmUser (pald as root); pald running as an
unprivileged user gives it SlurmUser's group and mode 0660 instead (`group_gid`). Every peer is
also checked with SO_PEERCRED, so a user who can reach the path still cannot ask for placements. A line longer
than the protocol's limit gets a typed `too_long` error and the connection is closed; any other
malformed line gets a typed error and the connection stays usable.

A socket path that already exists is unlinked only when nothing answers on it (a dead pald's
leftover): a second pald started by mistake on the same host must not take the socket away from
the live one, which would go on running with slurmctld unable to reach it. `claim_path` raises
`SocketInUse` instead, and `pald` exits with `EXIT_SOCKET_IN_USE`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import struct
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pal_slurm.daemon.protocol import (
    MAX_LINE_BYTES,
    ErrorCode,
    ErrorReply,
    ProtocolError,
    Reply,
    Request,
    decode_request,
    encode_reply,
)

log = logging.getLogger("pald.server")

Answer = Reply | Coroutine[Any, Any, Reply]  # a handler that must wait (reload) returns a coroutine
Handler = Callable[[Request], Answer]  # what the server calls with each decoded request
Settle = Callable[[Request, Reply, bool], None]  # ... and after writing its reply (written or not)

CLAIM_CONNECT_TIMEOUT_S = 1.0
IDLE_S = 10.0  # the samples listener closes a connection silent this long (a node sends at once)  # a live pald accepts at once (the kernel queues the connect)


class SocketInUse(Exception):
    """Something answers on pald's socket path, or the path is not a socket: never unlinked."""


def claim_path(path: str) -> None:
    """Make `path` free for bind: unlink a stale socket, refuse a live one or a non-socket."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketInUse(f"{path} exists and is not a socket; not removing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(CLAIM_CONNECT_TIMEOUT_S)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        pass  # nobody listens: a dead pald's socket
    except OSError as exc:  # a timeout (a full backlog) or a permission error: assume alive
        raise SocketInUse(f"{path} exists and could not be probed ({exc}); another pald may own it") from exc
    else:
        raise SocketInUse(f"another process (a running pald?) answers on {path}")
    finally:
        probe.close()
    try:
        p.unlink()
        log.info("removed the stale socket %s", path)
    except FileNotFoundError:
        pass


def peer_uid(sock: socket.socket) -> int | None:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class SocketServer:
    def __init__(self, handler: Handler, path: str, allowed_uids: set[int], owner_uid: int | None = None,
                 settle: Settle | None = None, group_gid: int | None = None) -> None:
        self.handler = handler  # request -> reply (sync, memory only)
        self.settle = settle  # (request, reply, written: bool) -> None, after each reply's write
        self.path = path
        self.allowed_uids = allowed_uids
        self.owner_uid = owner_uid
        self.group_gid = group_gid
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        claim_path(self.path)
        old = os.umask(0o177)
        try:
            self.server = await asyncio.start_unix_server(self._client, path=self.path, limit=MAX_LINE_BYTES + 1)
        finally:
            os.umask(old)
        if self.group_gid is not None:
            os.chown(self.path, -1, self.group_gid)  # a group we belong to: no privilege needed
            os.chmod(self.path, 0o660)
        else:
            os.chmod(self.path, 0o600)
        if self.owner_uid is not None and os.geteuid() == 0:
            os.chown(self.path, self.owner_uid, -1)
        log.info("listening on %s", self.path)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else None
        if uid is None or uid not in self.allowed_uids:
            try:
                writer.write(encode_reply(ErrorReply(ErrorCode.FORBIDDEN.value, f"uid {uid} may not use pald")))
                await writer.drain()
            except (ConnectionError, BrokenPipeError):
                pass
            finally:
                writer.close()
            return
        await serve_lines(reader, writer, self.handler, self.settle)


async def serve_lines(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler,
                      settle: Settle | None, idle_s: float | None = None) -> None:
    """One connection: a reply per request line until the peer closes (module docstring), or
    stays silent `idle_s` (None: no bound, the unix socket's peers are slurmctld and root)."""
    try:
        while True:
            try:
                line = await asyncio.wait_for(reader.readline(), idle_s)
            except asyncio.TimeoutError:
                return
            except (asyncio.LimitOverrunError, ValueError):
                writer.write(encode_reply(ErrorReply(ErrorCode.TOO_LONG.value, f"line longer than {MAX_LINE_BYTES} bytes")))
                await writer.drain()
                return
            if not line:
                return
            request: Request | None = None
            answer: Answer
            try:
                request = decode_request(line)
                answer = handler(request)
            except ProtocolError as exc:
                answer = ErrorReply.from_error(exc)
            # a handler that must wait (reload) does it off the loop
            reply = (await answer) if isinstance(answer, Coroutine) else answer
            written = False
            try:
                writer.write(encode_reply(reply))
                await writer.drain()
                written = True
            finally:
                if settle is not None and request is not None:
                    settle(request, reply, written)
    except (ConnectionError, BrokenPipeError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001
            pass


class SamplesServer:
    """pald's TCP listener for compute nodes' samples (`[samples] listen`): the same line
    protocol, but only `samples` requests, whose MUNGE credential is their authentication
    (sample_intake.py); anything else gets `forbidden`. No peer check: any host may connect,
    only a credential signed with the cluster's MUNGE key by root or SlurmdUser is taken. A
    connection silent for `idle_s` is closed: a peer that connects and sends nothing holds
    nothing for long."""

    def __init__(self, handler: Handler, host: str, port: int, idle_s: float = IDLE_S) -> None:
        self.handler = handler
        self.host, self.port = host, port
        self.idle_s = idle_s
        self.server: asyncio.AbstractServer | None = None

    def _only_samples(self, request: Request) -> Answer:
        if request.op != "samples":
            return ErrorReply(ErrorCode.FORBIDDEN.value, f"only samples on this listener, not {request.op}")
        return self.handler(request)

    async def start(self) -> None:
        self.server = await asyncio.start_server(
            lambda r, w: serve_lines(r, w, self._only_samples, None, self.idle_s), self.host, self.port,
            limit=MAX_LINE_BYTES + 1)
        bound = self.server.sockets[0].getsockname() if self.server.sockets else (self.host, self.port)
        self.port = int(bound[1])
        log.info("taking samples on %s:%d", self.host, self.port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
