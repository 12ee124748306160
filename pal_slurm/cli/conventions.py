"""The options every palctl command spells the same way (docs/cli.md is the reference).

`--json` is a flag printing one JSON document on stdout; `--output FILE` writes that document to
a file; `--plots DIR` is where plots go; durations are Slurm's; job ids are Slurm's. Commands take
these decorators and helpers instead of declaring their own, so a spelling lives in one place.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import click

from pal_slurm.atomic_file import write_atomic
from pal_slurm.intake.durations import DurationError, parse_duration
from pal_slurm.slurm.jobids import JobIdError, JobRef, parse_job_id

# What click's option decorators take and give back: a command function or a command.
Decorated = TypeVar("Decorated", bound="Callable[..., Any] | click.Command")

if TYPE_CHECKING:  # click types ParamType by the value it converts to; older releases cannot subscript it at run time
    DurationType = click.ParamType[float | None]
    JobIdType = click.ParamType[JobRef]
else:
    DurationType = JobIdType = click.ParamType

# options renamed by the convention: old spelling -> what to say instead (any command)
RENAMED = {
    "--plot": "--plot FILE is now --plots DIR (the plot is written into DIR)",
    "--baseline": "--baseline is now --baselines (a comma-separated list; gains are relative to the first)",
}


COMMAND_ARGS = "pal.command_args"  # ctx.meta key: the arguments of the command being run, as typed


class PalCommand(click.Command):
    """A command that says clearly when an old spelling is used (`--json FILE`, `--plot`, ...)
    instead of click's generic "no such option" or "unexpected extra argument"."""

    def __init__(self, *args: Any, renamed: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = {**RENAMED, **(renamed or {})}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[COMMAND_ARGS] = list(args)  # as typed: a sweep's elements rerun the command with them
        takes_json = any("--json" in p.opts for p in self.params if isinstance(p, click.Option))
        for i, arg in enumerate(args):
            if arg == "--":
                break
            name = arg.split("=", 1)[0]
            if name in self.renamed and not any(name in p.opts for p in self.params if isinstance(p, click.Option)):
                raise click.UsageError(self.renamed[name], ctx)
            if takes_json and (arg.startswith("--json=") or (
                    arg == "--json" and i + 1 < len(args) and not args[i + 1].startswith("-"))):
                value = arg.split("=", 1)[1] if "=" in arg else args[i + 1]
                raise click.UsageError(f"--json is a flag (it prints the JSON on stdout); to write a file use "
                                       f"--output {value}", ctx)
        return super().parse_args(ctx, args)


def json_option(help_text: str = "Print one JSON document on stdout (text goes to stderr).") -> Callable[[Decorated], Decorated]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def output_option(what: str = "the JSON document") -> Callable[[Decorated], Decorated]:
    return click.option("--output", "output_path", type=click.Path(dir_okay=False, writable=True), default=None,
                        help=f"Write {what} (what --json prints) to this file.")


def plots_option(what: str = "PNG plots", default: str | None = None) -> Callable[[Decorated], Decorated]:
    return click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=default,
                        show_default=default is not None, help=f"Write {what} into this folder.")


def emit_json(doc: Any, as_json: bool, output_path: str | None, sort_keys: bool = False) -> None:
    """The JSON document on stdout (--json) and/or atomically into a file (--output)."""
    text = json.dumps(doc, indent=1, allow_nan=False, default=str, sort_keys=sort_keys) + "\n"
    if output_path:
        try:
            write_atomic(output_path, text)
        except OSError as exc:
            from pal_slurm.cli.errors import PalError

            raise PalError(f"cannot write {output_path}: {exc.strerror or exc}") from None
        click.echo(f"wrote {output_path}", err=True)
    if as_json:
        click.echo(text, nl=False)


class Duration(DurationType):
    """A Slurm duration (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or 30m / 12h / 7d) ->
    seconds; `at_least` refuses shorter ones. A bare `30` is 30 minutes, as in Slurm, except on
    options whose bare number once meant another unit (`was`): there it is refused, so that an
    old script's `--wait 1800` is an error rather than 1800 minutes."""

    name = "DURATION"

    def __init__(self, at_least: float = 0.0, unlimited: bool = False, was: str | None = None) -> None:
        self.at_least = at_least
        self.unlimited = unlimited
        self.was = was

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if self.was and str(value).strip().replace(".", "", 1).isdigit():
            self.fail(f"{value!r}: give a unit or Slurm's form, e.g. {value.strip()}s, {value.strip()}m or "
                      f"{value.strip()}h (a bare number is minutes in Slurm; this option took {self.was} before)",
                      param, ctx)
        try:
            seconds = parse_duration(value)
        except DurationError as exc:
            self.fail(str(exc), param, ctx)
        if seconds is None:
            if not self.unlimited:
                self.fail(f"{value!r}: give a finite duration", param, ctx)
            return None
        if seconds < self.at_least:
            self.fail(f"{value!r} is {seconds:g} s; at least {self.at_least:g} s (a bare number is minutes, "
                      f"as in Slurm: write e.g. 7d or 7-00:00:00)", param, ctx)
        return seconds


class JobId(JobIdType):
    """A Slurm job id: 1234, 1234_5 (array task), 1234+1 (het component)."""

    name = "JOBID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> JobRef:
        if isinstance(value, JobRef):
            return value
        try:
            return parse_job_id(str(value))
        except JobIdError as exc:
            self.fail(str(exc), param, ctx)


JOB_ID = JobId()
