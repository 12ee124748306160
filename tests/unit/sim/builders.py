"""Builders for the simulator's unit tests."""

from pal_slurm.model import JobShape
from pal_slurm.sim.trace import UNCLASSED, TraceJob


def shaped_job(i: int, submit: float, seconds: float, nodes: int, per_node: int) -> TraceJob:
    """A trace job of `seconds` ideal run time asking `-N nodes --gres=gpu:per_node`, unclassed."""
    return TraceJob(i, nodes * per_node, float(submit), float(seconds), "resnet50",
                    shape=JobShape.on_nodes(nodes, per_node), iter_s=1.0, perf_class=UNCLASSED)
