import json

from pal_slurm.sim.metrics import JobOutcome, RunResult
from pal_slurm.sim.report import write_json


def test_json_has_no_nan_or_infinity(tmp_path):
    job = JobOutcome(0, 1, "vgg19", 0.0, 0.0, 10.0, 10.0, 10.0)
    run = RunResult("t", "pal", 0, "event", 4, [job], 40.0, extra={"odd": float("inf"), "nested": [float("nan")]})
    out = tmp_path / "r.json"
    write_json(out, [run], {"x": float("nan")})
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    assert doc["meta"]["x"] is None and doc["results"][0]["odd"] is None and doc["results"][0]["nested"] == [None]
