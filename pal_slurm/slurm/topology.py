"""Slurm's network topology, in pal-slurm's one vocabulary: a node's rack is its locality unit.

pal-slurm's network tiers are node < rack < spine. Under topology/tree the rack is the leaf
switch that lists the node; under topology/block (Slurm 23.11+, NVLink domains) it is the base
block. topology.conf lines look like

    SwitchName=leaf1 Nodes=gpu[01-08]
    SwitchName=leaf2 Nodes=gpu[09-16] LinkSpeed=100
    SwitchName=spine Switches=leaf[1-2]

or, for topology/block,

    BlockName=b1 Nodes=gpu[01-04]
    BlockName=b2 Nodes=gpu[05-08]
    BlockSizes=4

`parse_topology` reads the file ([slurm] topology_conf; a block is read as a leaf), and
`parse_show_topology` reads what Slurm itself says (`scontrol show topology`): the blocks and
their size, which pald reads every cycle, so that a site on topology/block needs no file.
Slurm 22.05 has no topology/block; there, and under topology/tree, the command prints no
block and the site has none. Pure parsing plus one reader; errors name the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pal_slurm.model.site import NO_BLOCKS, Blocks
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
        if set(fields) == {"blocksizes"}:  # topology/block's sizes: no locality of their own
            _block_sizes(fields["blocksizes"], f"{source}:{lineno}")
            continue
        name = fields.get("switchname") or fields.get("blockname")
        if not name or ("switchname" in fields and "blockname" in fields):
            raise SlurmParseError(f"{source}:{lineno}: a line needs SwitchName= or BlockName=")
        unknown = set(fields) - ({"switchname", "nodes", "switches", "linkspeed"} if "switchname" in fields
                                 else {"blockname", "nodes"})
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
        raise SlurmParseError(f"{source}: no switches or blocks")
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


def _block_sizes(text: str, where: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SlurmParseError(f"{where}: BlockSizes={text!r} is not a list of node counts") from None
    if not sizes or min(sizes) < 1:
        raise SlurmParseError(f"{where}: BlockSizes={text!r} is not a list of node counts")
    return sizes


def parse_show_topology(text: str) -> Blocks:
    """`scontrol show topology` -> the base blocks (NO_BLOCKS when it lists none: topology/tree,
    no topology plugin, Slurm 22.05). Slurm 24.11 prints a line per base block and one per
    aggregated block of a larger BlockSizes value (`AggregatedBlock=b[1-2] ... BlockSize=8`),
    which adds no locality of its own and is skipped:

        BlockName=b1 BlockIndex=0 Nodes=gpu[01-04] BlockSize=4
    """
    block_of: dict[str, str] = {}
    size = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.startswith("BlockName="):
            continue
        fields = dict(token.partition("=")[::2] for token in raw.split())
        where = f"scontrol show topology:{lineno}"
        name, nodes = fields.get("BlockName", ""), fields.get("Nodes", "")
        if not name or not nodes:
            raise SlurmParseError(f"{where}: a block needs BlockName= and Nodes=")
        try:
            members = expand(nodes)
        except Exception as exc:  # noqa: BLE001 - hostlist errors carry their own text
            raise SlurmParseError(f"{where}: {exc}") from None
        for node in members:
            if node in block_of:
                raise SlurmParseError(f"{where}: node {node!r} in both {block_of[node]!r} and {name!r}")
            block_of[node] = name
        line_size = _block_sizes(fields.get("BlockSize", str(len(members))), where)[0]
        size = line_size if size == 0 else min(size, line_size)
    return Blocks(block_of, size) if block_of else NO_BLOCKS


def read_blocks(run: Callable[[list[str]], str]) -> Blocks:
    """The site's blocks as Slurm shows them now (`run`: a Runner's run)."""
    return parse_show_topology(run(["scontrol", "show", "topology"]))
