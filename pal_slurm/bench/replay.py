"""Replay backend: a lab cluster's GPUs take on the measured profiles of real GPUs.

Each cluster GPU (node, slot) is mapped, per class, to one GPU of a per-run variability dataset
(the Longhorn `*-agg.csv` files, one per class A..D). The mapping is a pure function of
(seed, class, node, slot), so the prolog on one node and `palctl` on another agree without
sharing state, and tests can plant profiles and check that ranking recovers them. Each sample is
one of that dataset GPU's own runs (walked without replacement) (normalised by the file's median), so run-to-run noise is
real noise, not a made-up distribution. Values are time-like: >1 slower than the median GPU.

With `cluster` (nodes in cluster order, GPUs per node) the mapping is instead the event
simulator's draw for that cluster and seed (`ranking.profiles.gpu_picks`, GPU index = position
of the node in `cluster` x GPUs per node + slot): a lab replaying a trace (`palctl replay`) then
has exactly the GPUs the simulator predicts it with, and a ranking measured on it is measured,
not handed in.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Callable, Mapping, Sequence

from pal_slurm.bench.base import Availability, GpuTarget, NoGpuAvailable, Sample
from pal_slurm.ranking.datasets import RunSet, artifact_class_runs


def _digest(*parts: object) -> int:
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class ReplayBackend:
    """Deterministic replay of dataset profiles (see module docstring)."""

    name = "replay"

    def __init__(
        self,
        seed: int = 0,
        class_runs: Mapping[str, RunSet] | None = None,
        nonce: object | None = None,
        clock: Callable[[], float] = time.time,
        slowdown: Mapping[tuple[str, int], float] | None = None,
        cluster: tuple[Sequence[str], int] | None = None,
    ) -> None:
        self.seed = seed
        self._cluster = (tuple(cluster[0]), int(cluster[1])) if cluster else None
        self._picks: dict[str, tuple[str, ...]] | None = None
        self._slowdown = dict(slowdown or {})  # (node, slot) -> factor: an emulated degraded GPU
        self._class_runs = class_runs
        self._nonce = nonce  # e.g. the job id: same job, same draw
        self._calls: dict[str, int] = {}
        self._clock = clock
        self._per_class: dict[str, tuple[tuple[str, ...], dict[str, tuple[float, ...]]]] = {}

    def _runs(self) -> Mapping[str, RunSet]:
        if self._class_runs is None:
            self._class_runs = artifact_class_runs()
        return self._class_runs

    def _dataset(self, perf_class: str) -> tuple[tuple[str, ...], dict[str, tuple[float, ...]]]:
        if perf_class not in self._per_class:
            runs = self._runs()
            if perf_class not in runs:
                known = ", ".join(sorted(runs))
                raise ValueError(f"replay has no dataset for class {perf_class!r} (known: {known})")
            per_gpu = runs[perf_class].runs_of()
            self._per_class[perf_class] = (tuple(sorted(per_gpu)), per_gpu)
        return self._per_class[perf_class]

    def available(self) -> Availability:
        return Availability.yes("replays bundled variability datasets")

    def device_count(self) -> int:
        """Replay measures no GPU of this host: its targets are named (node, slot) pairs."""
        raise NoGpuAvailable("replay: measures no local GPU; name the nodes and GPUs to replay")

    def dataset_gpu(self, node: str, slot: int, perf_class: str) -> str:
        """Which dataset GPU stands for (node, slot) in this class."""
        ids, _ = self._dataset(perf_class)
        if self._cluster is not None:
            return self._simulator_pick(self._cluster, node, slot, perf_class)
        return ids[_digest(self.seed, perf_class, node, slot) % len(ids)]

    def _simulator_pick(self, cluster: tuple[tuple[str, ...], int], node: str, slot: int, perf_class: str) -> str:
        nodes, per_node = cluster
        if node not in nodes or not 0 <= slot < per_node:
            raise ValueError(f"replay cluster has no GPU {node}:{slot}")
        if self._picks is None:
            from pal_slurm.ranking.profiles import gpu_picks

            self._picks = gpu_picks(len(nodes) * per_node, self.seed, dict(self._runs()))
        return self._picks[perf_class][nodes.index(node) * per_node + slot]

    def planted(self, node: str, slot: int, perf_class: str) -> float:
        """The profile planted on (node, slot): the median of its dataset GPU's runs."""
        ids, runs = self._dataset(perf_class)
        vals = sorted(runs[self.dataset_gpu(node, slot, perf_class)])
        n = len(vals)
        return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2

    def _draw_index(self, g: GpuTarget, perf_class: str, n: int, draw_key: object) -> int:
        """Which of the GPU's n runs this draw replays.

        Successive calls walk a seeded permutation of the runs (sampling without replacement),
        so k calls with k a multiple of n replay every run equally often and the window median
        equals the planted profile; a nonce (job id) picks a seeded run independently.
        """
        if self._nonce is not None:
            return random.Random(_digest(self.seed, perf_class, g.node, g.slot, "draw", draw_key)).randrange(n)
        order = list(range(n))
        random.Random(_digest(self.seed, perf_class, g.node, g.slot, "perm")).shuffle(order)
        assert isinstance(draw_key, int), "without a nonce the draw key is the call count"
        return order[draw_key % n]

    def prepare(self, gpus: Sequence[GpuTarget]) -> None:
        """Nothing to start: replayed runs need no GPU."""

    def sample(self, gpus: Sequence[GpuTarget], perf_class: str, duration_s: float = 0.0) -> list[Sample]:
        """One replayed run per GPU; draws differ per call (or per nonce) but repeat per seed."""
        # draws count per class: interleaving classes must not skip runs of any one class
        draw_key = self._nonce if self._nonce is not None else self._calls.get(perf_class, 0)
        self._calls[perf_class] = self._calls.get(perf_class, 0) + 1
        now = self._clock()
        out = []
        for g in gpus:
            gid = self.dataset_gpu(g.node, g.slot, perf_class)
            runs = self._dataset(perf_class)[1][gid]
            value = runs[self._draw_index(g, perf_class, len(runs), draw_key)] * self._slowdown.get((g.node, g.slot), 1.0)
            out.append(
                Sample(
                    node=g.node,
                    slot=g.slot,
                    perf_class=perf_class,
                    backend=self.name,
                    value=float(value),
                    higher_is_better=False,
                    metrics={"perf_norm": float(value), "dataset_gpu": gid, "seed": self.seed},
                    uuid=g.uuid,
                    taken_at=now,
                )
            )
        return out
