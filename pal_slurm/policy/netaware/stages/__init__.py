"""The stages a network-aware placement is composed of, one module each, in the order a plan
runs them for every waiting job:

- `locality`: how much of the topology the placement sees (racks, or PAL's node locality);
- `accept` (filter): the widest tier a job accepts now (delay scheduling, or any);
- `score`: the cheapest allocation within that tier (PAL's bins x network factor, packed
  first, or stock Slurm's node choice);
- `preempt`: stopping less sensitive, recent jobs for a sensitive one (optional);
- `waits`: refusing a start that finishes later than waiting would (for a tighter tier; for
  faster bins) and holding what it waits for (optional);
- `backfill` (reserve): what a job that cannot start does to the ones behind it (stop them,
  let them pass, or reserve and let only what keeps the reservations pass);
- `estimate`: how long a job runs on given GPUs (the reservations' and waits' clock).

The queue order (which job first) is the other policy axis (policy.queue): the placement
takes the jobs in the order it is given.
"""
