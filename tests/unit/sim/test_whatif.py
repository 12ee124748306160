import pytest

from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.trace import synthetic_trace
from pal_slurm.sim.whatif import compare, format_page, resample


def test_resample_keeps_the_size_and_is_seeded():
    t = synthetic_trace(50, seed=1, max_gpus=8)
    assert resample(t, 0) is t
    a, b, c = resample(t, 1), resample(t, 1), resample(t, 2)
    assert a == b and a != c and len(a.jobs) == 50
    assert [j.job_id for j in a.jobs] == list(range(50))
    times = [j.submit_time for j in a.jobs]
    assert times == sorted(times) and set(times) <= {j.submit_time for j in t.jobs}


def test_compare_pairs_ratios_per_sample():
    t = synthetic_trace(40, seed=2, jobs_per_hour=4, max_gpus=8)
    runs = []
    for s in range(3):
        sim = EventSimulator(EventConfig(num_nodes=4, gpus_per_node=4))
        runs.append([sim.run(resample(t, s), p) for p in ("firstfit", "pal")])
    rows = {r.policy: r for r in compare(runs, "firstfit")}
    assert rows["firstfit"].ratio == (1.0, 0.0)
    ratios = [b.summary()["avg_jct_s"] / a.summary()["avg_jct_s"] for a, b in runs]
    assert rows["pal"].ratio[0] == pytest.approx(sum(ratios) / 3)
    assert rows["pal"].samples == 3 and rows["pal"].ratio[1] > 0
    page = format_page(list(rows.values()), "firstfit", ["head"])
    assert page.startswith("head\n") and "avg JCT / firstfit (95% CI)" in page
    assert page.splitlines()[-1].startswith("pal: ")
