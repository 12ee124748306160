"""The hook under the real Lua 5.1 interpreter with Debian's luasocket, talking over a real
unix socket to a tiny server that speaks the real protocol module. This is what proves that
pal.lua loads under 5.1 (not just lupa's), that `require "socket"` / `require "socket.unix"`
work, and that what Lua sends, Python decodes (and back)."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.protocol import PlaceRequest, decode_request
from tests.support.tiny_pald import TinyPald

REPO = Path(__file__).resolve().parents[2]
LUA = shutil.which("lua5.1")
pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/install-deps.sh)")

DRIVER = r"""
local hook_dir, comment = arg[1], arg[2]
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, info = {}, user_msgs = {}, errors = {} }
function slurm.log_info(f, ...) table.insert(slurm.info, string.format(f, ...)) end
function slurm.log_user(f, ...) table.insert(slurm.user_msgs, string.format(f, ...)) end
function slurm.log_error(f, ...) table.insert(slurm.errors, string.format(f, ...)) end
dofile(hook_dir .. "/job_submit.lua")
local pal = package.loaded["pal"]
local socket = require "socket"
local job = { comment = comment, name = "train", user_name = "ann", user_id = 1001,
  tres_per_node = "gres:gpu:2", min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL,
  priority = slurm.NO_VAL }
local t0 = socket.gettime()
local rc = slurm_job_submit(job, {}, 1001)
local elapsed = socket.gettime() - t0
local info = pal.json.array(slurm.info)
io.write(pal.json.encode({ rc = rc, job = job, info = info, user = pal.json.array(slurm.user_msgs),
  elapsed_s = elapsed, version = _VERSION, socket = socket._VERSION,
  unix = type(require("socket.unix")) }), "\n")
