"""A sweep split cell by cell and merged back gives `run_grid`'s results exactly; an element's
JSON loses nothing a report reads; where elements stand."""

from __future__ import annotations

import json

import pytest

from pal_slurm.sim.report import json_document
from pal_slurm.sim.runner import run_grid, run_one
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.sweep import (
    Cell,
    SweepError,
    element_document,
    grid_cells,
    merge_elements,
    result_from_json,
    result_to_json,
    tally,
)
from pal_slurm.sim.trace import synthetic_trace


@pytest.mark.parametrize("mode", ["compat", "event"])
def test_elements_run_one_by_one_through_json_merge_to_the_grid(mode):
    traces = [synthetic_trace(12, seed=s, jobs_per_hour=2.0, max_gpus=8) for s in (1, 2)]
    spec = RunSpec(mode=mode, num_nodes=4, gpus_per_node=4, seeds=2)
    policies = ["pal", "packed-sticky"]
    serial = run_grid(traces, policies, spec)
    cells = grid_cells([t.name for t in traces], spec.seeds, policies)
    assert len(cells) == 8 and cells[1] == Cell(0, traces[0].name, 0, "packed-sticky") and cells[2].seed == 1
    docs = {}
    for i in reversed(range(len(cells))):  # in any order, as Slurm runs them
        c = cells[i]
        docs[i] = json.loads(json.dumps(element_document(i, c, run_one(traces[c.trace], c.policy, spec, c.seed), 0.5)))
    merged = merge_elements(cells, docs)
    assert [r.summary() for r in merged] == [r.summary() for r in serial]
    assert json_document(merged, {}) == json_document(serial, {})
    assert [(r.jobs, r.util_series) for r in merged] == [(r.jobs, r.util_series) for r in serial]


def test_a_result_round_trips_through_json_whole():
    run = run_grid([synthetic_trace(8, seed=4, jobs_per_hour=2.0, max_gpus=4)], ["pal"],
                   RunSpec(mode="event", num_nodes=2, gpus_per_node=4))[0]
    back = result_from_json(json.loads(json.dumps(result_to_json(run))))
    assert back == run and back.jobs[0].gpus == run.jobs[0].gpus and isinstance(back.jobs[0].gpus, tuple)
    with pytest.raises(SweepError, match="not a run result"):
        result_from_json({"trace": "t"})


def test_merge_names_missing_foreign_and_mismatched_elements():
    cells = grid_cells(["a"], 1, ["pal", "packed-sticky"])
    run = run_grid([synthetic_trace(6, seed=1, jobs_per_hour=2.0, max_gpus=4)], ["pal"],
                   RunSpec(mode="event", num_nodes=2, gpus_per_node=4))[0]
    good = {i: element_document(i, c, run, 1.0) for i, c in enumerate(cells)}
    with pytest.raises(SweepError, match=r"1 of 2 element\(s\) have no result: 1"):
        merge_elements(cells, {0: good[0]})
    with pytest.raises(SweepError, match=r"element\(s\) 5 are not in this sweep of 2"):
        merge_elements(cells, {**good, 5: good[0]})
    with pytest.raises(SweepError, match="element 1 ran .*pal.*this sweep's element 1 is"):
        merge_elements(cells, {0: good[0], 1: {**good[0], "element": 1}})
    assert len(merge_elements(cells, good)) == 2


def test_tally_reads_the_folder_first_and_slurm_for_the_rest():
    p = tally(7, done={0, 1}, errors={2: "cannot open trace"},
              slurm_states={3: "RUNNING", 4: "PENDING", 5: "TIMEOUT"})
    assert (p.done, p.running, p.pending) == ((0, 1), (3,), (4,))
    assert p.failed == ((2, "cannot open trace"), (5, "Slurm ended it TIMEOUT and it wrote no result"),
                        (6, "not in Slurm's queue and no result written"))
    assert not p.complete
    unknown = tally(3, done={0}, errors={}, slurm_states=None)  # Slurm not asked: the rest may still run
    assert (unknown.pending, unknown.failed) == ((1, 2), ())
    assert tally(2, {0, 1}, {}, {}).complete
