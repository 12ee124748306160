"""Reading the inputs of Slurm's multifactor priority (scontrol, sshare, sacctmgr text)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from pal_slurm.model.priority import priority
from pal_slurm.slurm.errors import SlurmCommandFailed, SlurmParseError
from pal_slurm.slurm.priority import (
    config_values,
    parse_assoc_priority,
    parse_partition_priority,
    parse_priority_config,
    parse_qos,
    parse_sshare,
    priority_job,
    read_site_priority,
)
from pal_slurm.slurm.readers import parse_job, parse_sinfo

DATA = Path(__file__).parent / "data"

# as `scontrol show config` prints them (Slurm 22.05 and 24.11 alike)
CONFIG = """Configuration data as of 2026-01-01T00:00:00
PriorityParameters      = (null)
PrioritySiteFactorParameters = (null)
PrioritySiteFactorPlugin = (null)
PriorityDecayHalfLife   = 7-00:00:00
PriorityCalcPeriod      = 00:05:00
PriorityFavorSmall      = No
PriorityFlags           = SMALL_RELATIVE_TO_TIME,ACCRUE_ALWAYS
PriorityMaxAge          = 1-00:00:00
PriorityUsageResetPeriod = NONE
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightAssoc     = 0
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 500
PriorityWeightPartition = 2000
PriorityWeightQOS       = 3000
PriorityWeightTRES      = CPU=1000,Mem=2000,GRES/gpu=3000
"""

# `sshare -P -a` (Slurm 22.05, classic fair share): accounts indented by depth
SSHARE = """Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare
root|||0.000000|3600||1.000000
 heavy||1|0.500000|3600|1.000000|0.250000
  heavy|ana|1|1.000000|3600|1.000000|0.250000
 light||1|0.500000|0|0.000000|1.000000
  light|bob|1|1.000000|0|0.000000|1.000000
"""

# `sshare -P -a` under Fair Tree (Slurm 24.11): accounts carry no FairShare, users do
SSHARE_FAIR_TREE = """Account|User|RawShares|NormShares|RawUsage|EffectvUsage|LevelFS|FairShare
root||||3600|||
 heavy||1|0.500000|3600|1.000000|0.500000|
  heavy|ana|1|1.000000|3600|1.000000|1.000000|0.500000
 light||1|0.500000|0|0.000000|inf|
  light|bob|1|1.000000|0|0.000000|inf|1.000000
