#!/usr/bin/env python3
"""In-hook round trip: real lua5.1 + luasocket (pal.lua) -> a Python unix-socket server.

Measures, from inside Lua with socket.gettime():
  ask     pal.ask(): connect + send one request line + read one reply line + close
  submit  the whole pal.job_submit() path for a PAL job: parse the comment, build and encode
          the request, ask, decode and check the reply, write the job fields
against a trivial server (fixed reply, no parsing) and, with --decode, a server that decodes
the request and encodes the reply with pal_slurm.daemon.protocol (pald's framing cost, not its
placement cost: see benchmarks/place_latency.py for that).

    python3 -m benchmarks.hook_roundtrip [--calls 1000] [--decode]   (from the repo root,
    or plain `python3 benchmarks/hook_roundtrip.py` once the package is installed)
Prints p50/p90/p99/max in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPLY = (b'{"v":1,"ok":true,"decision":"place","reason":"pal","nodes":{"gpu03":[2,3]},'
         b'"gres":"gres:gpu:s2:1,gres:gpu:s3:1","rank":7}\n')

LUA_DRIVER = r"""
local hook_dir, sock_path, calls = arg[1], arg[2], tonumber(arg[3])
package.path = hook_dir .. "/?.lua;" .. package.path
local pal = require "pal"
local socket = require "socket"
slurm = { SUCCESS = 0, NO_VAL = 4294967294 }
function slurm.log_info() end
function slurm.log_user() end
local cfg = { socket = sock_path, timeout_ms = 150 }
local job0 = { comment = "exp pal:class=resnet,gpus=2", name = "train", user_name = "ann",
  user_id = 1001, tres_per_node = "gres:gpu:2", min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL }
local _, spec = pal.parse_comment(job0.comment)
local line = pal.json.encode(pal.build_request(job0, spec, 1001, "bench")) .. "\n"
local ask, submit, failures = {}, {}, 0
for i = 1, calls do
  local t0 = socket.gettime()
  local reply = pal.ask(line, cfg)
  ask[i] = (socket.gettime() - t0) * 1000
  if not reply then failures = failures + 1 end
end
-- part_list as slurmctld hands it in: the placement is checked against the default partition
local ctx = { slurm = slurm, getenv = function() return nil end,
  overrides = { socket = sock_path, timeout_ms = 150 },
  part_list = { cpu = { nodes = "cpu[001-512]", flag_default = 0 },
    gpu = { nodes = "gpu[01-64],big[001-016]", flag_default = 1 } } }
for i = 1, calls do
  local job = {}
  for k, v in pairs(job0) do job[k] = v end
  local t0 = socket.gettime()
  pal.job_submit(job, 1001, ctx)
  submit[i] = (socket.gettime() - t0) * 1000
  if job.req_nodes ~= "gpu03" then failures = failures + 1 end
end
io.write(pal.json.encode({ ask = ask, submit = submit, failures = failures }), "\n")
"""


def serve(server: socket.socket, decode: bool, stop: threading.Event, served: list) -> None:
    if decode:
        from pal_slurm.daemon.protocol import decode_reply, decode_request, encode_reply

        placed = decode_reply(REPLY, "place")
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
            served.append(1)
            try:
                if decode:
                    decode_request(buf)
                    conn.sendall(encode_reply(placed))
                else:
                    conn.sendall(REPLY)
            except OSError:  # the hook gave up first (its deadline under load): keep serving
                pass


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1)))))
    return ordered[k]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--decode", action="store_true",
                        help="server decodes/encodes with pal_slurm.daemon.protocol")
    args = parser.parse_args()
    if args.decode:
        try:
            import pal_slurm.daemon.protocol  # noqa: F401
        except ImportError:
            print("pal_slurm not importable: run `python3 -m benchmarks.hook_roundtrip` from the "
                  "repo root, or `make install`", file=sys.stderr)
            return 2
    lua = shutil.which("lua5.1")
    if lua is None:
        print("lua5.1 not found (apt-get install lua5.1 lua-socket)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pal-bench-") as tmp:
        sock_path = os.path.join(tmp, "pald.sock")
        driver = Path(tmp) / "driver.lua"
        driver.write_text(LUA_DRIVER)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(sock_path)
        server.listen(64)
        stop = threading.Event()
        served: list = []
        thread = threading.Thread(target=serve, args=(server, args.decode, stop, served),
                                  daemon=True)
        thread.start()
        try:
            out = subprocess.run([lua, str(driver), str(REPO / "job_submit_lua"), sock_path,
                                  str(args.calls)], capture_output=True, text=True, check=True,
                                 timeout=600)
        finally:
            stop.set()
            server.close()
    result = json.loads(out.stdout)
    server_kind = "protocol decode+encode" if args.decode else "trivial fixed reply"
    print(f"hook round trip, real lua5.1 + luasocket -> Python unix socket server ({server_kind})")
    print(f"calls per row: {args.calls}; answered by the server: {len(served)}; "
          f"failures: {result['failures']}; load avg: "
          f"{os.getloadavg()[0]:.2f}; cores: {os.cpu_count()}")
    print(f"{'path':<8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'mean ms':>8}")
    for name in ("ask", "submit"):
        v = result[name]
        print(f"{name:<8} {pct(v, 50):8.3f} {pct(v, 90):8.3f} {pct(v, 99):8.3f} {max(v):8.3f} "
              f"{statistics.fmean(v):8.3f}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
