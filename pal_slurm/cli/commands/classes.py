"""palctl classes: the application -> variability class map kept in the store.

pald reads it to turn `--comment=pal:class=<app>` into a class; applications not in the map
get `[policy] default_class` (the most variability-sensitive class unless configured).
"""

from __future__ import annotations

import click

from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.conventions import PalCommand, emit_json, json_option, output_option
from pal_slurm.cli.errors import PalError
from pal_slurm.model.classes import CLASS_ORDER, class_rank
from pal_slurm.store.errors import StoreError

CLASS_HELP = "A (most variability-sensitive, compute-bound) .. D (least, memory-bound)"


def _class_letter(value: str) -> str:
    letter = value.strip().upper()
    if letter not in CLASS_ORDER:
        raise click.BadParameter(
            f"unknown class {value!r}: use one of {', '.join(CLASS_ORDER)} ({CLASS_HELP})",
            param_hint="CLASS",
        )
    return letter


@click.group("classes")
def COMMAND() -> None:
    """The application -> class map (classes: A most variability-sensitive .. D least)."""


@COMMAND.command("list", cls=PalCommand)
@json_option("Print a JSON object instead of a table.")
@output_option("the map as JSON")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool, output_path: str | None) -> None:
    """Show every mapped application and its class."""
    repo = cli_store(ctx, read_only=True)
    try:
        mapping = repo.app_classes()
    except StoreError as err:
        raise PalError(str(err)) from None
    default = cli_config(ctx).policy.default_class
    emit_json({"classes": mapping, "default": default}, as_json, output_path, sort_keys=True)
    if as_json:
        return
    rows = sorted(mapping.items(), key=lambda kv: (class_rank(kv[1]), kv[0]))
    width = max([len("APPLICATION")] + [len(a) for a in mapping])
    click.echo(f"{'APPLICATION':<{width}}  CLASS")
    for app, cls in rows:
        click.echo(f"{app:<{width}}  {cls}")
    click.echo(f"(unknown applications: class {default}; {len(mapping)} mapped)")


@COMMAND.command("add")
@click.argument("app")
@click.argument("perf_class", metavar="CLASS", callback=lambda ctx, param, v: _class_letter(v))
@click.pass_context
def add_cmd(ctx: click.Context, app: str, perf_class: str) -> None:
    """Map APP (case-insensitive) to CLASS, replacing an earlier mapping.

    CLASS is A (most variability-sensitive, compute-bound) .. D (least, memory-bound).
    """
    if not app.strip() or any(ch.isspace() or ch in ",=;:" for ch in app.strip()):
        raise click.BadParameter(
            f"{app!r}: an application name is one word without spaces or , = ; :", param_hint="APP"
        )
    repo = cli_store(ctx, read_only=False)
    try:
        before = repo.app_classes().get(app.strip().lower())
        repo.set_app_class(app, perf_class)
    except StoreError as err:
        raise PalError(str(err)) from None
    name = app.strip().lower()
    if before is None:
        click.echo(f"added {name} -> {perf_class}")
    elif before == perf_class:
        click.echo(f"unchanged {name} -> {perf_class}")
    else:
        click.echo(f"changed {name}: {before} -> {perf_class}")


@COMMAND.command("remove")
@click.argument("app")
@click.pass_context
def remove_cmd(ctx: click.Context, app: str) -> None:
    """Forget APP; its jobs then get the default class."""
    repo = cli_store(ctx, read_only=False)
    try:
        removed = repo.remove_app_class(app)
    except StoreError as err:
        raise PalError(str(err)) from None
    name = app.strip().lower()
    if not removed:
        raise PalError(f"no application {name!r} in the class map (see `palctl classes list`)")
    default = cli_config(ctx).policy.default_class
    click.echo(f"removed {name} (its jobs now get class {default})")