"""


def test_config_values_skip_the_banner() -> None:
    values = config_values(CONFIG)
    assert values["PriorityType"] == "priority/multifactor" and "Configuration data as of 2026" not in values


def test_priority_config() -> None:
    w = parse_priority_config(CONFIG)
    assert w is not None
    assert (w.age, w.assoc, w.fairshare, w.job_size, w.partition, w.qos) == (1000, 0, 10000, 500, 2000, 3000)
    assert w.max_age_s == 86400 and not w.favor_small
    assert w.flags == {"SMALL_RELATIVE_TO_TIME", "ACCRUE_ALWAYS"}
    assert w.tres == {"cpu": 1000, "mem": 2000, "gres/gpu": 3000}


def test_basic_priority_has_nothing_to_compute() -> None:
    assert parse_priority_config("PriorityType            = priority/basic\n") is None


def test_unset_flags_and_tres() -> None:
    w = parse_priority_config("PriorityType = priority/multifactor\nPriorityFlags =\nPriorityWeightTRES = (null)\n"
                              "PriorityFavorSmall = Yes\n")
    assert w is not None and w.flags == frozenset() and w.tres == {} and w.favor_small
    assert w.max_age_s == 7 * 86400  # Slurm's default PriorityMaxAge


def test_bad_weight_is_a_parse_error() -> None:
    with pytest.raises(SlurmParseError):
        parse_priority_config("PriorityType = priority/multifactor\nPriorityWeightAge = lots\n")


@pytest.mark.parametrize("text", [SSHARE, SSHARE_FAIR_TREE])
def test_sshare_both_algorithms(text: str) -> None:
    shares = parse_sshare(text)
    assert shares[("light", "bob")] == 1.0
    assert shares[("heavy", "ana")] in (0.25, 0.5)
    if text is SSHARE_FAIR_TREE:
        assert ("heavy", "") not in shares  # Fair Tree prints no factor for an account
    else:
        assert shares[("heavy", "")] == 0.25


def test_sshare_without_its_header() -> None:
    with pytest.raises(SlurmParseError):
        parse_sshare("root|||0.0|0||1.0\n")


def test_qos_and_assoc() -> None:
    assert parse_qos("normal|0\nhigh|100\nscavenger|\n") == {"normal": 0, "high": 100, "scavenger": 0}
    assert parse_assoc_priority("heavy|ana|5\nlight|bob|\nlight||2\n") == {("heavy", "ana"): 5, ("light", ""): 2}


def test_partition_priority() -> None:
    parts = parse_partition_priority((DATA / "scontrol_partitions.txt").read_text())
    assert parts["gpu"].job_factor == 1 and parts["gpu"].max_time_min is None
    assert parts["two"].max_time_min == 60
    assert parts["gpu"].tres["cpu"] == 64 and parts["gpu"].tres["mem"] == 16000 and parts["gpu"].tres["node"] == 4


class ScriptedRunner:
    def __init__(self, outputs: dict[str, str], failing: Sequence[str] = ()) -> None:
        self.outputs, self.failing = outputs, failing
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> str:
        self.calls.append(list(argv))
        if argv[0] in self.failing:
            raise SlurmCommandFailed(list(argv), 1, "Problem talking to the database")
        return self.outputs[" ".join(argv)]


OUTPUTS = {
    "scontrol show config": CONFIG,
    "scontrol -o show partition": (DATA / "scontrol_partitions.txt").read_text(),
    "sshare -P -a": SSHARE,
    "sacctmgr -P -n show qos format=name,priority": "normal|0\nhigh|100\n",
}


def test_read_site_priority_and_a_job_scored_by_it() -> None:
    runner = ScriptedRunner(OUTPUTS)
    nodes = parse_sinfo((DATA / "sinfo_site.json").read_text())
    read = read_site_priority(runner, nodes)
    assert read is not None and read.missing == {}
    assert ["sacctmgr", "-P", "-n", "show", "assoc", "format=account,user,priority"] not in runner.calls  # weight 0
    site = read.site
    assert (site.cluster_cpus, site.node_count) == (64, 4)  # drained gpu02 counts, as in slurmctld
    job = priority_job(parse_job({
        "job_id": 7, "user_name": "ana", "account": "heavy", "qos": "high", "partition": "gpu,one", "cpus": 8,
        "node_count": 1, "time_limit": 30, "submit_time": 1000, "eligible_time": 1000, "nice": 10,
    }), read.partitions)
    assert (job.partition, job.user, job.time_limit_min, job.nice) == ("gpu", "ana", 30, 10)
    # age (ACCRUE_ALWAYS) 43200/86400 = 0.5 -> 500; fair share 0.25 -> 2500;
    # size (SMALL_RELATIVE_TO_TIME) max(8, 1*64/4=16)/30/64 = 1/120 -> 4.17; partition 1/1 -> 2000;
    # QOS 100/100 -> 3000; TRES cpu 8/64 * 1000 = 125 (8129.17); nice 10 => 8119.17 -> 8119
    assert priority(job, site, now=1000 + 43200) == 8119


def test_missing_accounting_leaves_its_factors_zero() -> None:
    runner = ScriptedRunner(OUTPUTS, failing=("sshare", "sacctmgr"))
    read = read_site_priority(runner, [])
    assert read is not None and set(read.missing) == {"sshare", "sacctmgr qos"}
    assert read.site.fairshare == {} and read.site.qos_priority == {}


@pytest.mark.parametrize(("printed", "nice"), [(None, 0), (-5, -5), (0x80000000 + 7, 7), (0x80000000 - 3, -3)])
def test_job_nice_plain_or_offset(printed: object, nice: int) -> None:
    assert parse_job({"job_id": 1, "nice": printed}).nice == nice
