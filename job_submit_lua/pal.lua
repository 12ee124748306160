-- pal.lua: the submit-time half of pal-slurm (Lua 5.1, as linked by Debian's job_submit_lua.so).
--
-- Why it exists: slurmctld runs job_submit.lua for every submission while holding its job,
-- node and partition locks, one submission at a time. This module therefore does the least
-- that can place a job: parse the --comment spec, ask pald over a unix socket with one hard
-- deadline (<= 150 ms), and write pald's answer into the job. Every failure of ours leaves
-- the job as the user submitted it, tagged `pal:pass=<reason>` in admin_comment and logged:
-- a PAL problem must never stop or reject a job. Jobs without a `pal:` spec are not touched
-- and cost no socket call.
--
-- Pure apart from `M.ask` (the socket) and the `slurm` table handed in by job_submit.lua;
-- the luasocket modules are loaded lazily so that tests can stand in for them through
-- package.loaded. The comment grammar's cases live in tests/golden/comment_grammar.json,
-- shared with pald's Python validator (pal_slurm/daemon/comment_grammar.py).

local M = {}

M.PROTOCOL_VERSION = 1
M.MAX_LINE_BYTES = 64 * 1024 -- one wire line, newline included (pal_slurm/daemon/protocol.py)
M.DEFAULT_SOCKET = "/run/pal/pald.sock"
M.DEFAULT_TIMEOUT_MS = 150 -- pal.toml [daemon] hook_timeout_ms default
M.MAX_TIMEOUT_MS = 150 -- a hook slower than MessageTimeout makes ghost jobs; stay far below
M.GRAMMAR = "pal:class=<name>[,gpus=<n>][,mode=now|defer][,net=<sensitivity>]"

local NO_VAL32 = 4294967294 -- slurm.NO_VAL: "not given" for min_nodes, max_nodes, priority
local WS = " \t\r\n\f\v"

----------------------------------------------------------------------------------------- JSON
-- A small strict JSON codec: Debian's lab package set has no lua-cjson, and the messages are
-- tiny. Objects decode to tables, arrays to tables with n = length, null to M.json.null.

local json = {}
M.json = json
json.null = setmetatable({}, { __tostring = function() return "null" end })
local array_mt = { __jsonarray = true }

function json.array(t)
  return setmetatable(t or {}, array_mt)
end

local escapes = {
  ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
}

local function escape_char(c)
  return escapes[c] or string.format("\\u%04x", c:byte())
end

local function encode_value(v, out)
  local t = type(v)
  if v == json.null or v == nil then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      error("json: cannot encode " .. tostring(v))
    end
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      out[#out + 1] = string.format("%d", v)
    else
      out[#out + 1] = string.format("%.17g", v)
    end
  elseif t == "string" then
    out[#out + 1] = '"' .. (v:gsub('[%c"\\]', escape_char)) .. '"'
  elseif t == "table" then
    if getmetatable(v) == array_mt or v[1] ~= nil then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode_value(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then error("json: object key is not a string") end
        keys[#keys + 1] = k
      end
      table.sort(keys) -- stable output: easier logs and tests
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        encode_value(k, out)
        out[#out + 1] = ":"
        encode_value(v[k], out)
      end
      out[#out + 1] = "}"
    end
  else
    error("json: cannot encode a " .. t)
  end
end

function json.encode(v)
  local out = {}
  encode_value(v, out)
  return table.concat(out)
end

local function utf8_char(cp)
  if cp < 0x80 then
    return string.char(cp)
  elseif cp < 0x800 then
    return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
  elseif cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40,
      0x80 + cp % 0x40)
  end
  return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
    0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local MAX_DEPTH = 32
local decode_value

local function skip_ws(s, i)
  local _, e = s:find("^[ \t\r\n]*", i)
  return e + 1
end

local function decode_string(s, i)
  -- s:sub(i, i) == '"'
  local parts, pos = {}, i + 1
  while true do
    local j = s:find('["\\%z\1-\31]', pos)
    if not j then error("json: unterminated string") end
    parts[#parts + 1] = s:sub(pos, j - 1)
    local c = s:sub(j, j)
    if c == '"' then
      return table.concat(parts), j + 1
    elseif c == "\\" then
      local e = s:sub(j + 1, j + 1)
      local simple = ({ ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f',
        n = '\n', r = '\r', t = '\t' })[e]
      if simple then
        parts[#parts + 1] = simple
        pos = j + 2
      elseif e == "u" then
        local hex = s:match("^%x%x%x%x", j + 2)
        if not hex then error("json: bad \\u escape") end
        local cp = tonumber(hex, 16)
        pos = j + 6
        if cp >= 0xD800 and cp <= 0xDBFF then
          local low = s:match("^\\u(%x%x%x%x)", pos)
          local lcp = low and tonumber(low, 16)
          if lcp and lcp >= 0xDC00 and lcp <= 0xDFFF then
            cp = 0x10000 + (cp - 0xD800) * 0x400 + (lcp - 0xDC00)
            pos = pos + 6
          else
            cp = 0xFFFD -- lone surrogate
          end
        elseif cp >= 0xDC00 and cp <= 0xDFFF then
          cp = 0xFFFD
        end
        parts[#parts + 1] = utf8_char(cp)
      else
        error("json: bad escape")
      end
    else
      error("json: control character in string")
    end
  end
end

local function decode_number(s, i)
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if not num or num:match("^-?0%d") or num:match("%.$") or num:match("%.[eE]")
      or num:match("[eE][-+]?$") or num:match("^-?%d+[-+]") then
    error("json: bad number")
  end
  local v = tonumber(num)
  if not v or v ~= v or v == math.huge or v == -math.huge then error("json: bad number") end
  return v, i + #num
end

function decode_value(s, i, depth)
  if depth > MAX_DEPTH then error("json: nested too deep") end
  i = skip_ws(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    i = skip_ws(s, i + 1)
    if s:sub(i, i) == "}" then return obj, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then error("json: expected a key") end
      local key
      key, i = decode_string(s, i)
      i = skip_ws(s, i)
      if s:sub(i, i) ~= ":" then error("json: expected ':'") end
      obj[key], i = decode_value(s, i + 1, depth + 1)
      i = skip_ws(s, i)
      c = s:sub(i, i)
      if c == "}" then return obj, i + 1 end
      if c ~= "," then error("json: expected ',' or '}'") end
      i = skip_ws(s, i + 1)
    end
  elseif c == "[" then
    local arr, n = json.array(), 0
    i = skip_ws(s, i + 1)
    if s:sub(i, i) == "]" then return arr, i + 1 end
    while true do
      n = n + 1
      arr[n], i = decode_value(s, i, depth + 1)
      i = skip_ws(s, i)
      c = s:sub(i, i)
      if c == "]" then return arr, i + 1 end
      if c ~= "," then error("json: expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif c == "-" or c:match("%d") then
    return decode_number(s, i)
  elseif s:sub(i, i + 3) == "true" then
    return true, i + 4
  elseif s:sub(i, i + 4) == "false" then
    return false, i + 5
  elseif s:sub(i, i + 3) == "null" then
    return json.null, i + 4
  end
  error("json: unexpected " .. (c == "" and "end" or ("'" .. c .. "'")))
end

-- Decode one JSON text. Returns the value, or nil and a message; never raises.
function json.decode(s)
  if type(s) ~= "string" then return nil, "json: not a string" end
  local ok, value, pos = pcall(decode_value, s, 1, 0)
  if not ok then
    return nil, (tostring(value):gsub("^.-json:", "json:"))
  end
  if skip_ws(s, pos) <= #s then return nil, "json: trailing data" end
  return value
end

------------------------------------------------------------------------------ comment grammar
-- One whitespace-delimited `pal:` token; see the Python docstring in
-- pal_slurm/daemon/comment_grammar.py for the full rules (they share one table of cases).

local KEYS = { class = true, gpus = true, mode = true, net = true }
local KEY_LIST = "class, gpus, mode, net"

local function comment_error(code, message)
  return "error", { code = code, message = message }
end

local function is_name(v)
  return #v >= 1 and #v <= 64 and v:find("^[A-Za-z0-9_%.%-]+$") ~= nil
end

-- Parse a job comment. Returns "none" (no pal: spec), "ok", spec (spec.class, .gpus, .mode,
-- .net), or "error", {code=, message=}.
function M.parse_comment(comment)
  if type(comment) ~= "string" or comment == "" then return "none" end
  local tokens = {}
  for token in (" " .. comment):gmatch("[" .. WS .. "]pal:([^" .. WS .. "]*)") do
    tokens[#tokens + 1] = token
  end
  if #tokens == 0 then return "none" end
  if #tokens > 1 then
    return comment_error("multiple_specs", #tokens .. " pal: specs in the comment; give one")
  end
  local token = tokens[1]
  if token == "" then
    return comment_error("empty", "pal: is followed by nothing; expected class=<name>")
  end
  local spec = {}
  for pair in (token .. ","):gmatch("([^,]*),") do
    local key, value = pair:match("^([^=]*)=(.*)$")
    if not key or key == "" then
      return comment_error("bad_pair", "'" .. pair .. "' is not key=value")
    end
    if not KEYS[key] then
      return comment_error("unknown_key", "unknown key '" .. key .. "' (allowed: " .. KEY_LIST .. ")")
    end
    if spec[key] ~= nil then
      return comment_error("duplicate_key", "key '" .. key .. "' given more than once")
    end
    if value == "" then
      return comment_error("empty_value", "empty value for '" .. key .. "'")
    end
    if key == "gpus" then
      if not value:find("^[1-9]%d?%d?%d?%d?%d?$") then
        return comment_error("bad_gpus", "gpus='" .. value .. "' is not a whole number 1..999999")
      end
      spec.gpus = tonumber(value)
    elseif key == "mode" then
      if value ~= "now" and value ~= "defer" then
        return comment_error("bad_mode", "mode='" .. value .. "' must be now or defer")
      end
      spec.mode = value
    else
      if not is_name(value) then
        return comment_error("bad_name",
          key .. "='" .. value .. "' must be 1-64 characters of A-Z a-z 0-9 _ . -")
      end
      spec[key] = value
    end
  end
  if spec.class == nil then
    return comment_error("missing_class", "class=<name> is required")
  end
  return "ok", spec
end

--------------------------------------------------------------------------------- job fields

local function split(s, sep)
  local parts = {}
  for part in (s .. sep):gmatch("([^" .. sep .. "]*)" .. sep) do parts[#parts + 1] = part end
  return parts
end

-- The ':'-separated parts of one TRES item without its "gres:" / "gres/" prefix.
local function tres_parts(item)
  return split((item:gsub("^gres[:/]", "")), ":")
end

-- Sum the GPUs of a TRES string ("gres:gpu:2", "gres:gpu:s2:1,gres:gpu:s3:1", "gres/gpu:4").
-- nil when it names no GPU or holds a GPU count we cannot read.
function M.gpu_count(tres)
  if type(tres) ~= "string" or tres == "" then return nil end
  local total, seen = 0, false
  for _, item in ipairs(split(tres, ",")) do
    local parts = tres_parts(item)
    if parts[1] == "gpu" then
      seen = true
      local last = parts[#parts]
      if #parts == 1 then
        total = total + 1 -- "gpu": one GPU
      elseif last:find("^%d+$") and #parts <= 3 then
        total = total + tonumber(last) -- "gpu:N" or "gpu:type:N"
      elseif #parts == 2 then
        total = total + 1 -- "gpu:type": one GPU
      else
        return nil
      end
    end
  end
  return seen and total or nil
end

-- Remove the GPU items of a TRES string; "" when nothing else is left (writing "" clears).
function M.strip_gpu_items(tres)
  if type(tres) ~= "string" then return nil end
  local kept = {}
  for _, item in ipairs(split(tres, ",")) do
    if item ~= "" and tres_parts(item)[1] ~= "gpu" then kept[#kept + 1] = item end
  end
  return table.concat(kept, ",")
end

local function count_or_nil(v)
  v = tonumber(v)
  if v == nil or v < 0 or v >= NO_VAL32 then return nil end
  return v
end

local function string_or_nil(v)
  if type(v) == "string" then return v end
  return nil
end

local request_counter = 0

-- A short id for one request: logged by both sides and written into admin_comment.
function M.new_request_id(now)
  request_counter = request_counter + 1
  return string.format("h%x-%x", math.floor((now or os.time()) * 1000), request_counter)
end

-- The place request for a job, as a Lua table ready for json.encode.
function M.build_request(job_desc, spec, submit_uid, request_id)
  local tres_node = string_or_nil(job_desc.tres_per_node)
  local tres_job = string_or_nil(job_desc.tres_per_job)
  local uid = count_or_nil(job_desc.user_id) or count_or_nil(submit_uid) or 0
  local job = {
    uid = uid,
    comment = job_desc.comment,
    name = string_or_nil(job_desc.name),
    user = string_or_nil(job_desc.user_name),
    partition = string_or_nil(job_desc.partition),
    tres_per_node = tres_node,
    tres_per_job = tres_job,
    tres_per_task = string_or_nil(job_desc.tres_per_task),
    tres_per_socket = string_or_nil(job_desc.tres_per_socket),
    gpus_per_node = M.gpu_count(tres_node),
    gpus_per_job = M.gpu_count(tres_job),
    min_nodes = count_or_nil(job_desc.min_nodes),
    max_nodes = count_or_nil(job_desc.max_nodes),
  }
  local pal = { class = spec.class, gpus = spec.gpus, mode = spec.mode, net = spec.net }
  return { v = M.PROTOCOL_VERSION, op = "place", id = request_id, job = job, pal = pal }
end

----------------------------------------------------------------------------------- config

-- Socket path and timeout from slurmctld's environment, under the names pal.toml's
-- environment overrides use (PAL_DAEMON_SOCKET or its short form PAL_SOCKET,
-- PAL_DAEMON_HOOK_TIMEOUT_MS or PAL_TIMEOUT_MS), with `overrides` (a table set in
-- job_submit.lua) taking precedence. The timeout is clamped to 1..MAX_TIMEOUT_MS whatever is
-- asked. (The hook does not read pal.toml itself: no TOML parser inside slurmctld.)
function M.config(getenv, overrides)
  getenv = getenv or os.getenv
  overrides = overrides or {}
  local timeout = tonumber(overrides.timeout_ms) or tonumber(getenv("PAL_DAEMON_HOOK_TIMEOUT_MS"))
    or tonumber(getenv("PAL_TIMEOUT_MS")) or M.DEFAULT_TIMEOUT_MS
  if timeout ~= timeout then timeout = M.DEFAULT_TIMEOUT_MS end
  timeout = math.max(1, math.min(M.MAX_TIMEOUT_MS, timeout))
  local path = overrides.socket
  for _, name in ipairs({ "PAL_DAEMON_SOCKET", "PAL_SOCKET" }) do
    if type(path) == "string" and path ~= "" then break end
    path = getenv(name)
  end
  if type(path) ~= "string" or path == "" then path = M.DEFAULT_SOCKET end
  return { socket = path, timeout_ms = timeout }
end

------------------------------------------------------------------------------------ socket

local function load_socket()
  local ok_core, core = pcall(require, "socket")
  local ok_unix, unix = pcall(require, "socket.unix")
  if not (ok_core and ok_unix) then return nil end
  return core, unix
end

local function failure_reason(err)
  err = tostring(err)
  if err == "timeout" then return "timeout" end
  if err:find("refused") or err:find("No such file") or err:find("not found") then
    return "pald-down"
  end
  return "socket-error"
end

-- Send one line to pald and read one line back, all within cfg.timeout_ms.
-- Returns the reply line, or nil, reason (a short token), detail.
function M.ask(line, cfg)
  local core, unix = load_socket()
  if not core then return nil, "no-luasocket", "require socket/socket.unix failed" end
  local now = core.gettime
  local deadline = now() + cfg.timeout_ms / 1000
  local function remaining()
    return math.max(0, deadline - now())
  end
  -- LuaSocket 3 (Debian 12): socket.unix is a table with stream(); LuaSocket 2: a function.
  local create = unix
  if type(unix) == "table" and unix.stream then create = unix.stream end
  local sock, err = create()
  if not sock then return nil, "socket-error", err end
  local function fail(e)
    sock:close()
    return nil, failure_reason(e), tostring(e)
  end
  sock:settimeout(remaining(), "t")
  local ok
  ok, err = sock:connect(cfg.socket)
  if not ok then return fail(err) end
  sock:settimeout(remaining(), "t")
  local sent, send_err = sock:send(line)
  if not sent and send_err ~= "closed" then return fail(send_err) end
  -- On "closed", pald may have answered before reading (e.g. a refused peer): read it.
  sock:settimeout(remaining(), "t")
  local reply
  reply, err = sock:receive("*l")
  if not reply then return fail(sent and err or send_err) end
  sock:close()
  if #reply >= M.MAX_LINE_BYTES then return nil, "bad-reply", "reply line too long" end
  return reply
end

------------------------------------------------------------------------------------ replies

local function is_count(v)
  return type(v) == "number" and v >= 0 and v == math.floor(v) and v < 2 ^ 53
end

local function valid_gres(gres)
  if type(gres) ~= "string" or gres == "" then return false end
  for item in (gres .. ","):gmatch("([^,]*),") do
    if not (item:find("^gres:gpu:%d+$") or item:find("^gres:gpu:[A-Za-z0-9_%.%-]+:%d+$")) then
      return false
    end
  end
  return true
end

-- Check a decoded reply. Returns a table {decision=, reason=, nodes={sorted names},
-- gres= (nil: pin nodes only), rank=, warning=} or nil, reason, detail.
function M.check_reply(obj)
  if type(obj) ~= "table" or getmetatable(obj) == array_mt then
    return nil, "bad-reply", "not an object"
  end
  if obj.v ~= M.PROTOCOL_VERSION then return nil, "bad-reply", "protocol version " .. tostring(obj.v) end
  if obj.ok == false then
    local e = type(obj.error) == "table" and obj.error or {}
    local code = type(e.code) == "string" and e.code or "unknown"
    return nil, "pald-error:" .. code, type(e.message) == "string" and e.message or ""
  end
  if obj.ok ~= true then return nil, "bad-reply", "ok is not a boolean" end
  local out = {
    decision = obj.decision,
    reason = type(obj.reason) == "string" and obj.reason or "",
    warning = type(obj.warning) == "string" and obj.warning or nil,
  }
  if obj.rank ~= nil and obj.rank ~= json.null then
    if not is_count(obj.rank) then return nil, "bad-reply", "rank is not a count" end
    out.rank = obj.rank
  end
  if obj.decision == "place" then
    if type(obj.nodes) ~= "table" or getmetatable(obj.nodes) == array_mt then
      return nil, "bad-reply", "place without nodes"
    end
    local names = {}
    for name, slots in pairs(obj.nodes) do
      if type(name) ~= "string" or not name:find("^[A-Za-z0-9][A-Za-z0-9_%.%-]*$") then
        return nil, "bad-reply", "bad node name"
      end
      if type(slots) ~= "table" or #slots == 0 then return nil, "bad-reply", "node without slots" end
      for _, slot in ipairs(slots) do
        if not is_count(slot) then return nil, "bad-reply", "bad GPU slot" end
      end
      names[#names + 1] = name
    end
    if #names == 0 then return nil, "bad-reply", "place without nodes" end
    table.sort(names)
    -- No gres: pin the nodes only, the job keeps its own GPU request (e.g. --gpus=N spread
    -- unevenly over nodes cannot be bound slot by slot).
    if obj.gres ~= nil and obj.gres ~= json.null then
      if not valid_gres(obj.gres) then return nil, "bad-reply", "bad gres" end
      out.gres = obj.gres
    end
    out.nodes = names
  elseif obj.decision ~= "defer" and obj.decision ~= "pass" then
    return nil, "bad-reply", "unknown decision " .. tostring(obj.decision)
  end
  return out
end

------------------------------------------------------------------------------ applying it

-- admin_comment reasons are single tokens: safe to grep, safe inside the `;`-separated tag.
function M.token(reason)
  reason = tostring(reason or ""):gsub("[^A-Za-z0-9_%.:%-]", "-"):sub(1, 64)
  if reason == "" then return "unspecified" end
  return reason
end

local function tag_text(existing, tag)
  if type(existing) == "string" and existing ~= "" then return existing .. " " .. tag end
  return tag
end

-- Write `changes` ({field, value} in order) into job_desc; on any error put back what was
-- there, so a failed write leaves the job as submitted. Returns true or false, error.
local STRING_FIELDS = { req_nodes = true, tres_per_node = true, tres_per_job = true,
  admin_comment = true }

function M.write_fields(job_desc, changes)
  local done = {}
  local ok, err = pcall(function()
    for _, change in ipairs(changes) do
      local name, value = change[1], change[2]
      done[#done + 1] = { name, job_desc[name] }
      job_desc[name] = value
    end
  end)
  if ok then return true end
  for i = #done, 1, -1 do
    local name, old = done[i][1], done[i][2]
    if old == nil then old = STRING_FIELDS[name] and "" or NO_VAL32 end
    pcall(function() job_desc[name] = old end)
  end
  return false, err
end

-- The TRES prefix this Slurm takes in job_desc: 23.11 and later write and require
-- "gres/gpu:s2:1" (a "gres:" item is rejected there as an invalid TRES specification), 22.05 to
-- 23.02 "gres:gpu:s2:1". The job's own GPU request shows the spelling when it has one; else
-- slurm.GRES_ALLOW_TASK_SHARING, a constant the Lua plugin exports from 23.11 on, tells.
local TRES_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket" }

function M.tres_prefix(job_desc, slurm)
  for _, field in ipairs(TRES_FIELDS) do
    local v = string_or_nil(job_desc[field])
    if v and v:find("gres/", 1, true) then return "gres/" end
    if v and v:find("gres:", 1, true) then return "gres:" end
  end
  if type(slurm) == "table" and slurm.GRES_ALLOW_TASK_SHARING ~= nil then return "gres/" end
  return "gres:"
end

-- pald's "gres:gpu:s2:1,gres:gpu:s3:1" with each item's "gres:" spelled as `prefix`.
function M.spell_tres(gres, prefix)
  if prefix == "gres:" then return gres end
  return (("," .. gres):gsub(",gres:", "," .. prefix)):sub(2)
end

-- The field writes for a checked reply (`slurm`: the Slurm table, for the TRES spelling).
function M.changes_for(job_desc, reply, request_id, slurm)
  local suffix = (reply.rank and (";rank=v" .. string.format("%d", reply.rank)) or "")
    .. (request_id and (";req=" .. request_id) or "")
  local changes = {}
  if reply.decision == "place" then
    local n = #reply.nodes
    changes[#changes + 1] = { "req_nodes", table.concat(reply.nodes, ",") }
    changes[#changes + 1] = { "min_nodes", n }
    changes[#changes + 1] = { "max_nodes", n }
    if reply.gres then
      changes[#changes + 1] = { "tres_per_node", M.spell_tres(reply.gres, M.tres_prefix(job_desc, slurm)) }
      -- --gpus=N (tres_per_job) would ask for GPUs on top of the slots: drop its GPU items.
      local tres_job = string_or_nil(job_desc.tres_per_job)
      if tres_job and M.gpu_count(tres_job) then
        changes[#changes + 1] = { "tres_per_job", M.strip_gpu_items(tres_job) }
      end
    end
    changes[#changes + 1] = { "admin_comment", tag_text(job_desc.admin_comment,
      "pal:placed=" .. table.concat(reply.nodes, ",") .. suffix) }
  elseif reply.decision == "defer" then
    changes[#changes + 1] = { "priority", 0 }
    changes[#changes + 1] = { "admin_comment", tag_text(job_desc.admin_comment, "pal:defer" .. suffix) }
  else
    changes[#changes + 1] = { "admin_comment", tag_text(job_desc.admin_comment,
      "pal:pass=" .. M.token(reply.reason ~= "" and reply.reason or "pald") .. suffix) }
  end
  return changes
end

------------------------------------------------------------------------------- the hook

local function log_info(slurm, msg)
  pcall(slurm.log_info, "%s", msg)
end

local function pass(slurm, job_desc, reason, detail, request_id)
  local tag = "pal:pass=" .. M.token(reason) .. (request_id and (";req=" .. request_id) or "")
  M.write_fields(job_desc, { { "admin_comment", tag_text(job_desc.admin_comment, tag) } })
  log_info(slurm, "pal: pass reason=" .. M.token(reason)
    .. (request_id and (" req=" .. request_id) or "")
    .. ((detail and detail ~= "") and (" detail=" .. tostring(detail)) or ""))
end

local function place(job_desc, spec, submit_uid, ctx)
  local slurm = ctx.slurm
  local cfg = M.config(ctx.getenv, ctx.overrides)
  local core = load_socket()
  local clock = ctx.now or (core and core.gettime) or os.time
  local request_id = M.new_request_id(clock())
  local line = json.encode(M.build_request(job_desc, spec, submit_uid, request_id)) .. "\n"
  if #line > M.MAX_LINE_BYTES then
    return pass(slurm, job_desc, "request-too-large", #line .. " bytes", request_id)
  end
  local started = clock()
  local reply_line, why, detail = (ctx.ask or M.ask)(line, cfg)
  local took_ms = (clock() - started) * 1000
  if not reply_line then
    return pass(slurm, job_desc, why, detail, request_id)
  end
  local obj, jerr = json.decode(reply_line)
  if obj == nil then return pass(slurm, job_desc, "bad-reply", jerr, request_id) end
  local reply, rwhy, rdetail = M.check_reply(obj)
  if not reply then return pass(slurm, job_desc, rwhy, rdetail, request_id) end
  if reply.warning then pcall(slurm.log_user, "%s", "pal: " .. reply.warning) end
  local ok, werr = M.write_fields(job_desc, M.changes_for(job_desc, reply, request_id, slurm))
  if not ok then return pass(slurm, job_desc, "write-failed", werr, request_id) end
  pcall(function()
    log_info(slurm, string.format("pal: %s class=%s req=%s nodes=%s gres=%s rank=%s rtt_ms=%.2f",
      reply.decision, spec.class, request_id, reply.nodes and table.concat(reply.nodes, ",") or "-",
      reply.gres or "-", reply.rank and string.format("v%d", reply.rank) or "-", took_ms))
  end)
end

-- The whole submit-time path. ctx: slurm (the Slurm table), getenv (default os.getenv),
-- overrides (socket/timeout_ms), and for tests ask/now. Always returns slurm.SUCCESS.
function M.job_submit(job_desc, submit_uid, ctx)
  local slurm = ctx.slurm
  local status, spec = M.parse_comment(job_desc.comment)
  if status == "none" then return slurm.SUCCESS end
  if status == "error" then
    pcall(slurm.log_user, "%s", "pal: ignoring the pal: spec in --comment (" .. spec.message
      .. "); the job is submitted without PAL placement. Expected " .. M.GRAMMAR)
    pass(slurm, job_desc, "bad-comment:" .. spec.code, spec.message)
    return slurm.SUCCESS
  end
  local ok, err = pcall(place, job_desc, spec, submit_uid, ctx)
  if not ok then pass(slurm, job_desc, "lua-error", err) end
  return slurm.SUCCESS
end

return M
