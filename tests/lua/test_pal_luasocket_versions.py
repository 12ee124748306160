"""The hook's portability across what sites run: LuaSocket 3 (Debian 12: 3.0, Debian 13: 3.1,
where `socket.unix` is a table with stream()) and LuaSocket 2 (`socket.unix` is itself the
constructor), and the `job_desc.tres_per_node` spelling of each Slurm (22.05 to 23.02:
gres:gpu:2; 23.11+: gres/gpu:2, and 24.11 rejects the other). Real Lua 5.1, the real luasocket C library underneath (LuaSocket 2's API is
the same library called the old way), a real unix socket, the real protocol module on the other
side."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pal_slurm.daemon.protocol import decode_request
from tests.support.tiny_pald import TinyPald

REPO = Path(__file__).resolve().parents[2]
LUA = shutil.which("lua5.1")
pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/install-deps.sh)")

DRIVER = r"""
local hook_dir, api, tres, release, cpus_per_tres = arg[1], arg[2], arg[3], arg[4], arg[5]
local real_unix = require "socket.unix"
if api == "2" then  -- LuaSocket 2: require "socket.unix" returns the constructor itself
  package.loaded["socket.unix"] = function() return real_unix.stream() end
end
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294 }
if release ~= "22.05" then slurm.GRES_ALLOW_TASK_SHARING = 64 end  -- exported from 23.11 on
if tres == "" then tres = nil end
if cpus_per_tres == "" then cpus_per_tres = nil end
function slurm.log_info() end
function slurm.log_user() end
function slurm.log_error() end
dofile(hook_dir .. "/job_submit.lua")
local pal = package.loaded["pal"]
local job = { comment = tres and "pal:class=resnet" or "pal:class=resnet,gpus=2", name = "train", user_name = "ann", user_id = 1001,
  tres_per_node = tres, cpus_per_tres = cpus_per_tres, min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL, priority = slurm.NO_VAL }
local rc = slurm_job_submit(job, {}, 1001)
io.write(pal.json.encode({ rc = rc, job = job, unix = type(require("socket.unix")),
  socket = require("socket")._VERSION }), "\n")
"""


@pytest.mark.parametrize("api", ["3", "2"])
@pytest.mark.parametrize("release, tres, written", [
    ("22.05", "gres:gpu:2", "gres:gpu:s2:1,gres:gpu:s3:1"),
    ("24.11", "gres/gpu:2", "gres/gpu:s2:1,gres/gpu:s3:1"),
    ("22.05", "", "gres:gpu:s2:1,gres:gpu:s3:1"),   # GPUs asked only in pal:...,gpus=2: the
    ("24.11", "", "gres/gpu:s2:1,gres/gpu:s3:1"),   # plugin's constants tell the release
])
def test_hook_places_with_each_luasocket_api_and_tres_spelling(tmp_path, api, release, tres, written):
    result, pald = run_hook(tmp_path, api, release, tres)
    assert result["unix"] == ("function" if api == "2" else "table")
    assert result["socket"].startswith("LuaSocket 3") or result["socket"].startswith("LuaSocket 2")
    job = result["job"]
    assert result["rc"] == 0 and job.get("req_nodes") == "gpu03", job
    assert job["tres_per_node"] == written  # 23.11+ rejects gres:gpu:... in job_desc
    assert job["admin_comment"].startswith("pal:placed=gpu03")
    (line,) = pald.received
    assert decode_request(line).job.gpus_per_node == (2 if tres else None)  # both spellings read


def run_hook(tmp_path, api, release, tres, cpus_per_tres=""):
    """(what the driver printed, the TinyPald that answered): the real hook placing one job."""
    sock = tmp_path / "pald.sock"
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    with TinyPald(sock) as pald:
        out = subprocess.run([LUA, str(driver), str(REPO / "job_submit_lua"), api, tres, release, cpus_per_tres],
                             capture_output=True, text=True, timeout=20, check=True,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PAL_SOCKET": str(sock)})
    return json.loads(out.stdout), pald


@pytest.mark.parametrize("release, tres, cpus_per_tres, written", [
    ("24.11", "gres/gpu:2", "gres/gpu:4", "gres/gpu:2"),  # two slot types would stall it: nodes only
    ("22.05", "gres:gpu:2", "gres:gpu:4", "gres:gpu:s2:1,gres:gpu:s3:1"),  # 22.05 starts it bound
    ("24.11", "gres/gpu:2", "", "gres/gpu:s2:1,gres/gpu:s3:1"),
])
def test_cpus_per_gpu_job_is_pinned_to_nodes_only_where_slot_types_stall_it(tmp_path, release, tres, cpus_per_tres,
                                                                            written):
    """Slurm 24.11 leaves a --cpus-per-gpu job bound to two per-slot types pending for ever
    (found in the Debian 13 root; tests/integration/test_site_compat.py runs such a job)."""
    result, _ = run_hook(tmp_path, "3", release, tres, cpus_per_tres)
    job = result["job"]
    assert result["rc"] == 0 and job.get("req_nodes") == "gpu03", job
    assert job["tres_per_node"] == written
    assert job["admin_comment"].startswith("pal:placed=gpu03")
