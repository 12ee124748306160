"""`palctl slurm gres-conf`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli


def run(*args: str):
    return CliRunner().invoke(cli, ["slurm", "gres-conf", *args], catch_exceptions=False)


def test_prints_gres_conf_and_slurm_conf_fragment() -> None:
    r = run("--nodes", "gpu[01-04]", "--gpus", "4")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "AutoDetect=off" in lines
    assert "NodeName=gpu[01-04] Name=gpu Type=s0 File=/dev/nvidia0" in lines
    assert "NodeName=gpu[01-04] Name=gpu Type=s3 File=/dev/nvidia3" in lines
    assert not any("Type=s4" in line for line in lines)
    # the slurm.conf part is commented out, so stdout can be redirected into gres.conf as is
    assert "#   NodeName=gpu[01-04] Gres=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1" in lines
    assert all(line.startswith(("#", "AutoDetect", "NodeName=gpu[01-04] Name=")) for line in lines)


def test_writes_output_file_with_device_pattern(tmp_path: Path) -> None:
    out = tmp_path / "gres.conf"
    r = run("--nodes", "n[1-2],n5", "--gpus", "2", "--device-pattern", "/lab/dev/g{slot}",
            "--output", str(out))
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == "NodeName=n[1-2,5] Gres=gpu:s0:1,gpu:s1:1"
    text = out.read_text()
    assert "NodeName=n[1-2,5] Name=gpu Type=s1 File=/lab/dev/g1" in text
    assert out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nodes", "gpu[01-04", "--gpus", "4"], "unclosed '['"),
        (["--nodes", "gpu[04-01]", "--gpus", "4"], "descending"),
        (["--nodes", "", "--gpus", "4"], "--nodes is empty"),
        (["--nodes", "gpu01", "--gpus", "4", "--device-pattern", "/dev/nvidia"], "{slot}"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], message: str) -> None:
    r = run(*args)
    assert r.exit_code == 1
    assert message in r.output


@pytest.mark.parametrize("gpus", ["0", "-2", "four"])
def test_bad_gpu_count_is_a_usage_error(gpus: str) -> None:
    r = run("--nodes", "gpu01", "--gpus", gpus)
    assert r.exit_code == 2
    assert "--gpus" in r.output


def test_failed_write_keeps_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "gres.conf"
    out.write_text("precious\n")
    r = run("--nodes", "gpu[01-", "--gpus", "4", "--output", str(out))
    assert r.exit_code == 1
    assert out.read_text() == "precious\n"


def test_unwritable_output_directory(tmp_path: Path) -> None:
    r = run("--nodes", "gpu01", "--gpus", "1", "--output", str(tmp_path / "missing" / "gres.conf"))
    assert r.exit_code != 0
    assert "gres.conf" in r.output


def test_from_the_sites_gres_conf(tmp_path: Path) -> None:
    site = tmp_path / "site-gres.conf"
    site.write_text("NodeName=tux[0-15] Name=gpu File=/dev/nvidia[0-3]\nName=mps Count=100 File=/dev/nvidia0\n")
    out = tmp_path / "gres.conf"
    r = run("--from", str(site), "--output", str(out))
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == "NodeName=tux[0-15] Gres=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"
    text = out.read_text()
    assert "NodeName=tux[0-15] Name=gpu Type=s2 File=/dev/nvidia2" in text and "Name=mps Count=100" in text


def test_from_a_gres_conf_with_model_types_gives_slots_features_and_the_hooks_models(tmp_path: Path) -> None:
    site = tmp_path / "site-gres.conf"
    site.write_text("AutoDetect=off\nNodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-3]\n"
                    "NodeName=n2 Name=gpu Type=v100 File=/dev/nvidia[0-1]\n")
    out = tmp_path / "gres.conf"
    r = CliRunner().invoke(cli, ["slurm", "gres-conf", "--from", str(site), "--output", str(out)])
    assert r.exit_code == 0, r.output
    assert "NodeName=n1 Gres=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1 Features=a100" in r.output
    assert "NodeName=n2 Gres=gpu:s0:1,gpu:s1:1 Features=v100" in r.output
    assert "PAL_GPU_MODELS=a100,v100" in r.output
    assert "Type=a100" not in out.read_text() and "NodeName=n2 Name=gpu Type=s1 File=/dev/nvidia1" in out.read_text()
    mixed = tmp_path / "mixed.conf"
    mixed.write_text("NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia0\nNodeName=n1 Name=gpu Type=v100 File=/dev/nvidia1\n")
    out2 = tmp_path / "gres2.conf"
    r = CliRunner().invoke(cli, ["slurm", "gres-conf", "--from", str(mixed), "--output", str(out2)])
    assert r.exit_code != 0 and "line 2" in r.output and "two models" in r.output
    assert "nothing written" in r.output and not out2.exists()
    both = CliRunner().invoke(cli, ["slurm", "gres-conf", "--from", str(site), "--gpus", "4"])
    assert both.exit_code != 0 and "--gpus" in both.output
    neither = CliRunner().invoke(cli, ["slurm", "gres-conf"])
    assert neither.exit_code != 0 and "--from" in neither.output
