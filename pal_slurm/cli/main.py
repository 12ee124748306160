"""palctl's root group, and the one place where exceptions become exit codes.

Command modules live in `pal_slurm.cli.commands`; each exports `COMMAND` (a click command or
group) and is registered here by discovery, so adding a command touches no shared file.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Any

import click

from pal_slurm import __version__
from pal_slurm.cli.errors import ExitStatus, PalConfigError, PalError  # noqa: F401 - re-exported for callers
from pal_slurm.config import ConfigError

_ARGV = "pal.argv"


class PalGroup(click.Group):
    """The root group: a bad configuration exits 2, and with `--json` an error is one JSON object
    on stdout ({"ok": false, "error": ..., "exit_code": ...}) so scripts never parse prose."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                return super().invoke(ctx)
            except ConfigError as exc:
                raise PalConfigError(f"configuration: {exc}") from None
        except click.ClickException as exc:
            argv = ctx.meta.get(_ARGV, [])
            options = argv[: argv.index("--")] if "--" in argv else argv
            if "--json" in options:
                click.echo(json.dumps({"ok": False, "error": exc.format_message(), "exit_code": exc.exit_code}))
                raise click.exceptions.Exit(exc.exit_code) from None
            raise


@click.group(cls=PalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="palctl")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="PAL_CONFIG",
    default=None,
    help="pal.toml to read (default /etc/pal/pal.toml; env PAL_CONFIG).",
)
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """pal-slurm: variability- and locality-aware GPU placement for Slurm."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


def _register_commands() -> None:
    from pal_slurm.cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        command = getattr(module, "COMMAND", None)
        if command is not None:
            cli.add_command(command)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="palctl")


if __name__ == "__main__":  # pragma: no cover
    main()
