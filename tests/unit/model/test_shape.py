import pytest

from pal_slurm.model.shape import JobShape, ShapeError, job_shape

def test_per_node_counts_win_and_a_node_count_spreads_them():
    assert job_shape(gpus_per_node=2, nodes=3) == JobShape.on_nodes(3, 2)
    assert job_shape(gpus_per_node=2) == JobShape.on_nodes(1, 2)
    assert job_shape(gpus_per_node=2, gpus_per_job=8) == JobShape.on_nodes(1, 2)


def test_a_total_is_split_only_over_several_nodes_that_divide_it():
    assert job_shape(gpus_per_job=8, nodes=2) == JobShape.on_nodes(2, 4)
    assert job_shape(gpus_per_job=7, nodes=2) == JobShape.anywhere(7)
    assert job_shape(gpus_per_job=4, nodes=1) == JobShape.anywhere(4)  # -N 1: Slurm's default
    assert job_shape(comment_gpus=3) == JobShape.anywhere(3)
    assert job_shape(gpus_per_job=5, comment_gpus=3) == JobShape.anywhere(5)


def test_no_gpus_is_a_shape_error():
    with pytest.raises(ShapeError, match="no_gpus"):
        job_shape()
    with pytest.raises(ShapeError):
        job_shape(gpus_per_node=0, gpus_per_job=0)


def test_shapes_are_consistent_and_print_as_slurm_options():
    assert str(JobShape.on_nodes(2, 4)) == "-N 2 --gres=gpu:4" and JobShape.on_nodes(2, 4).total == 8
    assert str(JobShape.anywhere(8)) == "--gpus=8" and not JobShape.anywhere(8).is_per_node
    with pytest.raises(ValueError):
        JobShape(8, 2, 3)
    with pytest.raises(ValueError):
        JobShape(8, 2, None)
