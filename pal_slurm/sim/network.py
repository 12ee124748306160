"""The event simulator's network model: topology tiers, per-model sensitivity, congestion.

Topology. GPUs sit in nodes, nodes under leaf switches (racks), racks under one spine. A
placement's *tier* is the highest level its traffic must cross: 0 = one node, 1 = one rack
(several nodes under one leaf), 2 = several racks (through the spine). The racks come from the
ClusterView (`Node.rack`), which can be built from a cluster spec (`16x4` plus nodes per rack)
or from a Slurm `topology.conf` (`parse_topology_conf`, pure).

Sensitivity. `placement-slowdowns.csv` gives, per model, GPU count and placement level, the
fraction of iteration time that is compute, s = comp / (comp + exposed_comm), simulated with
ASTRA-sim for 8-GPU machines (two 4-GPU NVSwitch slots), a 200 GB/s machine ring and a 400 GB/s
rack switch. We work with the exposed-communication ratio e = 1/s - 1 (exposed comm per unit of
compute) and map the table's levels onto our tiers:

    slot, machine(...)  -> node   (intra-node: NVLink/NVSwitch)
    rack(K mc ...)      -> rack   (K machines under one switch; K = 2 or 4 in the table)
    xrack(...)          -> spine

Per tier we interpolate linearly in log2(GPU count) between the table's counts and clamp at the
ends (1 GPU = no communication); the rack tier also depends on how many nodes the job spans,
interpolated in log2(nodes) between the table's 2- and 4-machine rows and extrapolated beyond
(ring latency grows with the ring), capped at the spine value.

Smoothing (the data's README warns of simulator artefacts): the node tier takes the best
intra-node row at a GPU count (a scheduler can choose the arrangement; BERT's 4-GPU slot row,
0.923 against 0.996 for 2x2, is such an artefact), and tiers are made monotone (a coarser tier
is never faster than a finer one, more machines never faster than fewer). Rows that had to be
changed are listed in `SensitivityTable.flags`.

The factor. The trace's per-iteration times were measured on one node, so intra-node
communication is part of a job's ideal time; the network factor is the time multiplier of the
placement relative to an intra-node one:

    factor = (1 + e_node + d_leaf / (1 - load_leaf) + d_spine / (1 - load_spine)) / (1 + e_node)

where d_leaf = e_rack - e_node and d_spine = e_spine - e_rack are the extra exposed
communication of crossing a leaf switch and the spine, and `load_*` is the congestion knob:
background load on that tier, so the bandwidth left to the job is (1 - load). Communication
overhead (seconds lost to the network) over a run of wall time W is W * (1 - 1/factor).

Model mapping (our trace models -> the table's six; as data in `DEFAULT_MODEL_MAP`). The
table's models span a range of communication-to-compute ratios; ours are placed on that range
by architecture family and gradient-bytes per second of compute (public parameter counts and the
trace's per-iteration times):
    resnet50 -> ResNet50  (same model)
    vgg19    -> VGG       (same family; VGG-11 in the table)
    BERT     -> BERT      (same model)
    GPT2     -> BERT      (the table's only transformer; GPT-2 is at least as large)
    DCGAN    -> AlexNet   (shallow convnets with a few large conv/deconv layers, short iterations)
    PointNet -> ResNet50  (3.5M parameters, ~14 MB of gradients per 0.28 s iteration: mostly
                           compute; ResNet50 is the table's least sensitive distributed model)
    unknown  -> BERT      (the most sensitive target of the mapping: assume the worst)
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pal_slurm.model import ClusterView
# (tier, nodes, racks) of a GPU set: the placements' own definition, under the simulator's name
from pal_slurm.model.network import NODE, RACK, SPINE, TIERS, class_of_factor, span as tier_of


DEFAULT_MODEL_MAP: Mapping[str, str] = {
    "resnet50": "ResNet50",
    "resnet": "ResNet50",
    "vgg19": "VGG",
    "vgg": "VGG",
    "bert": "BERT",
    "gpt2": "BERT",
    "dcgan": "AlexNet",
    "pointnet": "ResNet50",
    # the table's own names map to themselves
    "resnet18": "ResNet18",
    "alexnet": "AlexNet",
    "mobilenetv3": "MobileNetV3",
}
DEFAULT_TABLE_MODEL = "BERT"



class NetworkError(ValueError):
    """Bad network input (topology file, congestion, slowdown table); says what and where."""


# ---------------------------------------------------------------------------------------------
# topology


def cluster_from_racks(racks: Mapping[str, str], gpus_per_node: int | Mapping[str, int]) -> ClusterView:
    """A ClusterView of the nodes of `racks` ({node: leaf switch}, e.g. from Slurm's topology.conf
    read by pal_slurm.slurm.topology), in that order, racks = leaf switches."""
    if not racks:
        raise NetworkError("topology has no nodes")
    layout = [(n, gpus_per_node if isinstance(gpus_per_node, int) else gpus_per_node[n]) for n in racks]
    return ClusterView.from_layout(layout, racks=dict(racks))


def parse_cluster_spec(spec: str, nodes_per_rack: int | None = None) -> ClusterView:
    """`16x4` -> 16 nodes of 4 GPUs, `nodes_per_rack` nodes under each leaf (None: one rack)."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", spec or "")
    if not m:
        raise NetworkError(f"bad cluster spec {spec!r}: expected NODESxGPUS, e.g. 16x4")
    nodes, gpn = int(m.group(1)), int(m.group(2))
    if nodes <= 0 or gpn <= 0:
        raise NetworkError(f"bad cluster spec {spec!r}: counts must be > 0")
    if nodes_per_rack is not None and nodes_per_rack <= 0:
        raise NetworkError("nodes per rack must be > 0")
    return ClusterView.uniform(nodes, gpn, nodes_per_rack=nodes_per_rack)


