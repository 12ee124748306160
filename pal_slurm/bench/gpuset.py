"""Which GPUs a job holds on this node: parsed from `scontrol show job -d`, else the env.

Slurm 22.05 bug: with several typed GRES records (gpu:s0..sN, how pal-slurm binds exact GPUs)
the prolog/epilog's SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES show only the LAST record's index.
`scontrol show job -d` lists every index per node (`Nodes=n1 ... GRES=gpu:s2:1(IDX:2),gpu:s3:1(IDX:3)`)
so it is the primary source. After the job ended (epilog) the per-node GRES is empty, but
JOB_GRES keeps the per-slot types (s0..sN) pal-slurm requests; the environment comes last.
These functions are pure (text in, sets out); hostlists are expanded by pal_slurm.slurm.hostlist.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Mapping

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.hostlist import expand as expand_hostlist
from pal_slurm.slurm.readers import parse_gres, parse_index_list, slots_named

_NODES_LINE = re.compile(r"^\s*Nodes=(\S+)\s.*?\bGRES=(\S+)", re.M)


def gpus_from_scontrol(text: str) -> dict[str, tuple[int, ...]]:
    """{node: GPU indices} from `scontrol show job -d` output (only gpu GRES; others ignored).

    IDX lists may hold commas (`gpu:2(IDX:1,3)`), so the IDX is read up to its closing
    parenthesis rather than split at commas. ValueError on a malformed node or index list.
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


def slots_from_typed_gres(text: str) -> tuple[int, ...]:
    """GPU slots named by pal-slurm's per-slot GRES types in JOB_GRES (`gpu:s1:1,gpu:s3:1`).

    Once a job has ended, `scontrol show job -d` prints an empty per-node GRES, but JOB_GRES
    keeps the typed request; with one type per slot (s0..sN) it names the GPUs, and as a
    per-node request it holds on every node of the job. () for untyped requests (gpu:2).
    """
    m = re.search(r"\bJOB_GRES=(\S+)", text)
    return slots_named(m.group(1)) if m else ()


def end_time_from_scontrol(text: str) -> float | None:
    """Epoch seconds of EndTime= (local time), None when absent/Unknown."""
    m = re.search(r"\bEndTime=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").timestamp()


def gpus_from_env(env: Mapping[str, str]) -> tuple[int, ...]:
    """Fallback: SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES (incomplete with typed GRES)."""
    for key in ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        raw = (env.get(key) or "").strip()
        if raw:
            try:
                return tuple(sorted(parse_index_list(raw)))
            except (ValueError, SlurmParseError):
                continue  # e.g. CUDA_VISIBLE_DEVICES with UUIDs: try the next one
    return ()


def start_time_from_scontrol(text: str) -> float | None:
    """Epoch seconds of StartTime=YYYY-MM-DDTHH:MM:SS (local time), None when absent/Unknown."""
    m = re.search(r"\bStartTime=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").timestamp()


def class_from_comment(comment: str | None, default: str) -> str:
    """The `pal:class=X` of a job comment (other text around it kept), else `default`."""
    m = re.search(r"pal:class=([A-Za-z0-9_.\-]+)", comment or "")
    return m.group(1) if m else default
