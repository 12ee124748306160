"""A progress bar that appears only for work that lasts longer than a second."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # what click.progressbar returns (click's own termui imports it so)
    from click._termui_impl import ProgressBar


class DelayedProgress:
    """Call with a fraction in [0, 1]; draws a click progress bar on stderr after `delay_s`."""

    def __init__(self, label: str, delay_s: float = 1.0, steps: int = 1000):
        self.label = label
        self.delay_s = delay_s
        self.steps = steps
        self.start = time.monotonic()
        self.bar: ProgressBar[int] | None = None
        self.plain = False  # no terminal: announced in one line, the end in another
        self.pos = 0

    def __call__(self, fraction: float) -> None:
        if self.plain:
            return
        if self.bar is None:
            if time.monotonic() - self.start < self.delay_s:
                return
            if not sys.stderr.isatty():
                # no terminal to redraw on: one line now, one at the end
                click.echo(f"{self.label} ...", err=True)
                self.plain = True
                return
            self.bar = click.progressbar(length=self.steps, label=self.label, file=sys.stderr)
            self.bar.__enter__()
        target = int(max(0.0, min(1.0, fraction)) * self.steps)
        if target > self.pos:
            self.bar.update(target - self.pos)
            self.pos = target

    def close(self) -> None:
        if self.plain:
            click.echo(f"{self.label}: done in {time.monotonic() - self.start:.1f} s", err=True)
        elif self.bar is not None:
            self.bar.__exit__(None, None, None)
        self.bar = None
        self.plain = False

    def __enter__(self) -> "DelayedProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
