from pal_slurm.model import ClusterView, JobRequest, JobShape
from pal_slurm.policy.slurm_starts import SLURM_STARTS, started_at_pass

VIEW = ClusterView.uniform(4, 4, nodes_per_rack=2)


def job(n: int, shape: JobShape | None = None) -> JobRequest:
    return JobRequest(job_id="a", num_gpus=n, submit_time=0.0, waiting_since=0.0, shape=shape)


def test_slurm_takes_the_lowest_free_slots_of_a_per_node_job_whose_slots_differ_between_nodes():
    per_node = job(4, JobShape.on_nodes(2, 2))
    assert tuple(SLURM_STARTS.start(per_node, (1, 2, 6, 7), VIEW, range(16))) == (0, 1, 4, 5)
    assert tuple(SLURM_STARTS.start(per_node, (1, 2, 5, 6), VIEW, range(16))) == (1, 2, 5, 6)  # same slots: bound


def test_a_total_request_starts_where_pal_chose():
    assert tuple(SLURM_STARTS.start(job(2), (2, 7), VIEW, range(16))) == (2, 7)


def test_a_pinned_job_whose_bound_slot_an_earlier_job_took_at_the_pass_waits_for_the_next():
    # A (-N 2 --gres=gpu:2, pinned to slots 1-2 and 0-1: Slurm picks) takes the lowest free
    # slots at the pass, slot 0 of node 1 among them; B (1 GPU, bound to that slot) cannot start.
    view = ClusterView.uniform(2, 4)
    a = JobRequest(job_id=0, num_gpus=4, submit_time=0.0, shape=JobShape.on_nodes(2, 2))
    b = JobRequest(job_id=1, num_gpus=1, submit_time=1.0, shape=JobShape.on_nodes(1, 1))
    started = started_at_pass({1: (0,), 0: (1, 2, 4, 5)}, {0: a, 1: b}, view)
    assert started == {0: (0, 1, 4, 5)}
