"""How the scheduler that carries out the engine's launches really starts a job: the StartRule
protocol, and the rule of a scheduler that starts every launch as planned.

The engine plans GPUs; the scheduler under it may start a launch on others (Slurm takes its own
slots when pald can pin only a job's nodes: policy.slurm_starts.SlurmStarts). The caller names
the rule its scheduler follows, and the engine then answers with the GPUs jobs really get: the
submit path returns them, and a cycle whose launch the rule changed plans the jobs after it
again on what is really left (Engine.cycle). A rule declares whether it ever changes a
launch (`changes_launches`), so the engine skips that work for one that never does."""

from __future__ import annotations

from typing import Collection, Protocol, Sequence

from pal_slurm.model import ClusterView, JobRequest


class StartRule(Protocol):
    @property
    def changes_launches(self) -> bool:
        """False: `start` always answers the GPUs it is given."""
        ...

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        """The GPUs `job`, launched on `gpus`, really starts on, `free` being free for it (read
        during the call only: the caller takes GPUs from it afterwards)."""
        ...


class AsPlanned:
    """A scheduler that starts every launch on the GPUs planned (the simulator's own cluster)."""

    changes_launches = False

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        return gpus


AS_PLANNED = AsPlanned()
