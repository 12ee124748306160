"""Which GPUs a job holds on this node: parsed from `scontrol show job -d`, else the env.

Slurm 22.05 bug: with several typed GRES records (gpu:s0..sN, how pal-slurm binds exact GPUs)
the prolog/epilog's SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES show only the LAST record's index.
`scontrol show job -d` lists every index per node (`Nodes=n1 ... GRES=gpu:s2:1(IDX:2),gpu:s3:1(IDX:3)`)
so it is the primary source; the environment is the fallback when scontrol fails.
These functions are pure (text in, sets out).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Mapping

_NODES_LINE = re.compile(r"^\s*Nodes=(\S+)\s.*?\bGRES=(\S+)", re.M)
_IDX = re.compile(r"IDX:([0-9,\-]+)")


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist ('n[1-3,7],gpu05') into names, in order; ValueError if malformed."""
    names, depth, start = [], 0, 0
    parts = []
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    for part in filter(None, (p.strip() for p in parts)):
        m = re.fullmatch(r"([^\[\]]*)\[([0-9,\-]+)\](.*)", part)
        if not m:
            if "[" in part or "]" in part:
                raise ValueError(f"malformed hostlist {expr!r}")
            names.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for piece in ranges.split(","):
            if not piece:
                raise ValueError(f"malformed hostlist {expr!r}")
            if "-" in piece:
                lo, hi = piece.split("-", 1)
                if not lo.isdigit() or not hi.isdigit() or int(hi) < int(lo):
                    raise ValueError(f"malformed range {piece!r} in hostlist {expr!r}")
                width = len(lo)
                for k in range(int(lo), int(hi) + 1):
                    names.extend(expand_hostlist(f"{prefix}{k:0{width}d}{suffix}"))
            else:
                names.extend(expand_hostlist(f"{prefix}{piece}{suffix}"))
    return names


def parse_index_list(text: str) -> tuple[int, ...]:
    """'0-2,5' -> (0, 1, 2, 5); ValueError on junk."""
    out: set[int] = set()
    for piece in filter(None, (p.strip() for p in text.split(","))):
        if "-" in piece:
            lo, hi = piece.split("-", 1)
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"bad index range {piece!r}")
            out.update(range(a, b + 1))
        else:
            out.add(int(piece))
    return tuple(sorted(out))


def gpus_from_scontrol(text: str) -> dict[str, tuple[int, ...]]:
    """{node: GPU indices} from `scontrol show job -d` output (only gpu GRES; others ignored)."""
    out: dict[str, set[int]] = {}
    for nodes, gres in _NODES_LINE.findall(text):
        idx: set[int] = set()
        # split records at commas outside parentheses: gpu:s2:1(IDX:2),gpu:s3:1(IDX:3)
        depth, start, records = 0, 0, []
        for i, ch in enumerate(gres):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0:
                records.append(gres[start:i])
                start = i + 1
        records.append(gres[start:])
        for rec in records:
            if not rec.startswith("gpu"):
                continue
            m = _IDX.search(rec)
            if m:
                idx.update(parse_index_list(m.group(1)))
        for node in expand_hostlist(nodes):
            out.setdefault(node, set()).update(idx)
    return {n: tuple(sorted(v)) for n, v in out.items()}


def gpus_from_env(env: Mapping[str, str]) -> tuple[int, ...]:
    """Fallback: SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES (incomplete with typed GRES)."""
    for key in ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        raw = (env.get(key) or "").strip()
        if raw:
            try:
                return parse_index_list(raw)
            except ValueError:
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
