"""Golden test: compat mode reproduces the PAL artifact's Sia-Philly results.

The reference files live in tests/golden/ (see its README for where they came from). Every avg JCT must be within 0.5%, and PAL's geomean gain over packed-sticky
within 1 point of the reference.
"""

import json
import math
from pathlib import Path

import pytest

from pal_slurm.sim.compat import CompatSimulator
from pal_slurm.sim.trace import bundled_trace

REF = Path(__file__).resolve().parents[2] / "golden" / "pal-artifact-results.json"
ARTIFACT_NAMES = {
    "PAL": "pal",
    "PMFirst": "pmfirst",
    "Default-Packed-S": "packed-sticky",
    "Default-Packed-NS": "packed-nonsticky",
    "Default-Random-S": "random-sticky",
    "Default-Random-NS": "random-nonsticky",
}


@pytest.fixture(scope="module")
def reference():
    if not REF.exists():
        pytest.fail(f"reference results missing: {REF}")
    return json.loads(REF.read_text())["results"]


@pytest.fixture(scope="module")
def ours(reference):
    sim = CompatSimulator()
    out = {}
    for trace_name in reference:
        trace = bundled_trace(trace_name)
        for art, name in ARTIFACT_NAMES.items():
            out[(trace_name, art)] = sim.run(trace, name).summary()
    return out


def test_every_avg_jct_within_half_a_percent(reference, ours):
    assert len(ours) == 36
    for (trace, art), s in ours.items():
        ref = reference[trace][art]
        assert s["avg_jct_s"] == pytest.approx(ref["avg_jct_s"], rel=0.005), (trace, art)
        assert s["p99_jct_s"] == pytest.approx(ref["p99_jct_s"], rel=0.005), (trace, art)
        assert s["makespan_s"] == pytest.approx(ref["makespan_s"], rel=0.005), (trace, art)
        assert s["busy_gpu_s"] == pytest.approx(ref["busy_gpu_s"], rel=0.005), (trace, art)


def test_pal_geomean_gain_within_one_point(reference, ours):
    def gain(table):
        ratios = [table(t, "PAL") / table(t, "Default-Packed-S") for t in reference]
        return 1 - math.exp(sum(map(math.log, ratios)) / len(ratios))

    ref_gain = gain(lambda t, p: reference[t][p]["avg_jct_s"])
    our_gain = gain(lambda t, p: ours[(t, p)]["avg_jct_s"])
    assert abs(our_gain - ref_gain) < 0.01
    assert our_gain > 0.3  # PAL's headline: a large gain over packed-sticky


def test_locality_penalty_sweep_matches_the_artifact():
    """The artifact's Fig. 12 sweep on workload-6: LF 1.0..3.0 is both PAL's across-node weight
    and the simulated slowdown."""
    from pal_slurm.sim.compat import CompatConfig

    path = REF.with_name("pal-artifact-losweep.json")
    sweep = json.loads(path.read_text())["results"]
    trace = bundled_trace("workload-6")
    assert len(sweep) == 30
    for key, ref in sweep.items():
        lf, art = key.split("|")
        s = CompatSimulator(CompatConfig(locality_penalty=float(lf[2:]))).run(trace, ARTIFACT_NAMES[art]).summary()
        assert s["avg_jct_s"] == pytest.approx(ref["avg"], rel=0.005), key
        assert s["p99_jct_s"] == pytest.approx(ref["p99"], rel=0.005), key
