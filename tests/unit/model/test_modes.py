"""PAL's mode per partition: parsing, the most cautious mode of a job's partitions, overrides."""

from __future__ import annotations

import pytest

from pal_slurm.config import ConfigError, from_mapping
from pal_slurm.model.modes import ModeError, PartitionModes, parse_partition_modes


def test_parse_partition_modes_and_its_refusals():
    assert parse_partition_modes(" gpu=on, debug = off ,") == {"gpu": "on", "debug": "off"}
    assert parse_partition_modes("") == {}
    for bad in ("gpu", "=on", "gpu=maybe", "gpu=ON"):
        with pytest.raises(ModeError):
            parse_partition_modes(bad)


def test_a_job_gets_the_most_cautious_mode_of_its_partitions():
    modes = PartitionModes("shadow", {"gpu": "on", "debug": "off"})
    assert modes.of_job(["gpu"]) == "on"
    assert modes.of_job(["gpu", "other"]) == "shadow"
    assert modes.of_job(["gpu", "debug"]) == "off"
    assert modes.of_job([]) == "shadow"


def test_the_stores_switches_win_and_a_bad_one_is_ignored():
    modes = PartitionModes("shadow", {"gpu": "on"})
    over = modes.overridden({"gpu": "off", "*": "on", "new": "shadow", "odd": "sideways"})
    assert over == PartitionModes("on", {"gpu": "off", "new": "shadow"})
    assert modes.overridden({}) == modes


def test_the_configuration_checks_modes():
    cfg = from_mapping({"daemon": {"mode": "shadow", "partition_modes": "gpu=on"}})
    assert cfg.daemon.modes() == PartitionModes("shadow", {"gpu": "on"})
    with pytest.raises(ConfigError, match="partition_modes"):
        from_mapping({"daemon": {"partition_modes": "gpu=maybe"}})
    with pytest.raises(ConfigError, match="mode"):
        from_mapping({"daemon": {"mode": "half"}})
