"""THE decision engine: one cycle (queue order -> eligible view -> placement -> plan) that pald's
submit path, pald's cycle and both simulator modes run, with Clock and Actuator protocols for
what differs between them (wall clock and Slurm; virtual time and an in-memory job table), and the StartRule its
caller's scheduler starts launches by."""

from pal_slurm.engine.actuator import Actuator, Launch
from pal_slurm.engine.clock import Clock, ManualClock, WallClock
from pal_slurm.engine.cycle import Cycle, Engine, EngineSettings, eligible_view
from pal_slurm.engine.starts import AS_PLANNED, StartRule

__all__ = ["AS_PLANNED", "Actuator", "Clock", "Cycle", "Engine", "EngineSettings", "Launch", "ManualClock", "StartRule", "WallClock",
           "eligible_view"]
