"""The sbatch lines palctl submits for a sweep, and the job id sbatch answers."""

from __future__ import annotations

import pytest

from pal_slurm.slurm.batch import BatchSubmitter, SiteOptions, parse_job_id_line, sbatch_argv
from pal_slurm.slurm.errors import SlurmParseError


def test_an_array_carries_the_sites_options_and_its_throttle():
    site = SiteOptions(partition="gpu", account="proj", time_s=5400)
    assert sbatch_argv("/d/e.sh", job_name="palctl-simulate", output="/d/logs/element-%a.out", chdir="/w",
                       site=site, array_size=6, throttle=2) == [
        "sbatch", "--parsable", "--job-name=palctl-simulate", "--output=/d/logs/element-%a.out", "--chdir=/w",
        "--partition=gpu", "--account=proj", "--time=01:30:00", "--array=0-5%2", "/d/e.sh"]


def test_the_merge_waits_for_every_element_and_is_cancelled_if_one_fails():
    argv = sbatch_argv("/d/m.sh", job_name="m", output="/d/logs/merge.out", chdir="/w", site=SiteOptions(),
                       after_ok=41)
    assert argv[-3:] == ["--dependency=afterok:41", "--kill-on-invalid-dep=yes", "/d/m.sh"]
    assert not any(a.startswith(("--array", "--partition", "--account", "--time")) for a in argv)


def test_site_time_is_slurms_duration_at_least_a_minute():
    assert SiteOptions(time_s=2 * 86400 + 30).argv() == ["--time=2-00:00:30"]
    assert SiteOptions(time_s=1).argv() == ["--time=00:01:00"]
    with pytest.raises(ValueError):
        sbatch_argv("s", job_name="j", output="o", chdir="c", site=SiteOptions(), array_size=0)


class Answers:
    def __init__(self, out):
        self.out, self.calls = out, []

    def run(self, argv, *, timeout=None):
        self.calls.append((list(argv), timeout))
        return self.out


def test_submit_reads_the_parsable_job_id():
    runner = Answers("4242;cluster\n")
    assert BatchSubmitter(runner).submit(["sbatch", "x.sh"]) == 4242
    assert runner.calls[0][1] == 60.0  # sbatch may wait on a busy slurmctld
    assert parse_job_id_line("17\n") == 17
    with pytest.raises(SlurmParseError, match="not a job id"):
        parse_job_id_line("sbatch: error: Batch job submission failed")
