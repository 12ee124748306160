"""The prolog's first step: is anything of this job due for a sample? (pal_slurm.bench.due)

Slurm runs the prolog at the start of every job on each of its nodes, and under the default
policy nearly every job finds its GPUs measured within `prolog_every_h`: those jobs must pay
only this check. So it reads only what slurmd wrote in the prolog's environment (the job's GPU
indices, its comment), the configuration (without the registry checks that import the
policies) and the node's state file, and none of what measuring needs (numpy, SQLAlchemy, the
Slurm readers, the backends): sbin/pal-prolog asks `skip_job` before it imports
`pal_slurm.bench.prolog`.

It answers "skip" only when sure. No GPU indices in the environment, `prolog_pal_only` without
a comment in the environment, or any error: False, and the full prolog decides on the job's
Slurm record. Where slurmd shows fewer GPUs than the job holds (Slurm 22.05 shows only the
last of several typed GRES records, see `gpuset`), the ones it does not show are measured
with them when a shown one is due, else by the cron re-profiling of idle nodes.
"""

from __future__ import annotations

import os
import time
from typing import Mapping

from pal_slurm.bench.due import Policy, is_pal_job, verdict
from pal_slurm.bench.gpuset import gpus_from_env
from pal_slurm.bench.measured import read_state, warn
from pal_slurm.config import load_config


def skip_job(env: Mapping[str, str], now: float | None = None) -> bool:
    """True when the job's GPUs on this node are all measured within the policy's period, or
    the policy leaves this job out; False to run the full prolog (also on any error, logged)."""
    try:
        cfg = load_config(env=env, registries=False).profiling
        policy = Policy.from_hours(cfg.prolog_every_h, cfg.prolog_pal_only)
        comment = env.get("SLURM_JOB_COMMENT")
        if policy.pal_only and comment is not None and not is_pal_job(comment):
            return True
        gpus = gpus_from_env(env)
        if not gpus or (policy.pal_only and comment is None):
            return False
        node = env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]  # socket's gethostname
        when = time.time() if now is None else now
        return not verdict(policy, comment, node, gpus, read_state(cfg.spool_dir), when).measure
    except Exception as exc:  # noqa: BLE001 - a failing prolog drains the node: measure instead
        warn("prolog due check failed (%s: %s); running the full prolog", type(exc).__name__, exc)
        return False