# ---------------------------------------------------------------------------------------------
# sensitivity table


def _label_tier(label: str) -> tuple[int, int]:
    """(tier, machines spanned) for a table placement label."""
    if label.startswith("slot") or label.startswith("machine"):
        return NODE, 1
    if label.startswith("rack"):
        m = re.match(r"rack\((\d+)mc", label)
        return RACK, int(m.group(1)) if m else 2
    if label.startswith("xrack"):
        return SPINE, 2
    raise NetworkError(f"unknown placement label {label!r}")


def _interp(points: Mapping[float, float], x: float) -> float:
    """Piecewise-linear in x over sorted points; clamped at both ends."""
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    if x >= xs[-1]:
        return points[xs[-1]]
    for a, b in zip(xs, xs[1:]):
        if a <= x <= b:
            return points[a] + (points[b] - points[a]) * (x - a) / (b - a)
    return points[xs[-1]]  # pragma: no cover


@dataclass(frozen=True)
class ModelCurve:
    """Smoothed exposed-communication ratios of one table model, keyed by log2(GPU count)."""

    model: str
    node: Mapping[float, float]  # log2 n -> e
    rack2: Mapping[float, float]  # 2 machines
    rack4: Mapping[float, float]  # 4 machines
    spine: Mapping[float, float]

    def e_node(self, n: int) -> float:
        return 0.0 if n <= 1 else _interp(self.node, math.log2(n))

    def e_spine(self, n: int) -> float:
        return 0.0 if n <= 1 else _interp(self.spine, math.log2(n))

    def e_rack(self, n: int, machines: int) -> float:
        if n <= 1:
            return 0.0
        x = math.log2(n)
        e2, e4 = _interp(self.rack2, x), _interp(self.rack4, x)
        m = max(2, machines)
        e = e2 + (e4 - e2) * (math.log2(m) - 1.0)  # 2 -> e2, 4 -> e4, linear in log2 beyond
        e = max(e, self.e_node(n))
        return min(e, self.e_spine(n)) if self.spine else e


