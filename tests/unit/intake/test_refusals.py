"""Why pald leaves a job to Slurm as it reads it (pal_slurm/intake/refusals.py): refused input
and the shapes it passes on purpose."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from pal_slurm.intake.refusals import (
    DEFERRED_SHAPES,
    PASSED_SHAPES,
    JobTraits,
    RefusedInput,
    defer_reason,
    pass_reason,
    refused_input,
)

USERS_DOC = Path(__file__).resolve().parents[3] / "docs" / "users.md"


def test_a_plain_job_is_placed():
    assert pass_reason(JobTraits()) is None


@pytest.mark.parametrize("trait, reason", [(t, r) for t, r, _ in PASSED_SHAPES])
def test_each_trait_passes_with_its_reason(trait, reason):
    assert pass_reason(JobTraits(**{trait: True})) == reason


def test_every_trait_has_a_row_and_the_users_table_lists_every_reason():
    passed, deferred = {t for t, _, _ in PASSED_SHAPES}, {t for t, _ in DEFERRED_SHAPES}
    assert passed | deferred == {f.name for f in fields(JobTraits)} and not passed & deferred
    doc = USERS_DOC.read_text()
    for _, reason, _ in PASSED_SHAPES:
        assert f"pal:pass={reason}" in doc, reason


def test_the_users_hold_wins_over_everything_else():
    assert pass_reason(JobTraits(user_hold=True, array=True, dependency=True)) == "user_hold"


def test_an_array_is_deferred_to_the_cycle_unless_throttled():
    assert pass_reason(JobTraits(array=True)) is None and defer_reason(JobTraits(array=True)) == "array"
    assert pass_reason(JobTraits(array=True, array_throttled=True)) == "array_throttle"
    assert defer_reason(JobTraits()) is None


def test_refused_input_reasons_name_a_field():
    assert refused_input("input-too-large:exclude") and refused_input("bad-input:nodelist")
    assert not refused_input("no_room") and not refused_input("input-too-large")
    assert RefusedInput("bad-input:gres", "x").reason == "bad-input:gres"
