"""`--array`: a simulate or whatif sweep run as one Slurm job array, merged by a dependent job.

The submitting palctl checks everything a serial run would (the traces load, the policies
exist), lays out the sweep's folder (sim.sweep_dir), writes two batch scripts and submits them
through pal_slurm.slurm.batch: an array of one element per independent run, each element
running the same palctl command with `--element I` (one run; its result to DIR/elements/I.json),
and a job after it (`afterok`) running the command with `--merge`, which reads the elements'
results in the serial run's order and prints, writes and plots the very report the serial run
gives. `palctl simulate --status DIR` says where the elements stand.

`--element` and `--merge` are the batch scripts' options (hidden from --help): a person runs
the sweep with `--array`, or reruns one failed element by hand with the line in element.sh.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import click

from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import COMMAND_ARGS, Duration, emit_json
from pal_slurm.cli.errors import ExitStatus, PalError
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.sweep import RUNNING_STATES, WAITING_STATES, Cell, SweepError, SweepProgress, element_document, elapsed, merge_elements, tally
from pal_slurm.atomic_file import write_atomic
from pal_slurm.sim.sweep_dir import SweepDir, SweepDirError
from pal_slurm.slurm.batch import BatchSubmitter, SiteOptions, sbatch_argv
from pal_slurm.slurm.errors import SlurmError

F = TypeVar("F", bound=Callable[..., Any])

# the sweep's own options: an element's command line is the command's, less these
VALUE_OPTIONS = frozenset({"--array-dir", "--array-throttle", "--partition", "--account", "--time", "--element",
                           "--status"})
FLAG_OPTIONS = frozenset({"--array", "--merge"})
SWEEP_PARAMS = ("array", "array_dir", "array_throttle", "partition", "account", "time_s", "element", "merge")


def sweep_options(func: F) -> F:
    """The options of a command that can run its sweep as a Slurm job array."""
    options = [
        click.option("--array", "array", is_flag=True,
                     help="Submit the sweep to Slurm as one job array (one element per run) and a job that "
                          "merges the elements' results into this report once all succeeded."),
        click.option("--array-dir", "array_dir", type=click.Path(file_okay=False), default=None,
                     help="With --array: the folder the elements write to (on a file system the compute nodes "
                          "share); `palctl simulate --status DIR` reads it."),
        click.option("--array-throttle", type=click.IntRange(min=1), default=None,
                     help="With --array: at most N elements run at once (sbatch --array=...%N)."),
        click.option("--partition", default=None, help="With --array: the jobs' partition (sbatch --partition)."),
        click.option("--account", default=None, help="With --array: the jobs' account (sbatch --account)."),
        click.option("--time", "time_s", type=Duration(at_least=60.0), default=None,
                     help="With --array: each job's time limit, a Slurm duration (sbatch --time)."),
        click.option("--element", type=click.IntRange(min=0), default=None, hidden=True,
                     help="Run element I of the sweep in --array-dir and write its result there."),
        click.option("--merge", is_flag=True, hidden=True,
                     help="Report the sweep in --array-dir from its elements' results."),
    ]
    for option in reversed(options):
        func = option(func)
    return _recording_element_errors(func)


@dataclass(frozen=True)
class SweepRequest:
    """What a command was asked to do with its sweep: run it here (serial), submit it, run one
    element of it, or merge it."""

    array: bool = False
    array_dir: str | None = None
    throttle: int | None = None
    site: SiteOptions = SiteOptions()
    element: int | None = None
    merge: bool = False

    @property
    def serial(self) -> bool:
        return not (self.array or self.merge or self.element is not None)

    @property
    def folder(self) -> SweepDir:
        assert self.array_dir is not None, "checked by sweep_request"
        return SweepDir(self.array_dir)


def sweep_request(params: dict[str, Any]) -> SweepRequest:
    """The sweep options of a command's parameters (removed from `params`), checked together."""
    values = {k: params.pop(k) for k in SWEEP_PARAMS}
    req = SweepRequest(values["array"], values["array_dir"], values["array_throttle"],
                       SiteOptions(values["partition"], values["account"], values["time_s"]),
                       values["element"], values["merge"])
    modes = [name for name, on in (("--array", req.array), ("--element", req.element is not None),
                                   ("--merge", req.merge)) if on]
    if len(modes) > 1:
        raise click.UsageError(f"{' and '.join(modes)} do not go together")
    if modes and not req.array_dir:
        raise click.BadParameter(f"{modes[0]} needs --array-dir DIR (a folder the compute nodes share)",
                                 param_hint="--array-dir")
    if not req.array:
        given = [o for o, v in (("--array-throttle", req.throttle), ("--partition", req.site.partition),
                                ("--account", req.site.account), ("--time", req.site.time_s)) if v is not None]
        if req.array_dir and not modes:
            given.insert(0, "--array-dir")
        if given:
            raise click.UsageError(f"{', '.join(given)} only with --array (they describe the sweep's Slurm jobs)")
    return req


