"""The site's run-time switches, kept in the store so that they survive pald's restarts and
reach every pald (and through it every hook) at once: `palctl pause` / `palctl resume`, and
`palctl mode PARTITION MODE` (model/modes.py; a switch per partition, ``mode:<partition>``).

A switch is a named text value (records.Switch). `SiteSwitches` is what pald and palctl read
of them; an unknown value reads as the switch's safe side (paused stays paused only on "on").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pal_slurm.store.records import Switch

PAUSE = "pause"  # "on": the hook passes every job and pald releases every job it holds
MODE_PREFIX = "mode:"  # + a partition name (or model.modes.ALL): that partition's mode
ON, OFF = "on", "off"


@dataclass(frozen=True)
class SiteSwitches:
    paused: bool = False
    changed_by: str | None = None  # who last set the pause switch
    changed_at: datetime | None = None
    modes: Mapping[str, str] = field(default_factory=dict)  # partition (or "*") -> mode set by palctl mode

    @classmethod
    def from_store(cls, switches: Mapping[str, Switch]) -> SiteSwitches:
        modes = {name.removeprefix(MODE_PREFIX): s.value for name, s in switches.items()
                 if name.startswith(MODE_PREFIX)}
        pause = switches.get(PAUSE)
        if pause is None:
            return cls(modes=modes)
        return cls(paused=pause.value == ON, changed_by=pause.changed_by, changed_at=pause.changed_at, modes=modes)


def mode_switch(partition: str, mode: str, by: str, at: datetime) -> Switch:
    """The row `palctl mode PARTITION MODE` writes."""
    return Switch(MODE_PREFIX + partition, mode, at, by)


def pause_switch(paused: bool, by: str, at: datetime) -> Switch:
    """The row `palctl pause` (paused) or `palctl resume` writes."""
    return Switch(PAUSE, ON if paused else OFF, at, by)
