"""`repo`: the same contract tests against every Repository implementation.

memory -> MemoryRepository; sqlite -> a migrated file database in tmp_path;
postgres -> a migrated fresh database on the session's real PostgreSQL (marked `postgres`).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.repository import Repository


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def repo(request: pytest.FixtureRequest, tmp_path) -> Iterator[Repository]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/pal.db"
    else:
        url = request.getfixturevalue("postgres_url")
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()
