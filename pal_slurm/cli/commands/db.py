"""palctl db: the store's schema (Alembic migrations shipped in the package)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import Duration
from pal_slurm.cli.errors import PalError
from pal_slurm.store.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy import Engine


def _engine(ctx: click.Context, url: str | None, *, read_only: bool = False) -> Engine:
    """The store's engine, disposed when the command ends; `read_only` as in make_engine (a
    missing SQLite file reads as an empty, never migrated database and is not created)."""
    from pal_slurm.store.engine import make_engine

    url = url or cli_config(ctx).store.url
    try:
        engine = make_engine(url, read_only=read_only)
    except StoreError as err:
        raise PalError(str(err)) from None
    ctx.call_on_close(engine.dispose)
    return engine


def _where(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


@click.group("db")
def COMMAND() -> None:
    """The store's database schema: migrate it (up or down), or show where it is."""


url_option = click.option(
    "--url", default=None, help="Store URL (default: [store] url of pal.toml, env PAL_DB_URL)."
)


@COMMAND.command("upgrade")
@url_option
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@click.pass_context
def upgrade_cmd(ctx: click.Context, url: str | None, revision: str) -> None:
    """Migrate the store to the newest schema (safe to repeat; nothing is lost)."""
    from pal_slurm.store import migrate

    engine = _engine(ctx, url)
    try:
        before = migrate.current(engine)
        migrate.upgrade(engine, revision)
        after = migrate.current(engine)
    except StoreError as err:
        raise PalError(str(err)) from None
    except Exception as err:  # alembic: unknown revision and the like
        raise PalError(f"migration failed on {_where(engine)}: {err}") from None
    if before == after:
        click.echo(f"{_where(engine)}: already at revision {after}")
    else:
        click.echo(f"{_where(engine)}: upgraded {before or 'empty'} -> {after}")


@COMMAND.command("downgrade")
@url_option
@click.option("--revision", required=True,
              help="Target revision: an older one (`palctl db current` lists the newest), or `base` "
                   "to drop every table of pal-slurm's (removing pal-slurm).")
@click.option("--yes", is_flag=True, help="Confirm `--revision base`: it deletes every sample, ranking and decision.")
@click.pass_context
def downgrade_cmd(ctx: click.Context, url: str | None, revision: str, yes: bool) -> None:
    """Migrate the store back to an older schema (before going back to an older pal-slurm), or
    drop pal-slurm's tables with `--revision base`. Tables that are not pal-slurm's are left."""
    from pal_slurm.store import migrate

    if revision == "base" and not yes:
        raise click.UsageError("--revision base drops every table of pal-slurm's and all their rows: "
                               "add --yes to confirm")
    engine = _engine(ctx, url)
    try:
        before = migrate.current(engine)
        if before is None:
            click.echo(f"{_where(engine)}: not migrated, nothing to downgrade")
            return
        migrate.downgrade(engine, revision)
        after = migrate.current(engine)
    except StoreError as err:
        raise PalError(str(err)) from None
    except Exception as err:  # alembic: unknown revision, or one newer than the store's
        raise PalError(f"downgrade failed on {_where(engine)}: {err}") from None
    if before == after:
        click.echo(f"{_where(engine)}: already at revision {after or 'base'}")
    else:
        click.echo(f"{_where(engine)}: downgraded {before} -> {after or 'base (no pal-slurm tables left)'}")


@COMMAND.command("current")
@url_option
@click.option("--check", is_flag=True, help="Exit 1 unless the store is at the newest revision.")
@click.pass_context
def current_cmd(ctx: click.Context, url: str | None, check: bool) -> None:
    """Show the store's schema revision and the newest one this pal-slurm ships."""
    from pal_slurm.store import migrate

    engine = _engine(ctx, url, read_only=True)
    try:
        rev = migrate.current(engine)
    except StoreError as err:
        raise PalError(str(err)) from None
    head = migrate.head()
    if rev == head:
        state = "up to date"
    elif rev is None:
        state = "not migrated: run `palctl db upgrade`"
    else:
        state = f"behind {head}: run `palctl db upgrade`"
    click.echo(f"store:    {_where(engine)}")
    click.echo(f"revision: {rev or 'none'} ({state})")
    click.echo(f"head:     {head}")
    if check and rev != head:
        ctx.exit(1)


@COMMAND.command("prune")
@click.option(
    "--older-than",
    "age_s",
    type=Duration(at_least=86400.0, was="days"),
    required=True,
    help="Delete samples, decisions and finished held-job rows older than this Slurm duration "
         "(at least a day: 90d, 90-0, 90-00:00:00).",
)
@click.pass_context
def prune_cmd(ctx: click.Context, age_s: float) -> None:
    """Delete old history (ranking snapshots and jobs still held are always kept)."""
    from datetime import datetime, timedelta, timezone

    from pal_slurm.cli.context import cli_store

    repo = cli_store(ctx, read_only=False)
    before = datetime.now(timezone.utc) - timedelta(seconds=age_s)
    try:
        counts = repo.prune(before)
    except StoreError as err:
        raise PalError(str(err)) from None
    parts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items())
    click.echo(f"pruned before {before:%Y-%m-%d %H:%M} UTC: {parts}")
