"""Slurm accounting (sacct --json / sacct -P) read as a simulator trace."""

from pathlib import Path

import pytest

from pal_slurm.model.class_rules import parse_class_rules
from pal_slurm.sim.sacct import (
    accounting_trace,
    load_accounting_trace,
    read_accounting,
)
from pal_slurm.sim.trace import UNCLASSED, TraceError

DATA = Path(__file__).parent / "data"


def test_json_jobs_fields():
    jobs = {j.job_id: j for j in read_accounting(DATA / "sacct-22.05.json")}
    assert set(jobs) == {"101", "102", "103", "104", "105", "106_3"}
    j = jobs["101"]
    assert (j.gpus, j.nodes, j.submit, j.start, j.end, j.time_limit_s) == (2, 1, 1700000000, 1700000060, 1700003660, 7200)
    assert j.comment == "pal:class=A" and j.account == "vision" and j.state == "COMPLETED"
    assert jobs["102"].gpus == 8  # typed GRES counts when there is no plain one
    assert jobs["103"].time_limit_s is None  # INFINITE
    assert jobs["105"].start is None  # never started: sacct writes 0
    assert jobs["106_3"].submit == 1700003000 and jobs["106_3"].time_limit_s == 1800  # Slurm >= 23.02 wrappers


def test_json_trace_classes_rules_and_skips():
    rules = parse_class_rules("name:bert*=B; account:misc=D")
    t = load_accounting_trace(DATA / "sacct-22.05.json", rules)
    by_name = {j.model: j for j in t.jobs}
    assert set(by_name) == {"resnet-train", "bert-large", "notebook", "sweep"}
    assert by_name["resnet-train"].perf_class == "A"  # comment
    assert by_name["bert-large"].perf_class == "B"  # rule on the name
    assert by_name["notebook"].perf_class == "D"  # rule on the account ("just a note" is no spec)
    assert by_name["sweep"].perf_class == "resnet50"  # comment names an application: the class map decides
    assert by_name["resnet-train"].submit_time == 0 and by_name["bert-large"].submit_time == 500
    assert by_name["resnet-train"].ideal_runtime == 3600 and by_name["bert-large"].num_gpus == 8
    text = "\n".join(t.warnings)
    assert "4 job(s) kept; classes from comments 2, rules 2, unclassed 0" in text
    assert "skipped 1 job(s): no GPUs" in text and "skipped 1 job(s): never started" in text
    assert load_accounting_trace(DATA / "sacct-22.05.json").jobs[1].perf_class == UNCLASSED


def test_pipe_format_steps_typed_gres_running_and_pending():
    jobs = read_accounting(DATA / "sacct-p.txt")
    assert [j.job_id for j in jobs] == ["201", "202", "203", "204"]
    j = {j.job_id: j for j in jobs}
    assert j["201"].gpus == 2 and j["201"].end - j["201"].start == 3600 and j["201"].time_limit_s == 7200
    assert j["202"].gpus == 8 and j["202"].time_limit_s == 86400 and j["202"].state == "CANCELLED"
    assert j["203"].end is None and j["203"].time_limit_s is None
    t = accounting_trace(jobs, name="p")
    assert [x.model for x in t.jobs] == ["resnet-train", "bert-large"]
    assert any("still running" in w for w in t.warnings) and any("never started" in w for w in t.warnings)


@pytest.mark.parametrize(
    "content, message",
    [
        ("JobID|Submit|Start|End|AllocTRES\n1|2024-03-01T10:00:00|soon|2024-03-01T11:00:00|gres/gpu=1\n",
         ":2:3: Start: not a time: 'soon'"),
        ("JobID|Submit|Start|End|AllocTRES\n1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|gres/gpu=x\n",
         ":2:5: AllocTRES: 'gres/gpu=x': GPU count is not an integer"),
        ("JobID|Submit|Start\n1|2|3\n", ":1: missing column(s) End, AllocTRES"),
        ('{"jobs": [{"job_id": 1, "time": {"submission": NaN}}]}', ": not valid JSON: NaN is not a number"),
        ('{"jobs": [', ":1:11: not valid JSON"),
        ("just text\n", ":1: neither sacct --json nor sacct -P output"),
        ("JobID|Submit|Start|End|AllocTRES\n1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|gres/gpu=1\n"
         "1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|gres/gpu=1\n", ":3: job 1 appears twice (first at"),
        ("JobID|Submit|Start|End|AllocTRES\n1|2024-03-01T10:00:00|2024-03-01T12:00:00|2024-03-01T11:00:00|gres/gpu=1\n",
         ":2: job 1: times out of order"),
    ],
)
def test_malformed_accounting_names_file_and_line(tmp_path, content, message):
    p = tmp_path / "acct.txt"
    p.write_text(content)
    with pytest.raises(TraceError) as exc:
        load_accounting_trace(p)
    assert str(exc.value).startswith(str(p)) and message in str(exc.value), str(exc.value)


