"""A run's cache of values derived from its inputs (a ranking's per-GPU factors as NumPy
arrays, PAL's locality x variability order), kept for the run instead of in module globals.

The run's owner (the engine: one per simulation, one per pald) creates one and passes it in
every PlacementContext; a context built without one gets its own (then it lasts one plan).
Entries are keyed by the *identity* of an input the run holds (hashing a 1,000-element tuple
on every call would cost more than the work itself); each entry keeps its input alive, so an
id is never reused while cached. Bounded: a long-lived pald that reloads rankings drops the
oldest entries."""

from __future__ import annotations

from typing import Callable, Hashable, TypeVar

T = TypeVar("T")


class RunCache:
    def __init__(self, limit: int = 256):
        self.limit = limit
        self._entries: dict[tuple[Hashable, int], tuple[object, object]] = {}

    def get(self, kind: Hashable, source: object, make: Callable[[], T]) -> T:
        """The value `make()` derives from `source` (for this `kind`), made once per run."""
        hit = self._entries.get((kind, id(source)))
        if hit is not None and hit[0] is source:
            return hit[1]  # type: ignore[return-value]
        return self.put(kind, source, make())

    def lookup(self, kind: Hashable, source: object) -> object | None:
        """The value kept for `source`, or None (hot paths: no closure to build per call)."""
        hit = self._entries.get((kind, id(source)))
        return hit[1] if hit is not None and hit[0] is source else None

    def put(self, kind: Hashable, source: object, value: T) -> T:
        if len(self._entries) >= self.limit:
            self._entries.pop(next(iter(self._entries)))
        self._entries[(kind, id(source))] = (source, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
