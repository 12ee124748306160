import pytest

from pal_slurm.sim.trace import TraceError, bundled_trace, bundled_trace_names, load_trace, resolve_trace, synthetic_trace


def test_bundled_traces():
    assert bundled_trace_names() == [f"workload-{i}" for i in range(1, 7)]
    t = bundled_trace("workload-1")
    assert len(t.jobs) == 160
    assert t.jobs[0].model == "vgg19" and t.jobs[0].num_gpus == 1
    assert t.jobs[0].ideal_runtime == pytest.approx(1481.0 * 0.300610341)


def test_malformed_row_names_file_and_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,10,vgg19\n1,two,5,10,vgg19\n")
    with pytest.raises(TraceError, match=r"t.csv:3"):
        load_trace(p)


def test_missing_columns_and_file(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="missing column"):
        load_trace(p)
    with pytest.raises(TraceError, match="cannot open"):
        load_trace(tmp_path / "none.csv")
    with pytest.raises(TraceError, match="no bundled trace"):
        resolve_trace("workload-99")


def test_nonpositive_values_rejected(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model\n0,0,0,10,vgg19\n")
    with pytest.raises(TraceError, match="num_gpus"):
        load_trace(p)


def test_synthetic_is_seeded_and_bounded():
    a = synthetic_trace(200, seed=5, max_gpus=16)
    b = synthetic_trace(200, seed=5, max_gpus=16)
    c = synthetic_trace(200, seed=6, max_gpus=16)
    assert a == b and a != c
    assert all(j.num_gpus <= 16 for j in a.jobs)
    times = [j.submit_time for j in a.jobs]
    assert times == sorted(times)
    # Poisson at 20 jobs/hour: 200 jobs span roughly 10 hours
    assert 5 * 3600 < times[-1] < 15 * 3600
