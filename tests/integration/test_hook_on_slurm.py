"""The real hook (job_submit_lua/) inside a real slurmctld (Debian 22.05 lab, 4 nodes x 4
emulated GPUs with per-slot GRES types), asking a stand-in pald over a real unix socket.

pald's placement logic is tested elsewhere; here the stand-in answers what each test needs, so
what is checked is the hook's half: the job lands on the nodes and GPU slots of the answer,
non-PAL jobs are untouched, malformed comments get a message and run, every failure passes the
job (pald down, hanging, refusing), and defer holds the job.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.protocol import (
    ErrorCode,
    ErrorReply,
    PlaceReply,
    PlaceRequest,
    decode_request,
    encode_reply,
)
from pal_slurm.model.decision import DecisionKind
from tests.support.tiny_pald import TinyPald

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "job_submit_lua" / "job_submit.lua"
PLACE_GPU03 = PlaceReply(DecisionKind.PLACE, "pal", {"gpu03": (2, 3)},
                         "gres:gpu:s2:1,gres:gpu:s3:1", rank=7)


@pytest.fixture(scope="module")
def hook_lab(tmp_path_factory, lab_factory):
    sock_dir = tmp_path_factory.mktemp("pald")
    sock = sock_dir / "pald.sock"
    lab = lab_factory(hook=HOOK, env={"PAL_SOCKET": str(sock), "PAL_TIMEOUT_MS": "150"})
    return lab, sock


def answering(reply):
    def answer(line: bytes) -> bytes:
        decode_request(line)  # the hook's request must be valid protocol
        return encode_reply(reply)

    return answer


def submit(lab, *args, wrap="echo NODE=$SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES"):
    """sbatch with stderr kept (the hook's slurm.log_user text); returns (job id, stderr, s)."""
    argv = ["sbatch", "--parsable", f"--output={lab.lab_dir}/out/%j.out", *args, "--wrap", wrap]
    t0 = time.monotonic()
    out = subprocess.run(argv, env=lab.client_env(), capture_output=True, text=True, timeout=30)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().split(";")[0]), out.stderr, took


def job_info(lab, job_id):
    (info,) = [j for j in lab.reader.jobs() if j.job_id == job_id]
    return info


def test_pal_job_runs_on_the_node_and_gpus_pald_chose(hook_lab):
    lab, sock = hook_lab
    with TinyPald(sock, answer=answering(PLACE_GPU03)) as pald:
        job, _, _ = submit(lab, "--gres=gpu:2", "--comment=exp7 pal:class=resnet,gpus=2")
    assert lab.wait_job(job) == "COMPLETED"
    assert lab.job_output(job).split() == ["NODE=gpu03", "CVD=2,3"]
    info = job_info(lab, job)
    assert info.admin_comment.startswith("pal:placed=gpu03;rank=v7;req=h")
    assert info.comment == "exp7 pal:class=resnet,gpus=2"
    (line,) = pald.received
    req = decode_request(line)
    assert isinstance(req, PlaceRequest)
    assert req.pal.perf_class == "resnet" and req.pal.gpus == 2 and req.job.gpus_per_node == 2
    assert info.admin_comment.endswith(";req=" + req.request_id)


def test_two_node_placement_sets_node_counts(hook_lab):
    lab, sock = hook_lab
    reply = PlaceReply(DecisionKind.PLACE, "pal", {"gpu02": (1,), "gpu04": (1,)},
                       "gres:gpu:s1:1", rank=7)
    with TinyPald(sock, answer=answering(reply)):
        # -N 2: a two-node answer for a job without a node count would not fit it (passed)
        job, _, _ = submit(lab, "-N", "2", "--gres=gpu:1", "--comment=pal:class=bert",
                           wrap="srun -l sh -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'")
    assert lab.wait_job(job) == "COMPLETED"
    lines = sorted(line.split(":", 1)[1].strip() for line in lab.job_output(job).splitlines())
    assert lines == ["gpu02 1", "gpu04 1"]
    assert job_info(lab, job).node_count == 2


def test_non_pal_job_is_untouched_and_pald_never_asked(hook_lab):
    lab, sock = hook_lab
    with TinyPald(sock, answer=answering(PLACE_GPU03)) as pald:
        job, err, _ = submit(lab, "--gres=gpu:1", "--comment=just a note")
    assert pald.received == []
    assert err == ""
    assert lab.wait_job(job) == "COMPLETED"
    info = job_info(lab, job)
    assert info.admin_comment == "" and info.required_nodes == ()


def test_malformed_comment_gets_a_message_and_runs(hook_lab):
    lab, sock = hook_lab
    with TinyPald(sock, answer=answering(PLACE_GPU03)) as pald:
        job, err, _ = submit(lab, "--gres=gpu:1", "--comment=pal:class=resnet,mode=later")
    assert pald.received == []
    assert "mode='later' must be now or defer" in err and "without PAL placement" in err
    assert lab.wait_job(job) == "COMPLETED"
    info = job_info(lab, job)
    assert info.admin_comment == "pal:pass=bad-comment:bad_mode"
    assert info.required_nodes == ()


