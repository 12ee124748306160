"""Read the timing of Slurm's scheduler (`scontrol show config`), for a what-if at a site's timing.

What a model of stock Slurm needs from a site's slurmctld: how often the backfill scheduler
runs (`bf_interval`, the passes' period) and how deep it looks (`bf_max_job_test`), plus the
settings it does not model but states beside its answer (`sched_interval`, `bf_window`,
`bf_resolution`, `bf_continue`). They sit in `SchedulerParameters`, a comma-separated list in
which an absent key means Slurm's default; `SchedulerType` says whether there is a backfill
scheduler at all.

The parsers are pure: `parse_scheduler_config` takes the text of `scontrol show config`
(`Key = Value` lines, as `priority.config_values` reads them), `parse_scheduler_parameters`
the value of `SchedulerParameters` alone (what an administrator passes to `palctl whatif
--scheduler-parameters` where palctl cannot reach slurmctld). `read_scheduler_timing` runs the
command.
"""

from __future__ import annotations

from dataclasses import dataclass

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.priority import config_values
from pal_slurm.slurm.runner import Runner

BACKFILL = "sched/backfill"
# Slurm's defaults for what SchedulerParameters leaves out (slurm.conf(5), 22.05 to 24.11)
DEFAULTS: dict[str, int] = {
    "bf_interval": 30,  # seconds between backfill passes
    "bf_max_job_test": 500,  # jobs a backfill pass tests
    "bf_window": 1440,  # minutes ahead the backfill pass plans
    "bf_resolution": 60,  # seconds of the pass's time slots
    "sched_interval": 60,  # seconds between the main scheduler's periodic passes
}


@dataclass(frozen=True)
class SchedulerTiming:
    """The scheduler settings a what-if assumes. `source`: where they came from (`scontrol show
    config`, the command line, or Slurm's defaults); `parameters`: SchedulerParameters as given
    ("" for none); `given`: the keys the source set (the others are Slurm's defaults)."""

    scheduler_type: str
    bf_interval_s: int
    bf_max_job_test: int
    bf_window_min: int
    bf_resolution_s: int
    sched_interval_s: int
    bf_continue: bool
    parameters: str
    source: str
    given: frozenset[str] = frozenset()

    @property
    def backfills(self) -> bool:
        return self.scheduler_type == BACKFILL

    def as_dict(self) -> dict[str, object]:
        return {"scheduler_type": self.scheduler_type, "bf_interval_s": self.bf_interval_s,
                "bf_max_job_test": self.bf_max_job_test, "bf_window_min": self.bf_window_min,
                "bf_resolution_s": self.bf_resolution_s, "sched_interval_s": self.sched_interval_s,
                "bf_continue": self.bf_continue, "scheduler_parameters": self.parameters, "source": self.source,
                "given": sorted(self.given)}


def _count(key: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise SlurmParseError(f"SchedulerParameters {key}={text!r}: not an integer") from None
    if n < 0:
        raise SlurmParseError(f"SchedulerParameters {key}={text!r}: negative")
    return n


def parse_scheduler_parameters(parameters: str, source: str, scheduler_type: str = BACKFILL) -> SchedulerTiming:
    """`bf_interval=30,bf_max_job_test=1000,bf_continue` -> the timing, Slurm's default for each
    key left out. Keys this module does not read are kept in `parameters` as given."""
    text = "" if parameters.strip() in ("", "(null)") else parameters.strip()
    values: dict[str, int] = {}
    flags: set[str] = set()
    for item in (i.strip() for i in text.split(",")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if key in DEFAULTS and sep:
            values[key] = _count(key, value.strip())
        elif not sep and key:
            flags.add(key)
    v = {**DEFAULTS, **values}
    if v["bf_interval"] < 1:
        raise SlurmParseError(f"SchedulerParameters bf_interval={v['bf_interval']}: at least 1 second")
    return SchedulerTiming(scheduler_type=scheduler_type, bf_interval_s=v["bf_interval"],
                           bf_max_job_test=v["bf_max_job_test"], bf_window_min=v["bf_window"],
                           bf_resolution_s=v["bf_resolution"], sched_interval_s=v["sched_interval"],
                           bf_continue="bf_continue" in flags, parameters=text, source=source,
                           given=frozenset(values) | frozenset(flags & {"bf_continue"}))


def parse_scheduler_config(text: str, source: str = "scontrol show config") -> SchedulerTiming:
    """`scontrol show config` -> the scheduler's timing (SchedulerType, SchedulerParameters)."""
    values = config_values(text)
    if "SchedulerType" not in values:
        raise SlurmParseError("scontrol show config printed no SchedulerType")
    return parse_scheduler_parameters(values.get("SchedulerParameters", ""), source, values["SchedulerType"])


def read_scheduler_timing(runner: Runner) -> SchedulerTiming:
    """The running slurmctld's scheduler timing; a SlurmError when Slurm cannot be reached."""
    return parse_scheduler_config(runner.run(["scontrol", "show", "config"], timeout=10.0))


def default_timing(why: str) -> SchedulerTiming:
    """Slurm's defaults (sched/backfill, no SchedulerParameters), with why they are assumed."""
    return parse_scheduler_parameters("", f"Slurm's defaults ({why})")
