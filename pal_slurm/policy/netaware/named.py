"""The registered network-aware placements, each a list of stages (netaware.stages):

- `pal-net`: variability + locality, cost-aware delay scheduling, finish-aware on tiers, EASY
  backfill with aging;
- `pal-net-tuned`: the same, timers from the auto-tuner;
- `pal-net-preempt`: plus network-sensitive preemption;
- `pal-net-nodelay`: ablation: no delay timers;
- `pal-backfill`: ablation: PAL's allocation (variability bins, node locality only) + EASY
  backfill, no delay: what backfilling alone buys;
- `pal-fit`: PAL for a backfilling Slurm: the packed, topology-aware choice unless a better bin
  beats the locality and fragmentation costs (policy.fragmentation); a spread placement only
  when waiting for the consolidated one would not finish the job sooner; a per-node job on
  slower bins only when waiting for faster ones would not finish it sooner (several nodes:
  network factor counted); EASY backfill, in which a held job on whole nodes lets only jobs no
  longer than itself pass in its grace, holding the nodes that free last, and a detour around
  the reservations only when it is not slower than waiting; no delay timers; a starvation
  bound (stages.bound): no such wait plans a job's start past its bound, and a job that waited
  longer is placed as stock Slurm would;
- `dally`: no variability, greedy skip, tuned timers without the cost bound, preemption: a
  Dally-like policy;
- `slurm`: the model of stock Slurm (cons_tres + topology/tree + sched/backfill): variability
  blind, no waits, Slurm's node choice (lowest free slots, the leaf switch that fits best),
  EASY backfill on the jobs' time limits with a reservation for a blocked job at once. What
  the replay's `stock` arm and the robustness benchmark compare against; run with Slurm's
  pass clock it is `sim.stock_slurm.StockSlurm`.
"""

from __future__ import annotations

from pal_slurm.policy.fragmentation import FragmentationCost
from pal_slurm.policy.netaware.compose import NetAwarePlacement
from pal_slurm.policy.netaware.stages.accept import AnyTier, DelayScheduling
from pal_slurm.policy.netaware.stages.backfill import Easy, SkipBlocked
from pal_slurm.policy.netaware.stages.bound import StarvationBound
from pal_slurm.policy.netaware.stages.estimate import Stretched, WallLimit
from pal_slurm.policy.netaware.stages.locality import NodeOnly, Topology
from pal_slurm.policy.netaware.stages.preempt import Preemption
from pal_slurm.policy.netaware.stages.score import CheapestBin, PackedFirst, SlurmNodes
from pal_slurm.policy.netaware.stages.waits import ForFasterBins, ForTighterTier

PAL_NET = NetAwarePlacement(
    "pal-net", locality=Topology(), accept=DelayScheduling(), score=CheapestBin(), preempt=None,
    tier_wait=ForTighterTier(), reserve=Easy(), bin_wait=None, estimate=Stretched())
PAL_NET_TUNED = NetAwarePlacement(
    "pal-net-tuned", locality=Topology(), accept=DelayScheduling(tuned=True), score=CheapestBin(), preempt=None,
    tier_wait=ForTighterTier(), reserve=Easy(), bin_wait=None, estimate=Stretched())
PAL_NET_PREEMPT = NetAwarePlacement(
    "pal-net-preempt", locality=Topology(), accept=DelayScheduling(), score=CheapestBin(), preempt=Preemption(),
    tier_wait=ForTighterTier(), reserve=Easy(), bin_wait=None, estimate=Stretched())
PAL_NET_NODELAY = NetAwarePlacement(
    "pal-net-nodelay", locality=Topology(), accept=AnyTier(), score=CheapestBin(), preempt=None,
    tier_wait=ForTighterTier(), reserve=Easy(), bin_wait=None, estimate=Stretched())
PAL_BACKFILL = NetAwarePlacement(
    "pal-backfill", locality=NodeOnly(), accept=AnyTier(), score=CheapestBin(), preempt=None,
    tier_wait=None, reserve=Easy(), bin_wait=None, estimate=Stretched())
PAL_FIT = NetAwarePlacement(
    "pal-fit", locality=Topology(), accept=AnyTier(), score=PackedFirst(FragmentationCost()), preempt=None,
    tier_wait=ForTighterTier(), reserve=Easy(grace_reservation=True, ready_last=True, detour_finish_aware=True),
    bin_wait=ForFasterBins(several=True), estimate=Stretched(), bound=StarvationBound())
DALLY = NetAwarePlacement(
    "dally", locality=Topology(), accept=DelayScheduling(cost_aware=False, tuned=True),
    score=CheapestBin(variability=False), preempt=Preemption(), tier_wait=None, reserve=SkipBlocked(),
    bin_wait=None, estimate=Stretched())

SLURM = NetAwarePlacement(
    "slurm", locality=Topology(), accept=AnyTier(), score=SlurmNodes(CheapestBin(variability=False)), preempt=None,
    tier_wait=None, reserve=Easy(reserve_after_s=0.0), bin_wait=None, estimate=WallLimit())

NAMED = (PAL_NET, PAL_NET_PREEMPT, PAL_NET_TUNED, PAL_NET_NODELAY, PAL_BACKFILL, PAL_FIT, DALLY, SLURM)