def test_bad_rules():
    with pytest.raises(ValueError, match="bad rule 'user:x=A'"):
        parse_class_rules("user:x=A")
    assert parse_class_rules(" ;name:a*=B\n") [0].pattern == "a*"


def test_a_requested_gpu_model_is_read_from_requested_tres_not_allocated(tmp_path):
    import json
    def job(jid, requested):
        return {"job_id": jid, "name": f"j{jid}", "time": {"submission": 100, "start": 110, "end": 200, "limit": 60},
                "state": {"current": "COMPLETED"}, "allocation_nodes": 1,
                "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 1},
                                       {"type": "gres", "name": "gpu:a100", "count": 1}],
                         "requested": requested}}
    js = tmp_path / "a.json"
    js.write_text(json.dumps({"jobs": [job(1, [{"type": "gres", "name": "gpu:a100", "count": 1}]),
                                       job(2, [{"type": "gres", "name": "gpu", "count": 1}]),
                                       job(3, [{"type": "gres", "name": "gpu:s2", "count": 1}])]}))
    assert [j.gpu_model for j in read_accounting(js)] == ["a100", None, None]  # s2: pal-slurm's slot type
    pipe = tmp_path / "a.txt"
    pipe.write_text("JobID|Submit|Start|End|AllocTRES|ReqTRES\n"
                    "1|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T11:01:00|gres/gpu:v100=2,gres/gpu=2|"
                    "cpu=1,gres/gpu:v100=2,gres/gpu=2\n"
                    "2|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T11:01:00|gres/gpu:v100=1,gres/gpu=1|gres/gpu=1\n")
    assert [j.gpu_model for j in read_accounting(pipe)] == ["v100", None]
    assert [j.gpu_model for j in read_accounting(DATA / "sacct-p.txt")] == [None] * 4  # no ReqTRES field


def _peak_while(read):
    import tracemalloc

    tracemalloc.start()
    try:
        out = read()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_pipe_file_is_read_a_line_at_a_time(tmp_path):
    """Memory holds the jobs kept, not the file: 40,000 step rows (dropped as read) and one job."""
    from pal_slurm.sim import sacct

    step = "{}.batch|batch|||2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00||gres/gpu=1|1|COMPLETED|\n"
    p = tmp_path / "big.txt"
    with p.open("w") as f:
        f.write("JobID|JobName|Account|Partition|Submit|Start|End|Timelimit|AllocTRES|NNodes|State|Comment\n")
        f.write("7|train|a|p|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|02:00:00|gres/gpu=2|1|COMPLETED|\n")
        for i in range(40_000):
            f.write(step.format(i))
    size = p.stat().st_size

    jobs, peak = _peak_while(lambda: sacct.read_accounting(p))
    assert [(j.job_id, j.gpus) for j in jobs] == [("7", 2)]
    assert size > 3_000_000 and peak < size / 10, (size, peak)


def test_json_file_is_read_a_job_at_a_time(tmp_path):
    """Memory holds the jobs kept, not the document: 1,000 jobs with bulky step lists."""
    import json

    job = {"job_id": 0, "name": "train", "time": {"submission": 1709287200, "start": 1709287230,
                                                   "end": 1709290800, "limit": 120},
           "state": {"current": "COMPLETED"}, "allocation_nodes": 1,
           "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]},
           "steps": [{"step": {"name": f"step{k}"}, "pad": "x" * 200} for k in range(20)]}
    p = tmp_path / "big.json"
    with p.open("w") as f:
        f.write('{"meta": {"plugin": {"type": "openapi/v0.0.38"}},\n "jobs": [\n')
        for i in range(1000):
            f.write(("" if i == 0 else ",\n") + json.dumps({**job, "job_id": i + 1}, indent=1))
        f.write('\n],\n "warnings": []}\n')
    size = p.stat().st_size
    jobs, peak = _peak_while(lambda: read_accounting(p))
    assert len(jobs) == 1000 and jobs[-1].job_id == "1000" and jobs[0].gpus == 2
    assert size > 5_000_000 and peak < size / 4, (size, peak)


