"""The shared hostlist membership table (tests/golden/hostlist_match.json) against Python's
hostlist module: the same cases the Lua hook's compiled matcher is held to
(tests/lua/test_pal_hostlist.py), so both sides read a node list the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_slurm.slurm.errors import HostlistError
from pal_slurm.intake.hostlist import expand

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "hostlist_match.json"
CASES = json.loads(GOLDEN.read_text())["cases"]


def expression(case: dict) -> str:
    if "expr" in case:
        return case["expr"]
    return "".join(text * times for text, times in case["expr_parts"])


def case_id(case: dict) -> str:
    return f"{case.get('expr', 'long')[:30]}~{case['name']}"


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["status"] == "ok" and c.get("expand", True)], ids=case_id)
def test_membership_agrees_with_expand(case: dict) -> None:
    assert (case["name"] in expand(expression(case))) is case["member"]


@pytest.mark.parametrize("case", [c for c in CASES if c["status"] == "malformed"], ids=case_id)
def test_malformed_lists_are_refused(case: dict) -> None:
    with pytest.raises(HostlistError):
        expand(expression(case))


def test_the_table_covers_every_status() -> None:
    assert {c["status"] for c in CASES} == {"ok", "malformed", "too-large"}
    assert any(c["member"] for c in CASES) and any(not c["member"] for c in CASES)
