from pathlib import Path

import pytest

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.topology import parse_show_topology, parse_topology, racks_of_nodes, read_blocks, read_racks

CONF = """
# two leaves under a spine
SwitchName=leaf1 Nodes=gpu[01-02]
SwitchName=leaf2 Nodes=gpu[03-04] LinkSpeed=100
SwitchName=spine Switches=leaf[1-2]
"""


def test_racks_from_leaf_switches(tmp_path):
    sw = parse_topology(CONF)
    assert sw["spine"].switches == ("leaf1", "leaf2")
    assert racks_of_nodes(sw) == {"gpu01": "leaf1", "gpu02": "leaf1", "gpu03": "leaf2", "gpu04": "leaf2"}
    p = tmp_path / "topology.conf"
    p.write_text(CONF)
    assert read_racks(p)["gpu04"] == "leaf2"


@pytest.mark.parametrize("text,match", [
    ("Nodes=gpu01", "needs SwitchName"),
    ("SwitchName=a Nodes=gpu01\nSwitchName=a Nodes=gpu02", "defined twice"),
    ("SwitchName=s Switches=nope", "unknown switch"),
    ("SwitchName=a junk", "KEY=VALUE"),
    ("SwitchName=a Nodes=gpu[03-01]", ":1:"),
    ("SwitchName=s0 Nodes=a Bogus=1", "unknown key"),
    ("SwitchName=s0 Nodes=a\nSwitchName=s1 Nodes=a", "under both"),
    ("SwitchName=s0 Nodes=a[1-", ":1:"),
    ("# only a comment\n", "no switches or blocks"),
])
def test_bad_topology_names_the_line(text, match):
    with pytest.raises(SlurmParseError, match=match):
        parse_topology(text)


def test_missing_file(tmp_path):
    with pytest.raises(SlurmParseError, match="cannot read topology"):
        read_racks(tmp_path / "none.conf")


# ---- topology/block ---------------------------------------------------------------------
# Goldens captured from Slurm 24.11's `scontrol show topology` on an 8-node lab with two blocks
# (docs/decisions/block-topology.md has the commands).
DATA = Path(__file__).parent / "data" / "24.11"


def test_blocks_from_scontrol_show_topology():
    blocks = parse_show_topology((DATA / "scontrol_show_topology_block.txt").read_text())
    assert blocks.size == 4
    assert blocks.block_of["gpu04"] == "b1" and blocks.block_of["gpu05"] == "b2"
    assert blocks.members() == {"b1": frozenset(f"gpu0{i}" for i in range(1, 5)),
                                "b2": frozenset(f"gpu0{i}" for i in range(5, 9))}


def test_an_aggregated_block_adds_no_locality_of_its_own():
    """BlockSizes=4,8 adds `AggregatedBlock=b[1-2] ... BlockSize=8`: the base blocks stay the unit."""
    blocks = parse_show_topology((DATA / "scontrol_show_topology_block_aggregated.txt").read_text())
    assert set(blocks.members()) == {"b1", "b2"} and blocks.size == 4


@pytest.mark.parametrize("text", [(DATA / "scontrol_show_topology_tree.txt").read_text(), ""])
def test_tree_topology_or_none_has_no_blocks(text):
    """topology/tree's switches, or no topology plugin (Slurm 22.05 prints nothing): no blocks."""
    blocks = parse_show_topology(text)
    assert not blocks and blocks.size == 0


@pytest.mark.parametrize("text,match", [
    ("BlockName=b1 BlockIndex=0 BlockSize=4", "needs BlockName= and Nodes="),
    ("BlockName=b1 Nodes=a[1-2] BlockSize=4\nBlockName=b2 Nodes=a[2-3] BlockSize=4", "in both"),
    ("BlockName=b1 Nodes=a[1- BlockSize=4", ":1:"),
    ("BlockName=b1 Nodes=a1 BlockSize=four", "BlockSizes"),
])
def test_bad_show_topology_names_the_line(text, match):
    with pytest.raises(SlurmParseError, match=match):
        parse_show_topology(text)


def test_a_block_topology_conf_gives_blocks_as_racks():
    conf = "BlockName=b1 Nodes=gpu[01-04]\nBlockName=b2 Nodes=gpu[05-08]\nBlockSizes=4,8\n"
    racks = racks_of_nodes(parse_topology(conf))
    assert racks["gpu01"] == "b1" and racks["gpu08"] == "b2" and len(racks) == 8


@pytest.mark.parametrize("text,match", [
    ("BlockName=b1 Nodes=a1 Switches=x", "unknown key"),
    ("BlockName=b1 SwitchName=s Nodes=a1", "SwitchName= or BlockName="),
    ("BlockName=b1 Nodes=a1\nBlockSizes=0", "BlockSizes"),
    ("BlockSizes=4", "no switches or blocks"),
])
def test_bad_block_conf_names_the_problem(text, match):
    with pytest.raises(SlurmParseError, match=match):
        parse_topology(text)


def test_read_blocks_asks_scontrol():
    calls = []

    def run(argv):
        calls.append(argv)
        return "BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=2\n"

    assert read_blocks(run).block_of == {"n1": "b1", "n2": "b1"}
    assert calls == [["scontrol", "show", "topology"]]
