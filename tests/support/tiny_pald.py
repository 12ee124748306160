"""A tiny stand-in for pald in tests: a real unix-socket server speaking the real protocol
module, with a pluggable answer. (pald itself is another module; this only lets the hook and
the client be tested against a real socket.)"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Callable, Iterable

from pal_slurm.daemon.protocol import (
    ErrorReply,
    PlaceReply,
    ProtocolError,
    decode_request,
    encode_reply,
)
from pal_slurm.model.decision import DecisionKind

# answer(line) -> bytes to send (None: close without answering), or an iterable of byte chunks
# sent one after another until the peer goes away (a pald streaming without end)
Answer = Callable[[bytes], "bytes | Iterable[bytes] | None"]


def protocol_answer(reply_for_place: PlaceReply | None = None) -> Answer:
    """Decode with the real protocol; malformed -> typed error reply, place -> reply_for_place."""
    reply_for_place = reply_for_place or PlaceReply(
        DecisionKind.PLACE, "pal", {"gpu03": (2, 3)}, "gres:gpu:s2:1,gres:gpu:s3:1", rank=7)

    def answer(line: bytes) -> bytes:
        try:
            decode_request(line)
        except ProtocolError as err:
            return encode_reply(ErrorReply.from_error(err))
        return encode_reply(reply_for_place)

    return answer


class TinyPald:
    """Serve `answer` on a unix socket at `path` in a thread; one request per connection."""

    def __init__(self, path: str, answer: Answer | None = None, delay_s: float = 0.0):
        self.path = str(path)
        self.answer = answer or protocol_answer()
        self.delay_s = delay_s
        self.received: list[bytes] = []
        self.sent_bytes = 0  # what the peers accepted, in all
        self._stop = threading.Event()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(64)
        self._server.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "TinyPald":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
        if os.path.exists(self.path):
            os.unlink(self.path)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2.0)
                try:
                    line = conn.makefile("rb").readline(1 << 20)
                except OSError:
                    continue
                self.received.append(line)
                if self.delay_s:
                    time.sleep(self.delay_s)
                out = self.answer(line)
                chunks = [out] if isinstance(out, bytes) else (out or [])
                try:
                    for chunk in chunks:
                        conn.sendall(chunk)
                        self.sent_bytes += len(chunk)
                        if self._stop.is_set():
                            break
                except OSError:
                    pass
