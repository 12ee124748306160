"""CommandRunner on real subprocesses: stand-in `sinfo`/`scontrol` scripts in a temp bin dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pal_slurm.slurm.errors import (
    SlurmCommandFailed,
    SlurmCommandMissing,
    SlurmCommandTimeout,
    SlurmError,
)
from pal_slurm.slurm.runner import CommandRunner


def _command(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    _command(d, "sinfo", 'echo "conf=$SLURM_CONF extra=$PAL_X args=$*"')
    _command(d, "scontrol", 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1')
    _command(d, "squeue", "sleep 5")
    return d


def test_runs_command_with_slurm_conf_and_env(bin_dir: Path) -> None:
    runner = CommandRunner(slurm_conf="/lab/slurm.conf", env={"PAL_X": "1"}, bin_dir=str(bin_dir))
    assert runner.run(["sinfo", "--json"]) == "conf=/lab/slurm.conf extra=1 args=--json\n"


def test_failure_carries_command_rc_and_stderr(bin_dir: Path) -> None:
    runner = CommandRunner(bin_dir=str(bin_dir))
    with pytest.raises(SlurmCommandFailed) as err:
        runner.run(["scontrol", "show", "job", "7"])
    assert err.value.argv == ("scontrol", "show", "job", "7")
    assert err.value.returncode == 1
    assert err.value.stderr == "slurm_load_jobs error: Invalid job id specified"
    assert "rc=1" in str(err.value) and "Invalid job id" in str(err.value)


def test_timeout(bin_dir: Path) -> None:
    runner = CommandRunner(bin_dir=str(bin_dir), timeout=0.2)
    with pytest.raises(SlurmCommandTimeout, match="timed out after 0.2 s"):
        runner.run(["squeue", "--json"])


def test_missing_command(bin_dir: Path) -> None:
    runner = CommandRunner(bin_dir=str(bin_dir))
    with pytest.raises(SlurmCommandMissing, match="'sbatch' not found.*slurm-client") as err:
        runner.run(["sbatch", "job.sh"])
    assert isinstance(err.value, SlurmError)


def test_missing_from_path(tmp_path: Path) -> None:
    runner = CommandRunner(env={"PATH": str(tmp_path)})
    with pytest.raises(SlurmCommandMissing):
        runner.run(["sinfo"])


def test_not_executable(bin_dir: Path) -> None:
    (bin_dir / "sbatch").write_text("not a program")
    os.chmod(bin_dir / "sbatch", 0o644)
    with pytest.raises(SlurmCommandMissing):  # which() skips non-executables
        CommandRunner(bin_dir=str(bin_dir)).run(["sbatch"])


@pytest.mark.parametrize("argv", [[], ["rm", "-rf", "/"], ["/usr/bin/sinfo"]])
def test_only_slurm_commands(bin_dir: Path, argv: list[str]) -> None:
    with pytest.raises(SlurmError):
        CommandRunner(bin_dir=str(bin_dir)).run(argv)


def test_output_with_a_non_utf8_byte_is_decoded_with_replacement(tmp_path: Path) -> None:
    """A user's Latin-1 comment (`caf\\xe9`) in squeue's output must not break the read."""
    d = tmp_path / "bin"
    d.mkdir()
    _command(d, "squeue", """printf '{"comment": "caf\\351"}\\n'; printf 'warn \\351\\n' >&2""")
    _command(d, "scontrol", r"printf 'bad \351 byte\n' >&2; exit 1")
    runner = CommandRunner(bin_dir=str(d), env={"LANG": "C", "LC_ALL": "C"})
    assert runner.run(["squeue", "--json"]) == '{"comment": "caf\ufffd"}\n'
    with pytest.raises(SlurmCommandFailed) as err:
        runner.run(["scontrol", "show", "job", "1"])
    assert err.value.stderr == "bad \ufffd byte"
