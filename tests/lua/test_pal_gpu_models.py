"""GPU model requests on a site with per-slot types (pal.lua: M.gpu_models, M.model_changes):
every job that names a configured model, PAL's or not, also when pald is down, asks an untyped
count on nodes with the model's feature; anything the hook cannot rewrite stays as submitted."""

import pytest

from hook_harness import Hook

MODELS = {"PAL_GPU_MODELS": "a100,v100"}


def test_without_configured_models_nothing_is_rewritten():
    hook = Hook()
    rc, job = hook.submit({"tres_per_node": "gres:gpu:a100:2"})
    assert rc == 0 and job["tres_per_node"] == "gres:gpu:a100:2" and "features" not in job
    assert hook.writes == []


@pytest.mark.parametrize("field, given, want", [
    ("tres_per_node", "gres:gpu:a100:2", "gres:gpu:2"),  # --gres=gpu:a100:2 (22.05 spelling)
    ("tres_per_node", "gres/gpu:v100:1", "gres/gpu:1"),  # 23.11+ spelling
    ("tres_per_job", "gres:gpu:v100:4", "gres:gpu:4"),  # --gpus=v100:4
    ("tres_per_task", "gres:gpu:a100", "gres:gpu:1"),  # --gpus-per-task=a100: one
    ("tres_per_node", "gres:gpu:a100:2,gres:mps:100", "gres:gpu:2,gres:mps:100"),
])
def test_a_model_request_becomes_an_untyped_count_with_the_models_feature(field, given, want):
    hook = Hook(env=MODELS)
    rc, job = hook.submit({field: given})
    model = "v100" if "v100" in given else "a100"
    assert rc == 0 and job[field] == want and job["features"] == model
    assert any("constraint=" + model in line for line in hook.info)


@pytest.mark.parametrize("features, want", [
    ("ib", "ib&a100"),
    ("ib&fast", "ib&fast&a100"),
    ("ib|eth", "(ib|eth)&a100"),
])
def test_the_model_is_anded_with_the_jobs_own_constraint(features, want):
    _, job = Hook(env=MODELS).submit({"tres_per_node": "gres:gpu:a100:1", "features": features})
    assert job["features"] == want and job["tres_per_node"] == "gres:gpu:1"


@pytest.mark.parametrize("fields, why", [
    ({"tres_per_node": "gres:gpu:a100:1", "features": "[rack1|rack2]"}, "counts or brackets"),
    ({"tres_per_node": "gres:gpu:a100:1", "features": "big*2"}, "counts or brackets"),
    ({"tres_per_node": "gres:gpu:a100:1", "tres_per_job": "gres:gpu:v100:1"}, "two models"),
    ({"tres_per_node": "gres:gpu:a100:x"}, "unreadable"),
])
def test_what_cannot_be_rewritten_stays_as_submitted(fields, why):
    hook = Hook(env=MODELS)
    _, job = hook.submit(dict(fields))
    for k, v in fields.items():
        assert job[k] == v
    assert hook.writes == [] and any("left as submitted" in line and why in line for line in hook.info)


def test_untyped_slot_and_unknown_type_requests_are_not_touched():
    hook = Hook(env=MODELS)
    _, job = hook.submit({"tres_per_node": "gres:gpu:s2:1,gres:gpu:s3:1", "tres_per_job": "gres:gpu:h100:1"})
    assert job["tres_per_node"] == "gres:gpu:s2:1,gres:gpu:s3:1" and job["tres_per_job"] == "gres:gpu:h100:1"
    assert hook.writes == []


def test_a_pal_job_is_rewritten_before_pald_sees_it_and_when_pald_is_down():
    hook = Hook(env=MODELS)
    hook.stub(connect_error="connection refused")
    rc, job = hook.submit({"comment": "pal:class=resnet", "tres_per_node": "gres:gpu:v100:2"})
    assert rc == 0 and job["tres_per_node"] == "gres:gpu:2" and job["features"] == "v100"
    assert "pal:pass=" in job.get("admin_comment", "")


def test_overrides_name_the_models_too():
    hook = Hook()
    hook.lua.execute('PAL_OVERRIDES = { gpu_models = { "h100" } }')
    _, job = hook.submit({"tres_per_node": "gres:gpu:h100:1"})
    assert job["tres_per_node"] == "gres:gpu:1" and job["features"] == "h100"
