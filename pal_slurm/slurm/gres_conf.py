"""A site's existing gres.conf -> pal-slurm's per-slot typed gres.conf. Pure (text in, text out).

What is read (gres.conf(5), Slurm 22.05-24.11; parameter names are case-insensitive, `#` starts
a comment): `AutoDetect=off`, and GPU lines `[NodeName=<hostlist>] Name=gpu File=<device or
device[range]> [Count=<n>] [Cores=<list>] [Flags=<flags>]`. Each GPU of a node, in the order its
lines list the device files, becomes slot k with its own type `s<k>` (pal_slurm/slurm/gres.py),
keeping its device file, Cores= and Flags=. Lines of other GRES (mps, shard, bandwidth, ...) are
kept as they are.

What is refused, with the line and why (the site keeps its file; pald still pins nodes):
- `AutoDetect=nvml|rsmi|...`: slurmd then takes types and files from the driver, over ours;
- GPU model types (`Type=a100`): Slurm matches a requested type exactly, so per-slot types
  would make `--gres=gpu:a100:2` fail unless something rewrote every model request, also when
  pald is down; on such a site PAL pins nodes of the model and Slurm picks the slots;
- a GPU line without File= (Slurm cannot tell one GPU from another), `Links=`/`MultipleFiles=`
  (per-device settings this does not carry over), a Count= that disagrees with the files;
- a GPU line without NodeName= unless the caller names the nodes it applies to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pal_slurm.slurm.gres import GRES_NAME, node_gres_field, slot_type
from pal_slurm.slurm.errors import HostlistError
from pal_slurm.slurm.hostlist import compress, expand

KEPT_GPU_KEYS = ("cores", "flags")  # carried onto every slot line of the device
KNOWN_GPU_KEYS = {"nodename", "name", "type", "file", "count", *KEPT_GPU_KEYS}
_RANGE = re.compile(r"^(?P<head>.*)\[(?P<body>[0-9,\-]+)\](?P<tail>[^\[\]]*)$")


class GresConfUnsupported(ValueError):
    """The site's gres.conf says something this generator does not carry over."""

    def __init__(self, line_no: int, line: str, why: str):
        super().__init__(f"gres.conf line {line_no}: {line.strip()!r}: {why}")
        self.line_no, self.why = line_no, why


@dataclass(frozen=True)
class Gpu:
    file: str
    extra: tuple[tuple[str, str], ...] = ()  # (Key, value) kept on its slot line: Cores, Flags


@dataclass(frozen=True)
class SlotConf:
    lines: list[str]  # the new gres.conf
    gres_fields: dict[str, str]  # hostlist -> the slurm.conf NodeName Gres= value


def _fields(line: str) -> list[tuple[str, str]]:
    out = []
    for word in line.split():
        key, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"{word!r} is not Key=Value")
        out.append((key, value))
    return out


def device_files(spec: str) -> list[str]:
    """``/dev/nvidia[0-3]`` -> the four paths; ``/dev/nvidia0`` -> itself; a list
    (``/dev/nvidia0,/dev/nvidia1``) is not a range and stays one entry per name."""
    out: list[str] = []
    for part in re.split(r",(?![^\[]*\])", spec):
        m = _RANGE.match(part)
        if not m:
            out.append(part)
            continue
        for piece in m.group("body").split(","):
            first, _, last = piece.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise ValueError(f"bad device range {spec!r}")
            width = len(first)
            for i in range(int(first), int(last or first) + 1):
                out.append(f"{m.group('head')}{i:0{width}d}{m.group('tail')}")
    return out


def slot_conf(text: str, nodes: str | None = None) -> SlotConf:
    """The per-slot gres.conf for a site's gres.conf `text` (`nodes`: the hostlist that lines
    without NodeName= apply to). Raises GresConfUnsupported for what it does not carry over."""
    per_node: dict[str, list[Gpu]] = {}
    spelled: dict[frozenset[str], str] = {}
    kept: list[str] = []
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            fields = _fields(line)
        except ValueError as exc:
            raise GresConfUnsupported(no, raw, str(exc)) from None
        keys = {k.lower(): v for k, v in fields}
        if "autodetect" in keys:
            if keys["autodetect"].lower() != "off":
                raise GresConfUnsupported(no, raw, "AutoDetect takes GPU types and files from the driver over "
                                          "per-slot types; list the GPUs with File= lines (slurmd -G shows "
                                          "what it detects) and AutoDetect=off")
            if len(keys) > 1 and "name" in keys:
                raise GresConfUnsupported(no, raw, "AutoDetect on a GRES line: write it on its own line")
            continue
        if keys.get("name", "").lower() != GRES_NAME:
            kept.append(raw.strip())  # another GRES: as it was
            continue
        unknown = set(keys) - KNOWN_GPU_KEYS
        if unknown:
            raise GresConfUnsupported(no, raw, f"{', '.join(sorted(unknown))} is not carried over to per-slot lines")
        if keys.get("type"):
            raise GresConfUnsupported(no, raw, f"GPU model type {keys['type']!r}: Slurm matches types exactly, "
                                      "so per-slot types would break --gres=gpu:<model>:N requests; keep this "
                                      "gres.conf (PAL pins nodes of the model, Slurm picks the slots)")
        if not keys.get("file"):
            raise GresConfUnsupported(no, raw, "a GPU line without File=: Slurm cannot bind one GPU by type")
        hostlist = keys.get("nodename") or nodes
        if not hostlist:
            raise GresConfUnsupported(no, raw, "no NodeName=: give the nodes it applies to (--nodes)")
        try:
            files = device_files(keys["file"])
            names = expand(hostlist)
        except (ValueError, HostlistError) as exc:
            raise GresConfUnsupported(no, raw, str(exc)) from None
        if "count" in keys and keys["count"] != str(len(files)):
            raise GresConfUnsupported(no, raw, f"Count={keys['count']} but {len(files)} device file(s)")
        extra = tuple((k, v) for k, v in fields if k.lower() in KEPT_GPU_KEYS)
        spelled.setdefault(frozenset(names), hostlist)  # the site's own spelling of these nodes
        for name in names:
            per_node.setdefault(name, []).extend(Gpu(f, extra) for f in files)
    if not per_node:
        raise GresConfUnsupported(0, "", "no GPU lines with File= found")
    by_layout: dict[tuple[Gpu, ...], list[str]] = {}
    for name, gpus in per_node.items():
        if len({g.file for g in gpus}) != len(gpus):
            raise GresConfUnsupported(0, name, "a device file is listed twice for this node")
        by_layout.setdefault(tuple(gpus), []).append(name)
    lines = ["AutoDetect=off"]
    fields_out: dict[str, str] = {}
    for layout, names in by_layout.items():
        hostlist = spelled.get(frozenset(names)) or compress(names)
        for slot, gpu in enumerate(layout):
            kept_fields = "".join(f" {k}={v}" for k, v in gpu.extra)
            lines.append(f"NodeName={hostlist} Name={GRES_NAME} Type={slot_type(slot)} File={gpu.file}{kept_fields}")
        fields_out[hostlist] = node_gres_field(len(layout))
    return SlotConf(lines + kept, fields_out)
