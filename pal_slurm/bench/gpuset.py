"""Which GPUs a job held on this node, from sources a job's owner cannot forge; else none.

The prolog and epilog run as root and benchmark the GPUs they are given, so the GPU set must
come only from what Slurm itself wrote, never from text the job's owner chose:

- `squeue --json` (every release pal-slurm reads; `dialects.Dialect.job_argv`), read by
  `pal_slurm.slurm.readers.parse_job`. In JSON a job name or comment is one string value: a
  name ``x JOB_GRES=gpu:s0:1,...`` or a comment with a newline and ``Nodes=... GRES=...``
  stays inside its string. `scontrol show job -d` text is not read here: it prints the name,
  comment and work dir unquoted (a newline in a comment starts a line of its own), so no
  parse of it can tell Slurm's ``JOB_GRES=``/``Nodes=`` from the user's. (`scontrol --json`
  does not exist in 22.05.) The fields read are Slurm's: ``gres_detail`` (per node, with
  IDX), ``job_resources`` (the allocated nodes) and the job's TRES request, which the
  owner wrote but Slurm enforced: a job that ran with ``gres:gpu:s1:1,gres:gpu:s3:1`` per
  node held exactly GPUs 1 and 3 on each of its nodes (one GRES type per GPU slot, how
  pal-slurm binds GPUs).
- the prolog/epilog environment that slurmd builds (src/plugins/prep/script/
  prep_script_slurmd.c `_build_env`): SLURMD_NODENAME, SLURM_JOB_ID and the GRES plugin's
  SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES / GPU_DEVICE_ORDINAL are set by slurmd from the job
  credential; the job's own environment is not copied (lab: ``SLURM_JOB_GPUS=0,1,2,3`` and
  other variables in sbatch's environment did not reach the prolog/epilog), and SPANK job
  variables are renamed ``SPANK_*`` by slurmd (`valid_spank_job_env`). So every index there
  is one the job held. But Slurm 22.05 shows only the LAST record's index when a job holds
  several typed GRES records (gpu:s1:1,gpu:s3:1 -> "3"), so the environment is used only
  when Slurm's record says how many GPUs the job has on a node and the environment shows
  that many.

`held_gpus` applies, in order: the job's per-node ``gres_detail`` (a running job: the
prolog); once the job has ended (the epilog) Slurm prints an empty ``gres_detail``, and then
the per-slot types of the per-node request (cross-checked against the environment), else the
environment when its size matches the per-node count. Anything else - no record, a record
that does not parse, this node not among the job's nodes, GPUs requested per task or socket,
an environment that disagrees - gives no GPUs and a reason: the hooks then measure nothing
rather than the whole node or a guess. These functions are pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.intake.hostlist import expand as expand_hostlist
from pal_slurm.intake.gres import GresItem, gpus_in, parse_gres, parse_index_list, slots_named

if TYPE_CHECKING:  # the prolog's due check reads `gpus_from_env` without the Slurm readers
    from pal_slurm.slurm.readers import JobInfo

# slurmd's GRES plugin writes these in the prolog/epilog environment (the first one set wins)
SLURMD_GPU_VARS = ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


@dataclass(frozen=True)
class HeldGpus:
    """The GPUs a job held on one node (empty: none, or they cannot be told) and why."""

    gpus: tuple[int, ...]
    source: str  # where they came from, or why there are none
    known: bool  # False: Slurm did not say enough; the hook measures nothing and logs `source`


def _unknown(why: str) -> HeldGpus:
    return HeldGpus((), why, False)


def _gpu_items(tres: str) -> list[GresItem]:
    return [i for i in parse_gres(tres) if i.name == "gpu"]


def held_gpus(job: JobInfo | None, node: str, env: Mapping[str, str]) -> HeldGpus:
    """The GPUs `job` held on `node`, from its `squeue --json` record and slurmd's environment.

    See the module docstring for why each source is trusted and in which order."""
    if job is None:
        return _unknown("Slurm has no record of the job")
    if job.unreadable:
        return _unknown(f"its record does not parse ({job.unreadable})")
    if node not in job.nodes:
        return _unknown(f"{node} is not among its nodes ({','.join(job.nodes) or 'none'})")
    if job.gpu_slots:  # gres_detail while the job runs: every index, per node
        return HeldGpus(tuple(sorted(job.gpu_slots.get(node, ()))), "gres_detail", True)
    try:
        per_node = _gpu_items(job.tres_per_node)
        per_job = _gpu_items(job.tres_per_job)
        other = _gpu_items(job.tres_per_task) + _gpu_items(job.tres_per_socket)
    except SlurmParseError as exc:
        return _unknown(f"its GPU request does not parse ({exc})")
    if other:
        return _unknown("GPUs requested per task or socket: how many are on this node is not recorded")
    if not per_node and not per_job:
        return HeldGpus((), "no GPUs requested", True)
    env_gpus = gpus_from_env(env)
    typed = slots_named(job.tres_per_node) if per_node and not per_job else ()
    if typed:
        if not set(env_gpus) <= set(typed):
            return _unknown(f"slurmd's environment shows GPUs {_show(env_gpus)}, "
                            f"not among the requested slots {_show(typed)}")
        return HeldGpus(typed, "per-slot GRES types", True)
    count = gpus_in(per_node) if per_node else None
    if count is None and per_job and job.node_count == 1:
        count = gpus_in(per_job)
    if count is None:
        return _unknown("GPUs requested per job across nodes: how many are on this node is not recorded")
    if len(env_gpus) != count:
        return _unknown(f"slurmd's environment shows {len(env_gpus)} GPU(s) ({_show(env_gpus)}) "
                        f"of the {count} the job held here")
    return HeldGpus(env_gpus, "slurmd's environment", True)


def _show(gpus: tuple[int, ...]) -> str:
    return ",".join(str(g) for g in gpus) or "none"


def gpus_from_env(env: Mapping[str, str]) -> tuple[int, ...]:
    """The first of SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL that reads as an
    index list (UUIDs do not); () when none does."""
    for key in SLURMD_GPU_VARS:
        raw = (env.get(key) or "").strip()
        if raw:
            try:
                return tuple(sorted(parse_index_list(raw)))
            except (ValueError, SlurmParseError):
                continue
    return ()


_NODES_LINE = re.compile(r"^\s*Nodes=(\S+)\s.*?\bGRES=(\S+)", re.M)


def gpus_from_scontrol(text: str) -> dict[str, tuple[int, ...]]:
    """{node: GPU indices} from `scontrol show job -d` text, for a job's OWN payload only.

    It runs as the job's user, and a comment with a newline can add a ``Nodes=`` line here:
    text the job wrote can only mislead the job itself. Root's hooks use `held_gpus`.
    IDX lists may hold commas (`gpu:2(IDX:1,3)`). ValueError on a malformed node or index list.
    """
    out: dict[str, set[int]] = {}
    for nodes, gres in _NODES_LINE.findall(text):
        idx: set[int] = set()
        try:
            items = parse_gres(gres)
        except SlurmParseError as exc:
            raise ValueError(str(exc)) from None
        for item in items:
            if item.name == "gpu" and item.indices:
                idx.update(item.indices)
        for node in expand_hostlist(nodes):
            out.setdefault(node, set()).update(idx)
    return {n: tuple(sorted(v)) for n, v in out.items()}


def class_from_comment(comment: str | None, default: str) -> str:
    """The `pal:class=X` of a job comment (other text around it kept), else `default`."""
    m = re.search(r"pal:class=([A-Za-z0-9_.\-]+)", comment or "")
    return m.group(1) if m else default