"""


def run_hook(tmp_path, comment, sock_path, timeout_ms=None):
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PAL_SOCKET": str(sock_path)}
    if timeout_ms is not None:
        env["PAL_TIMEOUT_MS"] = str(timeout_ms)
    out = subprocess.run([LUA, str(driver), str(REPO / "job_submit_lua"), comment],
                         capture_output=True, env=env, timeout=20, check=True)
    return json.loads(out.stdout.decode("utf-8", "replace"))  # a comment may be Latin-1 bytes


def run_hook_until_answered(tmp_path, comment, sock_path, attempts=3):
    """`run_hook` for a test about what an answer does: the hook's deadline is capped at 150 ms,
    and a loaded machine (the whole suite in a Debian root beside another) can miss it before
    the server thread is scheduled. A timeout is retried (it is what the hook must do then, and
    other tests prove it); any other outcome is returned. result["attempts"]: how many runs."""
    runs = 0
    while True:
        runs += 1
        result = run_hook(tmp_path, comment, sock_path)
        timed_out = result["job"].get("admin_comment", "").startswith("pal:pass=timeout")
        if not timed_out or runs == attempts:
            result["attempts"] = runs
            return result


def test_real_lua51_places_a_job_through_a_real_socket(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock) as pald:
        result = run_hook_until_answered(tmp_path, "exp pal:class=resnet,gpus=2", sock)
    assert result["version"] == "Lua 5.1"
    assert result["socket"].startswith("LuaSocket") and result["unix"] == "table"
    assert result["rc"] == 0
    job = result["job"]
    assert job["req_nodes"] == "gpu03" and job["min_nodes"] == 1 and job["max_nodes"] == 1
    assert job["tres_per_node"] == "gres:gpu:s2:1,gres:gpu:s3:1"
    assert job["admin_comment"].startswith("pal:placed=gpu03;rank=v7;req=h")
    assert len(pald.received) == result["attempts"]
    req = decode_request(pald.received[-1])  # what Lua wrote, Python's protocol reads
    assert isinstance(req, PlaceRequest)
    assert req.pal.perf_class == "resnet" and req.pal.gpus == 2
    assert req.job.uid == 1001 and req.job.gpus_per_node == 2
    assert job["admin_comment"].endswith(";req=" + req.request_id)


def test_real_lua51_pald_down_passes_fast(tmp_path):
    result = run_hook(tmp_path, "pal:class=resnet", tmp_path / "nobody-listens.sock")
    assert result["rc"] == 0
    assert result["job"]["admin_comment"].startswith("pal:pass=pald-down;req=h")
    assert "req_nodes" not in result["job"]
    assert result["elapsed_s"] < 0.12  # refused at once, not the 150 ms deadline (slack for a loaded CI)


def test_real_lua51_stale_socket_file_passes(tmp_path):
    import socket as pysocket

    sock = tmp_path / "stale.sock"
    s = pysocket.socket(pysocket.AF_UNIX)
    s.bind(str(sock))
    s.close()  # file stays, nobody listens: connection refused
    result = run_hook(tmp_path, "pal:class=resnet", sock)
    assert result["job"]["admin_comment"].startswith("pal:pass=pald-down")


def test_real_lua51_hanging_pald_hits_the_deadline(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock, delay_s=1.0):
        t0 = time.monotonic()
        result = run_hook(tmp_path, "pal:class=resnet", sock, timeout_ms=80)
        wall = time.monotonic() - t0
    assert result["job"]["admin_comment"].startswith("pal:pass=timeout;req=h")
    # upper bounds well above the deadline, well below the 1 s answer: a loaded CI machine
    # (the suite in a Debian root) can deschedule the hook for tens of milliseconds
    assert 0.07 <= result["elapsed_s"] < 0.5, result["elapsed_s"]
    assert wall < 1.0  # the hook did not wait for the 1 s answer


def test_real_lua51_timeout_is_capped_at_150_ms(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock, delay_s=1.0):
        result = run_hook(tmp_path, "pal:class=resnet", sock, timeout_ms=10000)
    assert result["job"]["admin_comment"].startswith("pal:pass=timeout")
    assert 0.14 <= result["elapsed_s"] < 0.6, result["elapsed_s"]  # not 10 s, not the 1 s answer


def test_real_lua51_pald_error_reply_passes(tmp_path):
    sock = tmp_path / "pald.sock"
    bad = lambda line: b'{"v":1,"ok":false,"error":{"code":"unavailable","message":"standby"}}\n'
    with TinyPald(sock, answer=bad):
        result = run_hook(tmp_path, "pal:class=resnet", sock)
    assert result["job"]["admin_comment"].startswith("pal:pass=pald-error:unavailable")


def test_real_lua51_pald_closing_without_answer_passes(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock, answer=lambda line: None):
        result = run_hook(tmp_path, "pal:class=resnet", sock)
    assert result["job"]["admin_comment"].startswith("pal:pass=socket-error")


def test_real_lua51_non_pal_job_makes_no_connection(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock) as pald:
        result = run_hook(tmp_path, "just a comment", sock)
    assert pald.received == []
    assert "admin_comment" not in result["job"] and "req_nodes" not in result["job"]


def run_against_pald_server(tmp_path, comment, handler, allowed_uids):
    """Run the hook under lua5.1 against pald's real asyncio SocketServer in a thread."""
    import asyncio
    import threading

    from pal_slurm.daemon.server import SocketServer

    sock = tmp_path / "pald.sock"
    loop = asyncio.new_event_loop()
    server = SocketServer(handler, str(sock), allowed_uids=allowed_uids)
    loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        assert (sock.stat().st_mode & 0o777) == 0o600
        return run_hook_until_answered(tmp_path, comment, sock)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.run_until_complete(server.close())
        loop.close()


def test_real_lua51_against_palds_own_socket_server(tmp_path):
    """The hook against pald's real asyncio server (SO_PEERCRED check, 0600 socket)."""
    from pal_slurm.daemon.protocol import PlaceReply
    from pal_slurm.model.decision import DecisionKind

    seen = []

    def handler(req):
        seen.append(req)
        return PlaceReply(DecisionKind.PLACE, "pal", {"gpu02": (1, 2)},
                          "gres:gpu:s1:1,gres:gpu:s2:1", rank=3,
                          perf_class="A", warning="unknown class 'mystery': using A")

    result = run_against_pald_server(tmp_path, "pal:class=mystery", handler, {os.geteuid()})
    job = result["job"]
    assert job["req_nodes"] == "gpu02" and job["tres_per_node"] == "gres:gpu:s1:1,gres:gpu:s2:1"
    assert job["admin_comment"].startswith("pal:placed=gpu02;rank=v3;req=h")
    assert result["user"] == ["pal: unknown class 'mystery': using A"]
    assert len(seen) == result["attempts"] and seen[-1].pal.perf_class == "mystery"


def test_real_lua51_peer_refused_by_pald_passes(tmp_path):
    seen = []
    result = run_against_pald_server(tmp_path, "pal:class=resnet", seen.append,
                                     {os.geteuid() + 12345})
    assert seen == []
    assert result["job"]["admin_comment"].startswith("pal:pass=pald-error:forbidden")
    assert "req_nodes" not in result["job"]