def test_unknown_class_warning_reaches_the_user(hook_lab):
    lab, sock = hook_lab
    reply = PlaceReply(DecisionKind.PLACE, "pal", {"gpu01": (0,)}, "gres:gpu:s0:1", rank=7,
                       perf_class="A", warning="unknown class 'mystery': placed as class A")
    with TinyPald(sock, answer=answering(reply)):
        job, err, _ = submit(lab, "--gres=gpu:1", "--comment=pal:class=mystery")
    assert "pal: unknown class 'mystery': placed as class A" in err
    assert lab.wait_job(job) == "COMPLETED"
    assert lab.job_output(job).split() == ["NODE=gpu01", "CVD=0"]


def test_pald_down_the_job_passes(hook_lab):
    lab, sock = hook_lab
    assert not sock.exists()
    job, err, took = submit(lab, "--gres=gpu:1", "--comment=pal:class=resnet")
    assert lab.wait_job(job) == "COMPLETED"
    assert job_info(lab, job).admin_comment.startswith("pal:pass=pald-down;req=h")
    assert "pal: pass reason=pald-down" in lab.log()


def test_pald_hanging_the_hook_times_out_and_the_job_passes(hook_lab):
    lab, sock = hook_lab
    with TinyPald(sock, answer=answering(PLACE_GPU03), delay_s=2.0):
        job, _, took = submit(lab, "--gres=gpu:1", "--comment=pal:class=resnet")
    assert took < 1.5, took  # 150 ms hook deadline, not pald's 2 s
    assert lab.wait_job(job) == "COMPLETED"
    info = job_info(lab, job)
    assert info.admin_comment.startswith("pal:pass=timeout;req=h")
    assert info.required_nodes == ()


def test_pald_refusing_the_peer_the_job_passes(hook_lab):
    lab, sock = hook_lab
    refuse = lambda line: encode_reply(ErrorReply(ErrorCode.FORBIDDEN, "uid 0 may not"))
    with TinyPald(sock, answer=refuse):
        job, _, _ = submit(lab, "--gres=gpu:1", "--comment=pal:class=resnet")
    assert lab.wait_job(job) == "COMPLETED"
    assert job_info(lab, job).admin_comment.startswith("pal:pass=pald-error:forbidden")


def test_defer_holds_the_job_until_released(hook_lab):
    lab, sock = hook_lab
    reply = PlaceReply(DecisionKind.DEFER, "queued", rank=7)
    with TinyPald(sock, answer=answering(reply)):
        job, _, _ = submit(lab, "--gres=gpu:1", "--comment=pal:class=resnet,mode=defer")
    info = job_info(lab, job)
    assert info.state == "PENDING" and info.held and info.reason == "JobHeldUser"
    assert info.admin_comment.startswith("pal:defer;rank=v7;req=h")
    time.sleep(1.5)  # a held job does not start on the scheduler's next tick
    assert lab.job_state(job) == "PENDING"
    # pald's path for deferred jobs (the Slurm adapter): pin nodes + slots, then release
    lab.actuator.place_held_job(job, ["gpu02"], "gpu:s3:1")
    assert lab.wait_job(job) == "COMPLETED"
    assert lab.job_output(job).split() == ["NODE=gpu02", "CVD=3"]


def test_gpus_per_job_request_is_replaced_by_the_slots(hook_lab):
    """--gpus=2 (tres_per_job): the hook drops it for the per-slot tres_per_node."""
    lab, sock = hook_lab
    with TinyPald(sock, answer=answering(PLACE_GPU03)) as pald:
        job, _, _ = submit(lab, "--gpus=2", "--comment=pal:class=resnet")
    assert decode_request(pald.received[0]).job.gpus_per_job == 2
    assert lab.wait_job(job) == "COMPLETED"
    assert lab.job_output(job).split() == ["NODE=gpu03", "CVD=2,3"]


def test_place_without_gres_pins_nodes_and_keeps_the_gpu_request(hook_lab):
    """pald answers nodes only for a --gpus=N job it cannot bind slot by slot."""
    lab, sock = hook_lab
    reply = PlaceReply(DecisionKind.PLACE, "pal", {"gpu01": (0, 1), "gpu04": (0,)}, rank=7)
    with TinyPald(sock, answer=answering(reply)):
        job, _, _ = submit(lab, "--gpus=3", "--comment=pal:class=bert",
                           wrap="srun -l sh -c 'echo $SLURMD_NODENAME'")
    assert lab.wait_job(job) == "COMPLETED"
    info = job_info(lab, job)
    assert info.node_count == 2 and info.admin_comment.startswith("pal:placed=gpu01,gpu04;")
    nodes = {line.split(":", 1)[1].strip() for line in lab.job_output(job).splitlines()}
    assert nodes == {"gpu01", "gpu04"}
