"""Malformed traces and variability files, generated, through the real CLI: never a traceback,
never a hang, never NaN/inf in what is printed. Either exit 0 (maybe with warnings) or exit 1
with one `Error: FILE...` line."""

from __future__ import annotations

import re
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from pal_slurm.cli.main import cli

BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", "1e400", "1e300", "-0", "", " ", "abc",
               "1,5", "0x10", "\u00bd", "1e-320", "99999999999999999999999"]
MODELS = ["vgg19", "resnet50", "BERT", "GPT2", "PointNet", "DCGAN", "VGG19", "mystery", "", "\u00e9t\u00e9"]
NONFINITE = re.compile(r"\b(nan|inf)\b", re.IGNORECASE)


@contextmanager
def time_limit(seconds: float):
    """Turn a hang into a test failure (the CLI runs in this thread)."""

    def _alarm(_signum, _frame):
        raise TimeoutError(f"no answer in {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cell(valid):
    return st.one_of(valid, st.sampled_from(BAD_NUMBERS), st.text(max_size=6))


@st.composite
def damaged_bytes(draw, text: str) -> bytes:
    """The text as bytes, maybe with a BOM, a stray byte, a NUL, or cut short."""
    data = text.encode("utf-8")
    how = draw(st.sampled_from(["none", "bom", "latin1", "nul", "truncate", "empty", "crlf"]))
    pos = draw(st.integers(0, max(0, len(data))))
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "latin1":
        return data[:pos] + b"\xe9\xff" + data[pos:]
    if how == "nul":
        return data[:pos] + b"\0" + data[pos:]
    if how == "truncate":
        return data[:pos]
    if how == "empty":
        return b""
    if how == "crlf":
        return data.replace(b"\n", b"\r\n")
    return data


@st.composite
def traces(draw) -> bytes:
    header = draw(st.sampled_from(["job_id,num_gpus,submit_time,duration,model",
                                   "model,duration,submit_time,num_gpus,job_id",
                                   "job_id,num_gpus,submit_time,duration",
                                   "job_id,num_gpus,submit_time,duration,model,extra"]))
    cols = header.split(",")
    valid = {
        "job_id": st.integers(0, 6).map(str),
        "num_gpus": st.sampled_from(["1", "2", "4", "8", "9", "64"]),
        "submit_time": st.floats(0, 36000).map(lambda v: f"{v:.1f}"),
        "duration": st.integers(1, 4000).map(str),
        "model": st.sampled_from(MODELS),
        "extra": st.just("x"),
    }
    rows = draw(st.lists(st.tuples(*[cell(valid[c]) for c in cols]), max_size=6))
    lines = [header]
    for row in rows:
        fields = list(row)
        if draw(st.integers(0, 9)) == 0:
            fields = fields[:-1]  # a ragged row
        lines.append(",".join(f.replace(",", ";").replace("\n", " ").replace("\r", " ").replace('"', "'")
                              for f in fields))
    return draw(damaged_bytes("\n".join(lines) + "\n"))


def check(result, path: Path) -> None:
    assert not isinstance(result.exception, (TimeoutError,)), "hang"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 0:
        assert not NONFINITE.search(result.stdout), result.stdout
    else:
        errors = [l for l in result.output.splitlines() if l.startswith("Error: ")]
        assert len(errors) == 1, result.output
        assert str(path) in errors[0] or "job" in errors[0], errors[0]


def run_on(data: bytes, name: str, *commands: list[str]) -> None:
    """Write `data` as `name` in a fresh folder (empty config, private store), run each palctl
    command ("{}" stands for the file's path) under a time limit, and check every answer."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        env = {"PAL_CONFIG": str(Path(d) / "pal.toml"), "PAL_DB_URL": f"sqlite:///{d}/pal.db"}
        Path(env["PAL_CONFIG"]).write_text("")
        for args in commands:
            with time_limit(60):
                r = CliRunner(env=env).invoke(cli, [a.format(path) for a in args])
            check(r, path)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=traces(), mode=st.sampled_from(["compat", "event"]))
def test_simulate_never_hangs_or_crashes_on_malformed_traces(data, mode):
    run_on(data, "trace.csv",
           ["simulate", "--trace", "{}", "--mode", mode, "--cluster", "2x4", "--policies", "pal,packed-sticky"])


@st.composite
def variability_files(draw) -> bytes:
    if draw(st.booleans()):
        lines = ["uuid,perf"]
        for _ in range(draw(st.integers(0, 6))):
            gid = draw(st.one_of(st.sampled_from(["c1-0", "c1-1", "c2-0", "c2-3"]), st.text(max_size=5)))
            perf = draw(cell(st.floats(0.5, 2.0).map(lambda v: f"{v:.4f}")))
            lines.append(f"{gid},{perf}".replace("\n", " ").replace("\r", " ").replace('"', "'"))
    else:
        lines = [",GPU_ID,GPU_UUID,Local_GPU_ID,Node_ID,PerfVar_classA,PerfVar_classB"]
        for i in range(draw(st.integers(0, 6))):
            gid = draw(cell(st.integers(0, 7).map(str)))
            slot = draw(cell(st.integers(0, 3).map(str)))
            a, b = (draw(cell(st.floats(0.5, 2.0).map(lambda v: f"{v:.4f}"))) for _ in range(2))
            lines.append(",".join(s.replace(",", ";").replace("\n", " ").replace("\r", " ").replace('"', "'")
                                  for s in (str(i), gid, f"GPU-{i}", slot, "0", a, b)))
    return draw(damaged_bytes("\n".join(lines) + "\n"))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=variability_files())
def test_import_variability_never_crashes_on_malformed_files(data):
    run_on(data, "var.csv", ["import-variability", "{}", "--class", "A"],
           ["simulate", "--synthetic", "5", "--mode", "event", "--cluster", "2x4", "--variability", "A={}",
            "--policies", "pal"])


@st.composite
def accounting_files(draw) -> bytes:
    times = st.sampled_from(["2024-03-01T10:00:00", "2024-03-01T11:00:00", "2024-03-02T00:00:00", "Unknown", "None"])
    lines = ["JobID|JobName|Account|Partition|Submit|Start|End|Timelimit|AllocTRES|NNodes|State|Comment"]
    for i in range(draw(st.integers(0, 6))):
        fields = [
            draw(st.one_of(st.sampled_from([str(i), f"{i}.batch", "7", f"{i}_2"]), st.text(max_size=4))),
            draw(st.sampled_from(["bert", "resnet-train", "", "x"])), "acct", "gpu",
            draw(st.one_of(times, st.text(max_size=6))), draw(st.one_of(times, st.text(max_size=6))),
            draw(st.one_of(times, st.text(max_size=6))),
            draw(st.one_of(st.sampled_from(["01:00:00", "1-00:00:00", "UNLIMITED", "30", "bad"]), st.text(max_size=5))),
            draw(st.one_of(st.sampled_from(["gres/gpu=2,node=1", "gres/gpu:a100=9", "cpu=1", "", "gres/gpu=nan"]),
                           st.text(max_size=8))),
            draw(cell(st.integers(0, 3).map(str))), "COMPLETED",
            draw(st.sampled_from(["", "pal:class=A", "pal:class=", "pal:gpus=0", "pal:class=B pal:class=C"])),
        ]
        lines.append("|".join(f.replace("|", "/").replace("\n", " ").replace("\r", " ") for f in fields))
    return draw(damaged_bytes("\n".join(lines) + "\n"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=accounting_files(), mode=st.sampled_from(["compat", "event"]))
def test_simulate_never_crashes_on_malformed_accounting(data, mode):
    run_on(data, "acct.txt",
           ["simulate", "--trace", "sacct:{}", "--mode", mode, "--cluster", "2x4", "--policies", "pal,packed-sticky"])
