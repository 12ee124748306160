"""MUNGE, Slurm's own authentication, through its command-line tools (`munge`, `unmunge`).

Every Slurm node runs munged with the cluster's shared key, so a credential made on a compute
node can be checked on the controller without any other secret: it says which host encoded
it (ENCODE_HOST, an IP address), which user (UID), and it carries a payload no one without the
key could have signed. munged itself refuses a credential it has decoded before (replay), an
expired one (TTL) and one made with another key.

The tools run as subprocesses (no C binding); `parse_unmunge` is the pure part.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping, Protocol

MUNGE_TIMEOUT_S = 5.0
CREDENTIAL_TTL_S = 300  # munge's default; the payload is stored within seconds of its making
# Slurm's prologs run with no PATH
_PATH = "/usr/bin:/usr/local/bin:/bin:/usr/sbin"


class MungeError(Exception):
    """A credential could not be made or was not valid; the message is munge's own."""


@dataclass(frozen=True)
class Decoded:
    """What `unmunge` vouches for."""

    uid: int
    gid: int
    encode_host: str  # the encoding host's IP address, as munged saw it
    payload: bytes


class Decoder(Protocol):
    """Credential text -> Decoded, or MungeError (the real one runs `unmunge`)."""

    def __call__(self, credential: str) -> Decoded: ...


def _argv(tool: str, socket: str) -> list[str]:
    exe = shutil.which(tool, path=os.environ.get("PATH") or _PATH) or tool
    return [exe, *(["--socket", socket] if socket else [])]


def encode(payload: bytes, socket: str = "", ttl_s: int = CREDENTIAL_TTL_S,
           timeout_s: float = MUNGE_TIMEOUT_S) -> str:
    """A credential carrying `payload` (one line of text); MungeError when munged refuses or
    is not there."""
    try:
        proc = subprocess.run([*_argv("munge", socket), "--ttl", str(ttl_s)], input=payload,
                              capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MungeError(f"munge: {exc}") from None
    if proc.returncode != 0:
        raise MungeError(proc.stderr.decode(errors="replace").strip() or f"munge exited {proc.returncode}")
    return proc.stdout.decode("ascii", "replace").strip()


class Unmunge:
    """The real decoder: `unmunge --numeric` against munged's socket."""

    def __init__(self, socket: str = "", timeout_s: float = MUNGE_TIMEOUT_S) -> None:
        self.socket = socket
        self.timeout_s = timeout_s

    def __call__(self, credential: str) -> Decoded:
        try:
            proc = subprocess.run([*_argv("unmunge", self.socket), "--numeric"],
                                  input=credential.encode("ascii", "replace"), capture_output=True,
                                  timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MungeError(f"unmunge: {exc}") from None
        if proc.returncode != 0:
            why = proc.stderr.decode(errors="replace").strip() or _status(proc.stdout)
            raise MungeError(why or f"unmunge exited {proc.returncode}")
        return parse_unmunge(proc.stdout)


def _status(out: bytes) -> str:
    head, _, _ = out.partition(b"\n\n")
    for line in head.decode(errors="replace").splitlines():
        if line.startswith("STATUS:"):
            return line.split(":", 1)[1].strip()
    return ""


def parse_unmunge(out: bytes) -> Decoded:
    """`unmunge --numeric` output (metadata lines, a blank line, the payload) -> Decoded;
    MungeError when the status is not 0 or a field is missing."""
    head, sep, payload = out.partition(b"\n\n")
    if not sep:
        raise MungeError("unmunge printed no payload")
    meta: Mapping[str, str] = {
        key.strip(): value.strip()
        for key, _, value in (line.partition(":") for line in head.decode("ascii", "replace").splitlines())
    }
    if meta.get("STATUS") != "0":
        raise MungeError(f"credential status {meta.get('STATUS')!r}")
    try:
        return Decoded(uid=int(meta["UID"]), gid=int(meta["GID"]), encode_host=meta["ENCODE_HOST"], payload=payload)
    except (KeyError, ValueError) as exc:
        raise MungeError(f"unmunge metadata without a usable {exc}") from None
