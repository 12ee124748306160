"""The trial path on the lab (real Slurm, the real hook and pald): with the partition in
`shadow`, PAL jobs run exactly where the same submissions run with PAL `off` (same nodes, same
GPUs, none held or pinned); pald records what it would have done and where Slurm ran each job,
and `palctl trial report` covers them. `palctl mode` switches at run time."""

from __future__ import annotations

import json
import time

import pytest

from pal_slurm.model.modes import SHADOW_PREFIX, SHADOW_STARTED
from pal_slurm.store.bootstrap import open_store
from tests.integration.test_faults import Rig, quiet, rig_in, wait_for

pytestmark = pytest.mark.slurm

SHAPES = ["gpu:1", "gpu:2", "gpu:1", "gpu:3", "gpu:2", "gpu:1"]  # 10 of the lab's 16 GPUs: all start at once


@pytest.fixture(scope="module")
def rig():
    with rig_in("typed") as r:
        yield r


def run_shapes(rig: Rig) -> list[tuple[int, dict[str, frozenset[int]], str]]:
    """Submit SHAPES one after another (each running before the next goes in); (job id, GPUs
    by node, admin comment) of each, then cancel them all."""
    ids = []
    for shape in SHAPES:
        job = rig.lab.sbatch(f"--gres={shape}", "--comment=pal:class=resnet", wrap="sleep 300")
        rig.lab.wait_job(job, timeout=30, states=("RUNNING",))
        ids.append(job)
    wait_for(lambda: all(j.gpu_slots for j in rig.lab.reader.jobs() if j.job_id in ids), 10, "no GPUs read")
    jobs = {j.job_id: j for j in rig.lab.reader.jobs()}
    out = [(i, dict(jobs[i].gpu_slots), jobs[i].admin_comment) for i in ids]
    time.sleep(2.5)  # two of pald's cycles: each running shadow job seen and recorded
    rig.slurm("scancel", *map(str, ids))
    for i in ids:
        rig.lab.wait_job(i, timeout=60)
    quiet(rig)
    return out


def test_shadow_runs_jobs_where_slurm_would_and_records_what_pal_would_have_done(rig):
    quiet(rig)
    assert rig.palctl("mode", "*", "off").returncode == 0
    off = run_shapes(rig)
    assert all(comment.startswith("pal:pass=partition_off") for _, _, comment in off), off
    p = rig.palctl("mode", "*", "shadow")
    assert p.returncode == 0 and "pald follows it" in p.stdout, p.stdout + p.stderr
    shadow = run_shapes(rig)
    # the same nodes and GPUs, submission by submission; never held, never pinned
    assert [gpus for _, gpus, _ in shadow] == [gpus for _, gpus, _ in off]
    assert all(comment.startswith("pal:pass=shadow") and "pal:defer" not in comment for _, _, comment in shadow)

    time.sleep(1.5)  # the store link writes what pald recorded
    store = open_store(rig.db)
    try:
        records = store.decisions(limit=1000, reason_prefix="shadow")
    finally:
        store.close()
    would = [d for d in records if d.reason.startswith(SHADOW_PREFIX)]
    started = {d.job_id: d for d in records if d.reason.startswith(SHADOW_STARTED)}
    assert len(would) == len(SHAPES)
    for job_id, gpus, _ in shadow:  # where Slurm ran it, as pald recorded it
        assert started[str(job_id)].nodes == {n: tuple(sorted(s)) for n, s in gpus.items()}
    report = rig.palctl("trial", "report", "--json")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["shadowed"] == len(SHAPES) and doc["started"] == len(SHAPES)
    placed = doc["would"].get("place", 0)
    assert len(doc["jobs"]) == placed and placed >= 1
    assert {j["job_id"] for j in doc["jobs"]} <= {str(i) for i, _, _ in shadow}
    text = rig.palctl("trial", "report").stdout
    assert f"over {len(SHAPES)} GPU jobs submitted in shadow" in text

    p = rig.palctl("mode", "*", "on")  # and on again: the jobs are PAL's
    assert p.returncode == 0
    on = run_shapes(rig)
    assert all(comment.startswith(("pal:placed=", "pal:defer")) for _, _, comment in on), on
    time.sleep(1.5)
    doc = json.loads(rig.palctl("trial", "report", "--json").stdout)
    assert doc["ran"]["shadow"]["jobs"] == len(SHAPES)  # where Slurm ran the shadow jobs
    assert doc["ran"]["on"]["jobs"] == len(SHAPES)  # and where PAL ran the jobs it placed
    assert doc["ran"]["on"]["gpus"] == doc["ran"]["shadow"]["gpus"] == 10
    text = rig.palctl("trial", "report").stdout
    assert "Slurm (shadow)" in text and "PAL (on)" in text
