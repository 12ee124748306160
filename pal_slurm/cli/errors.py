"""palctl's exit statuses and its user-facing error (kept apart from `main` so that command
modules can import them without importing the root group that discovers them)."""

from __future__ import annotations

from enum import IntEnum

import click


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # an operation failed (Slurm, store, daemon)
    USAGE = 2  # bad input: click's own convention


class PalError(click.ClickException):
    """A failure with a message the user can act on; palctl prints it and exits 1."""

    exit_code = ExitStatus.ERROR
