"""A bad value that slips past the loaders must end a run with SimulationError, never spin."""

import pytest

from pal_slurm.sim.compat import CompatConfig, CompatSimulator
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.trace import Trace, TraceJob


def smuggled(**bad) -> Trace:
    """A trace whose job bypassed TraceJob's checks (as a future loader bug might)."""
    job = TraceJob(0, 1, 0.0, 10.0, "vgg19")
    for k, v in bad.items():
        object.__setattr__(job, k, v)
    return Trace("smuggled", (job,))


def test_event_mode_refuses_a_nan_time_instead_of_spinning():
    with pytest.raises(SimulationError, match="non-finite time"):
        EventSimulator(EventConfig(num_nodes=2, gpus_per_node=4)).run(smuggled(submit_time=float("nan")), "pal")
    with pytest.raises(SimulationError, match="non-finite time"):
        EventSimulator(EventConfig(num_nodes=2, gpus_per_node=4)).run(smuggled(iterations=float("inf")), "pal")


def test_compat_mode_refuses_a_trace_longer_than_its_rounds():
    long_job = Trace("long", (TraceJob(0, 1, 0.0, 3e8, "vgg19"),))
    with pytest.raises(SimulationError, match="use --mode event"):
        CompatSimulator(CompatConfig(num_nodes=2, gpus_per_node=4)).run(long_job, "pal")


def test_compat_mode_stops_a_backlog_that_only_grows():
    # one job that fills the cluster for ~1,000 rounds while 2 copies per hour keep arriving
    hog = Trace("hog", (TraceJob(0, 8, 0.0, 1.2e6, "vgg19"),))
    cfg = CompatConfig(num_nodes=2, gpus_per_node=4, max_job_rounds=20_000)
    with pytest.raises(SimulationError, match="cannot keep up"):
        CompatSimulator(cfg).run(hog, "packed-sticky")
