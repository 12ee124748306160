"""The free GPUs of one round, as its allocators read them.

A round (policy.skeletons) takes GPUs job after job from one free set; its allocators read it
in different forms: the sorted id list (packed, first fit, random), the id array or a boolean
mask over the cluster's GPUs (PAL, PM-First and the per-node pick, which are vectorised).
Converting a Python list of thousands of ids into an array at every allocation cost more than
the allocation itself on an 8,192-GPU cluster, so the round keeps one `FreeGpus`: the mask is
the truth, updated in place as GPUs are taken or given back, and each other form is kept in
step once it has been read (the list) or made again from the mask when next read (the array).
An allocator may also keep its own view of the round's free GPUs here (`views`: PM-First's
per-GPU keys), brought up to date from `taken`, the GPUs taken since the set was made; a GPU
given back drops every view.
"""

from __future__ import annotations

import bisect
from typing import Hashable, Iterable

import numpy as np


# up to this many GPUs, a take clears them in the mask one by one: numpy's indexing by a list
# costs more than a few scalar writes (a non-sticky round takes millions of small sets)
_FEW = 8


class FreeGpus:
    __slots__ = ("mask", "origin", "_count", "_ids", "_array", "taken", "views")

    def __init__(self, size: int, ids: Iterable[int]):
        self.mask = np.zeros(size, dtype=bool)
        self.mask[np.fromiter(ids, dtype=np.int64)] = True
        self.origin = self.mask.tobytes()  # the set as made (what `taken` started from)
        self._count = int(self.mask.sum())
        self._ids: list[int] | None = None
        self._array: np.ndarray | None = None
        self.taken: list[int] = []  # every GPU taken since the set was `origin`
        self.views: dict[Hashable, object] = {}  # allocators' views, each reading `taken` from where it left off

    def __len__(self) -> int:
        return self._count

    def ids(self) -> list[int]:
        """The free GPU ids, ascending (kept in step by take/give once read)."""
        if self._ids is None:
            self._ids = self.array().tolist()
        return self._ids

    def array(self) -> np.ndarray:
        """The free GPU ids, ascending, as a read-only int64 array."""
        if self._array is None:
            self._array = np.flatnonzero(self.mask)
            self._array.flags.writeable = False
        return self._array

    def take(self, gpus: Iterable[int]) -> None:
        """`gpus` (free ones) are no longer free."""
        gone = sorted(gpus, reverse=True)
        if len(gone) <= _FEW:
            mask = self.mask
            for g in gone:
                mask[g] = False
        else:
            self.mask[gone] = False
        self._count -= len(gone)
        self._array = None
        self.taken.extend(gone)
        free = self._ids
        if free is not None:
            for g in gone:
                i = bisect.bisect_left(free, g)
                if i < len(free) and free[i] == g:
                    del free[i]

    def give(self, gpus: Iterable[int]) -> None:
        """`gpus` (held ones) are free again."""
        back = list(gpus)
        self.mask[back] = True
        self._count = int(self.mask.sum())
        self._array = None
        self._ids = None
        self.origin = self.mask.tobytes()
        self.taken.clear()
        self.views.clear()

    def signature(self) -> bytes:
        """The free set, comparable between rounds (a round's memo checks it)."""
        return self.origin if not self.taken else self.mask.tobytes()
