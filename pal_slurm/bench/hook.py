"""What the prolog and epilog share: find the job's GPUs, measure, deliver or spool, never fail.

Slurm drains a node whose prolog exits non-zero, so `run_bounded` catches everything and always
returns 0, and the work runs in a daemon thread with a deadline (profiling.timeout_s, default
5 s): a hung driver call cannot hold the job. Samples go to the repository (the store, or pald
with `[samples] send = "pald"`: bench/handoff.py); when it is unreachable they are appended to the local spool (profiling.spool_dir); when even that fails
(missing directory, read-only, full disk) a log line says so and the hook still exits 0.

The store gets what is left of the deadline minus `SPOOL_RESERVE_S`, not more: a store that
accepts TCP and never answers used to eat the whole deadline and the samples with it. A store
call still running when its time is up is abandoned (the process exits right after) and the
samples are spooled; in the rare case that call commits in its last moment, the samples are
stored twice (a duplicate sample moves no median), never lost.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from pal_slurm.bench import spool
from pal_slurm.bench.base import Backend, GpuTarget, Sample, SampleSink
from pal_slurm.bench.busy import BusyProbe, flag_busy
from pal_slurm.bench.gpuset import HeldGpus, class_from_comment, held_gpus
from pal_slurm.bench.settings import ProfilingSettings, load_settings
from pal_slurm.model.classes import AppClassMap
from pal_slurm.slurm.readers import JobInfo

log = logging.getLogger("pal.hook")


# Slurm runs prologs with no PATH: look for scontrol where Debian and source builds put it.
_SLURM_PATH = "/usr/bin:/usr/local/bin:/usr/sbin:/bin"


def scontrol_show_job(job_id: str, timeout_s: float) -> str:
    """`scontrol show job -d <id>` output ('' when it fails), for a job's own payload
    (pal_lab.replay.payload); the hooks read `squeue_job` (see pal_slurm.bench.gpuset)."""
    from pal_slurm.slurm.errors import SlurmError
    from pal_slurm.slurm.runner import CommandRunner

    path = os.environ.get("PATH") or _SLURM_PATH
    try:
        return CommandRunner(env={"PATH": path}, timeout=timeout_s).run(["scontrol", "show", "job", "-d", str(job_id)])
    except SlurmError as exc:
        log.warning("scontrol show job %s failed (%s)", job_id, exc)
        return ""


def squeue_job(job_id: str, timeout_s: float) -> JobInfo | None:
    """The job's `squeue --json` record in this Slurm release's dialect; None when Slurm
    cannot be asked, prints no record of it, or prints JSON that does not parse."""
    from pal_slurm.slurm.dialects import detect
    from pal_slurm.slurm.errors import SlurmError
    from pal_slurm.slurm.readers import parse_squeue
    from pal_slurm.slurm.runner import CommandRunner

    runner = CommandRunner(env={"PATH": os.environ.get("PATH") or _SLURM_PATH}, timeout=timeout_s)
    try:
        dialect = detect(runner)
        jobs = parse_squeue(runner.run(dialect.job_argv(job_id)), dialect)
    except SlurmError as exc:
        log.warning("squeue --json for job %s failed (%s)", job_id, exc)
        return None
    return next((j for j in jobs if str(j.job_id) == str(job_id)), None)


@dataclass
class HookContext:
    """Everything a hook touches from outside, injectable for tests."""

    env: Mapping[str, str]
    settings: ProfilingSettings
    read_job: Callable[[str, float], JobInfo | None] = squeue_job
    backend: Callable[[ProfilingSettings, str], Backend] | None = None
    sink: Callable[[ProfilingSettings], SampleSink] | None = None
    busy: BusyProbe | None = None
    clock: Callable[[], float] = time.time
    deadline: float | None = None  # time.monotonic() by which the hook must be done (run_script)

    @property
    def job_id(self) -> str:
        return self.env.get("SLURM_JOB_ID") or self.env.get("SLURM_JOBID") or ""

    @property
    def node(self) -> str:
        return self.env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _default_backend(settings: ProfilingSettings, job_id: str) -> Backend:
    from pal_slurm.bench.select import select_backend

    return select_backend(settings.backend, seed=settings.replay_seed, nonce=job_id or None,
                          replay_slowdown=settings.replay_slowdown, replay_cluster=settings.replay_cluster)


def _default_sink(settings: ProfilingSettings) -> SampleSink:
    from pal_slurm.bench.repository import open_sink

    return open_sink(settings)  # the store, or pald ([samples] send)


def job_gpus(ctx: HookContext) -> tuple[HeldGpus, JobInfo | None]:
    """(the GPUs the job held on this node, its Slurm record) - `gpuset.held_gpus` on the
    job's `squeue --json` record and slurmd's environment; no GPUs when they cannot be told."""
    left = ctx.settings.timeout_s if ctx.deadline is None else ctx.deadline - time.monotonic()
    job = ctx.read_job(ctx.job_id, max(0.1, min(2.0, left / 2))) if ctx.job_id else None
    return held_gpus(job, ctx.node, ctx.env), job


def no_gpus_line(what: str, ctx: HookContext, held: HeldGpus) -> None:
    """The one log line of a hook that measures nothing, saying why."""
    if held.known:
        log.info("%s job %s on %s: no GPUs allocated here", what, ctx.job_id, ctx.node)
    else:
        log.warning("%s job %s on %s: measuring nothing, its GPUs cannot be told: %s",
                    what, ctx.job_id, ctx.node, held.source)


PROFILE_MARK = "pal:profile"  # comment of palctl profile-nodes' own benchmark jobs


def job_comment(ctx: HookContext, job: JobInfo | None) -> str | None:
    """The job's --comment: slurmd's SLURM_JOB_COMMENT where it sets it, else the job's Slurm
    record's (Slurm 22.05 gives the prolog and epilog no SLURM_JOB_COMMENT)."""
    comment = ctx.env.get("SLURM_JOB_COMMENT")
    return comment if comment is not None else (job.comment if job is not None else None)


