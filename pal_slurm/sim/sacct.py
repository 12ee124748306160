"""A site's own workload: Slurm accounting (`sacct --json`, `sacct -P`) as a simulator trace.

What the simulator takes from each job: submit time, runtime (end - start: what the job took on
the GPUs stock Slurm gave it, used as its ideal runtime), allocated GPUs, nodes, time limit, and
a variability class. The class comes, in order, from the job's `pal:class=` comment (parsed by
the hook's grammar, `model.comment_grammar`), then from the admin's rules (job name / account /
partition glob -> class, `[simulate] class_rules` in pal.toml), else the job is *unclassed*:
simulated with no variability (every GPU 1.0 for it) but still occupying its GPUs.

Skipped with a count in the warnings, never silently: jobs that never started, jobs without
GPUs, jobs still running (job steps, `123.batch` / `123.0`, are part of their job's row).

`sacct -P` needs these fields (any order, header line included):

    sacct -a -X -P --format=JobID,JobName,Account,Partition,Submit,Start,End,Timelimit,AllocTRES,NNodes,State,Comment,ReqTRES

(`Comment` is recorded only with `AccountingStoreFlags=job_comment`; GPUs appear in AllocTRES only
with `AccountingStorageTRES=gres/gpu`.) `sacct --json` (Slurm 22.05's data_parser 0.0.38 and
later ones) has all of it. A GPU model a job asked for (`--gres=gpu:a100:2`, `--gpus=v100:1`) is
in its requested TRES (`tres.requested`; with -P the optional `ReqTRES`: `gres/gpu:a100=2`) when
the site's `AccountingStorageTRES` names the model (`gres/gpu,gres/gpu:a100,gres/gpu:v100`; with
`gres/gpu` alone accounting records no model). AllocTRES names the model a job got, asked or
not, so it is not read for this. The simulator runs such a job on that model's GPUs on a
`--gpu-models` cluster.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Sequence

from pal_slurm.model.class_rules import ClassRule
from pal_slurm.model.comment_grammar import CommentError, parse_comment
from pal_slurm.input_files import CsvRow, InputError, read_lines, stream_csv
from pal_slurm.json_stream import array_items
from pal_slurm.intake.durations import DurationError, minutes_field, parse_limit
from pal_slurm.intake.gres import gres_name
from pal_slurm.intake.slurm_numbers import number
from pal_slurm.intake.tres import accounting_gpus, is_gpu, requested_model
from pal_slurm.sim.trace import MAX_RUNTIME_S, UNCLASSED, Trace, TraceError, TraceJob

SACCT_FIELDS = ("JobID", "JobName", "Account", "Partition", "Submit", "Start", "End", "Timelimit", "AllocTRES",
                "NNodes", "State", "Comment", "ReqTRES")
REQUIRED_FIELDS = ("JobID", "Submit", "Start", "End", "AllocTRES")


@dataclass(frozen=True, slots=True)
class AccountingJob:
    """One job allocation as accounting recorded it (times in epoch seconds; None: not recorded).

    Slotted: a large site's dump holds millions of them at once."""

    job_id: str
    name: str
    account: str
    partition: str
    submit: float
    start: float | None
    end: float | None
    gpus: int
    nodes: int
    time_limit_s: float | None
    state: str
    comment: str
    where: str  # file:line (or file: job N) for messages
    gpu_model: str | None = None  # the GPU model it asked for (requested TRES), None: any


# ---- reading ------------------------------------------------------------------------------

def read_accounting(path: str | Path) -> list[AccountingJob]:
    """Jobs of a `sacct --json` or `sacct -P` file (format from the content), of any size.

    Both are read as they are needed (`-P` a line at a time, `--json` a job at a time): memory
    holds the jobs kept (steps are dropped as they are read), not the file."""
    lines = read_lines(path, what="accounting file", error=TraceError)
    head = []  # up to the first line that is not blank
    for line in lines:
        head.append(line)
        if line.strip():
            break
    else:
        raise TraceError("empty accounting file", path)
    if head[-1].lstrip().startswith("{"):
        lines.close()
        return _read_json(path)
    return _read_pipe(itertools.chain(head, lines), path)


def _json_jobs(path: str | Path) -> Iterator[Any]:
    """The `jobs` array's elements, read as they are needed."""
    items = array_items(path, "jobs", what="accounting file", error=TraceError, parse_constant=_reject_constant,
                        missing=": expected the output of sacct --json")
    while True:
        try:
            j = next(items)
        except StopIteration:
            return
        except InputError:
            raise
        except ValueError as exc:  # _reject_constant
            raise TraceError(f"not valid JSON: {exc}", path) from None
        yield j


