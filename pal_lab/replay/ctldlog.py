"""slurmctld's log: when Slurm started and ended each job, to the millisecond, and the clock of
its scheduling passes (pure parsing).

Slurm's job records (jobcomp) keep whole seconds, and a replay compresses time (one wall second
is `scale` trace seconds), so the instant a job was started comes from the log line of the
scheduler that started it, stamped in milliseconds (LogTimeFormat's default, iso8601_ms):

    [2026-11-24T05:47:11.022] sched/backfill: _start_job: Started JobId=1 in gpu on gpu01
    [2026-11-24T05:50:52.004] sched: Allocate JobId=8 NodeList=gpu[13-16] #CPUs=4 Partition=gpu

and the instant it ended (its GPUs free for the next pass) from slurmctld's completion:

    [2026-11-24T05:47:11.500] _job_complete: JobId=1 done

(the same on Slurm 22.05 to 25.11). Slurm 26.05 logs a backfill start only under
`DebugFlags=HetJob`, at the verbose level, with the flag's name before it:

    [2026-11-24T05:47:11.022] sched/backfill: _start_job: HETJOB: Started JobId=1 in gpu on gpu01

so a replay's lab sets both (`replay.harness`), on every release. Times are the host's local
time, like jobcomp's.

The backfill pass runs every `bf_interval` seconds from slurmctld's start, plus the pass's own
time, so its phase against a replay's first submission is a draw of the lab, not of the trace:
on the replay's labs nearly every job starts at such a pass, and a trace whose first jobs come
in one burst waits up to a whole interval more or less depending on it (workload-1, 40 jobs:
the model's avg JCT moved 6% with the phase). `pass_clock` reads the phase and the period
from the passes that started jobs, so the prediction can run the passes the lab ran, and how
far each pass fell from that clock (`PassClock.jitter_s`), so it can run the phases the lab
can have and no others (`replay.predict.pass_phases`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import datetime

_START = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] "
                    r"(?:sched/backfill: _start_job: (?:HETJOB: )?Started JobId=(\d+)|sched: Allocate JobId=(\d+))")
_DONE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] _job_complete: JobId=(\d+) done")


def slurm_starts(text: str) -> dict[int, tuple[float, str]]:
    """{job id: (epoch seconds, "backfill" | "main")}: when and by which scheduler Slurm
    started each job (its first start: a requeued job keeps its first)."""
    out: dict[int, tuple[float, str]] = {}
    for line in text.splitlines():
        m = _START.match(line)
        if not m:
            continue
        job_id = int(m.group(2) or m.group(3))
        out.setdefault(job_id, (datetime.fromisoformat(m.group(1)).timestamp(),
                                "backfill" if m.group(2) else "main"))
    return out


def slurm_ends(text: str) -> dict[int, float]:
    """{job id: epoch seconds}: when slurmctld completed each job (its GPUs free for the next
    pass; the last completion counts: a requeued job ends once more)."""
    out: dict[int, float] = {}
    for line in text.splitlines():
        m = _DONE.match(line)
        if m:
            out[int(m.group(2))] = datetime.fromisoformat(m.group(1)).timestamp()
    return out


@dataclass(frozen=True)
class PassClock:
    """A scheduler that acts on a period, as a lab ran it, in wall seconds: one tick at `phase_s`
    after the replay's first submission and every `period_s` after (and before) it. Slurm's
    backfill passes (`pass_clock`) and pald's cycle (`replay.harness.pald_clock`). `view_age_s`:
    how old what it acts on is at each tick (pald decides on a read of Slurm made that long
    before; Slurm's pass reads its own state, 0). `jitter_s`: how far each observed tick fell
    from the clock (its time less the nearest of phase + k x period, sorted; empty: not
    observed), the spread of phases the clock had while the lab ran."""

    phase_s: float
    period_s: float
    view_age_s: float = 0.0
    jitter_s: tuple[float, ...] = ()

    def jitter_quantile(self, q: float) -> float:
        """The offset from the clock below which a fraction `q` (0..1) of the observed ticks
        fell (0.0 when none was observed)."""
        if not self.jitter_s:
            return 0.0
        return self.jitter_s[min(len(self.jitter_s) - 1, max(0, math.floor(q * len(self.jitter_s))))]


SAME_PASS_S = 0.05  # starts this close together came from one pass (a pass starts jobs in ms)


def pass_clock(starts: dict[int, tuple[float, str]], t0: float, interval_s: float) -> PassClock | None:
    """The clock of the backfill passes that started jobs (`slurm_starts`), against `t0` (the
    first submission, epoch seconds); `interval_s` is the configured bf_interval, the period's
    first guess. The period is fitted to the passes (least squares through the first pass, in
    time order: bf_interval plus each pass's own milliseconds); None when fewer than two passes
    started jobs (then nothing says the period). A group of starts nearer the tick already counted
    than the next one is that pass running long (its starts spread past SAME_PASS_S on a loaded
    host, seen on CI): it is not a tick of its own, or it would pull the period below bf_interval. Its `jitter_s` is each pass's offset from the
    fitted clock: with few jobs pending (a pald arm: pald holds the rest) a pass takes
    milliseconds and the passes stay within ~0.03 s of the clock through a 20-minute replay;
    with a long queue (stock Slurm) a pass's own time pushes the next one and the offsets
    spread over the whole interval (workload-1/-3/-4 at 160 jobs)."""
    passes = _passes(starts)
    if len(passes) < 2:
        return None
    period, k, cd, cc = float(interval_s), 0, 0.0, 0.0
    for p in passes[1:]:  # in order: a pass's interval count is read with the period fitted so far
        d = p - passes[0]
        n = round(d / period)
        if n <= k:
            continue  # nearer the tick already counted than the next: that pass ran long (a loaded host)
        k = n
        cd, cc = cd + k * d, cc + k * k
        period = cd / cc
    if cc == 0.0:
        return None
    clock = PassClock(phase_s=(passes[0] - t0) % period, period_s=period)
    return replace(clock, jitter_s=tuple(sorted(offset for _, offset in pass_offsets(starts, t0, clock))))


def pass_offsets(starts: dict[int, tuple[float, str]], t0: float, clock: PassClock) -> list[tuple[float, float]]:
    """(wall s after `t0`, offset from `clock` in s) of each backfill pass that started jobs, in
    time order: where the passes fell as the replay went on. The jitter a `PassClock` keeps is
    these offsets sorted, which loses when each fell; on workload-1 seed 0 (160 jobs, a pald
    arm) they drift: +21 ms median over the first 100 wall s, +28 ms over the
    next 100, then a few passes tens of ms early, so the phase at one race is not the clock's."""
    out = []
    for p in _passes(starts):
        x = p - t0 - clock.phase_s
        out.append((p - t0, x - round(x / clock.period_s) * clock.period_s))
    return out


def _passes(starts: dict[int, tuple[float, str]]) -> list[float]:
    """The instants of the backfill passes that started jobs (one per group of starts closer
    than SAME_PASS_S), in time order."""
    passes: list[float] = []
    for t in sorted(t for t, by in starts.values() if by == "backfill"):
        if not passes or t - passes[-1] > SAME_PASS_S:
            passes.append(t)
    return passes
