"""What palctl commands share: the configuration and the store, opened once per invocation.

The root group stores `--config` (or $PAL_CONFIG) in `ctx.obj["config_path"]`; commands call
`cli_config(ctx)` / `cli_store(ctx, read_only=...)` and get a PalConfigError (exit 2) or PalError (exit 1)
with an actionable message instead of a traceback when the file is wrong or the database is away.
"""

from __future__ import annotations

import click

from pal_slurm.cli.errors import PalConfigError, PalError
from pal_slurm.config import Config, ConfigError, load_config
from pal_slurm.store.errors import StoreError
from pal_slurm.store.repository import Repository


def cli_config(ctx: click.Context) -> Config:
    obj = ctx.find_root().ensure_object(dict)
    if "config" not in obj:
        try:
            obj["config"] = load_config(obj.get("config_path"))
        except ConfigError as err:
            raise PalConfigError(f"configuration: {err}") from None
    config: Config = obj["config"]
    return config


def cli_store(ctx: click.Context, *, read_only: bool) -> Repository:
    """The store of the configuration, closed when the command ends. A command that writes it
    gets it created and migrated; one that only reads it (`read_only`) creates, migrates and
    writes nothing, and reads a store that is not there yet as an empty one
    (`open_store_readonly`). Every command says which it is: there is no default to forget."""
    from pal_slurm.store.bootstrap import open_store, open_store_readonly

    url = cli_config(ctx).store.url
    try:
        repo = open_store_readonly(url) if read_only else open_store(url)
    except StoreError as err:
        raise PalError(str(err)) from None
    ctx.call_on_close(repo.close)
    return repo
