"""Slurm job shapes: what a job asks for, in the one form every layer uses.

A Slurm job asks for GPUs in one of two shapes:

- per node: `g` GPUs on each of `k` nodes (`--gres=gpu:g` / `--gpus-per-node=g`, `-N k`);
- in total: `N` GPUs on any nodes (`--gpus=N`, or `gpus=N` in the pal: comment).

The simulator runs jobs with these shapes and pald reads them from the submit hook and from
squeue through `job_shape` (the GPU counts it takes come from intake/tres.py's `gpu_count`), so
a job has the same shape at submit time, when pald's cycle releases it, and in a simulated
trace.
"""

from __future__ import annotations

from dataclasses import dataclass


class ShapeError(ValueError):
    """A job's GPU request has no shape PAL can place (the reason goes into pal:pass=...)."""


@dataclass(frozen=True)
class JobShape:
    """GPUs a job needs and how they must be spread."""

    total: int  # GPUs in all (gang: all or nothing)
    nodes: int | None = None  # -N k for a per-node request; None: any number of nodes
    per_node: int | None = None  # GPUs on each of `nodes` nodes; None: a total request

    def __post_init__(self) -> None:
        if self.total <= 0:
            raise ShapeError("no_gpus")
        if (self.per_node is None) != (self.nodes is None):
            raise ValueError("a per-node shape needs both nodes and per_node")
        if self.per_node is not None and self.nodes is not None and self.per_node * self.nodes != self.total:
            raise ValueError(f"{self.nodes} nodes x {self.per_node} GPUs is not {self.total}")

    @classmethod
    def anywhere(cls, total: int) -> "JobShape":
        """`--gpus=N`: N GPUs on any nodes."""
        return cls(total)

    @classmethod
    def on_nodes(cls, nodes: int, per_node: int) -> "JobShape":
        """`-N k --gres=gpu:g`: g GPUs on each of k nodes."""
        return cls(nodes * per_node, nodes, per_node)

    @property
    def is_per_node(self) -> bool:
        return self.per_node is not None

    def __str__(self) -> str:
        if self.is_per_node:
            return f"-N {self.nodes} --gres=gpu:{self.per_node}"
        return f"--gpus={self.total}"


def job_shape(gpus_per_node: int | None = None, gpus_per_job: int | None = None,
              nodes: int | None = None, comment_gpus: int | None = None) -> JobShape:
    """The shape of a job from its GPU counts and node count (see intake/tres.py `gpu_count` for the counts).

    - GPUs per node: g on each of `nodes` nodes (one when not given);
    - else a total (`--gpus=N`, else `gpus=N` from the comment): split evenly over `nodes`
      nodes when more than one is asked and it divides, else anywhere. A node count of 1 is
      read as "not given": it is Slurm's default, so squeue cannot tell `-N 1` from nothing;
    - no GPU count at all: ShapeError("no_gpus").
    """
    k = nodes if nodes and nodes > 0 else None
    if gpus_per_node:
        return JobShape.on_nodes(k or 1, gpus_per_node)
    total = gpus_per_job or comment_gpus
    if not total:
        raise ShapeError("no_gpus")
    if k and k > 1 and total % k == 0:
        return JobShape.on_nodes(k, total // k)
    return JobShape.anywhere(total)
