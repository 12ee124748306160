"""The network vocabulary (model.network)."""

from pal_slurm.model.network import Sensitivity, sensitivity_rank


def test_sensitivity_rank_reads_names_and_members_and_counts_unknown_as_high():
    assert [sensitivity_rank(s) for s in ("none", "low", "medium", "high")] == [0, 1, 2, 3]
    assert [sensitivity_rank(s) for s in Sensitivity] == [0, 1, 2, 3]  # members hash by name, not value
    assert sensitivity_rank("extreme") == sensitivity_rank("HIGH") == 3