PIPE_HEADER = "JobID|JobName|Account|Partition|Submit|Start|End|Timelimit|AllocTRES|NNodes|State|Comment\n"


def _pipe_row(jid, submit="2024-03-01T10:00:00", start="2024-03-01T10:00:00", end="2024-03-01T11:00:00",
              tres="gres/gpu=1", limit="01:00:00", comment=""):
    return f"{jid}|train|a|gpu|{submit}|{start}|{end}|{limit}|{tres}|1|COMPLETED|{comment}\n"


def test_skipped_rows_are_counted_by_reason_and_the_window(tmp_path):
    """Each skip reason counted once per job, in the order they are checked; with a window, the
    skipped jobs and the kept ones submitted before it are counted as older instead."""
    p = tmp_path / "acct.txt"
    p.write_text(PIPE_HEADER
                 + _pipe_row(1, submit="2024-02-01T10:00:00", start="2024-02-01T10:00:00", end="2024-02-01T11:00:00")
                 + _pipe_row(2, submit="2024-02-01T10:00:00", start="Unknown", end="Unknown")  # old, never started
                 + _pipe_row(3, tres="cpu=4,mem=8G")  # no GPUs
                 + _pipe_row(4, start="None", end="Unknown", tres="")  # never started, before its GPUs count
                 + _pipe_row("5_1", start="Unknown", end="Unknown")
                 + _pipe_row(6, end="Unknown")  # still running
                 + _pipe_row("6.batch", end="Unknown")  # a step: not a job
                 + _pipe_row(7) + _pipe_row("8_2"))
    t = load_accounting_trace(p)
    assert len(t.jobs) == 3 and "acct: skipped 1 job(s): no GPUs" in t.warnings
    assert "acct: skipped 3 job(s): never started" in t.warnings and "acct: skipped 1 job(s): still running" in t.warnings
    w = load_accounting_trace(p, days=7)
    assert len(w.jobs) == 2
    assert [x for x in w.warnings if "skipped" in x] == [
        "acct: skipped 1 job(s): no GPUs", "acct: skipped 2 job(s): never started",
        "acct: skipped 1 job(s): still running", "acct: skipped 2 job(s): older than the window"]


def test_a_bad_cell_is_an_error_in_a_skipped_row_too(tmp_path):
    p = tmp_path / "acct.txt"
    p.write_text(PIPE_HEADER + _pipe_row(1) + _pipe_row(2, tres="cpu=1", limit="soon"))
    with pytest.raises(TraceError, match=r"acct.txt:3:8: Timelimit: not a duration: 'soon'"):
        load_accounting_trace(p)
    p.write_text(PIPE_HEADER + _pipe_row(1) + _pipe_row(2, start="Unknown", end="later"))
    with pytest.raises(TraceError, match=r"acct.txt:3:7: End: not a time: 'later'"):
        load_accounting_trace(p)


def test_malformed_comments_are_counted_past_the_ones_shown(tmp_path):
    p = tmp_path / "acct.txt"
    p.write_text(PIPE_HEADER + "".join(_pipe_row(i, comment="pal:class=") for i in range(1, 9)))
    bad = [w for w in load_accounting_trace(p).warnings if "comment" in w and "kept" not in w]
    assert len(bad) == 6 and bad[0].startswith(f"{p}:2: job 1: comment ignored")
    assert bad[-1] == "acct: 8 comment(s) ignored in all"


def test_skipped_rows_are_not_held(tmp_path):
    """Memory holds the jobs kept, not the records read: 40,000 CPU-only and pending jobs, one GPU job."""
    p = tmp_path / "big.txt"
    with p.open("w") as f:
        f.write(PIPE_HEADER + _pipe_row(7, tres="cpu=8,gres/gpu=2,mem=64G"))
        for i in range(8, 40_008):
            f.write(_pipe_row(i, tres="cpu=4,mem=8G") if i % 2 else _pipe_row(i, start="Unknown", end="Unknown"))
    size = p.stat().st_size
    t, peak = _peak_while(lambda: load_accounting_trace(p))
    assert [j.num_gpus for j in t.jobs] == [2] and "big: skipped 20000 job(s): no GPUs" in t.warnings
    assert size > 3_000_000 and peak < size / 10, (size, peak)


