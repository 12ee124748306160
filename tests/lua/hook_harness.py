"""A Lua 5.1 runtime (lupa) holding job_submit.lua + pal.lua, a stub `slurm` table and a stub
luasocket. The stubs record what the hook did: every job_desc write, every socket call, every
log line, so a test can assert "untouched" and "no socket call" exactly."""

from __future__ import annotations

import json
from pathlib import Path

try:  # the Lua that Debian's job_submit_lua.so links; lupa ships it as lupa.lua51
    from lupa.lua51 import LuaRuntime

    LUA_FLAVOUR = "lua51"
except ImportError:  # pragma: no cover - older lupa: its default runtime (5.4 in lupa 2.x)
    # Differences that matter for pal.lua, which is written to run on both: 5.1 has `unpack`
    # (5.2+: table.unpack), needs %z for NUL in patterns (5.2+: "\0"), has no integer subtype
    # (5.3+: 2 and 2.0 differ in tostring/json), and has setfenv/getfenv (gone in 5.2+).
    # test_runtime_is_lua_51 then fails, on purpose: the 5.1 run is the one that counts.
    from lupa import LuaRuntime

    LUA_FLAVOUR = "default"

REPO = Path(__file__).resolve().parents[2]
HOOK_DIR = REPO / "job_submit_lua"
NO_VAL = 4294967294

STUBS = r"""
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, user_msgs = {}, info = {}, errors = {} }
function slurm.log_user(fmt, ...) table.insert(slurm.user_msgs, string.format(fmt, ...)) end
function slurm.log_info(fmt, ...) table.insert(slurm.info, string.format(fmt, ...)) end
function slurm.log_error(fmt, ...) table.insert(slurm.errors, string.format(fmt, ...)) end

ENV = {}
os.getenv = function(k) return ENV[k] end

STUB = { now = 1000.0, calls = {}, created = 0, closed = 0 }
-- STUB.tick: seconds every clock reading costs (a slow slurmctld), 0 unless a test sets it
local core = { gettime = function() STUB.now = STUB.now + (STUB.tick or 0) return STUB.now end }
local unix = {}
function unix.stream()
  STUB.created = STUB.created + 1
  STUB.pos = 1 -- each connection reads pald's answer from the start
  if STUB.create_error then return nil, STUB.create_error end
  local s = {}
  local function log(...) table.insert(STUB.calls, {...}) end
  function s:settimeout(t, mode) log("settimeout", t, mode) end
  function s:connect(path)
    log("connect", path)
    STUB.now = STUB.now + (STUB.connect_cost or 0)
    if STUB.connect_error then return nil, STUB.connect_error end
    return 1
  end
  function s:send(data)
    log("send", data)
    STUB.sent = data
    if STUB.send_error then return nil, STUB.send_error end
    return #data
  end
  -- LuaSocket's receive(n): n bytes, or nil, error, what had arrived. STUB.stream is what
  -- pald wrote; at most STUB.chunk bytes arrive per call (a slow pald), each call costs
  -- STUB.receive_cost seconds, and at the end of the stream pald keeps the connection open
  -- ("timeout") or has closed it (STUB.eof = "closed").
  function s:receive(n)
    log("receive", n)
    STUB.now = STUB.now + (STUB.receive_cost or 0)
    if STUB.receive_error then return nil, STUB.receive_error end
    if type(n) ~= "number" then error("the hook must read a bounded number of bytes, not " .. tostring(n)) end
    local want = math.min(n, STUB.chunk or n)
    local data = (STUB.stream or ""):sub(STUB.pos, STUB.pos + want - 1)
    STUB.pos = STUB.pos + #data
    if #data == n then return data end
    return nil, STUB.eof or "timeout", data
  end
  function s:close() STUB.closed = STUB.closed + 1 end
  return s
end
package.loaded["socket"] = core
package.loaded["socket.unix"] = unix

WRITES = {}
-- A job_desc like Slurm's: reads fall through to `fields`, writes are recorded. A field
-- named in `fail_write` / `fail_read` raises, as a bad field write in slurmctld would.
function make_job(fields, fail_write, fail_read)
  local store = {}
  for k, v in pairs(fields) do store[k] = v end
  return setmetatable({}, {
    __index = function(_, k)
      if fail_read and k == fail_read then error("read of " .. k .. " failed") end
      return store[k]
    end,
    __newindex = function(_, k, v)
      if fail_write and k == fail_write then error("write of " .. k .. " failed") end
      table.insert(WRITES, { k, v })
      store[k] = v
    end,
  }), store
end
"""


