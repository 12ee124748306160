"""palctl's exit statuses and its user-facing errors (kept apart from `main` so that command
modules can import them without importing the root group that discovers them).

docs/cli.md is the reference: 0 ok, 1 needs attention (an operation failed or the report says
what to fix), 2 usage or configuration error, 3 drift found."""

from __future__ import annotations

from enum import IntEnum

import click


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # needs attention: an operation failed (Slurm, store, daemon) or a check found a problem
    USAGE = 2  # bad option or bad configuration: click's own convention
    DRIFT = 3  # a ranking comparison found GPUs that got slower


class PalError(click.ClickException):
    """A failure with a message the user can act on; palctl prints it and exits 1."""

    exit_code = ExitStatus.ERROR


class PalConfigError(PalError):
    """The configuration (pal.toml, PAL_* environment) is unusable: palctl exits 2."""

    exit_code = ExitStatus.USAGE