def test_real_lua51_latin1_comment_still_gets_placed(tmp_path):
    """Slurm comments are C strings, not necessarily UTF-8: pald replaces bad bytes."""
    sock = tmp_path / "pald.sock"
    with TinyPald(sock) as pald:
        result = run_hook_until_answered(tmp_path, b"caf\xe9 pal:class=resnet", sock)
    assert result["job"]["req_nodes"] == "gpu03"
    line = pald.received[-1]
    assert b"caf\xe9" in line  # sent as is
    req = decode_request(line)
    assert req.job.comment == "caf\ufffd pal:class=resnet" and req.pal.perf_class == "resnet"


# ---- #10: replies that must not cost slurmctld memory, time or the job (real sockets)

def test_real_lua51_streaming_reply_is_cut_at_64_kib(tmp_path):
    """A pald that streams bytes without a newline: the hook stops reading at the protocol's
    64 KiB and closes. Before, LuaSocket's receive("*l") buffered everything that arrived in
    150 ms (slurmctld grew from 34 MB to 270 MB)."""
    import itertools

    sock = tmp_path / "pald.sock"
    endless = lambda line: itertools.repeat(b"x" * 65536)
    with TinyPald(sock, answer=endless) as pald:
        result = run_hook(tmp_path, "pal:class=resnet", sock)
        time.sleep(0.05)
    assert result["job"]["admin_comment"].startswith("pal:pass=bad-reply;req=h")
    assert "req_nodes" not in result["job"] and result["job"]["tres_per_node"] == "gres:gpu:2"
    assert result["elapsed_s"] < 0.5
    # what pald got rid of: the hook's 64 KiB plus what the kernel's socket buffers hold
    assert pald.sent_bytes < 2 * 1024 * 1024, pald.sent_bytes


def test_real_lua51_dribbling_reply_ends_at_the_one_deadline(tmp_path):
    """A byte every 5 ms, never a newline: one deadline for the whole exchange, not per read."""
    def dribble(line):
        for _ in range(400):
            time.sleep(0.005)
            yield b"x"

    sock = tmp_path / "pald.sock"
    with TinyPald(sock, answer=dribble):
        result = run_hook(tmp_path, "pal:class=resnet", sock, timeout_ms=100)
    assert result["job"]["admin_comment"].startswith("pal:pass=timeout;req=h")
    assert 0.09 <= result["elapsed_s"] < 0.5, result["elapsed_s"]  # not 400 reads x 5 ms


def test_real_lua51_oversized_reply_line_passes(tmp_path):
    sock = tmp_path / "pald.sock"
    big = lambda line: b'{"v":1,"ok":true,"decision":"pass","reason":"' + b"x" * 100_000 + b'"}\n'
    with TinyPald(sock, answer=big):
        result = run_hook(tmp_path, "pal:class=resnet", sock)
    assert result["job"]["admin_comment"].startswith("pal:pass=bad-reply;req=h")
    assert "64 KiB" not in result["user"][0] and "65536 bytes" in result["user"][0]


def test_real_lua51_request_carries_the_instant_the_hook_stops_waiting(tmp_path):
    sock = tmp_path / "pald.sock"
    with TinyPald(sock, delay_s=0.3) as pald:
        before_ms = time.time() * 1000
        result = run_hook(tmp_path, "pal:class=resnet", sock, timeout_ms=60)
    assert result["job"]["admin_comment"].startswith("pal:pass=timeout")
    (line,) = pald.received
    deadline_ms = json.loads(line)["deadline_ms"]
    assert before_ms + 60 <= deadline_ms <= before_ms + 60 + 1000  # lua start-up in between
    assert isinstance(decode_request(line), PlaceRequest)  # still protocol v1 for pald


def test_real_lua51_reply_that_does_not_fit_passes_with_a_message(tmp_path):
    from pal_slurm.daemon.protocol import PlaceReply, encode_reply
    from pal_slurm.model.decision import DecisionKind

    sock = tmp_path / "pald.sock"
    four_nodes = PlaceReply(DecisionKind.PLACE, "pal",
                            {f"gpu0{i}": (0, 1) for i in range(1, 5)}, "gres:gpu:s0:1,gres:gpu:s1:1")
    with TinyPald(sock, answer=lambda line: encode_reply(four_nodes)):
        result = run_hook(tmp_path, "pal:class=resnet", sock)
    job = result["job"]
    assert job["admin_comment"].startswith("pal:pass=bad-reply;req=h")
    assert "req_nodes" not in job and job["max_nodes"] == 4294967294
    assert result["user"] == ["pal: the placement service's answer did not fit this job "
                              "(4 nodes for a job of 1..1 nodes); the job is submitted as you "
                              "asked, without PAL placement"]
