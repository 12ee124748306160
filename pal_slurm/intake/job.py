"""One call per source turning Slurm's job into what the engine needs: the hook's request at
submit (`from_hook`) or squeue's record of a held job (`from_queue`) -> one `Intake`, or a
`Pass` that says why pald leaves the job to Slurm. Pure.

Why one call: the submit path and the cycle must judge a job alike, and a reader should find
in one place how a job is read: its shape and GPU count (intake/tres.py), where it may run
and what it needs per node (intake/restrictions.py), the shapes pald passes or defers on
purpose (intake/refusals.py), its class and network sensitivity from the `pal:` comment, and
its time limit. Whatever the job says, the answer is a value, never an exception: input pald
does not read is a `Pass` with a reason token for `pal:pass=` and one line for the user.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple, Union

from pal_slurm.intake.refusals import JobTraits, RefusedInput, defer_reason, pass_reason
from pal_slurm.intake.restrictions import (
    HookFields,
    JobRestrictions,
    requested_partitions,
    restrictions_from_fields,
    restrictions_from_squeue,
    traits_from_fields,
)
from pal_slurm.intake.tres import gpu_count
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.site_rules import NO_RULES, SiteRules
from pal_slurm.model.comment_grammar import (
    DEFAULT_ON_CLASS,
    CommentError,
    CommentSpec,
    opted_out,
    parse_comment,
    verify_spec,
)
from pal_slurm.model.modes import DefaultOn
from pal_slurm.model.network import MAX_DECLARED_FACTOR, is_known_sensitivity
from pal_slurm.model.decision import JobId
from pal_slurm.model.job import JobRequest
from pal_slurm.model.shape import JobShape, ShapeError, job_shape
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.readers import JobInfo

DEFAULT_NET = "medium"  # network sensitivity of a job whose comment has no net=
USER_LINE_CHARS = 200  # a warning written back to the user


class Intake(NamedTuple):
    """A job as the engine takes it. Immutable; a named tuple rather than a frozen dataclass
    because the cycle builds one per held job each pass (three times cheaper to build)."""

    key: JobId  # the job's key: pald's request key at submit, the job id in the queue
    shape: JobShape
    restrictions: JobRestrictions  # where it may run and what it needs per node
    traits: JobTraits
    spec: CommentSpec | None  # its `pal:` comment (None: no spec)
    perf_class: str  # its application's variability class (the default for an unknown one)
    warning: str | None  # for the user: an unknown class or network sensitivity
    time_limit_s: float | None  # None: not given (the partition's default)
    request: JobRequest  # the engine's job: waiting since it was submitted
    deferred: str | None = None  # why pald always defers it to its cycle (an array), or None
    notice: str | None = None  # for the user, before any other warning: what the site's rules changed

    @property
    def gpus(self) -> int:
        return self.shape.total

    @property
    def net(self) -> str:
        """Its network sensitivity as the engine reads it (lower case; the default when unset)."""
        return self.request.net_sensitivity


@dataclass(frozen=True)
class Pass:
    """pald leaves the job to Slurm: `reason` is the `pal:pass=` token; `perf_class` and
    `warning` as far as they were read ("?" when the comment itself did not parse)."""

    reason: str
    perf_class: str = "?"
    warning: str | None = None
    notice: str | None = None  # as Intake.notice
    refused_spec: bool = False  # the `pal:` spec itself is refused: pald reads nothing else of the job


@dataclass(frozen=True)
class SubmitRules:
    """What pald's own configuration says of a job at submit: the partitions that are
    default-on, the site's rules (class, network sensitivity, who may ask `mode=now`) and the
    class of a job they give none."""

    default_on: DefaultOn = DefaultOn()
    site: SiteRules = NO_RULES
    default_class: str = "A"


Read = Union[Intake, Pass]


def _request(job_id: JobId, shape: JobShape, perf_class: str, spec: CommentSpec | None, submitted: float,
             time_limit_s: float | None) -> JobRequest:
    """The engine's view of a Slurm job that waits (submitted at `submitted`)."""
    return JobRequest(
        job_id=job_id, num_gpus=shape.total, shape=shape, perf_class=perf_class,
        app=spec.perf_class if spec else "", submit_time=submitted, waiting_since=submitted,
        remaining_time=time_limit_s or 0.0, net_sensitivity=((spec.net if spec else None) or DEFAULT_NET).lower(),
    )


