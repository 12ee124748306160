"""benchmarks/slurm_replay.py's --stock-from: pald arms replayed alone compared with an
earlier replay's stock arm (its row and work dir borrowed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "slurm_replay.py"


def _script():
    spec = importlib.util.spec_from_file_location("slurm_replay_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TAG = "workload-4-s150-n160-seed2"


def _replay(root: Path, arms: list[str]) -> Path:
    """A replay's --out as `replay` writes it: `<tag>.json` and `<tag>/<arm>/` per arm."""
    for arm in arms:
        (root / TAG / arm).mkdir(parents=True)
        (root / TAG / arm / "pal.db").write_text(arm)
    rows = [{"trace": "workload-4", "arm": arm, "time_scale": 150.0, "seed": 2, "avg_jct_s": 7000.0 + i}
            for i, arm in enumerate(arms)]
    (root / f"{TAG}.json").write_text(json.dumps({"results": rows}))
    return root


def test_a_pald_arm_replayed_alone_gets_the_earlier_stock_row_and_work_dir(tmp_path: Path) -> None:
    earlier = _replay(tmp_path / "earlier", ["stock", "pal-fit"])
    now = _replay(tmp_path / "now", ["pal-fit"])
    assert _script().borrow_arm(now, earlier) == [TAG]
    rows = json.loads((now / f"{TAG}.json").read_text())["results"]
    assert [r["arm"] for r in rows] == ["pal-fit", "stock"]
    assert rows[1]["avg_jct_s"] == 7000.0  # the earlier replay's stock row, not its pal-fit
    assert (now / TAG / "stock" / "pal.db").read_text() == "stock"
    assert _script().borrow_arm(now, earlier) == []  # borrowed once: nothing doubled
    assert len(json.loads((now / f"{TAG}.json").read_text())["results"]) == 2


def test_a_directory_without_those_replays_is_an_error_not_nothing_to_compare(tmp_path: Path) -> None:
    now = _replay(tmp_path / "now", ["pal-fit"])
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(FileNotFoundError, match="no replay"):
        _script().borrow_arm(now, tmp_path / "elsewhere")
    without_stock = _replay(tmp_path / "other", ["pal-fit"])
    with pytest.raises(FileNotFoundError, match="no stock arm"):
        _script().borrow_arm(now, without_stock)
    assert [r["arm"] for r in json.loads((now / f"{TAG}.json").read_text())["results"]] == ["pal-fit"]
