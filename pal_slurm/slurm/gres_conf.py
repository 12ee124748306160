"""A site's existing gres.conf -> pal-slurm's per-slot typed gres.conf. Pure (text in, text out).

What is read (gres.conf(5), Slurm 22.05-24.11; parameter names are case-insensitive, `#` starts
a comment): `AutoDetect=off`, and GPU lines `[NodeName=<hostlist>] Name=gpu File=<device or
device[range]> [Count=<n>] [Cores=<list>] [Flags=<flags>]`. Each GPU of a node, in the order its
lines list the device files, becomes slot k with its own type `s<k>` (pal_slurm/slurm/gres.py),
keeping its device file, Cores= and Flags=. Lines of other GRES (mps, shard, bandwidth, ...) are
kept as they are.

GPU model types (`Type=a100`) become node features: Slurm matches a requested type exactly, so
with per-slot types `--gres=gpu:a100:2` would find no GPU of type a100. Each node's model is
added to its `Features=` (the slurm.conf fragment says so) and job_submit.lua, told the models
(`PAL_GPU_MODELS`), rewrites every model request, PAL's or not and also when pald is down, into
an untyped count on nodes with that feature (`--gres=gpu:2 --constraint=a100`): the same GPUs,
the same nodes (docs/decisions/site-compat.md). A node with two models is refused.

What is refused, with the line and why (the site keeps its file; pald still pins nodes):
- `AutoDetect=nvml|rsmi|...`: slurmd then takes types and files from the driver, over ours;
- GPUs of two models on one node (one feature cannot tell which GPU a request may use);
- a GPU line without File= (Slurm cannot tell one GPU from another), `Links=`/`MultipleFiles=`
  (per-device settings this does not carry over), a Count= that disagrees with the files;
- a GPU line without NodeName= unless the caller names the nodes it applies to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pal_slurm.intake.gres import GRES_NAME
from pal_slurm.slurm.gres import node_gres_field, slot_type
from pal_slurm.slurm.errors import HostlistError
from pal_slurm.intake.hostlist import compress, expand

KEPT_GPU_KEYS = ("cores", "flags")  # carried onto every slot line of the device
KNOWN_GPU_KEYS = {"nodename", "name", "type", "file", "count", *KEPT_GPU_KEYS}
_MODEL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
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
    models: dict[str, str] = field(default_factory=dict)  # hostlist -> its GPU model (a node feature)

    @property
    def model_names(self) -> list[str]:
        """The GPU models job_submit.lua must rewrite (PAL_GPU_MODELS), sorted."""
        return sorted(set(self.models.values()))


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
    model_of: dict[str, str | None] = {}
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
        model = keys.get("type") or None
        if model is not None and not _MODEL.match(model):
            raise GresConfUnsupported(no, raw, f"GPU type {model!r} cannot be a node feature (letters, digits, _ . -)")
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
            if model_of.setdefault(name, model) != model:
                raise GresConfUnsupported(no, raw, f"{name} has GPUs of two models ({model_of[name] or 'untyped'} and "
                                          f"{model or 'untyped'}); one node feature cannot tell them apart")
    if not per_node:
        raise GresConfUnsupported(0, "", "no GPU lines with File= found")
    by_layout: dict[tuple[tuple[Gpu, ...], str | None], list[str]] = {}
    for name, gpus in per_node.items():
        if len({g.file for g in gpus}) != len(gpus):
            raise GresConfUnsupported(0, name, "a device file is listed twice for this node")
        by_layout.setdefault((tuple(gpus), model_of[name]), []).append(name)
    lines = ["AutoDetect=off"]
    fields_out: dict[str, str] = {}
    models: dict[str, str] = {}
    for (layout, model), names in by_layout.items():
        hostlist = spelled.get(frozenset(names)) or compress(names)
        for slot, gpu in enumerate(layout):
            kept_fields = "".join(f" {k}={v}" for k, v in gpu.extra)
            lines.append(f"NodeName={hostlist} Name={GRES_NAME} Type={slot_type(slot)} File={gpu.file}{kept_fields}")
        fields_out[hostlist] = node_gres_field(len(layout))
        if model is not None:
            models[hostlist] = model
    return SlotConf(lines + kept, fields_out, models)