def _read_json(path: str | Path) -> list[AccountingJob]:
    out = []
    for i, j in enumerate(_json_jobs(path)):
        where = f"{path}: jobs[{i}]"
        if not isinstance(j, dict):
            raise TraceError(f"jobs[{i}] is not an object", path)
        t = j.get("time") or {}
        comment = j.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job") or ""
        out.append(AccountingJob(
            job_id=str(_json_job_id(j, where)),
            name=str(j.get("name") or ""),
            account=str(j.get("account") or ""),
            partition=str(j.get("partition") or ""),
            submit=_json_submit(t.get("submission"), where),
            start=_json_time(t.get("start"), where, "time.start"),
            end=_json_time(t.get("end"), where, "time.end"),
            gpus=_json_gpus(j, where),
            nodes=int(_json_number(j.get("allocation_nodes"), where, "allocation_nodes") or 0),
            time_limit_s=_json_limit(t.get("limit"), where),
            state=_json_state(j.get("state")),
            comment=str(comment or ""),
            where=where,
            gpu_model=_json_model(j),
        ))
    return out


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number sacct writes")


def _json_job_id(j: Mapping[str, Any], where: str) -> str:
    jid = j.get("job_id")
    if jid is None:
        raise TraceError(f"{where}: no job_id")
    array = j.get("array") or {}
    task = _json_number(array.get("task_id"), where, "array.task_id") if isinstance(array, dict) else None
    if task is not None and array.get("job_id"):
        return f"{array['job_id']}_{int(task)}"
    return str(jid)


def _json_number(v: Any, where: str, what: str) -> float | None:
    """A number, or sacct's {"set": .., "infinite": .., "number": ..} wrapper (Slurm >= 23.02,
    unwrapped by slurm_numbers.number); None when unset or infinite."""
    v = number(v)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TraceError(f"{where}: {what} is not a number: {v!r}")
    return float(v)


def _json_time(v: Any, where: str, what: str) -> float | None:
    n = _json_number(v, where, what)
    if n is None or n <= 0:  # sacct writes 0 for "not yet" (a job that never started has start 0)
        return None
    return n


def _json_submit(v: Any, where: str) -> float:
    """time.submission, which every job has."""
    n = _json_time(v, where, "time.submission")
    if n is None:
        raise TraceError(f"{where}: no time.submission")
    return n


def _json_limit(v: Any, where: str) -> float | None:
    n = _json_number(v, where, "time.limit")
    return None if n is None else minutes_field(n)  # minutes; unset and INFINITE as None


def _json_state(v: Any) -> str:
    if isinstance(v, dict):
        v = v.get("current")
    if isinstance(v, list):
        v = v[0] if v else ""
    return str(v or "")


def _json_gpus(j: Mapping[str, Any], where: str) -> int:
    tres = (j.get("tres") or {}).get("allocated") or []
    return accounting_gpus((str(t.get("name") or ""), int(_json_number(t.get("count"), where, "tres count") or 0))
                           for t in (tres if isinstance(tres, list) else [])
                           if isinstance(t, dict) and t.get("type") == "gres")


def _json_model(j: Mapping[str, Any]) -> str | None:
    requested = (j.get("tres") or {}).get("requested") or []
    return requested_model(str(t.get("name")) for t in (requested if isinstance(requested, list) else [])
                           if isinstance(t, dict) and t.get("type") == "gres")


def _read_pipe(lines: Iterator[str], path: str | Path) -> list[AccountingJob]:
    """`sacct -P` lines (header first) -> jobs, one row at a time."""
    first = next(lines)
    if "|" not in first:
        raise TraceError("neither sacct --json nor sacct -P output (no '|' in the header line); expected "
                         f"sacct -P --format={','.join(SACCT_FIELDS)}", path, 1)
    _, rows = stream_csv(itertools.chain([first], lines), path, what="accounting file", required=REQUIRED_FIELDS,
                         error=TraceError, delimiter="|", quoting=False)
    out = []
    for row in rows:
        jid = row.text("JobID")
        if "." in jid:
            continue  # a step (123.batch, 123.0, 123.extern); the allocation row carries the job
        out.append(AccountingJob(
            job_id=jid,
            # interned: a site has few names, accounts, partitions, states and comments, and
            # millions of jobs holding them
            name=sys.intern(row.get("JobName")),
            account=sys.intern(row.get("Account")),
            partition=sys.intern(row.get("Partition")),
            submit=_pipe_submit(row),
            start=_pipe_time(row, "Start"),
            end=_pipe_time(row, "End"),
            gpus=_pipe_gpus(row),
            nodes=row.integer("NNodes", minimum=0) if row.get("NNodes") else 0,
            time_limit_s=_pipe_limit(row),
            state=sys.intern(row.get("State").split(" ")[0]),
            comment=sys.intern(row.get("Comment")),
            where=f"{path}:{row.line}",
            gpu_model=requested_model(name for name in (gres_name(i.partition("=")[0])
                                                         for i in row.get("ReqTRES").split(",")) if name),
        ))
    return out


_NO_TIME = ("", "unknown", "none", "n/a")