def class_of(classes: AppClassMap, app: str) -> tuple[str, str | None]:
    """(class, warning for the user or None) of an application name."""
    cls, known = classes.lookup(app)
    if known:
        return cls, None
    return cls, (f"pal: unknown class '{app}', placed as class {cls} (most variability-sensitive); "
                 f"ask your admin to add it (palctl classes add)")


def unknown_net_warning(net: str | None) -> str | None:
    """The user's warning for a `net=` that is neither a class nor a spread factor (placed as the
    most sensitive: spreading it is what could cost it most), None when it is fine or absent."""
    if net is None or is_known_sensitivity(net.lower()):
        return None
    return (f"pal: unknown network sensitivity '{net}', placed as high; give low, medium, high or "
            f"the factor your job runs slower at over two racks (e.g. net=2.2, 1 to {MAX_DECLARED_FACTOR:g})")


def submit_shape(job: HookFields, spec: CommentSpec | None) -> JobShape:
    """The shape of a job at submit time (the hook's fields, `gpus=` from the comment)."""
    return job_shape(
        gpus_per_node=job.gpus_per_node or gpu_count(job.tres_per_node),
        gpus_per_job=job.gpus_per_job or gpu_count(job.tres_per_job),
        nodes=job.min_nodes,
        comment_gpus=spec.gpus if spec else None,
    )


def held_shape(job: JobInfo, spec: CommentSpec | None) -> JobShape:
    """The shape of a job squeue shows: the same parser as at submit time."""
    return _squeue_shape(job.tres_per_node, job.tres_per_job, job.node_count, spec.gpus if spec else None)


@functools.lru_cache(maxsize=1024)
def _squeue_shape(tres_per_node: str, tres_per_job: str, node_count: int, comment_gpus: int | None) -> JobShape:
    """Memoised on the strings (a pure parse; thousands of held jobs share a few shapes)."""
    return job_shape(gpus_per_node=gpu_count(tres_per_node), gpus_per_job=gpu_count(tres_per_job),
                     nodes=node_count, comment_gpus=comment_gpus)


def partitions_of(job: HookFields, default_partition: str | None) -> tuple[str, ...]:
    """The partitions the job may run in: its `--partition` list, else Slurm's default
    partition (None: unknown)."""
    names = requested_partitions(job.partition)
    if not names and default_partition is not None:
        names = (default_partition,)
    return names


def ruled_spec(job: HookFields, spec: CommentSpec, partitions: tuple[str, ...],
               rules: SubmitRules) -> tuple[CommentSpec, str | None]:
    """The hook's spec as pald takes it, and a notice for the user (or None). The hook's parse
    must be what the raw comment says; a job of a default-on partition (no `pal:` spec,
    DEFAULT_ON_CLASS) is PAL's only where pald's own list makes its partitions default-on and
    its user did not write `pal:off` (CommentError otherwise: the job passes). The site's rules
    then give the class and network sensitivity (over the user's where they override), and a
    `mode=now` the site does not allow this job is dropped."""
    if spec.perf_class != DEFAULT_ON_CLASS:
        verify_spec(job.comment, spec)
    elif parse_comment(job.comment) is not None or opted_out(job.comment):
        raise CommentError("mismatch", "the hook sent no pal: spec, but the comment holds one")
    elif not rules.default_on.covers(partitions):
        raise CommentError("not_default_on", f"partitions {','.join(partitions) or '(default)'} are not "
                           "default-on in pald's configuration ([daemon] default_on)")
    asked = None if spec.perf_class == DEFAULT_ON_CLASS else spec.perf_class
    notice = None
    mode = spec.mode
    if mode == "now" and not rules.site.now.allows(job):
        mode = None
        notice = ("pal: mode=now is not allowed for this job's account or QOS at this site; "
                  "it waits its turn as mode=auto")
    ruled = replace(spec, perf_class=rules.site.class_for(job, asked) or rules.default_class,
                    net=rules.site.net_for(job, spec.net), mode=mode)
    return (spec if ruled == spec else ruled), notice


