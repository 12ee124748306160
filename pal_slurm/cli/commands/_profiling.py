"""What the profiling commands (profile-nodes, rank, rankings, import-variability) share."""

from __future__ import annotations

import click

from pal_slurm.bench.repository import StoreProfilingRepository
from pal_slurm.bench.settings import ProfilingSettings
from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.errors import PalConfigError
from pal_slurm.config import ConfigError


def profiling_settings(ctx: click.Context) -> ProfilingSettings:
    """The profiling settings; PalConfigError (exit 2) for a bad configuration."""
    try:
        return ProfilingSettings.from_config(cli_config(ctx))
    except ConfigError as exc:
        raise PalConfigError(f"configuration: {exc}") from None


def open_profiling(ctx: click.Context, *, read_only: bool) -> tuple[ProfilingSettings, StoreProfilingRepository]:
    """Settings and the store (closed when the command ends; `read_only` as in cli_store); PalConfigError (exit 2)
    or PalError otherwise."""
    return profiling_settings(ctx), StoreProfilingRepository(cli_store(ctx, read_only=read_only))
