"""A small Python client for pald's unix-socket protocol (palctl status/reload, tests, tools).

The Lua hook has its own copy of this exchange in `job_submit_lua/pal.lua` (it must run inside
slurmctld); both speak `pal_slurm.daemon.protocol`, and the hook's side is tested against it.
One connection per request, one deadline for connect + send + receive, and four outcomes a
caller can tell apart: a reply, `PaldUnavailable` (nobody answers), `PaldTimeout`,
`PaldRequestError` (pald answered with a typed error), or `ProtocolError` (pald answered
something malformed).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Callable, TypeVar

from pal_slurm.daemon.protocol import (
    MAX_LINE_BYTES,
    ErrorCode,
    ErrorReply,
    HealthReply,
    HealthRequest,
    PlaceReply,
    PlaceRequest,
    ProtocolError,
    ReloadReply,
    ReloadRequest,
    Reply,
    Request,
    decode_reply,
    encode_request,
)

DEFAULT_SOCKET = "/run/pal/pald.sock"

R = TypeVar("R", PlaceReply, HealthReply, ReloadReply)


class PaldError(Exception):
    """Base of the client's errors."""


class PaldUnavailable(PaldError):
    """No pald at the socket (missing, refused, no permission, closed without answering)."""


class PaldTimeout(PaldError):
    """pald did not answer within the deadline."""


class PaldRequestError(PaldError):
    """pald answered with a typed error reply."""

    def __init__(self, code: str, message: str):
        super().__init__(f"pald refused the request: {code}: {message}")
        self.code = code
        self.message = message


class PaldClient:
    """Ask pald one thing at a time over its unix socket."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_SOCKET, timeout_s: float = 1.0) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.path = os.fspath(path)
        self.timeout_s = timeout_s

    def place(self, request: PlaceRequest) -> PlaceReply:
        return self._typed(request, PlaceReply)

    def health(self) -> HealthReply:
        return self._typed(HealthRequest(), HealthReply)

    def reload(self) -> ReloadReply:
        return self._typed(ReloadRequest(), ReloadReply)

    def _typed(self, request: Request, kind: type[R]) -> R:
        reply = self.request(request)
        if isinstance(reply, ErrorReply):
            raise PaldRequestError(reply.code, reply.message)
        assert isinstance(reply, kind)
        return reply

    def request(self, request: Request) -> Reply:
        """Send one request, return pald's reply (an ErrorReply is returned, not raised)."""
        line = encode_request(request)
        raw = self.exchange(line)
        return decode_reply(raw, request.op)

    def exchange(self, line: bytes) -> bytes:
        """Send one raw line, return the raw reply line (newline included)."""
        deadline = time.monotonic() + self.timeout_s

        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PaldTimeout(f"no answer from pald at {self.path} in {self.timeout_s:g} s")
            return left

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.settimeout(remaining())
                sock.connect(self.path)
            except socket.timeout:
                raise PaldTimeout(
                    f"pald at {self.path} did not accept in {self.timeout_s:g} s") from None
            except OSError as err:  # missing, refused, permission, path too long
                raise PaldUnavailable(f"pald is not listening at {self.path}: {err}") from None
            try:
                sock.settimeout(remaining())
                sock.sendall(line)
                return self._read_line(sock, remaining)
            except socket.timeout:
                raise PaldTimeout(
                    f"no answer from pald at {self.path} in {self.timeout_s:g} s") from None
            except OSError as err:  # reset, broken pipe
                raise PaldUnavailable(f"pald at {self.path} dropped the connection: {err}") from None
        finally:
            sock.close()

    def _read_line(self, sock: socket.socket, remaining: Callable[[], float]) -> bytes:
        buf = bytearray()
        while True:
            newline = buf.find(b"\n")
            if newline >= 0:
                if newline + 1 > MAX_LINE_BYTES:
                    break
                return bytes(buf[: newline + 1])
            if len(buf) > MAX_LINE_BYTES:
                break
            sock.settimeout(remaining())
            chunk = sock.recv(65536)
            if not chunk:
                if buf:
                    raise ProtocolError(ErrorCode.NOT_JSON, "pald closed mid-line")
                raise PaldUnavailable(f"pald at {self.path} closed without answering")
            buf += chunk
        raise ProtocolError(ErrorCode.TOO_LONG, f"reply longer than {MAX_LINE_BYTES} bytes")