@dataclass(frozen=True)
class SensitivityTable:
    curves: Mapping[str, ModelCurve]
    flags: tuple[str, ...] = ()  # rows that smoothing changed, for the record

    @classmethod
    def load(cls, path: str | Path | None = None) -> "SensitivityTable":
        if path is None:
            path = Path(str(resources.files("pal_slurm") / "data" / "network" / "placement-slowdowns.csv"))
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise NetworkError(f"{path}: cannot read slowdown table: {exc.strerror or exc}") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str = "placement-slowdowns.csv") -> "SensitivityTable":
        rows = list(csv.reader(text.splitlines()))
        if not rows or rows[0][:3] != ["model", "num_gpus", "placement"]:
            raise NetworkError(f"{source}: expected a header starting model,num_gpus,placement")
        raw: dict[str, dict[tuple[int, int], dict[int, float]]] = {}
        flags: list[str] = []
        for lineno, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            try:
                model, n, label, s = row[0], int(row[1]), row[2], float(row[3])
            except (IndexError, ValueError):
                raise NetworkError(f"{source}:{lineno}: malformed row {row}") from None
            if not 0.0 < s <= 1.0 or n <= 0:
                raise NetworkError(f"{source}:{lineno}: slowdown must be in (0, 1] and GPUs > 0")
            tier, machines = _label_tier(label)
            key = (tier, machines if tier == RACK else 0)
            e = 1.0 / s - 1.0
            cell = raw.setdefault(model, {}).setdefault(key, {})
            # several rows per cell (node tier: slot vs machine arrangements; rack tier: the
            # same machine count at other shapes): keep the best, flag large disagreements
            if n in cell and abs(cell[n] - e) > 0.05 * (1.0 + min(cell[n], e)):
                flags.append(
                    f"{model} {n} GPUs {TIERS[tier]}: rows disagree (s={1 / (1 + cell[n]):.4f} vs "
                    f"{s:.4f}, {label}); kept the faster arrangement"
                )
            cell[n] = min(cell.get(n, math.inf), e)
        curves = {}
        for model, tiers in raw.items():
            curves[model] = cls._smooth(model, tiers, flags)
        return cls(curves, tuple(flags))

    @staticmethod
    def _smooth(model: str, tiers: Mapping[tuple[int, int], Mapping[int, float]], flags: list[str]) -> ModelCurve:
        def get(key: tuple[int, int]) -> dict[int, float]:
            if key not in tiers:
                raise NetworkError(f"model {model}: no rows for tier {key}")
            return dict(tiers[key])

        node, rack2, rack4, spine = get((NODE, 0)), get((RACK, 2)), get((RACK, 4)), get((SPINE, 0))
        def floor(points: dict[int, float], lower: Callable[[int], float], what: str) -> dict[float, float]:
            out = {}
            for n, e in sorted(points.items()):
                lo = lower(n)
                if e < lo - 1e-12:
                    flags.append(f"{model} {n} GPUs {what}: s={1 / (1 + e):.4f} faster than a finer level; raised to {1 / (1 + lo):.4f}")
                    e = lo
                out[math.log2(n)] = e
            return out

        # node rows: a larger intra-node count is never cheaper than a smaller one
        node_pts: dict[float, float] = {}
        prev = 0.0
        for n, e in sorted(node.items()):
            if e < prev - 1e-12:
                flags.append(f"{model} {n} GPUs node: s={1 / (1 + e):.4f} faster than fewer GPUs; raised")
                e = prev
            node_pts[math.log2(n)] = e
            prev = e
        base = ModelCurve(model, node_pts, {}, {}, {})
        r2 = floor(rack2, base.e_node, "rack(2 machines)")
        c2 = ModelCurve(model, node_pts, r2, r2, {})
        r4 = floor(rack4, lambda n: c2.e_rack(n, 2), "rack(4 machines)")
        c4 = ModelCurve(model, node_pts, r2, r4, {})
        sp = floor(spine, lambda n: c4.e_rack(n, 4), "xrack")
        return ModelCurve(model, node_pts, r2, r4, sp)


@lru_cache(maxsize=1)
def default_table() -> SensitivityTable:
    return SensitivityTable.load()


# ---------------------------------------------------------------------------------------------
# congestion and the slowdown factor


