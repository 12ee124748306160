import pytest

from pal_slurm.daemon.lazy_store import LazyStore
from pal_slurm.store.errors import InvalidRecord, StoreUnavailable
from pal_slurm.store.memory import MemoryRepository


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_opens_on_demand_retries_after_the_backoff_and_keeps_typed_errors():
    clock = Clock()
    attempts = []

    def opener(url):
        attempts.append(url)
        if len(attempts) < 2:
            raise OSError("connection refused")
        return MemoryRepository()

    store = LazyStore("postgresql://x/y", opener=opener, retry_s=5.0, clock=clock)
    with pytest.raises(StoreUnavailable, match="connection refused"):
        store.latest_ranking()
    with pytest.raises(StoreUnavailable):  # within the backoff: no new attempt
        store.latest_ranking()
    assert len(attempts) == 1
    clock.t = 6.0
    assert store.latest_ranking() is None
    with pytest.raises(InvalidRecord):  # bad input stays bad input, not an outage
        store.set_app_class("ok-app", "Z")
