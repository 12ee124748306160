"""A site's own workload: Slurm accounting (`sacct --json`, `sacct -P`) as a simulator trace.

What the simulator takes from each job: submit time, runtime (end - start: what the job took on
the GPUs stock Slurm gave it, used as its ideal runtime), allocated GPUs, nodes, time limit, and
a variability class. The class comes, in order, from the job's `pal:class=` comment (parsed by
the hook's grammar, `model.comment_grammar`), then from the admin's rules (job name / account /
partition glob -> class, `[simulate] class_rules` in pal.toml), else the job is *unclassed*:
simulated with no variability (every GPU 1.0 for it) but still occupying its GPUs.

Skipped with a count in the warnings, never silently: jobs that never started, jobs without
GPUs, jobs still running (job steps, `123.batch` / `123.0`, are part of their job's row). The
trace is built as the file is read, and a skipped job leaves only its count: memory follows the
jobs kept, not the file (a site's month is gigabytes, most of it CPU jobs and pending rows). So
a job id seen twice is an error among the jobs that used GPUs and finished (two dumps run
together would count their work twice); a skipped job seen twice is counted twice, and so is a
job seen again after the window of a later submission has dropped it (with `--window`).

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

import functools
import itertools
import math
import sys
from array import array
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, NoReturn, Sequence

from pal_slurm.model.class_rules import ClassRule
from pal_slurm.model.comment_grammar import CommentError, parse_comment
from pal_slurm.input_files import InputError, csv_row, read_lines, split_rows
from pal_slurm.json_stream import array_items
from pal_slurm.intake.durations import MAX_TEXT, DurationError, minutes_field, parse_limit
from pal_slurm.intake.gres import gres_name
from pal_slurm.intake.slurm_numbers import number
from pal_slurm.intake.tres import accounting_gpus, is_gpu, requested_model
from pal_slurm.sim.trace import MAX_RUNTIME_S, UNCLASSED, Trace, TraceError, TraceJob

SACCT_FIELDS = ("JobID", "JobName", "Account", "Partition", "Submit", "Start", "End", "Timelimit", "AllocTRES",
                "NNodes", "State", "Comment", "ReqTRES")
REQUIRED_FIELDS = ("JobID", "Submit", "Start", "End", "AllocTRES")


class AccountingJob(NamedTuple):
    """One job allocation as accounting recorded it (times in epoch seconds; None: not recorded).

    A named tuple: made for every job a dump keeps, and a tuple is made several times faster than
    a frozen dataclass (whose fields are each set through object.__setattr__)."""

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


# ---- reading ----

Skip = tuple[str, float]  # (why a record is not in the trace, its submit time): what a skipped record leaves

NEVER_STARTED, NO_GPUS, STILL_RUNNING, OLDER = "never started", "no GPUs", "still running", "older than the window"


def skip_reason(start: float | None, gpus: int, end: float | None) -> str | None:
    """Why a job is not in the trace (None: it is), in the order the counts are kept."""
    if start is None:
        return NEVER_STARTED
    if gpus <= 0:
        return NO_GPUS
    if end is None:
        return STILL_RUNNING
    return None


def read_accounting(path: str | Path) -> list[AccountingJob]:
    """Every job of a `sacct --json` or `sacct -P` file (format from the content), steps dropped."""
    return [j for j in _records(path, every=True) if isinstance(j, AccountingJob)]


def _records(path: str | Path, *, every: bool) -> Iterator[AccountingJob | Skip]:
    """The file's jobs as they are read (`-P` a block of lines at a time, `--json` a job at a
    time): memory holds one job, not the file. With `every` False, a `-P` job the trace would
    skip comes as a `Skip`, not built: most of a dump's rows are such jobs."""
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
    return _read_pipe(itertools.chain(head, lines), path, every)


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


def _read_json(path: str | Path) -> Iterator[AccountingJob]:
    for i, j in enumerate(_json_jobs(path)):
        where = f"{path}: jobs[{i}]"
        if not isinstance(j, dict):
            raise TraceError(f"jobs[{i}] is not an object", path)
        t = j.get("time") or {}
        comment = j.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job") or ""
        yield AccountingJob(
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
        )


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