def from_hook(job: HookFields, spec: CommentSpec | None, key: str, now: float, classes: AppClassMap,
              partitions: tuple[str, ...] = (), rules: SubmitRules | None = None) -> Read:
    """The hook's request (`spec`: its `pal:` comment as the protocol read it) at `now`, for
    a job that may run in `partitions`. With `rules` (pald's) the spec is checked and ruled
    first (`ruled_spec`); a refused one is a Pass with `refused_spec`. Without, it is taken
    as given (a caller that built it itself)."""
    notice = None
    if rules is not None and spec is not None:
        try:
            spec, notice = ruled_spec(job, spec, partitions, rules)
        except CommentError as exc:
            return Pass(f"bad_comment:{exc.code}", warning=f"pald ignored the pal: spec: {exc.message}",
                        refused_spec=True)
    perf_class, warning = class_of(classes, spec.perf_class if spec else "unknown")
    net_warning = unknown_net_warning(spec.net if spec else None)
    if net_warning:
        warning = f"{warning}; {net_warning}" if warning else net_warning
    traits = traits_from_fields(job, now)
    passing = pass_reason(traits)
    if passing:
        return Pass(passing, perf_class, warning, notice)
    try:
        shape = submit_shape(job, spec)
    except ShapeError as exc:
        return Pass(str(exc), perf_class, warning, notice)
    try:
        restrictions = restrictions_from_fields(job, shape.nodes, shape.per_node or 1)
    except RefusedInput as exc:
        return Pass(exc.reason, perf_class, f"PAL leaves this job to Slurm: {exc.detail}"[:USER_LINE_CHARS], notice)
    limit_s = job.time_limit * 60.0 if job.time_limit else None
    return Intake(key, shape, restrictions, traits, spec, perf_class, warning, limit_s,
                  _request(key, shape, perf_class, spec, now, limit_s), defer_reason(traits), notice)


_MEMO_CHARS = 256  # longer comments (user text) are parsed every time, never kept


def _comment(text: str) -> CommentSpec | None | CommentError:
    """A held or running job's comment, read once when short (such jobs share few comments)."""
    return _memo_comment(text) if len(text) <= _MEMO_CHARS else _read_comment(text)


def _read_comment(text: str) -> CommentSpec | None | CommentError:
    try:
        return parse_comment(text)
    except CommentError as exc:
        return exc


_memo_comment = functools.lru_cache(maxsize=1024)(_read_comment)


_JUDGED_AT_SUBMIT = JobTraits()  # a held job's traits: the hook judged them


def running_class(comment: str, classes: AppClassMap) -> tuple[str, str, str]:
    """(application, class, network sensitivity) of a running job from its comment, for a
    placement that plans around running jobs: a comment that does not parse reads as none."""
    spec = _comment(comment)
    if isinstance(spec, CommentError):
        spec = None
    app = spec.perf_class if spec else "unknown"
    return app if spec else "", class_of(classes, app)[0], ((spec.net if spec else None) or DEFAULT_NET).lower()


def from_queue(job: JobInfo, classes: AppClassMap, site: SiteRules = NO_RULES) -> Read:
    """squeue's record of a held job, as the cycle judges where it may run (a record with a
    pin pald itself wrote dropped first: intake/held.placement_record). Its user, array and
    hold traits were judged at submit. Its class and network sensitivity follow the site's
    rules as they did at submit (a default-on partition's job, with no `pal:` spec, has its
    class from them)."""
    if job.unreadable:  # Slurm's record of it did not parse: fail open
        return Pass("unreadable_record")
    spec = _comment(job.comment)
    if isinstance(spec, CommentError):
        return Pass(f"bad_comment:{spec}")
    if spec is not None:
        spec = replace(spec, net=site.net_for(job, spec.net))
    perf_class, warning = class_of(classes, site.class_for(job, spec.perf_class if spec else None) or "unknown")
    try:
        shape = _squeue_shape(job.tres_per_node, job.tres_per_job, job.node_count, spec.gpus if spec else None)
    except ShapeError as exc:
        return Pass(str(exc), perf_class, warning)
    try:
        restrictions = restrictions_from_squeue(job, shape.nodes, shape.per_node or 1)
    except RefusedInput as exc:
        return Pass(exc.reason, perf_class, warning)
    except SlurmError:
        return Pass("bad_nodelist", perf_class, warning)
    return Intake(job.job_id, shape, restrictions, _JUDGED_AT_SUBMIT, spec, perf_class, warning, job.time_limit_s,
                  _request(job.job_id, shape, perf_class, spec, float(job.submit_time), job.time_limit_s))
