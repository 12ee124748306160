"""A termination signal as a clean exit, for commands that start processes they must stop.

Python's default SIGTERM (and SIGHUP) handling ends the interpreter at once: no `finally` runs,
so a `palctl replay` stopped by `kill`, `timeout` or a closed terminal left its lab cluster
(slurmctld, 16 slurmd, munged) and pald running. Inside `exit_cleanly_on_termination()` those
signals raise `Terminated` (a SystemExit, exit code 128 + the signal) where the program is,
so every `finally` on the way out stops what it started. SIGINT already raises
KeyboardInterrupt."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """The process was asked to terminate by `signum`."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


@contextmanager
def exit_cleanly_on_termination(signals: tuple[int, ...] = TERMINATING) -> Iterator[None]:
    """Raise `Terminated` on `signals` while inside. A signal the process ignores (SIGHUP under
    nohup) stays ignored; after the first signal all of them are ignored until the block is left,
    so a second one cannot cut the clean-up short. The previous handlers come back on exit."""
    def on_signal(signum: int, _frame: object) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