def _read_pipe(lines: Iterator[str], path: str | Path, every: bool) -> Iterator[AccountingJob | Skip]:
    """`sacct -P` lines (header first) -> jobs (or Skips), one row at a time.

    Every row's times, GPUs, node count and time limit are checked, kept or not, so a bad cell
    is an error wherever it is. The common cells go through cached or plain readers (a site has
    few time limits and TRES strings, millions of rows); anything else, and every error, goes
    through the CsvRow readers that name the cell."""
    first = next(lines)
    if "|" not in first:
        raise TraceError("neither sacct --json nor sacct -P output (no '|' in the header line); expected "
                         f"sacct -P --format={','.join(SACCT_FIELDS)}", path, 1)
    header, rows = split_rows(itertools.chain([first], lines), path, what="accounting file", required=REQUIRED_FIELDS,
                              error=TraceError, delimiter="|")
    at = {h: i for i, h in enumerate(header)}
    # a column the file does not have reads the "" appended to each row
    (job_id, job_name, account, partition, submit_at, start_at, end_at, limit_at, alloc_at, nodes_at, state,
     comment, req_tres) = (at.get(c, len(header)) for c in SACCT_FIELDS)
    name = str(path)
    for line, fields in rows:
        fields.append("")
        jid = fields[job_id].strip()
        if "." in jid:
            continue  # a step (123.batch, 123.0, 123.extern); the allocation row carries the job
        try:
            if not jid:
                raise _Cell("JobID", "empty; a value is required")
            submit = _time(fields[submit_at], "Submit")
            if submit is None:
                raise _Cell("Submit", "no time recorded")
            start = _time(fields[start_at], "Start")
            end = _time(fields[end_at], "End")
            gpus = _alloc_gpus(fields[alloc_at].strip())
            raw = fields[nodes_at].strip()
            nodes = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else \
                csv_row(name, line, header, fields[:-1], TraceError).integer("NNodes", minimum=0) if raw else 0
            limit = _limit(fields[limit_at])
        except _Cell as exc:
            column, message = exc.args
            raise csv_row(name, line, header, fields[:-1], TraceError).fail(message, column) from None
        reason = skip_reason(start, gpus, end)
        if reason is not None and not every:
            yield reason, submit
            continue
        yield AccountingJob(  # by position: several times faster than by keyword, once per kept row
            jid,
            # interned: a site has few names, accounts, partitions, states and comments, and
            # millions of jobs holding them
            sys.intern(fields[job_name].strip()),
            sys.intern(fields[account].strip()),
            sys.intern(fields[partition].strip()),
            submit,
            start,
            end,
            gpus,
            nodes,
            limit,
            sys.intern(fields[state].strip().split(" ")[0]),
            sys.intern(fields[comment].strip()),
            f"{name}:{line}",
            _requested_model(fields[req_tres].strip()),
        )


class _Cell(ValueError):
    """A bad cell met on the fast path: (column, message), made a CsvRow error by `_read_pipe`."""


_NO_TIME = frozenset(("", "unknown", "none", "n/a"))
_EPOCH = datetime(1970, 1, 1)


def _time(raw: str, column: str) -> float | None:
    """A time as sacct -P writes it (local time, no zone: read as UTC, since only differences
    matter) in epoch seconds; None for "not recorded" (Unknown, None, empty)."""
    try:
        dt = datetime.fromisoformat(raw)  # most cells: a time, nothing around it
    except ValueError:
        raw = raw.strip()
        if raw.lower() in _NO_TIME:
            return None
        try:
            dt = datetime.fromisoformat(raw)
        except ValueError:
            raise _Cell(column, f"not a time: {raw!r} (sacct writes YYYY-MM-DDTHH:MM:SS)") from None
    if dt.tzinfo is None:
        return (dt - _EPOCH).total_seconds()  # what dt.replace(tzinfo=utc).timestamp() gives, faster
    return dt.timestamp()


def _limit(raw: str) -> float | None:
    raw = raw.strip()
    if len(raw) > MAX_TEXT:
        return _limit_of(raw)  # an error (not kept in the cache)
    return _cached_limit(raw)


def _limit_of(raw: str) -> float | None:
    try:
        return parse_limit(raw)
    except DurationError as exc:
        raise _Cell("Timelimit", str(exc)) from None


_cached_limit = functools.lru_cache(maxsize=1024)(_limit_of)


def _alloc_gpus(tres: str) -> int:
    """GPUs in an AllocTRES string (`billing=4,cpu=4,gres/gpu=2,mem=8G,node=1`)."""
    if "gres/" not in tres:
        return 0
    return _cached_gpus(tres) if len(tres) <= _MEMO_CHARS else _gpus_of(tres)


def _gpus_of(tres: str) -> int:
    counts = []
    for item in tres.split(","):
        key, _, value = item.partition("=")
        name = gres_name(key)
        if name is not None and is_gpu(name):
            try:
                counts.append((name, int(value)))
            except ValueError:
                raise _Cell("AllocTRES", f"{item!r}: GPU count is not an integer") from None
    return accounting_gpus(counts)


