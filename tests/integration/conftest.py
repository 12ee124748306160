"""Shared fixtures for integration tests on a real Slurm lab cluster.

`slurm_lab` (session scope) starts one lab (4 nodes x 4 emulated GPUs, per-slot typed GRES,
pass-through job_submit.lua) for every test that asks for it, and stops it at the end. Tests
that need their own hook or daemon environment call
`pal_lab.lab.start_lab(tmp_dir, hook=..., env=...)` themselves (a module-scoped
fixture is the usual shape, see `lab_factory`).

The lab needs Debian's slurmctld, slurmd, slurm-client and munge (scripts/install-deps.sh);
without them these tests are skipped with the list of what is missing. CI installs them.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from pal_lab.lab import LabCluster, missing_binaries, start_lab


def _skip_without_slurm() -> None:
    missing = missing_binaries()
    if missing:
        pytest.skip(
            "Slurm lab cluster unavailable, missing: "
            + ", ".join(missing)
            + " (run scripts/install-deps.sh)"
        )


@pytest.fixture(scope="session")
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabCluster]:
    """One running lab cluster for the whole session (default hook, no prolog/epilog)."""
    _skip_without_slurm()
    lab = start_lab(tmp_path_factory.mktemp("slurm-lab"))
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def lab_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., LabCluster]]:
    """Start extra labs with their own hook/env: `lab = lab_factory(hook=path, env={...})`.

    Accepts every keyword of `start_lab`; every lab started is stopped when the module ends.
    """
    _skip_without_slurm()
    started: list[LabCluster] = []

    def factory(**kwargs) -> LabCluster:
        lab = start_lab(tmp_path_factory.mktemp("slurm-lab"), **kwargs)
        started.append(lab)
        return lab

    try:
        yield factory
    finally:
        for lab in started:
            lab.stop()