class Hook:
    """One fresh Lua state with the hook loaded through job_submit.lua, as slurmctld does."""

    def __init__(self, env: dict | None = None, runtime=None, hook_dir: Path = HOOK_DIR):
        """`hook_dir`: where job_submit.lua and pal.lua are (another pal.lua, for comparisons)."""
        self.lua = (runtime or LuaRuntime)(unpack_returned_tuples=True)
        self.lua.execute(STUBS)
        for key, value in (env or {}).items():
            self.lua.globals().ENV[key] = value
        self.lua.execute(f"dofile({json.dumps(str(hook_dir / 'job_submit.lua'))})")
        self.pal = self.lua.eval("package.loaded['pal']")
        self.g = self.lua.globals()

    # -- stub control
    def reply(self, obj, newline: bool = True) -> None:
        """What pald answers: a JSON object or raw text, one line (newline added)."""
        line = obj if isinstance(obj, str) else json.dumps(obj)
        self.g.STUB.stream = line + ("\n" if newline else "")

    def stub(self, **fields) -> None:
        for key, value in fields.items():
            self.g.STUB[key] = value

    # -- running the hook
    def submit(self, fields: dict, submit_uid: int = 1000, fail_write=None, fail_read=None,
               part_list: dict | None = None, parts: dict | None = None):
        """Run slurm_job_submit; returns (rc, final fields as a dict). `part_list` (or `parts`):
        the part_list slurmctld hands in, partition name -> fields such as
        {"nodes": hostlist, "flag_default": 0|1} (default: none)."""
        base = {"min_nodes": NO_VAL, "max_nodes": NO_VAL, "priority": NO_VAL}
        base.update(fields)
        job, store = self.g.make_job(self.lua.table_from(base), fail_write, fail_read)
        given = part_list if part_list is not None else parts
        lua_parts = self.lua.table_from({k: self.lua.table_from(v) for k, v in (given or {}).items()})
        rc = self.g.slurm_job_submit(job, lua_parts, submit_uid)
        return rc, to_py(store)

    def modify(self, fields: dict):
        job, store = self.g.make_job(self.lua.table_from(fields))
        return self.g.slurm_job_modify(job, self.lua.table(), self.lua.table(), 0)

    # -- what happened
    @property
    def writes(self) -> list[tuple]:
        return [tuple(to_py(w)) for w in self.g.WRITES.values()]

    @property
    def calls(self) -> list[tuple]:
        return [tuple(to_py(c)) for c in self.g.STUB.calls.values()]

    @property
    def sockets_created(self) -> int:
        return int(self.g.STUB.created)

    @property
    def sent(self) -> dict | None:
        line = self.g.STUB.sent
        return None if line is None else json.loads(line)

    @property
    def user_msgs(self) -> list[str]:
        return list(self.g.slurm.user_msgs.values())

    @property
    def info(self) -> list[str]:
        return list(self.g.slurm.info.values())


def to_py(value):
    """A Lua value as plain Python (tables with 1..n keys become lists)."""
    if hasattr(value, "items"):
        items = dict(value.items())
        if items and all(isinstance(k, int) for k in items) and sorted(items) == list(
                range(1, len(items) + 1)):
            return [to_py(items[i]) for i in range(1, len(items) + 1)]
        return {k: to_py(v) for k, v in items.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def fill(item, limit: int) -> str:
    """Comma-joined items item(0), item(1), ... up to `limit` bytes: a long node list for the
    hook's hostlist tests and benchmarks/hook_cpu.py."""
    out, size, i = [], 0, 0
    while True:
        text = item(i)
        if size + len(text) + 1 > limit:
            return ",".join(out)
        out.append(text)
        size += len(text) + 1
        i += 1
