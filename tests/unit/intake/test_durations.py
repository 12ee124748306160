"""The Slurm duration parser against the ONE golden table (tests/golden/slurm_durations.json):
what every option, sacct file and squeue record in pal-slurm reads a duration with."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pal_slurm.intake.durations import MAX_TEXT, DurationError, format_duration, minutes_field, parse_duration

GOLDEN = json.loads((Path(__file__).parents[2] / "golden" / "slurm_durations.json").read_text())


@pytest.mark.parametrize("case", GOLDEN["text"], ids=lambda c: repr(c["text"]))
def test_text(case):
    if case.get("error"):
        with pytest.raises(DurationError, match="not a duration"):
            parse_duration(case["text"])
    else:
        assert parse_duration(case["text"]) == case["seconds"]


@pytest.mark.parametrize("case", GOLDEN["minutes"], ids=lambda c: repr(c["value"]))
def test_minutes_field(case):
    assert minutes_field(case["value"]) == case["seconds"]


def test_error_names_the_accepted_forms():
    with pytest.raises(DurationError) as err:
        parse_duration("soon")
    assert "D-HH:MM:SS" in str(err.value) and "'soon'" in str(err.value)


def test_long_input_is_refused_quickly():
    started = time.perf_counter()
    for text in ("1" * 100_000, "1:" * 50_000, "1-" + "1" * 100_000):
        with pytest.raises(DurationError, match=f"at most {MAX_TEXT}"):
            parse_duration(text)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("seconds", [0, 59, 3600, 86399, 86400, 93784, 30 * 86400 + 5])
def test_format_round_trips(seconds):
    assert parse_duration(format_duration(seconds)) == seconds
