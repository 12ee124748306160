"""pald's Slurm read (daemon/sync.py): what the view takes from the site read."""

from __future__ import annotations

from pal_slurm.model.site import Blocks, SiteView

from .test_app_server import make_pald


def test_a_sites_blocks_are_the_racks_of_pald_s_view(tmp_path):
    """topology/block without a topology_conf file: the blocks Slurm shows (site read) are
    pald's racks, the locality unit a leaf switch is under topology/tree."""
    pald = make_pald(tmp_path)
    pald.reader.site_view = SiteView(blocks=Blocks({"gpu01": "b1", "gpu02": "b1", "gpu03": "b2", "gpu04": "b2"}, 2))
    pald.sync_and_cycle()
    assert {n.name: n.rack for n in pald.service.view.nodes} == {"gpu01": "b1", "gpu02": "b1",
                                                                  "gpu03": "b2", "gpu04": "b2"}