_MEMO_CHARS = 256  # longer TRES strings are parsed every time, never kept
_cached_gpus = functools.lru_cache(maxsize=4096)(_gpus_of)


def _requested_model(tres: str) -> str | None:
    """The GPU model a ReqTRES string asks for (`gres/gpu:a100=2`), None: any."""
    if "gres/gpu:" not in tres:
        return None
    return _cached_model(tres) if len(tres) <= _MEMO_CHARS else _model_of(tres)


def _model_of(tres: str) -> str | None:
    return requested_model(name for name in (gres_name(i.partition("=")[0]) for i in tres.split(",")) if name)


_cached_model = functools.lru_cache(maxsize=4096)(_model_of)


# ---- accounting -> trace ------------------------------------------------------------------

def accounting_trace(
    jobs: Iterable[AccountingJob | Skip],
    rules: Sequence[ClassRule] = (),
    *,
    name: str,
    days: float | None = None,
) -> Trace:
    """The jobs that used GPUs and finished as a trace (submit times from the first kept job's),
    taken as they come: what is held is the jobs kept, not the records."""
    builder = _TraceBuilder(rules, name, days)
    for job in jobs:
        builder.add(job)
    return builder.trace()


_BAD_COMMENTS_SHOWN = 5


class _TraceBuilder:
    """A trace made from accounting records as they arrive.

    Held per kept job: one tuple of what its TraceJob needs (its size: docs/whatif.md). A
    skipped record is a count, plus its submit time (8 bytes) with a window. Which records the
    window drops is known only at the end, from the latest submission; those submitted before
    the window of the latest seen so far are dropped as they come (a record before them as the
    list doubles), so a window holds about its own jobs when the file is in submission order,
    as sacct writes it."""

    def __init__(self, rules: Sequence[ClassRule], name: str, days: float | None):
        self.rules, self.name, self.days = tuple(rules), name, days
        self.latest = 0.0  # the latest submission of any job
        self.skipped = {NO_GPUS: 0, NEVER_STARTED: 0, STILL_RUNNING: 0, OLDER: 0}
        self.skipped_at: dict[str, array[float]] = {} if days is None else {k: array("d") for k in self.skipped}
        # (submit, job id, GPUs, model, class, how classed, bad comment, seconds it ran, GPU model, limit, where)
        self.kept: list[tuple[Any, ...]] = []
        self.ids: set[str] = set()
        # Errors are raised once every record is read, the first in the file first, as when the
        # records were read whole: a bad cell further on is the error. A job twice:
        self.twice: tuple[int, TraceError] | None = None
        self.disorder: list[tuple[int, AccountingJob]] = []  # times out of order: an error unless older than the window
        self.count = 0  # jobs (not skipped) so far
        self.held = 1024  # the kept list's length when it was last pruned to the window (doubled)

    def add(self, record: AccountingJob | Skip) -> None:
        if not isinstance(record, AccountingJob):
            self.skip(*record)
            return
        j = record
        reason = skip_reason(j.start, j.gpus, j.end)
        if reason is not None:
            self.skip(reason, j.submit)
            return
        assert j.start is not None and j.end is not None
        if j.submit > self.latest:
            self.latest = j.submit
        self.count += 1
        if j.job_id in self.ids:
            if self.twice is None:
                first = next(itertools.chain((k[-1] for k in self.kept if k[1] == j.job_id),
                                             (d.where for _, d in self.disorder if d.job_id == j.job_id)))
                self.twice = self.count, TraceError(f"{j.where}: job {j.job_id} appears twice (first at {first})")
            return
        self.ids.add(j.job_id)
        if j.end < j.start or j.start < j.submit - 1.0:
            if self.days is not None or not self.disorder:  # with no window, the first is the error
                self.disorder.append((self.count, j))
            return
        has_spec, cls, bad = _comment_class(j.comment) if len(j.comment) <= _MEMO_CHARS else \
            _comment_class.__wrapped__(j.comment)
        how = "comment"
        if not has_spec:
            cls, how = UNCLASSED, "unclassed"
            for rule in self.rules:
                if rule.matches(j):
                    cls, how = rule.perf_class, "rule"
                    break
        self.kept.append((j.submit, j.job_id, j.gpus, j.name or f"job{j.job_id}", cls, how, bad, j.end - j.start,
                          j.gpu_model, j.time_limit_s, j.where))
        if self.days is not None and len(self.kept) >= 2 * self.held:
            self._prune()

    def skip(self, reason: str, submit: float) -> None:
        if submit > self.latest:
            self.latest = submit
        if self.days is None:
            self.skipped[reason] += 1
        elif submit < self.latest - self.days * 86400.0:
            self.skipped[OLDER] += 1
        else:
            self.skipped[reason] += 1
            self.skipped_at[reason].append(submit)

    def _prune(self) -> None:
        """Drop the kept jobs submitted before the window of the latest submission so far (the
        final window starts no earlier), counting them as older."""
        assert self.days is not None
        cutoff = self.latest - self.days * 86400.0
        inside = []
        for k in self.kept:
            if k[0] >= cutoff:
                inside.append(k)
            else:
                self.ids.discard(k[1])  # a job older than the window is in no trace: seen twice, no double count
        self.skipped[OLDER] += len(self.kept) - len(inside)
        self.kept[:] = inside
        self.held = max(1024, len(inside))

    def trace(self) -> Trace:
        kept, skipped = self.kept, self.skipped
        self.ids = set()
        cutoff = -math.inf if self.days is None else self.latest - self.days * 86400.0
        errors = [] if self.twice is None else [self.twice]
        errors += [(n, _disorder(j)) for n, j in self.disorder if j.submit >= cutoff][:1]
        if errors:
            raise min(errors, key=lambda e: e[0])[1]
        if self.days is not None:
            for reason, at in self.skipped_at.items():
                older = sum(1 for t in at if t < cutoff)
                skipped[reason] -= older
                skipped[OLDER] += older
            self.skipped_at = {}
            inside = [k for k in kept if k[0] >= cutoff]
            skipped[OLDER] += len(kept) - len(inside) + len(self.disorder)
            kept[:] = inside
            del inside
        if not kept:
            raise TraceError(f"{self.name}: no job that used GPUs and finished "
                             f"({', '.join(f'{v} {k}' for k, v in skipped.items() if v) or 'no jobs'})")
        classes = {"comment": 0, "rule": 0, "unclassed": 0}
        bad_comments: list[str] = []
        bad_count = 0
        for k in kept:
            classes[k[5]] += 1
            if k[6] is not None:
                bad_count += 1
                if len(bad_comments) < _BAD_COMMENTS_SHOWN:
                    bad_comments.append(f"{k[-1]}: job {k[1]}: comment ignored ({k[6]}); using the rules")
        if bad_count > len(bad_comments):
            bad_comments.append(f"{self.name}: {bad_count} comment(s) ignored in all")
        kept.sort()  # by submit time, then job id (unique): the trace's order
        t0 = kept[0][0]
        out = []
        for index in range(len(kept)):
            submit, job_id, gpus, model, cls, _, _, ran_s, gpu_model, limit, where = kept[index]
            kept[index] = ()  # dropped as it is made a TraceJob: the two are not held at once
            runtime = max(1.0, ran_s)  # whole seconds in accounting; a 0 s job still occupies a slot
            if runtime > MAX_RUNTIME_S:
                raise TraceError(f"{where}: job {job_id} ran {runtime:.0f} s, more than {MAX_RUNTIME_S:g} s")
            out.append(TraceJob(job_id=index, num_gpus=gpus, submit_time=submit - t0, iterations=runtime,
                                model=model, iter_s=1.0, perf_class=cls, gpu_model=gpu_model, time_limit_s=limit))
        self.kept = []
        warnings = [f"{self.name}: {len(out)} job(s) kept; classes from comments {classes['comment']}, rules "
                    f"{classes['rule']}, unclassed {classes['unclassed']} (simulated without variability)"]
        warnings += [f"{self.name}: skipped {v} job(s): {k}" for k, v in skipped.items() if v]
        warnings += bad_comments
        return Trace(self.name, tuple(out), tuple(warnings))


def _disorder(j: AccountingJob) -> TraceError:
    return TraceError(f"{j.where}: job {j.job_id}: times out of order (submit {j.submit:.0f}, "
                      f"start {j.start:.0f}, end {j.end:.0f})")


@functools.lru_cache(maxsize=4096)
def _comment_class(comment: str) -> tuple[bool, str | None, str | None]:
    """(whether the comment holds a `pal:` spec, its class, why it was ignored): a site's jobs
    share a few comments, parsed once each."""
    try:
        spec = parse_comment(comment)
    except CommentError as exc:
        return False, None, str(exc)
    return (True, spec.perf_class, None) if spec is not None else (False, None, None)


def load_accounting_trace(path: str | Path, rules: Sequence[ClassRule] = (), days: float | None = None) -> Trace:
    """`palctl simulate --trace sacct:FILE`: the file read a record at a time into the trace."""
    return accounting_trace(_records(path, every=False), rules, name=Path(path).stem, days=days)
