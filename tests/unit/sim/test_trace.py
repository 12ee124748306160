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


HEADER = "job_id,num_gpus,submit_time,duration,model\n"


@pytest.mark.parametrize(
    "row, where, what",
    [
        ("0,1,0,nan,vgg19", ":2:4:", "duration: must be a finite number"),
        ("0,1,0,inf,vgg19", ":2:4:", "duration: must be a finite number"),
        ("0,1,nan,10,vgg19", ":2:3:", "submit_time: must be a finite number"),
        ("0,1,-5,10,vgg19", ":2:3:", "submit_time: must be >= 0"),
        ("0,1,0,-10,vgg19", ":2:4:", "duration: must be > 0"),
        ("0,1.5,0,10,vgg19", ":2:2:", "num_gpus: not an integer"),
        ("0,1,0,1e300,vgg19", ":2:4:", "duration counts iterations"),
        ("0,1,0,10", ":2:5:", "4 field(s), the header has 5"),
        ("0,1,0,10,", ":2:5:", "model: empty"),
    ],
)
def test_bad_cells_name_file_line_and_column(tmp_path, row, where, what):
    p = tmp_path / "t.csv"
    p.write_text(HEADER + row + "\n")
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}{where}") and what in msg and "\n" not in msg


def test_bom_is_stripped_and_crlf_read(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (HEADER + "0,1,0,10,vgg19\n1,2,5,10,resnet50\n").replace("\n", "\r\n").encode())
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == [0, 1] and t.warnings == ()


def test_non_utf8_names_line_and_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(HEADER.encode() + b"0,1,0,10,vgg19\n1,1,0,10,r\xe9snet\n")
    with pytest.raises(TraceError, match=r"t.csv:3:11: not UTF-8"):
        load_trace(p)


def test_duplicate_ids_rejected_unknown_models_warned(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "0,1,0,10,vgg19\n1,1,0,10,vgg19\n0,1,0,10,vgg19\n")
    with pytest.raises(TraceError, match=r"t.csv:4:1: job_id: duplicate job_id 0 \(first on line 2\)"):
        load_trace(p)
    p.write_text(HEADER + "0,1,0,10,VGG19\n1,1,0,10,llama\n2,1,0,10,llama\n")
    t = load_trace(p)
    assert t.jobs[0].model == "vgg19"  # known models are matched without case
    assert len(t.warnings) == 1 and t.warnings[0].startswith(f"{p}:3:5: unknown model 'llama'")


def test_empty_and_header_only(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("")
    with pytest.raises(TraceError, match="empty trace"):
        load_trace(p)
    p.write_text(HEADER)
    with pytest.raises(TraceError, match="no jobs"):
        load_trace(p)


def test_no_job_can_carry_a_non_finite_number():
    from pal_slurm.sim.trace import TraceJob

    for kw in ({"submit_time": float("nan")}, {"iterations": float("inf")}, {"num_gpus": 0}, {"iterations": -1.0}):
        args = {"job_id": 0, "num_gpus": 1, "submit_time": 0.0, "iterations": 10.0, "model": "vgg19", **kw}
        with pytest.raises(TraceError):
            TraceJob(**args)


def test_the_gpu_model_column_is_optional_and_read(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model,gpu_model\n0,2,0,10,resnet50,a100\n1,1,5,10,vgg19,\n")
    jobs = {j.job_id: j for j in load_trace(p).jobs}
    assert jobs[0].gpu_model == "a100" and jobs[1].gpu_model is None
