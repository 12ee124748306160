"""The Slurm adapter against a real Slurm lab cluster (4 nodes x 4 emulated GPUs): 22.05 on the
host, 24.11, 25.11 and 26.05 in the Debian 13, Slurm-from-source and testing roots (`make
test-root SUITE=trixie|slurm-25.11|forky`)."""

from __future__ import annotations

import re
import time

import pytest

from pal_slurm.slurm.errors import SlurmCommandFailed, SlurmError
from pal_slurm.slurm.gres import tres_per_node
from pal_lab.lab import LabCluster

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

SHOW_GPUS = 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURMD_NODENAME=$SLURMD_NODENAME"'


@pytest.fixture
def lab(slurm_lab: LabCluster):
    """The session lab, idle before the test and cleaned up after it."""
    slurm_lab.wait_idle()
    yield slurm_lab
    slurm_lab.cancel_all()


def _lines(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if line.strip()}


def test_readers_see_every_node_and_gpu(lab: LabCluster) -> None:
    nodes = lab.reader.nodes()
    assert [n.name for n in nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert all(n.gpus == 4 and n.gpus_used == 0 and n.usable for n in nodes)
    assert all(n.gres == "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1" for n in nodes)
    view = lab.reader.cluster_view()
    assert view.size == 16
    assert view.free == frozenset(range(16))
    assert [(g.node, g.slot) for g in view.gpus[:5]] == [
        ("gpu01", 0), ("gpu01", 1), ("gpu01", 2), ("gpu01", 3), ("gpu02", 0)
    ]


def test_free_gpus_go_down_while_a_job_runs(lab: LabCluster) -> None:
    job = lab.sbatch("-w", "gpu02", "--gres=gpu:s1:1,gpu:s2:1", "--comment=pal:class=resnet",
                     wrap="sleep 60")
    lab.wait_job(job, states={"RUNNING"})
    view = lab.reader.cluster_view()
    where = view.gpu_by_location()
    assert view.free == frozenset(range(16)) - {where[("gpu02", 1)], where[("gpu02", 2)]}
    (info,) = [j for j in lab.reader.jobs() if j.job_id == job]
    assert info.state == "RUNNING"
    assert info.nodes == ("gpu02",)
    assert info.gpu_slots == {"gpu02": frozenset({1, 2})}
    assert info.comment == "pal:class=resnet"
    assert info.tres_per_node == "gres:gpu:s1:1,gres:gpu:s2:1"
    lab.runner.run(["scancel", str(job)])
    deadline = time.monotonic() + 15
    while lab.reader.cluster_view().free != frozenset(range(16)):
        assert time.monotonic() < deadline, "GPUs not freed after scancel"
        time.sleep(0.1)


def test_typed_gres_binds_exact_gpus(lab: LabCluster) -> None:
    job = lab.sbatch("--gres=gpu:s2:1,gpu:s3:1", wrap=SHOW_GPUS)
    assert lab.wait_job(job) == "COMPLETED"
    assert re.search(r"CUDA_VISIBLE_DEVICES=2,3 SLURMD_NODENAME=gpu0[1-4]", lab.job_output(job))


def test_held_job_is_seen_as_held(lab: LabCluster) -> None:
    job = lab.sbatch("--hold", "--gres=gpu:2", "--comment=pal:class=bert,mode=defer", wrap="true")
    (info,) = [j for j in lab.reader.jobs() if j.job_id == job]
    assert info.held and info.pending
    assert info.comment == "pal:class=bert,mode=defer"
    assert info.tres_per_node == "gres:gpu:2"
    assert lab.actuator.show(job).held


def test_actuator_places_held_job_on_chosen_node_and_slots(lab: LabCluster) -> None:
    # an untyped request (gres:gpu:2) rewritten to exact typed slots: Slurm 22.05 rejects that
    # in one step, the actuator must clear the request first
    job = lab.sbatch("--hold", "--gres=gpu:2", wrap=SHOW_GPUS)
    lab.actuator.place_on_slots(job, ["gpu03"], [1, 3])
    assert lab.wait_job(job) == "COMPLETED"
    assert _lines(lab.job_output(job)) == {"CUDA_VISIBLE_DEVICES=1,3 SLURMD_NODENAME=gpu03"}


def test_actuator_places_per_gpu_memory_job_on_slots(lab: LabCluster) -> None:
    # 24.11 refuses to clear the request of a --mem-per-gpu job (MemPerTres would name no GPU)
    # and takes the typed request in one update instead
    job = lab.sbatch("--hold", "--mem-per-gpu=100", "--gres=gpu:2", wrap=SHOW_GPUS)
    lab.actuator.place_on_slots(job, ["gpu02"], [0, 3])
    assert lab.wait_job(job) == "COMPLETED"
    assert _lines(lab.job_output(job)) == {"CUDA_VISIBLE_DEVICES=0,3 SLURMD_NODENAME=gpu02"}


def test_actuator_places_cpus_per_gpu_job_where_slurm_starts_it(lab: LabCluster) -> None:
    # 22.05 starts a --cpus-per-gpu job bound to two slot types; 24.11 leaves it pending for
    # ever, so there it gets its node only (Slurm picks the GPUs, from slot 0)
    job = lab.sbatch("--hold", "--cpus-per-gpu=4", "--gres=gpu:2", wrap=SHOW_GPUS)
    lab.actuator.place_on_slots(job, ["gpu04"], [1, 2])
    assert lab.wait_job(job, timeout=60) == "COMPLETED"
    slots = "1,2" if lab.reader.dialect.version.release < (23, 11) else "0,1"
    assert _lines(lab.job_output(job)) == {f"CUDA_VISIBLE_DEVICES={slots} SLURMD_NODENAME=gpu04"}


def test_actuator_places_multi_node_job(lab: LabCluster) -> None:
    job = lab.sbatch("--hold", "--gres=gpu:1",
                     wrap=f"srun --ntasks-per-node=1 bash -c '{SHOW_GPUS}'")
    lab.actuator.place_held_job(job, "gpu[02,04]", tres_per_node([0, 2]))
    assert lab.wait_job(job) == "COMPLETED"
    assert _lines(lab.job_output(job)) == {
        "CUDA_VISIBLE_DEVICES=0,2 SLURMD_NODENAME=gpu02",
        "CUDA_VISIBLE_DEVICES=0,2 SLURMD_NODENAME=gpu04",
    }


def test_actuator_places_gpus_per_job_request_on_nodes_only(lab: LabCluster) -> None:
    job = lab.sbatch("--hold", "--gpus=2", wrap=SHOW_GPUS)
    lab.actuator.place_nodes(job, ["gpu03"])
    assert lab.wait_job(job) == "COMPLETED"
    assert _lines(lab.job_output(job)) == {"CUDA_VISIBLE_DEVICES=0,1 SLURMD_NODENAME=gpu03"}


def test_actuator_holds_a_pending_job_before_rewriting_it(lab: LabCluster) -> None:
    # gpu01 fully busy: the second job pends (Resources) and must not start half-updated
    blocker = lab.sbatch("-w", "gpu01", "--gres=gpu:4", wrap="sleep 60")
    lab.wait_job(blocker, states={"RUNNING"})
    job = lab.sbatch("-w", "gpu01", "--gres=gpu:1", wrap=SHOW_GPUS)
    assert lab.job_state(job) == "PENDING"
    lab.actuator.place_on_slots(job, ["gpu04"], [2])
    assert lab.wait_job(job) == "COMPLETED"
    assert _lines(lab.job_output(job)) == {"CUDA_VISIBLE_DEVICES=2 SLURMD_NODENAME=gpu04"}


def test_actuator_hold_and_release(lab: LabCluster) -> None:
    job = lab.sbatch("--hold", "--gres=gpu:1", wrap=SHOW_GPUS)
    time.sleep(1.2)  # a scheduler tick passes: a held job stays pending
    assert lab.job_state(job) == "PENDING"
    lab.actuator.release(job)
    assert lab.wait_job(job) == "COMPLETED"
    assert "CUDA_VISIBLE_DEVICES=0 " in lab.job_output(job)


def test_actuator_refuses_a_finished_job(lab: LabCluster) -> None:
    job = lab.sbatch("--gres=gpu:1", wrap="true")
    assert lab.wait_job(job) == "COMPLETED"
    with pytest.raises(SlurmError, match="not PENDING"):
        lab.actuator.place_on_slots(job, ["gpu01"], [0])


def test_failed_placement_keeps_job_held_with_its_request(lab: LabCluster) -> None:
    job = lab.sbatch("--hold", "--gres=gpu:2", wrap="true")
    with pytest.raises(SlurmCommandFailed) as err:
        lab.actuator.place_on_slots(job, ["gpu99"], [0])  # no such node
    assert err.value.returncode != 0 and err.value.stderr
    snap = lab.actuator.show(job)
    assert snap.held
    assert snap.tres_per_node == "gres:gpu:2"


def test_runner_reports_failing_command(lab: LabCluster) -> None:
    with pytest.raises(SlurmCommandFailed) as err:
        lab.runner.run(["scontrol", "show", "job", "999999"])
    assert err.value.returncode == 1
    assert "Invalid job id" in err.value.stderr
    assert err.value.argv == ("scontrol", "show", "job", "999999")


def _array_elements(lab: LabCluster, array: int) -> dict[str, bool]:
    """Each pending element of the array (``A_I``) -> whether it is held (the pending ones
    that were not split off share one record)."""
    return {str(ref): j.held for j in lab.reader.jobs() if j.array_job_id == array and j.pending
            for ref in j.element_refs()}


def test_an_array_record_is_held_by_its_own_elements_not_by_the_array_id(lab: LabCluster) -> None:
    """pald makes the hook's hold of an array's record an admin hold after its cycle released
    some elements, from a record read before those releases. By the array's job id, Slurm
    holds every pending element, the ones just released too (they waited held until pald
    placed them again: the flaky array test of test_site_compat); by `JobInfo.own_ref` only
    the record's own elements are held."""
    blocker = lab.sbatch("-w", "gpu01", "--gres=gpu:4", wrap="sleep 60")
    lab.wait_job(blocker, states={"RUNNING"})
    array = lab.sbatch("--hold", "--array=1-4", "--gres=gpu:1", wrap="sleep 60")
    plain = lab.sbatch("--hold", "--gres=gpu:1", wrap="sleep 60")
    record = next(j for j in lab.reader.jobs() if j.array_job_id == array)  # read before the release
    assert record.element_refs() == [f"{array}_{i}" for i in range(1, 5)]
    released = f"{array}_1"
    lab.actuator.place_nodes(released, ["gpu01"])  # pinned behind the blocker: pending, not held
    assert _array_elements(lab, array) == {released: False, **{f"{array}_{i}": True for i in (2, 3, 4)}}
    assert record.own_ref(without={released}) == f"{array}_[2-4]"
    lab.actuator.hold_many([plain, record.own_ref(without={released})])
    assert _array_elements(lab, array)[released] is False
    reasons = {j.job_id: j.reason for j in lab.reader.jobs()}
    assert reasons[plain] == reasons[array] == "JobHeldAdmin"  # the record kept the array's id
    lab.actuator.hold(record.job_id)  # the fault: the array's id names the released element too
    assert _array_elements(lab, array)[released] is True
