"""Polling for a condition in tests that watch another thread or process."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, step: float = 0.05) -> bool:
    """True as soon as `predicate()` is true, False if it is still false after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
