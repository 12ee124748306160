from pal_slurm.model import ClusterView, JobRequest, JobShape
from pal_slurm.policy.slurm_starts import SLURM_STARTS

VIEW = ClusterView.uniform(4, 4, nodes_per_rack=2)


def job(n: int, shape: JobShape | None = None) -> JobRequest:
    return JobRequest(job_id="a", num_gpus=n, submit_time=0.0, waiting_since=0.0, shape=shape)


def test_slurm_takes_the_lowest_free_slots_of_a_per_node_job_whose_slots_differ_between_nodes():
    per_node = job(4, JobShape.on_nodes(2, 2))
    assert tuple(SLURM_STARTS.start(per_node, (1, 2, 6, 7), VIEW, range(16))) == (0, 1, 4, 5)
    assert tuple(SLURM_STARTS.start(per_node, (1, 2, 5, 6), VIEW, range(16))) == (1, 2, 5, 6)  # same slots: bound


def test_a_total_request_starts_where_pal_chose():
    assert tuple(SLURM_STARTS.start(job(2), (2, 7), VIEW, range(16))) == (2, 7)
