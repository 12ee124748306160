"""daemon.memory: each read's state frozen out of the collector, cycles reclaimed on schedule."""

from __future__ import annotations

import gc

import pytest

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.main import memory_policy
from pal_slurm.daemon.memory import FrozenAfterRead


@pytest.fixture(autouse=True)
def _unfrozen():
    yield
    gc.unfreeze()  # leave the test process's collector as it found it


class Cycle:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_a_read_freezes_what_exists_and_a_full_collection_waits_for_its_period():
    now = [0.0]
    memory = FrozenAfterRead(600.0, clock=lambda: now[0])
    Cycle()  # garbage in a cycle, made before the read
    memory.after_read()
    assert gc.get_freeze_count() > 0 and memory.full_collections == 0
    frozen = gc.get_freeze_count()
    now[0] = 599.0
    memory.after_read()
    assert memory.full_collections == 0 and gc.get_freeze_count() >= frozen  # still frozen, nothing collected
    now[0] = 600.0
    memory.after_read()
    assert memory.full_collections == 1 and memory.last_full == 600.0
    assert not any(isinstance(o, Cycle) for o in gc.get_objects())  # the cycle was reclaimed


def test_the_config_turns_it_off_with_zero():
    assert memory_policy(Config(daemon=DaemonConfig(gc_full_every_s=0))) is None
    assert isinstance(memory_policy(Config()), FrozenAfterRead)
