"""How the engine's decisions are carried out: the Actuator protocol.

pald's actuator talks to Slurm (pin a held job to nodes and GPU slots, release it:
daemon.launcher.SlurmLauncher); the simulator's starts the job on its in-memory cluster
(sim.core.SimActuator). The engine reserves a launch's GPUs *before* calling
`start`, so a slow or failing actuator never lets two decisions share GPUs; `start` raising
leaves the job waiting (its reservation is dropped by the caller)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pal_slurm.model import JobRequest
from pal_slurm.policy.shapes import ShapeChoice


@dataclass(frozen=True)
class Launch:
    """One decision to act on: start `job` on `choice`."""

    job: JobRequest
    choice: ShapeChoice
    gres_spec: str | None = None  # Slurm: the GPU slots to bind (None: pin the nodes, keep the request)
    partition: str | None = None  # Slurm: the one partition to set (a job that asked for several)


class Actuator(Protocol):
    def start(self, launch: Launch) -> None:
        """Start the job where the launch says; raise to leave it waiting."""
        ...