def _pipe_submit(row: CsvRow) -> float:
    """Submit, which every job has."""
    t = _pipe_time(row, "Submit")
    if t is None:
        raise row.fail("no time recorded", "Submit")
    return t


def _pipe_time(row: CsvRow, column: str) -> float | None:
    raw = row.get(column)
    if raw.lower() in _NO_TIME:
        return None
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        raise row.fail(f"not a time: {raw!r} (sacct writes YYYY-MM-DDTHH:MM:SS)", column) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)  # only differences matter; one zone for all rows
    return dt.timestamp()


def _pipe_limit(row: CsvRow) -> float | None:
    try:
        return parse_limit(row.get("Timelimit"))
    except DurationError as exc:
        raise row.fail(str(exc), "Timelimit") from None


def _pipe_gpus(row: CsvRow) -> int:
    counts = []
    for item in row.get("AllocTRES").split(","):
        key, _, value = item.partition("=")
        name = gres_name(key)
        if name is not None and is_gpu(name):
            try:
                counts.append((name, int(value)))
            except ValueError:
                raise row.fail(f"{item!r}: GPU count is not an integer", "AllocTRES") from None
    return accounting_gpus(counts)


# ---- accounting -> trace ------------------------------------------------------------------

def accounting_trace(
    jobs: Sequence[AccountingJob],
    rules: Sequence[ClassRule] = (),
    *,
    name: str,
    days: float | None = None,
) -> Trace:
    """The jobs that used GPUs as a trace (submit times from the first kept job's)."""
    skipped = {"no GPUs": 0, "never started": 0, "still running": 0, "older than the window": 0}
    bad_comments: list[str] = []
    classes = {"comment": 0, "rule": 0, "unclassed": 0}
    seen: dict[str, str] = {}
    kept: list[tuple[AccountingJob, str, float]] = []  # (job, class, seconds it ran)
    latest = max((j.submit for j in jobs), default=0.0)
    for j in jobs:
        if j.job_id in seen:
            raise TraceError(f"{j.where}: job {j.job_id} appears twice (first at {seen[j.job_id]})")
        seen[j.job_id] = j.where
        if days is not None and j.submit < latest - days * 86400.0:
            skipped["older than the window"] += 1
            continue
        if j.start is None:
            skipped["never started"] += 1
            continue
        if j.gpus <= 0:
            skipped["no GPUs"] += 1
            continue
        if j.end is None:
            skipped["still running"] += 1
            continue
        if j.end < j.start or j.start < j.submit - 1.0:
            raise TraceError(f"{j.where}: job {j.job_id}: times out of order (submit {j.submit:.0f}, "
                             f"start {j.start:.0f}, end {j.end:.0f})")
        cls, how = _class_of(j, rules, bad_comments)
        classes[how] += 1
        kept.append((j, cls, j.end - j.start))
    if not kept:
        raise TraceError(f"{name}: no job that used GPUs and finished "
                         f"({', '.join(f'{v} {k}' for k, v in skipped.items() if v) or 'no jobs'})")
    t0 = min(j.submit for j, _, _ in kept)
    out = []
    for index, (j, cls, ran_s) in enumerate(sorted(kept, key=lambda jc: (jc[0].submit, jc[0].job_id))):
        runtime = max(1.0, ran_s)  # whole seconds in accounting; a 0 s job still occupies a slot
        if runtime > MAX_RUNTIME_S:
            raise TraceError(f"{j.where}: job {j.job_id} ran {runtime:.0f} s, more than {MAX_RUNTIME_S:g} s")
        out.append(TraceJob(job_id=index, num_gpus=j.gpus, submit_time=j.submit - t0, iterations=runtime,
                            model=j.name or f"job{j.job_id}", iter_s=1.0, perf_class=cls, gpu_model=j.gpu_model,
                            time_limit_s=j.time_limit_s))
    warnings = [f"{name}: {len(out)} job(s) kept; classes from comments {classes['comment']}, rules "
                f"{classes['rule']}, unclassed {classes['unclassed']} (simulated without variability)"]
    warnings += [f"{name}: skipped {v} job(s): {k}" for k, v in skipped.items() if v]
    warnings += bad_comments[:5]
    return Trace(name, tuple(out), tuple(warnings))


def _class_of(job: AccountingJob, rules: Iterable[ClassRule], bad: list[str]) -> tuple[str, str]:
    try:
        spec = parse_comment(job.comment)
    except CommentError as exc:
        bad.append(f"{job.where}: job {job.job_id}: comment ignored ({exc}); using the rules")
        spec = None
    if spec is not None:
        return spec.perf_class, "comment"
    for rule in rules:
        if rule.matches(job):
            return rule.perf_class, "rule"
    return UNCLASSED, "unclassed"


def load_accounting_trace(path: str | Path, rules: Sequence[ClassRule] = (), days: float | None = None) -> Trace:
    """`palctl simulate --trace sacct:FILE`."""
    return accounting_trace(read_accounting(path), rules, name=Path(path).stem, days=days)
