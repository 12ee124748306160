"""Marking drifted GPUs' nodes: exact scontrol calls per action, one per node, failures per node."""

import pytest

from pal_slurm.ranking.drift import Drift
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.node_marks import mark_commands, node_texts, run_commands

DRIFTS = [Drift("gpu02", 1, "A", 1.0, 1.5, 0, 2), Drift("gpu02", 3, "B", 1.0, 1.1, 0, 0),
          Drift("gpu04", 0, "A", 1.0, 1.2, 0, 1)]


def test_one_text_per_node_naming_each_gpu():
    texts = node_texts(DRIFTS)
    assert texts == {"gpu02": "pal drift: GPU 1 class A +50.0%; GPU 3 class B +10.0%",
                     "gpu04": "pal drift: GPU 0 class A +20.0%"}


def test_commands_per_action():
    assert mark_commands(DRIFTS, "none") == []
    assert mark_commands(DRIFTS, "comment")[1] == ["scontrol", "update", "NodeName=gpu04",
                                                   "Comment=pal drift: GPU 0 class A +20.0%"]
    assert mark_commands(DRIFTS, "drain")[0][:4] == ["scontrol", "update", "NodeName=gpu02", "State=DRAIN"]
    assert mark_commands(DRIFTS, "drain")[0][4].startswith("Reason=pal drift: GPU 1 class A")
    with pytest.raises(ValueError):
        mark_commands(DRIFTS, "reboot")


def test_run_commands_reports_each_failure_and_goes_on():
    class Runner:
        def __init__(self):
            self.ran = []

        def run(self, argv, timeout=None):
            self.ran.append(argv)
            if "NodeName=gpu02" in argv:
                raise SlurmError("Invalid node name specified")
            return ""

    r = Runner()
    out = run_commands(r, mark_commands(DRIFTS, "comment"))
    assert len(r.ran) == 2
    assert out[0][0] == "gpu02" and "Invalid node name" in out[0][1]
    assert out[1] == ("gpu04", None)
