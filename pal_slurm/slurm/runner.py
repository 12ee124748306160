"""Runs Slurm client commands: the one place pal-slurm starts a Slurm process.

Everything else asks a `Runner` (a protocol), so unit tests inject a fake and pald/palctl use
`CommandRunner`. Failures become `SlurmError`s here and nowhere else: a missing binary is
`SlurmCommandMissing`, a non-zero exit `SlurmCommandFailed` (argv, rc, stderr), a hang
`SlurmCommandTimeout`. Commands get a timeout because slurmctld can block RPCs for seconds
(e.g. while a job_submit hook holds its locks) and pald must never hang on it.

Output is decoded as UTF-8 with invalid bytes replaced (U+FFFD), never strictly: Slurm prints
users' free text (job comments, names) byte for byte, and one job submitted with a Latin-1
`--comment=caf\xe9` must not make `squeue --json` unreadable for every other job. Replacing
(rather than surrogateescape) keeps every string safe to log, store and re-encode; nothing
pal-slurm acts on (ids, states, node names, GRES, the ASCII `pal:` spec) can contain such a
byte, so no decision changes meaning.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Mapping, Protocol, Sequence

from pal_slurm.slurm.errors import (
    SlurmCommandFailed,
    SlurmCommandMissing,
    SlurmCommandTimeout,
    SlurmError,
)

SLURM_COMMANDS = frozenset({"sinfo", "squeue", "scontrol", "sbatch", "scancel", "srun", "sshare", "sacctmgr"})
DEFAULT_TIMEOUT_S = 15.0
OUTPUT_ENCODING = "utf-8"
OUTPUT_ERRORS = "replace"  # see the module docstring: one user's bad byte must not stop pald


class Runner(Protocol):
    """Runs one Slurm command and returns its stdout, or raises a SlurmError."""

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> str: ...


class CommandRunner:
    """Runs Slurm client commands as subprocesses.

    `slurm_conf` sets SLURM_CONF for the commands (clients need it when the cluster is not
    configured in /etc/slurm); `env` adds or overrides variables; `bin_dir` pins the directory
    the commands come from (default: PATH).
    """

    def __init__(
        self,
        slurm_conf: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        bin_dir: str | None = None,
    ) -> None:
        merged = dict(os.environ)
        merged.update(env or {})
        if slurm_conf:
            merged["SLURM_CONF"] = slurm_conf
        self.env = merged
        self.timeout = timeout
        self.bin_dir = bin_dir

    def resolve(self, command: str) -> str:
        """Absolute path of a Slurm command, or SlurmCommandMissing."""
        if command not in SLURM_COMMANDS:
            raise SlurmError(f"{command!r} is not a Slurm client command")
        path = self.bin_dir if self.bin_dir else self.env.get("PATH", os.defpath)
        found = shutil.which(command, path=path)
        if found is None:
            raise SlurmCommandMissing(command, path)
        return found

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> str:
        if not argv:
            raise SlurmError("empty Slurm command")
        argv = [str(a) for a in argv]
        exe = self.resolve(argv[0])
        limit = self.timeout if timeout is None else timeout
        try:
            proc = subprocess.run(
                [exe, *argv[1:]],
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding=OUTPUT_ENCODING,
                errors=OUTPUT_ERRORS,
                timeout=limit,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(OUTPUT_ENCODING, OUTPUT_ERRORS) if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise SlurmCommandTimeout(argv, limit, stderr) from None
        except OSError as exc:  # exists but cannot be executed
            raise SlurmCommandFailed(argv, -1, str(exc)) from None
        if proc.returncode != 0:
            raise SlurmCommandFailed(argv, proc.returncode, proc.stderr or proc.stdout)
        return proc.stdout