def is_profile_job(comment: str | None) -> bool:
    """palctl profile-nodes' jobs measure their GPUs themselves: the hooks leave them alone."""
    return PROFILE_MARK in (comment or "")


def job_class(ctx: HookContext, comment: str | None) -> str:
    name = class_from_comment(comment, ctx.settings.default_class)
    return AppClassMap(default=ctx.settings.default_class).class_of(name)


#: of the hook's deadline, kept after measuring for the store (and the spool behind it)
STORE_RESERVE_S = 1.5


def measuring_time(ctx: HookContext, now: float) -> float:
    """profiling.duration_s, cut to what the deadline leaves once the store has its share.

    Why: a backend's start is not part of duration_s (on an H200, importing torch and starting
    CUDA took ~3 s of the default 5), so a full-length measurement could leave the store too
    little time and the samples went to the spool.
    """
    want = ctx.settings.duration_s
    if ctx.deadline is None:
        return want
    return max(0.0, min(want, ctx.deadline - now - STORE_RESERVE_S))


def measure(ctx: HookContext, gpus: Sequence[int], perf_class: str) -> list[Sample]:
    targets = [GpuTarget(ctx.node, slot) for slot in gpus]
    started = time.monotonic()
    backend = (ctx.backend or _default_backend)(ctx.settings, ctx.job_id)
    backend.prepare(targets)
    ready = time.monotonic()
    duration = measuring_time(ctx, ready)
    samples = backend.sample(targets, perf_class, duration)
    log.info("%s backend ready in %.2f s, measured %d GPU(s) in %.2f s%s", backend.name, ready - started,
             len(targets), time.monotonic() - ready,
             "" if duration >= ctx.settings.duration_s else
             f" (for {duration:.2f} s, not duration_s {ctx.settings.duration_s:g}: the deadline)")
    if backend.name != "replay":  # replayed runs are not disturbed by this host's load
        probe = ctx.busy or BusyProbe(max_load_per_cpu=ctx.settings.max_load_per_cpu)
        samples = flag_busy(samples, probe.host_reason())
    return [replace(s, job_id=ctx.job_id or None) for s in samples]


SPOOL_RESERVE_S = 0.5  # of the hook's deadline, kept for spooling when the store is slow


