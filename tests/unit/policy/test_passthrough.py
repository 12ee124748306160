"""Shapes PAL passes to Slurm on purpose (pal_slurm/policy/passthrough.py)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from pal_slurm.policy.passthrough import PASSED_SHAPES, JobTraits, pass_reason

USERS_DOC = Path(__file__).resolve().parents[3] / "docs" / "users.md"


def test_a_plain_job_is_placed():
    assert pass_reason(JobTraits()) is None


@pytest.mark.parametrize("trait, reason", [(t, r) for t, r, _ in PASSED_SHAPES])
def test_each_trait_passes_with_its_reason(trait, reason):
    assert pass_reason(JobTraits(**{trait: True})) == reason


def test_every_trait_has_a_row_and_the_users_table_lists_every_reason():
    assert {t for t, _, _ in PASSED_SHAPES} == {f.name for f in fields(JobTraits)}
    doc = USERS_DOC.read_text()
    for _, reason, _ in PASSED_SHAPES:
        assert f"pal:pass={reason}" in doc, reason


def test_the_users_hold_wins_over_everything_else():
    assert pass_reason(JobTraits(user_hold=True, array=True, dependency=True)) == "user_hold"
