"""palctl's root group, and the one place where exceptions become exit codes.

Command modules live in `pal_slurm.cli.commands`; each exports `COMMAND` (a click command or
group) and is registered here by discovery, so adding a command touches no shared file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import click

from pal_slurm import __version__
from pal_slurm.cli.errors import ExitStatus, PalError  # noqa: F401 - re-exported for callers


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    sys.exit(main())
