import pytest

from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.topology import parse_topology, racks_of_nodes, read_racks

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
    ("# only a comment\n", "no switches"),
])
def test_bad_topology_names_the_line(text, match):
    with pytest.raises(SlurmParseError, match=match):
        parse_topology(text)


def test_missing_file(tmp_path):
    with pytest.raises(SlurmParseError, match="cannot read topology"):
        read_racks(tmp_path / "none.conf")
