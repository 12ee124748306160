import pytest

from pal_lab.replay.payload import run_factors

SPEC = {"slowdown": {"a": [1.0, 1.2], "b": [0.9, 1.5]}, "rack": {"a": "l1", "b": "l2"},
        "net": {"1,1": 1.0, "2,1": 1.3, "2,2": 2.0}}


def test_slowest_gpu_and_the_tiers_spanned_decide():
    assert run_factors(SPEC, {"a": (0,)}) == (1.0, 1.0)
    assert run_factors(SPEC, {"a": (0, 1)}) == (1.2, 1.0)
    assert run_factors(SPEC, {"a": (0,), "b": (1,)}) == (1.5, 2.0)


def test_no_gpu_is_an_error():
    with pytest.raises(ValueError, match="holds no GPU"):
        run_factors(SPEC, {})
