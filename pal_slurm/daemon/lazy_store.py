"""A store handle that opens (and re-opens) the database on demand.

pald must start and keep serving when the database is down at boot or goes away later; every
call either reaches a working repository or raises StoreUnavailable quickly (a failed open is
not retried more often than every `retry_s` seconds, so a dead database costs one fast error
per call, not a connection timeout each time).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from pal_slurm.store.errors import StoreError, StoreUnavailable


class LazyStore:
    def __init__(self, url: str, opener: Callable[[str], Any] | None = None, retry_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if opener is None:
            from pal_slurm.store.bootstrap import open_store

            opener = open_store
        self.url = url
        self._open: Callable[[str], Any] = opener
        self.retry_s = retry_s
        self.clock = clock
        self._repo: Any = None  # the open repository (store.repository.Repository)
        self._failed_at: float | None = None
        self._last_error = ""

    def _repository(self) -> Any:
        if self._repo is not None:
            return self._repo
        if self._failed_at is not None and self.clock() - self._failed_at < self.retry_s:
            raise StoreUnavailable(self._last_error or "store unavailable")
        try:
            self._repo = self._open(self.url)
            self._failed_at = None
        except Exception as exc:  # noqa: BLE001 - any open failure means "not now"
            self._failed_at = self.clock()
            self._last_error = f"cannot open store {self.url}: {exc}"
            raise StoreUnavailable(self._last_error) from exc
        return self._repo

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._repository(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except StoreError:
                raise  # typed already: unavailable, full, or a record the store refuses
            except Exception as exc:  # noqa: BLE001
                raise StoreUnavailable(f"store call {name} failed: {exc}") from exc

        return call

    def interrupt(self) -> int:
        """Break calls stuck in the open repository (from a watchdog thread). An open in
        progress cannot be broken; the connect timeout bounds it."""
        repo = self._repo
        return 0 if repo is None else int(repo.interrupt())

    def close(self) -> None:
        if self._repo is not None:
            try:
                self._repo.close()
            finally:
                self._repo = None
