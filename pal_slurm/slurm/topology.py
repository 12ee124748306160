"""Slurm's topology.conf (topology/tree): leaf switches and the nodes under them.

pal-slurm's network tiers are node < rack (leaf switch) < spine: a node's rack is the leaf
switch that lists it. Lines look like

    SwitchName=leaf1 Nodes=gpu[01-08]
    SwitchName=leaf2 Nodes=gpu[09-16] LinkSpeed=100
    SwitchName=spine Switches=leaf[1-2]

Pure parsing (`parse_topology`) plus one reader; errors name the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.intake.hostlist import expand


@dataclass(frozen=True)
class Switch:
    name: str
    nodes: tuple[str, ...] = ()  # leaf switch: the nodes under it
    switches: tuple[str, ...] = ()  # upper switch: the switches under it


def parse_topology(text: str, source: str = "topology.conf") -> dict[str, Switch]:
    switches: dict[str, Switch] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if not sep:
                raise SlurmParseError(f"{source}:{lineno}: expected KEY=VALUE, got {token!r}")
            fields[key.lower()] = value
        name = fields.get("switchname")
        if not name:
            raise SlurmParseError(f"{source}:{lineno}: a line needs SwitchName=")
        unknown = set(fields) - {"switchname", "nodes", "switches", "linkspeed"}
        if unknown:
            raise SlurmParseError(f"{source}:{lineno}: unknown key(s) {', '.join(sorted(unknown))}")
        if name in switches:
            raise SlurmParseError(f"{source}:{lineno}: switch {name!r} defined twice")
        try:
            nodes = tuple(expand(fields["nodes"])) if "nodes" in fields else ()
            subs = tuple(expand(fields["switches"])) if "switches" in fields else ()
        except Exception as exc:  # noqa: BLE001 - hostlist errors carry their own text
            raise SlurmParseError(f"{source}:{lineno}: {exc}") from None
        switches[name] = Switch(name, nodes, subs)
    if not switches:
        raise SlurmParseError(f"{source}: no switches")
    leaf_of: dict[str, str] = {}
    for sw in switches.values():
        for sub in sw.switches:
            if sub not in switches:
                raise SlurmParseError(f"{source}: switch {sw.name!r} lists unknown switch {sub!r}")
        for node in sw.nodes:
            if node in leaf_of:
                raise SlurmParseError(f"{source}: node {node!r} under both {leaf_of[node]!r} and {sw.name!r}")
            leaf_of[node] = sw.name
    return switches


def racks_of_nodes(switches: dict[str, Switch]) -> dict[str, str]:
    """node -> the leaf switch that lists it, in the file's order."""
    return {node: sw.name for sw in switches.values() for node in sw.nodes}


def read_racks(path: str | Path) -> dict[str, str]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise SlurmParseError(f"{p}: cannot read topology: {exc.strerror or exc}") from None
    return racks_of_nodes(parse_topology(text, str(p)))