@dataclass(frozen=True)
class Congestion:
    """Background load per tier, as the fraction of link bandwidth other traffic uses."""

    leaf: float = 0.0  # node <-> leaf switch links
    spine: float = 0.0  # leaf <-> spine links

    def __post_init__(self) -> None:
        for name, v in (("leaf", self.leaf), ("spine", self.spine)):
            if not (0.0 <= v < 0.95):
                raise NetworkError(f"congestion {name}={v}: must be in [0, 0.95)")

    @classmethod
    def parse(cls, spec: str | None) -> "Congestion":
        """`0.5` (both tiers) or `leaf=0.2,spine=0.6`."""
        if not spec:
            return cls()
        try:
            if "=" not in spec:
                v = float(spec)
                return cls(v, v)
            kv = dict(p.split("=", 1) for p in spec.split(","))
            unknown = set(kv) - {"leaf", "spine"}
            if unknown:
                raise NetworkError(f"congestion {spec!r}: unknown tier(s) {', '.join(sorted(unknown))}")
            return cls(float(kv.get("leaf", 0.0)), float(kv.get("spine", 0.0)))
        except ValueError as exc:
            if isinstance(exc, NetworkError):
                raise
            raise NetworkError(f"bad congestion {spec!r}: expected 0.5 or leaf=0.2,spine=0.6") from None


@dataclass(frozen=True)
class NetworkModel:
    """Slowdown factors for (model, placement): the table, a model map and congestion."""

    table: SensitivityTable = field(default_factory=default_table)
    congestion: Congestion = Congestion()
    model_map: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_MODEL_MAP))
    default_model: str = DEFAULT_TABLE_MODEL
    _cache: dict[tuple[str, int, int, int], float] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def table_model(self, app: str) -> str:
        key = (app or "").strip().lower()
        name = self.model_map.get(key, self.default_model)
        if name not in self.table.curves:
            raise NetworkError(f"model map sends {app!r} to {name!r}, which the table lacks")
        return name

    def factor(self, app: str, num_gpus: int, nodes: int, racks: int) -> float:
        """Time multiplier (>= 1) of a placement of `num_gpus` GPUs over that many nodes/racks."""
        key = (app, num_gpus, nodes, racks)
        f = self._cache.get(key)
        if f is None:
            f = self._cache[key] = _factor(self.table.curves[self.table_model(app)], self.congestion, num_gpus, nodes, racks)
        return f

    def slowdown(self, app: str, gpu_ids: Sequence[int], cluster: ClusterView) -> float:
        _tier, nodes, racks = tier_of(gpu_ids, cluster)
        return self.factor(app, len(gpu_ids), nodes, racks)

    def sensitivity(self, app: str) -> str:
        """`low` / `medium` / `high` (the JobRequest.net_sensitivity a policy sees): the class
        of `spread_factor` (model.network.class_of_factor)."""
        return class_of_factor(self.spread_factor(app))

    def spread_factor(self, app: str) -> float:
        """The factor of an 8-GPU placement over two nodes in two racks, no congestion: what a
        user declares with a numeric `net=` (model.network)."""
        return NetworkModel(self.table, Congestion(), self.model_map, self.default_model).factor(app, 8, 2, 2)


def _factor(curve: ModelCurve, c: Congestion, n: int, nodes: int, racks: int) -> float:
    if n <= 1 or nodes <= 1:
        return 1.0
    e_node = curve.e_node(n)
    e_rack = curve.e_rack(n, nodes)
    d_leaf = max(0.0, e_rack - e_node)
    d_spine = max(0.0, curve.e_spine(n) - e_rack) if racks > 1 else 0.0
    return (1.0 + e_node + d_leaf / (1.0 - c.leaf) + d_spine / (1.0 - c.spine)) / (1.0 + e_node)


def placement_slowdown(
    model: str,
    gpu_ids: Sequence[int],
    cluster: ClusterView,
    congestion: Congestion | None = None,
) -> float:
    """Network time multiplier (>= 1) of running `model` on `gpu_ids` of `cluster`."""
    return NetworkModel(congestion=congestion or Congestion()).slowdown(model, gpu_ids, cluster)


def comm_overhead(wall_s: float, factor: float) -> float:
    """Seconds of `wall_s` lost to the network when running `factor` times slower."""
    return wall_s * (1.0 - 1.0 / factor) if factor > 1.0 else 0.0