def deliver(ctx: HookContext, samples: Sequence[Sample]) -> str:
    """Send to the repository within the time left, else spool. Returns 'stored', 'spooled'
    or 'lost' (logged)."""
    if not samples:
        return "stored"
    store_by = None if ctx.deadline is None else ctx.deadline - SPOOL_RESERVE_S
    stored = threading.Event()
    failure: list[BaseException] = []

    def store() -> None:
        sink = None
        try:
            sink = (ctx.sink or _default_sink)(ctx.settings)
            sink.add_samples(samples)
            stored.set()
            _drain_spool(ctx, sink)
        except BaseException as exc:  # noqa: BLE001 - any store failure means "spool it"
            failure.append(exc)
        finally:
            _close(sink)

    worker = threading.Thread(target=store, name="pal-store", daemon=True)
    started = time.monotonic()
    worker.start()
    while worker.is_alive() and not stored.is_set():
        left = None if store_by is None else store_by - time.monotonic()
        if left is not None and left <= 0:
            break  # out of time: abandon the store call, spool
        stored.wait(0.05 if left is None else min(0.05, left))
    if stored.is_set():
        log.info("stored %d sample(s) in %.2f s", len(samples), time.monotonic() - started)
        if ctx.deadline is not None:  # let the spool drain finish while there is time
            worker.join(max(0.0, ctx.deadline - time.monotonic() - 0.1))
        return "stored"
    why = str(failure[0]) if failure else f"no answer in {time.monotonic() - started:.1f} s"
    return _spool(ctx, samples, why)


def _spool(ctx: HookContext, samples: Sequence[Sample], why: str) -> str:
    log.warning("store unreachable (%s); spooling %d sample(s)", why, len(samples))
    try:
        spool.append(ctx.settings.spool_dir, samples)
        return "spooled"
    except OSError as exc:
        log.error(
            "cannot spool %d sample(s) to %s: %s; samples lost",
            len(samples), ctx.settings.spool_dir, exc.strerror or exc,
        )
        return "lost"


def _close(sink: SampleSink | None) -> None:
    close = getattr(sink, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - closing must not fail the hook
            pass


def _drain_spool(ctx: HookContext, sink: SampleSink) -> None:
    try:  # the store is back: send what waited in the spool
        if spool.pending(ctx.settings.spool_dir):
            report = spool.drain(sink, ctx.settings.spool_dir)
            if report.busy:
                log.info("another hook is draining the spool")
                return
            log.info("drained %d spooled sample(s)", report.delivered)
            for bad in report.corrupt:
                log.warning("corrupt spool line skipped: %s", bad)
    except Exception as exc:  # noqa: BLE001 - leave the spool for next time
        log.warning("spool drain failed: %s", exc)


def run_bounded(work: Callable[[], object], timeout_s: float, what: str) -> int:
    """Run `work` in a daemon thread; give up after timeout_s. Always 0."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - a hook must never fail the node
            errors.append(exc)

    t = threading.Thread(target=target, name=f"pal-{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        log.error("%s: gave up after %.1f s (its time limit); nothing recorded", what, timeout_s)
    elif errors:
        log.error("%s failed: %s: %s", what, type(errors[0]).__name__, errors[0])
    return 0


def run_script(record: Callable[["HookContext"], object], what: str,
               env: Mapping[str, str] | None = None, ctx: "HookContext | None" = None,
               limit_s: Callable[[ProfilingSettings], float] | None = None,
               started: float | None = None) -> int:
    """The prolog/epilog entry point: set up, run `record` under the time bound, exit 0 always
    (a non-zero prolog drains the node and requeues the job held).

    The bound is `limit_s(settings)` (default `timeout_s`) counted from `started` (the
    process's time.monotonic() at its start: what the hook adds to the job), else from now."""
    try:
        setup_logging()
        ctx = ctx or make_context(env)
        limit = (limit_s or (lambda s: s.timeout_s))(ctx.settings)
        ctx.deadline = (time.monotonic() if started is None else started) + limit
        return run_bounded(lambda: record(ctx), max(0.0, ctx.deadline - time.monotonic()), what)
    except BaseException as exc:  # noqa: BLE001 - never drain the node
        log.error("%s failed before starting: %s", what, exc)
        return 0


def setup_logging() -> None:
    """stderr (kept by slurmd only at debug levels) and syslog (daemon facility) when present."""
    if log.handlers:
        return
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    if os.path.exists("/dev/log"):
        try:
            from logging.handlers import SysLogHandler

            sh = SysLogHandler(address="/dev/log", facility=SysLogHandler.LOG_DAEMON)
            sh.setFormatter(logging.Formatter("pal-hook[%(process)d]: %(levelname)s %(message)s"))
            log.addHandler(sh)
        except OSError:
            pass  # no syslog daemon listening: stderr only


def make_context(env: Mapping[str, str] | None, **overrides: Any) -> HookContext:
    env = dict(os.environ if env is None else env)
    try:
        settings = load_settings(env=env)
    except Exception as exc:  # noqa: BLE001 - a bad config must not drain nodes
        log.error("bad profiling settings (%s); using defaults", exc)
        settings = ProfilingSettings()
    return HookContext(env=env, settings=overrides.pop("settings", settings), **overrides)
