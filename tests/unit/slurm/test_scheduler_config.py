"""Slurm's scheduler timing from `scontrol show config` and from SchedulerParameters alone."""

import pytest

from pal_slurm.slurm.errors import SlurmCommandMissing, SlurmParseError
from pal_slurm.slurm.scheduler_config import (DEFAULTS, default_timing, parse_scheduler_config,
                                              parse_scheduler_parameters, read_scheduler_timing)

# lines of Slurm 22.05's `scontrol show config` around the scheduler's
CONFIG = """Configuration data as of 2026-01-05T10:00:00
AccountingStorageType   = accounting_storage/slurmdbd
PriorityType            = priority/multifactor
SchedulerParameters     = bf_interval=60,bf_max_job_test=1000,bf_continue,default_queue_depth=200
SchedulerTimeSlice      = 30 sec
SchedulerType           = sched/backfill
SelectType              = select/cons_tres
"""


def test_the_site_s_settings_and_slurm_s_defaults_for_the_rest():
    t = parse_scheduler_config(CONFIG)
    assert (t.bf_interval_s, t.bf_max_job_test, t.bf_continue) == (60, 1000, True)
    assert (t.sched_interval_s, t.bf_window_min, t.bf_resolution_s) == (60, 1440, 60)  # defaults
    assert t.given == {"bf_interval", "bf_max_job_test", "bf_continue"}
    assert t.parameters == "bf_interval=60,bf_max_job_test=1000,bf_continue,default_queue_depth=200"
    assert t.backfills and t.source == "scontrol show config"
    assert t.as_dict()["bf_interval_s"] == 60


def test_no_scheduler_parameters_is_every_default():
    t = parse_scheduler_config(CONFIG.replace(
        "bf_interval=60,bf_max_job_test=1000,bf_continue,default_queue_depth=200", "(null)"))
    assert (t.bf_interval_s, t.bf_max_job_test, t.parameters, t.given) == (DEFAULTS["bf_interval"], 500, "", frozenset())
    assert default_timing("no Slurm").source == "Slurm's defaults (no Slurm)"


def test_builtin_scheduler_is_said():
    t = parse_scheduler_config(CONFIG.replace("sched/backfill", "sched/builtin"))
    assert not t.backfills and t.scheduler_type == "sched/builtin"


@pytest.mark.parametrize("bad", ["bf_interval=soon", "bf_interval=0", "bf_max_job_test=-3"])
def test_bad_values_are_errors(bad):
    with pytest.raises(SlurmParseError, match=bad.split("=")[0]):
        parse_scheduler_parameters(bad, "test")


def test_a_config_without_scheduler_type_is_an_error():
    with pytest.raises(SlurmParseError, match="SchedulerType"):
        parse_scheduler_config("Configuration data as of today\n")


class _Runner:
    def __init__(self, out=None):
        self.out, self.calls = out, []

    def run(self, argv, *, timeout=None):
        self.calls.append(list(argv))
        if self.out is None:
            raise SlurmCommandMissing("scontrol", "/nowhere")
        return self.out


def test_read_runs_scontrol_show_config():
    r = _Runner(CONFIG)
    assert read_scheduler_timing(r).bf_interval_s == 60 and r.calls == [["scontrol", "show", "config"]]
    with pytest.raises(SlurmCommandMissing):
        read_scheduler_timing(_Runner())