def element_argv(args: Sequence[str]) -> list[str]:
    """A command's arguments less the sweep's own options (`--opt VALUE`, `--opt=VALUE`, flags)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            out.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in FLAG_OPTIONS and "=" not in arg:
            continue
        if name in VALUE_OPTIONS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


# ---- submitting ---------------------------------------------------------------------------------
def _submitter(ctx: click.Context) -> BatchSubmitter:
    from pal_slurm.slurm.runner import CommandRunner

    cfg = cli_config(ctx).slurm
    return BatchSubmitter(CommandRunner(slurm_conf=cfg.conf, bin_dir=cfg.bin_dir, timeout=30.0))


def _palctl_line(ctx: click.Context, command: str, args: Sequence[str]) -> str:
    """The shell line that runs `palctl [--config F] COMMAND ARGS` with this interpreter (the
    compute nodes run what submitted, not whatever `palctl` their PATH finds)."""
    config = ctx.find_root().obj.get("config_path") if ctx.find_root().obj else None
    root = ["--config", os.path.abspath(config)] if config else []
    return shlex.join([sys.executable, "-m", "pal_slurm.cli", *root, command, *args])


def inputs_digest(*parts: object) -> str:
    """A digest of what a sweep's runs read (the traces' jobs, the variability's source, ...):
    an element or merge that reads other inputs than the submission did (a trace file edited, a
    newer ranking in the store) refuses to run rather than mix two sweeps in one report."""
    digest = hashlib.sha256()
    _feed(digest, parts)
    return digest.hexdigest()


def _feed(digest: Any, value: object) -> None:
    """`digest.update(repr(value).encode())` a list or tuple item at a time: a site's month of
    accounting is millions of jobs, and their repr at once a string of gigabytes."""
    kind = type(value)
    if kind is not list and kind is not tuple:
        digest.update(repr(value).encode())
        return
    items: Sequence[object] = value  # type: ignore[assignment]
    digest.update(b"[" if kind is list else b"(")
    for i, item in enumerate(items):
        if i:
            digest.update(b", ")
        _feed(digest, item)
    digest.update(b"]" if kind is list else b",)" if len(items) == 1 else b")")


def submit(ctx: click.Context, req: SweepRequest, command: str, cells: Sequence[Cell], digest: str,
           as_json: bool) -> None:
    """Lay out the folder, write the batch scripts, submit the array and its merge job."""
    folder = req.folder
    args = element_argv(ctx.meta.get(COMMAND_ARGS, []))
    cwd = os.getcwd()
    manifest: dict[str, Any] = {"command": command, "args": args, "cwd": cwd, "elements": len(cells),
                                "cells": [c.as_json() for c in cells], "inputs": digest, "array_job": None, "merge_job": None}
    try:
        folder.create(manifest)
    except SweepDirError as exc:
        raise PalError(str(exc)) from None
    where = ["--array-dir", str(folder.path)]
    element_sh, merge_sh = folder.script_path("element"), folder.script_path("merge")
    write_atomic(element_sh, "#!/bin/bash\n# one run of the sweep: the element is the array task id\n"
                 f"exec {_palctl_line(ctx, command, [*args, *where])} --element \"$SLURM_ARRAY_TASK_ID\"\n")
    write_atomic(merge_sh, "#!/bin/bash\n# the report of the sweep, from its elements' results\n"
                 f"exec {_palctl_line(ctx, command, [*args, *where, '--merge'])}\n")
    submitter = _submitter(ctx)
    try:
        array_job = submitter.submit(sbatch_argv(str(element_sh), job_name=f"palctl-{command}",
                                                 output=str(folder.logs_dir / "element-%a.out"), chdir=cwd,
                                                 site=req.site, array_size=len(cells), throttle=req.throttle))
        manifest["array_job"] = array_job
        folder.write_manifest(manifest)
        merge_job = submitter.submit(sbatch_argv(str(merge_sh), job_name=f"palctl-{command}-merge",
                                                 output=str(folder.merge_log), chdir=cwd, site=req.site,
                                                 after_ok=array_job))
    except SlurmError as exc:
        if manifest["array_job"] is not None:
            try:
                submitter.cancel(manifest["array_job"])
            except SlurmError as also:
                click.echo(f"could not cancel array job {manifest['array_job']}: {also}", err=True)
        raise PalError(f"submitting the sweep: {exc}") from None
    manifest["merge_job"] = merge_job
    folder.write_manifest(manifest)
    click.echo(f"submitted {len(cells)} element(s) as array job {array_job} and merge job {merge_job} "
               f"(after all succeeded); progress: palctl simulate --status {folder.path}", err=True)
    emit_json({"array_dir": str(folder.path), "elements": len(cells), "array_job": array_job,
               "merge_job": merge_job}, as_json, None)


# ---- one element, the merge --------------------------------------------------------------------
def _checked_cells(req: SweepRequest, cells: Sequence[Cell], digest: str) -> SweepDir:
    """The folder, once its manifest names the same runs and inputs as this command line (an
    element given other arguments or other inputs would write a result of another sweep)."""
    folder = req.folder
    try:
        manifest = folder.manifest()
    except SweepDirError as exc:
        raise PalError(str(exc)) from None
    if manifest.get("cells") != [c.as_json() for c in cells]:
        raise PalError(f"{folder.path}: this command's runs are not the sweep's there "
                       f"({len(cells)} here, {manifest.get('elements')} in {folder.manifest_path.name})")
    if manifest.get("inputs") != digest:
        raise PalError(f"{folder.path}: the inputs differ from the submission's (a trace or accounting file "
                       "changed, or the store has a newer ranking: pin it with --variability store:vN)")
    return folder


def run_element(req: SweepRequest, cells: Sequence[Cell], digest: str, run: Callable[[Cell], RunResult]) -> None:
    """Run element `req.element` and write its result."""
    folder = _checked_cells(req, cells, digest)
    index = req.element
    assert index is not None, "an element request"
    if index >= len(cells):
        raise PalError(f"element {index}: the sweep has {len(cells)} (0-{len(cells) - 1})")
    start = time.monotonic()
    result = run(cells[index])
    folder.write_element(index, element_document(index, cells[index], result, time.monotonic() - start))
    click.echo(f"element {index} ({cells[index].label()}): wrote {folder.element_path(index)}", err=True)


def merged_results(req: SweepRequest, cells: Sequence[Cell], digest: str) -> tuple[list[RunResult], float]:
    """Every element's result in the serial run's order, and the seconds they ran together."""
    folder = _checked_cells(req, cells, digest)
    try:
        docs = folder.element_documents()
        return merge_elements(cells, docs), elapsed(docs)
    except (SweepError, SweepDirError) as exc:
        raise PalError(f"{folder.path}: {exc}") from None


def write_report_text(req: SweepRequest, text: str) -> None:
    """The merged report's page into the sweep's folder (the merge job's log has it too)."""
    write_atomic(req.folder.report_text, text.rstrip() + "\n")
    click.echo(f"wrote {req.folder.report_text}", err=True)


def _recording_element_errors(func: F) -> F:
    """An element that fails writes why into its folder before it exits non-zero, so that
    `--status` can say it without anyone reading Slurm's logs."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        index, where = kwargs.get("element"), kwargs.get("array_dir")
        if index is None or not where:
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except click.exceptions.Exit as stop:
            if stop.exit_code:
                _write_error(where, index, f"exited {stop.exit_code}")
            raise
        except click.ClickException as exc:
            _write_error(where, index, exc.format_message())
            raise
        except Exception as exc:
            _write_error(where, index, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            raise
    return wrapper  # type: ignore[return-value]


def _write_error(where: str, index: int, text: str) -> None:
    try:
        SweepDir(where).write_error(index, text)
    except OSError as exc:  # the folder itself is the problem: Slurm's log keeps the error
        click.echo(f"cannot record element {index}'s error in {where}: {exc}", err=True)


# ---- progress -----------------------------------------------------------------------------------
def show_status(ctx: click.Context, path: str, as_json: bool) -> None:
    """Elements done, failed (with their errors), running and pending; the merge's state."""
    folder = SweepDir(path)
    try:
        manifest = folder.manifest()
    except SweepDirError as exc:
        raise PalError(str(exc)) from None
    states: dict[int, str] | None = None
    merge_state: str | None = None
    note = ""
    if manifest.get("array_job") is not None:
        try:  # Slurm first, the folder after: an element that finishes in between counts as done
            states, merge_state = _submitter(ctx).states(int(manifest["array_job"]), manifest.get("merge_job"))
        except SlurmError as exc:
            note = f"Slurm not asked ({exc}); elements without a result counted pending"
    progress = tally(int(manifest["elements"]), folder.done(), folder.errors(), states)
    cells = [Cell(**c) for c in manifest["cells"]]
    report = folder.report_json if folder.report_json.exists() else None
    failures = [{"element": i, "run": cells[i].label(), "error": error,
                 "log": str(folder.element_log(i)), "log_tail": folder.log_tail(i)} for i, error in progress.failed]
    merge = _merge_standing(report, merge_state, progress, asked=states is not None)
    doc = {"array_dir": str(folder.path), "command": manifest["command"], "elements": progress.elements,
           "done": len(progress.done), "failed": failures, "running": len(progress.running),
           "pending": len(progress.pending), "array_job": manifest.get("array_job"),
           "merge_job": manifest.get("merge_job"), "merge": merge, "report": str(report) if report else None}
    _print_status(doc, progress, note, as_json)
    emit_json(doc, as_json, None)
    if failures or merge.startswith("ended without"):
        raise click.exceptions.Exit(ExitStatus.ERROR)


def _merge_standing(report: object, merge_state: str | None, progress: SweepProgress, asked: bool) -> str:
    if report is not None:
        return "merged"
    if merge_state in WAITING_STATES or merge_state in RUNNING_STATES:
        return f"merge job {str(merge_state).lower()}"
    if progress.failed:
        return "ended without a report: an element failed (rerun it with the line in element.sh, then merge.sh)"
    if not asked:
        return "no report yet (Slurm not asked)"
    if merge_state is None and not progress.complete:
        return "waiting for the elements"
    return f"ended without a report: merge job {(merge_state or 'gone').lower()} (see logs/merge.out)"


def _print_status(doc: dict[str, Any], progress: SweepProgress, note: str, as_json: bool) -> None:
    say = functools.partial(click.echo, err=as_json)
    say(f"sweep {doc['array_dir']}: palctl {doc['command']}, {doc['elements']} element(s), "
        f"array job {doc['array_job']}, merge job {doc['merge_job']}")
    say(f"  done {len(progress.done)}, failed {len(progress.failed)}, running {len(progress.running)}, "
        f"pending {len(progress.pending)}")
    for f in doc["failed"]:
        say(f"  element {f['element']} ({f['run']}) failed: {f['error'].splitlines()[0] if f['error'] else ''}")
        if f["log_tail"]:
            say("    " + f["log_tail"].replace("\n", "\n    "))
        say(f"    log: {f['log']}")
    say(f"  merge: {doc['merge']}" + (f"; report {doc['report']}" if doc["report"] else ""))
    if note:
        say(f"  note: {note}")
