"""PAL's mode per partition: `off` (jobs pass untouched), `shadow` (pald decides as when on and
records it; the job runs as Slurm places it) or `on` (PAL places).

The modes come from pal.toml (`[daemon] mode` for every partition, `[daemon] partition_modes`
per partition) and from the store's switches (`palctl mode`), which win. A job that may run in
several partitions gets the most cautious of their modes (off < shadow < on): a site that turns
a partition off never has a job there placed or held by PAL."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

OFF, SHADOW, ON = "off", "shadow", "on"
MODES = (OFF, SHADOW, ON)  # most cautious first
ALL = "*"  # the partition name that stands for every partition not named
# Decision reasons of shadow jobs (daemon/requests.py, daemon/shadow.py; read by palctl trial report)
SHADOW_PREFIX = "shadow:"  # + the reason pald would have given: what it would have done
SHADOW_STARTED = "shadow_started:"  # where Slurm ran it: req=<request id>;partition=<p>;wait_s=<s>
SHADOW_ENDED = "shadow_ended:"  # req=<request id>;run_s=<seconds>
# ... and of the jobs PAL placed in `on` partitions (daemon/shadow.py): what PAL did
PAL_STARTED = "pal_started:"  # req=<request id>;partition=<p>;wait_s=<s>: the GPUs it ran on
PAL_ENDED = "pal_ended:"  # req=<request id>;run_s=<seconds>
RUN_RECORDS = (SHADOW_STARTED, SHADOW_ENDED, PAL_STARTED, PAL_ENDED)  # where and how long a job ran, not decisions


class ModeError(ValueError):
    pass


def check_mode(value: str, where: str) -> str:
    if value not in MODES:
        raise ModeError(f"{where}: mode {value!r} is not one of {', '.join(MODES)}")
    return value


def parse_partition_modes(text: str, where: str = "partition_modes") -> dict[str, str]:
    """``"gpu=on, debug=off"`` -> {"gpu": "on", "debug": "off"}; ModeError naming the item."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, mode = (p.strip() for p in item.partition("="))
        if not sep or not name:
            raise ModeError(f"{where}: {item!r} is not PARTITION=MODE")
        out[name] = check_mode(mode, f"{where}: {name}")
    return out


@dataclass(frozen=True)
class PartitionModes:
    default: str = ON  # every partition not in `by_partition`
    by_partition: Mapping[str, str] = field(default_factory=dict)

    def of(self, partition: str) -> str:
        return self.by_partition.get(partition, self.default)

    def of_job(self, partitions: Iterable[str]) -> str:
        """The most cautious mode of the partitions a job may run in (none named: the default)."""
        modes = [self.of(p) for p in partitions] or [self.default]
        return min(modes, key=MODES.index)

    def overridden(self, overrides: Mapping[str, str]) -> PartitionModes:
        """These modes with `overrides` ({partition or ALL: mode}, the store's) on top; an
        override that is no mode is ignored (the file's mode stands)."""
        valid = {k: v for k, v in overrides.items() if v in MODES}
        return PartitionModes(valid.get(ALL, self.default),
                              {**self.by_partition, **{k: v for k, v in valid.items() if k != ALL}})


@dataclass(frozen=True)
class DefaultOn:
    """The partitions where every GPU job is PAL's, with no `pal:class=` (the hook's
    PAL_DEFAULT_ON names the same ones: it asks pald about such jobs; pald checks them again
    here). Their class comes from the site's rules (model/site_rules.py). A user opts out with
    `pal:off`."""

    partitions: frozenset[str] = frozenset()  # "*": every partition

    @classmethod
    def parse(cls, partitions: str) -> DefaultOn:
        return cls(frozenset(p.strip() for p in partitions.split(",") if p.strip()))

    def covers(self, partitions: Iterable[str]) -> bool:
        """Every partition the job may run in is default-on (none named: not covered)."""
        names = list(partitions)
        return bool(names) and (ALL in self.partitions or all(p in self.partitions for p in names))
