"""Per-slot typed GRES: the configuration that lets pal-slurm bind exact GPUs. Pure.

With plain ``Gres=gpu:4`` Slurm's cons_tres always picks the lowest free GPU index, so a job
cannot ask for "GPUs 2 and 3". Giving every GPU slot its own GRES type (``s0``..``sN-1``)
makes each slot individually requestable: ``tres_per_node="gres:gpu:s2:1,gres:gpu:s3:1"``
binds exactly GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=2,3), while untyped ``--gres=gpu:2`` keeps
working for everyone else. These functions generate the three strings a site needs:
the gres.conf lines, the slurm.conf ``Gres=`` value, and the per-job TRES string.
"""

from __future__ import annotations

from typing import Iterable

from pal_slurm.intake.gres import GRES_NAME, SLOT_PREFIX
from pal_slurm.intake.hostlist import compress, expand

DEFAULT_DEVICE_PATTERN = "/dev/nvidia{slot}"


def slot_type(slot: int) -> str:
    """The GRES type name of GPU slot `slot` (``s0``, ``s1``, ...)."""
    if slot < 0:
        raise ValueError(f"GPU slot must be >= 0, got {slot}")
    return f"{SLOT_PREFIX}{slot}"


def _check_gpus(gpus: int) -> None:
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        raise ValueError(f"GPUs per node must be a positive integer, got {gpus!r}")


def device_path(pattern: str, slot: int) -> str:
    """Expand a device pattern such as ``/dev/nvidia{slot}`` for one slot."""
    if "{slot}" not in pattern:
        raise ValueError(f"device pattern {pattern!r} must contain '{{slot}}'")
    try:
        return pattern.format(slot=slot)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad device pattern {pattern!r}: {exc}") from None


def gres_conf_lines(
    nodes: str | Iterable[str],
    gpus: int,
    device_pattern: str = DEFAULT_DEVICE_PATTERN,
    autodetect_off: bool = True,
) -> list[str]:
    """gres.conf lines: one per slot, ``NodeName=<hostlist> Name=gpu Type=sK File=<dev K>``.

    `nodes` is a hostlist expression or a list of names; all of them get the same slots.
    AutoDetect=off comes first so NVML autodetection cannot override the per-slot types.
    """
    _check_gpus(gpus)
    names = expand(nodes) if isinstance(nodes, str) else list(nodes)
    if not names:
        raise ValueError("gres.conf needs at least one node")
    hostlist = compress(names)
    lines = ["AutoDetect=off"] if autodetect_off else []
    lines += [
        f"NodeName={hostlist} Name={GRES_NAME} Type={slot_type(s)} "
        f"File={device_path(device_pattern, s)}"
        for s in range(gpus)
    ]
    return lines


def node_gres_field(gpus: int) -> str:
    """The slurm.conf NodeName ``Gres=`` value: ``gpu:s0:1,gpu:s1:1,...``."""
    _check_gpus(gpus)
    return ",".join(f"{GRES_NAME}:{slot_type(s)}:1" for s in range(gpus))


def tres_per_node(slots: Iterable[int]) -> str:
    """The job's TRES string binding exactly `slots`: ``gres:gpu:s2:1,gres:gpu:s3:1``.

    This is what job_submit.lua writes to ``job_desc.tres_per_node`` (which needs the
    ``gres:`` prefix). `scontrol update Gres=` takes the same string without the prefixes
    (see `gres_update_spec`).
    """
    ordered = sorted(set(slots))
    if not ordered:
        raise ValueError("a GPU binding needs at least one slot")
    return ",".join(f"gres:{GRES_NAME}:{slot_type(s)}:1" for s in ordered)


def gres_update_spec(slots: Iterable[int]) -> str:
    """The ``scontrol update jobid=X Gres=`` value for `slots`: ``gpu:s2:1,gpu:s3:1``."""
    return tres_per_node(slots).replace("gres:", "")
