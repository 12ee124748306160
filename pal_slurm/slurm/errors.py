"""The single place where Slurm command failures become exceptions.

Everything in `pal_slurm.slurm` raises a subclass of `SlurmError`, so callers (pald, palctl)
catch one type and print one clear message; nothing else in the package inspects return codes.
"""

from __future__ import annotations

from typing import Sequence


class SlurmError(Exception):
    """Base class: any failure talking to Slurm or understanding what it said."""


class SlurmCommandMissing(SlurmError):
    """A Slurm client command is not installed (or not on PATH)."""

    def __init__(self, command: str, path: str | None = None) -> None:
        self.command = command
        self.path = path
        where = f" on PATH={path}" if path else ""
        super().__init__(
            f"Slurm command {command!r} not found{where}; install slurm-client "
            "(Debian: apt-get install slurm-client)"
        )


class SlurmCommandFailed(SlurmError):
    """A Slurm command ran and exited non-zero; carries the command, rc and stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        detail = self.stderr.splitlines()[-1] if self.stderr else "no error output"
        super().__init__(
            f"`{' '.join(self.argv)}` failed (rc={returncode}): {detail}"
        )


class SlurmCommandTimeout(SlurmCommandFailed):
    """A Slurm command did not finish in time (slurmctld busy or unreachable)."""

    def __init__(self, argv: Sequence[str], timeout: float, stderr: str = "") -> None:
        self.timeout = timeout
        super().__init__(argv, -1, stderr or f"timed out after {timeout:g} s")


class SlurmParseError(SlurmError):
    """Slurm's output (JSON, GRES strings) was not in the expected shape."""


class SlurmUnsupported(SlurmParseError):
    """This Slurm release (or the JSON shape it prints) is one pal-slurm does not read.

    Raised instead of a bare parse error so that pald's health and `palctl status` can say
    which release was found and which ones are supported, rather than "no 'nodes' field".
    """


class GresTooLarge(SlurmParseError):
    """A GRES/TRES string or GPU index list over `pal_slurm.slurm.readers`' caps (refused
    before its indices are built)."""


class HostlistError(SlurmError, ValueError):
    """A hostlist expression such as ``gpu[01-04`` is malformed."""


class HostlistTooLarge(HostlistError):
    """A hostlist expression over one of `pal_slurm.intake.hostlist`'s caps (its length, its
    items, or the names it would expand to): refused before any work grows with it."""