def test_accounting_is_read_past_the_caps_of_other_inputs(tmp_path, monkeypatch):
    """The byte and row caps keep a hostile trace or variability file out; a site's accounting
    is legitimately large and is read whatever its size (the caps made small here)."""
    import json

    from pal_slurm import input_files
    from pal_slurm.sim.trace import load_trace

    monkeypatch.setitem(input_files.read_text.__kwdefaults__, "max_bytes", 2000)
    monkeypatch.setitem(input_files.parse_csv.__kwdefaults__, "max_rows", 10)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n" + "".join(f"{i},1,0,10,BERT\n" for i in range(50)))
    with pytest.raises(TraceError, match="more than 10 rows"):
        load_trace(trace)  # the caps are in force
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n" + "".join(f"{i},1,0,10,{'x' * 500}\n" for i in range(5)))
    with pytest.raises(TraceError, match="more than the 2000"):
        load_trace(trace)
    pipe = tmp_path / "acct.txt"
    pipe.write_text(PIPE_HEADER + "".join(_pipe_row(i) for i in range(1, 51)))
    js = tmp_path / "acct.json"
    js.write_text(json.dumps({"jobs": [
        {"job_id": i, "name": "train", "time": {"submission": 100, "start": 110, "end": 200, "limit": 60},
         "state": {"current": "COMPLETED"}, "allocation_nodes": 1,
         "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 1}]}} for i in range(1, 51)]}))
    for path in (pipe, js):
        assert path.stat().st_size > 2000
        assert len(load_accounting_trace(path).jobs) == 50


def test_a_bad_cell_anywhere_is_the_error_before_a_job_twice_or_out_of_order(tmp_path):
    """The trace is built as rows are read, but its errors come as when the file was read whole."""
    p = tmp_path / "acct.txt"
    p.write_text(PIPE_HEADER + _pipe_row(1) + _pipe_row(1) + _pipe_row(2, start="2024-03-01T12:00:00")
                 + _pipe_row(3, tres="gres/gpu=x"))
    with pytest.raises(TraceError, match=r"acct.txt:5:9: AllocTRES"):
        load_accounting_trace(p)
    p.write_text(PIPE_HEADER + _pipe_row(2, start="2024-03-01T12:00:00") + _pipe_row(1) + _pipe_row(1))
    with pytest.raises(TraceError, match=r"acct.txt:2: job 2: times out of order"):
        load_accounting_trace(p)
    p.write_text(PIPE_HEADER + _pipe_row(1) + _pipe_row(1) + _pipe_row(2, start="2024-03-01T12:00:00"))
    with pytest.raises(TraceError, match=rf"acct.txt:3: job 1 appears twice \(first at {p}:2\)"):
        load_accounting_trace(p)


def test_a_window_holds_about_its_own_jobs_while_reading(tmp_path):
    """Jobs submitted before the window of the latest submission so far are dropped as they
    come: 20,000 GPU jobs a minute apart (two weeks), a one-day window."""
    from datetime import datetime, timedelta

    t0 = datetime(2024, 3, 1)
    p = tmp_path / "month.txt"
    with p.open("w") as f:
        f.write(PIPE_HEADER)
        for i in range(20_000):
            at = (t0 + timedelta(minutes=i)).isoformat()
            f.write(_pipe_row(i + 1, submit=at, start=at, end=(t0 + timedelta(minutes=i + 30)).isoformat()))
    t, peak = _peak_while(lambda: load_accounting_trace(p, days=1))
    assert len(t.jobs) == 1441 and "month: skipped 18559 job(s): older than the window" in t.warnings
    assert t.jobs[0].submit_time == 0 and t.jobs[-1].submit_time == 86400
    everything, peak_everything = _peak_while(lambda: load_accounting_trace(p))
    assert len(everything.jobs) == 20_000 and peak < peak_everything / 4, (peak, peak_everything)
