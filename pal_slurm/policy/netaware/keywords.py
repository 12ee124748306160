"""The keywords that name common stage swaps, so an ablation or a model reads as a sentence
(`NetAwarePlacement("t", delay=False, finish_aware=True)`, `replace(PAL_FIT,
waits_for_faster_node=False)`) and means exactly one stage change each:

- `topology_aware`: the locality stage (False: PAL's node locality only);
- `delay`, `timers`, `cost_aware`, `patience`, `max_wait_s`, `autotune`: the filter stage
  (delay scheduling with those settings, or any tier at once); `max_wait_s` also bounds the
  wait for faster bins;
- `variability`, `fragmentation`, `node_choice`: the score stage (PAL's cheapest bin, packed
  first at that fragmentation cost, stock Slurm's node choice for per-node requests);
- `finish_aware`: the wait for a tighter tier; `waits_for_faster_node(s)`: the wait for
  faster bins (one node; several nodes);
- `backfill` ("easy", "greedy", "none") and `reservations`, `reserve_after_s`,
  `grace_reservation`, `reserve_ready_last`, `will_run_window_s`, `detour_finish_aware`:
  the backfill stage and EASY's settings;
- `remaining_is_wall_limit`: the estimate stage (the remaining time is a wall-clock bound).

This module is the one place a keyword is read; the plan reads only stages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pal_slurm.model.network import DelayTimers
from pal_slurm.policy.fragmentation import FragmentationCost
from pal_slurm.policy.netaware.stages.accept import Accept, AnyTier, DelayScheduling
from pal_slurm.policy.netaware.stages.backfill import Backfill, Easy, SkipBlocked, StopAtFirst
from pal_slurm.policy.netaware.stages.estimate import Stretched, WallLimit
from pal_slurm.policy.netaware.stages.locality import NodeOnly, Topology
from pal_slurm.policy.netaware.stages.score import CheapestBin, PackedFirst, Score, SlurmNodes
from pal_slurm.policy.netaware.stages.waits import ForFasterBins, ForTighterTier


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def swaps(accept: Accept, score: Score, reserve: Backfill, bin_wait: ForFasterBins | None, *,
          variability: bool | None = None, delay: bool | None = None, autotune: bool | None = None,
          timers: DelayTimers | None = None, max_wait_s: float | None = None, cost_aware: bool | None = None,
          patience: float | None = None, finish_aware: bool | None = None, topology_aware: bool | None = None,
          fragmentation: FragmentationCost | None = None, node_choice: str | None = None,
          remaining_is_wall_limit: bool | None = None, backfill: str | None = None, reservations: int | None = None,
          reserve_after_s: float | None = None, grace_reservation: bool | None = None,
          reserve_ready_last: bool | None = None, will_run_window_s: float | None = None,
          detour_finish_aware: bool | None = None, waits_for_faster_node: bool | None = None,
          waits_for_faster_nodes: bool | None = None) -> dict[str, object]:
    """{stage slot: its new stage} for the keywords given (None: not given), from the current
    stages of those slots that keywords edit."""
    out: dict[str, object] = {}
    if topology_aware is not None:
        out["locality"] = Topology() if topology_aware else NodeOnly()

    # the filter
    delays = isinstance(accept, DelayScheduling) if delay is None else delay
    settings = _given(timers=timers, max_wait_s=max_wait_s, cost_aware=cost_aware, patience=patience, tuned=autotune)
    if delays and (delay is not None or settings):
        base = accept if isinstance(accept, DelayScheduling) else DelayScheduling(tuned=accept.tuned)
        out["accept"] = dataclasses.replace(base, **settings)
    elif not delays and (delay is not None or autotune is not None):
        out["accept"] = AnyTier(tuned=accept.tuned if autotune is None else autotune)

    # the score
    if variability is not None or fragmentation is not None or node_choice is not None:
        if node_choice not in (None, "pal", "slurm"):
            raise ValueError(f"node_choice must be pal or slurm, not {node_choice!r}")
        slurm = isinstance(score, SlurmNodes) if node_choice is None else node_choice == "slurm"
        inner = score.rest if isinstance(score, SlurmNodes) else score
        cost = fragmentation if fragmentation is not None else inner.cost if isinstance(inner, PackedFirst) else None
        v = score.variability if variability is None else variability
        rest: CheapestBin | PackedFirst = CheapestBin(v) if cost is None else PackedFirst(cost, v)
        out["score"] = SlurmNodes(rest) if slurm else rest

    if finish_aware is not None:
        out["tier_wait"] = ForTighterTier() if finish_aware else None

    # the backfill stage
    rule = reserve
    if backfill is not None:
        if backfill not in ("easy", "greedy", "none"):
            raise ValueError(f"backfill must be easy, greedy or none, not {backfill!r}")
        if backfill != "easy":
            rule = SkipBlocked() if backfill == "greedy" else StopAtFirst()
        elif not isinstance(rule, Easy):
            rule = Easy()
    easy = _given(reservations=reservations, reserve_after_s=reserve_after_s, grace_reservation=grace_reservation,
                  ready_last=reserve_ready_last, will_run_window_s=will_run_window_s,
                  detour_finish_aware=detour_finish_aware)
    if easy and isinstance(rule, Easy):
        rule = dataclasses.replace(rule, **easy)
    if rule is not reserve:
        out["reserve"] = rule

    # the wait for faster bins
    wait = bin_wait
    if waits_for_faster_node is not None or waits_for_faster_nodes is not None:
        one = bin_wait is not None if waits_for_faster_node is None else waits_for_faster_node
        several = (bin_wait is not None and bin_wait.several) if waits_for_faster_nodes is None else waits_for_faster_nodes
        wait = ForFasterBins(several, bin_wait.max_wait_s if bin_wait is not None else ForFasterBins.max_wait_s) if one else None
    if wait is not None and max_wait_s is not None:
        wait = dataclasses.replace(wait, max_wait_s=max_wait_s)
    if wait is not bin_wait:
        out["bin_wait"] = wait

    if remaining_is_wall_limit is not None:
        out["estimate"] = WallLimit() if remaining_is_wall_limit else Stretched()
    return out
