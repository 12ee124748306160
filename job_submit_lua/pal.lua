-- pal.lua: the submit-time half of pal-slurm (Lua 5.1, as linked by Debian's job_submit_lua.so).
--
-- Why it exists: slurmctld runs job_submit.lua for every submission while holding its job,
-- node and partition locks, one submission at a time. This module therefore does the least
-- that can place a job: parse the --comment spec, ask pald over a unix socket with one hard
-- deadline (<= 150 ms, sent along so pald can drop a request nobody waits for), read at most
-- 64 KiB back, check the answer against the job, and write it into the job. Every failure of
-- ours, and every answer that does not fit the job or that Slurm would refuse, leaves the job
-- as the user submitted it, tagged `pal:pass=<reason>` in admin_comment and logged: a PAL
-- problem must never stop or reject a job. Jobs without a `pal:` spec are not touched and
-- cost no socket call.
--
-- Pure apart from `M.ask` (the socket) and the `slurm` table handed in by job_submit.lua;
-- the luasocket modules are loaded lazily so that tests can stand in for them through
-- package.loaded. The comment grammar's cases live in tests/golden/comment_grammar.json,
-- shared with pald's Python validator (pal_slurm/model/comment_grammar.py).

local M = {}

M.PROTOCOL_VERSION = 1
M.MAX_LINE_BYTES = 64 * 1024 -- one wire line, newline included (pal_slurm/daemon/protocol.py)
M.DEFAULT_SOCKET = "/run/pal/pald.sock"
M.DEFAULT_TIMEOUT_MS = 150 -- pal.toml [daemon] hook_timeout_ms default
M.MAX_TIMEOUT_MS = 150 -- a hook slower than MessageTimeout makes ghost jobs; stay far below
M.CHECK_BUDGET_MS = 25 -- checking and writing pald's reply, after the socket's deadline at most
M.DEFAULT_MAX_GPUS_PER_NODE = 16 -- no node has more unless PAL_MAX_GPUS_PER_NODE says so
M.MAX_COMMENT_BYTES = 1024 -- slurmctld 22.05 refuses a longer --comment (after this hook)
M.MAX_WARNING_BYTES = 200 -- a pald warning shown to the user
M.MAX_LOG_DETAIL_BYTES = 300 -- a failure's detail in slurmctld's log
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
    -- most strings need no escape: finding none is cheaper than gsub's byte-by-byte copy
    local plain = not (v:find("%c") or v:find('"', 1, true) or v:find("\\", 1, true))
    out[#out + 1] = '"' .. (plain and v or (v:gsub('[%c"\\]', escape_char))) .. '"'
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
-- pal_slurm/model/comment_grammar.py for the full rules (they share one table of cases).

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
-- `pal:off` alone: the user opts out of a partition where every GPU job is PAL's.
function M.opted_out(comment)
  if type(comment) ~= "string" then return false end
  local tokens = {}
  for token in (" " .. comment):gmatch("[" .. WS .. "]pal:([^" .. WS .. "]*)") do
    tokens[#tokens + 1] = token
  end
  return #tokens == 1 and tokens[1] == "off"
end

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
  if token == "off" then return "none" end -- the user's pal:off (M.opted_out), not a spec
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

local NO_VAL16 = 65534 -- slurm.NO_VAL16: "not given" for 16-bit fields (shared, cpus_per_task)

local function count16_or_nil(v)
  v = tonumber(v)
  if v == nil or v < 0 or v >= NO_VAL16 then return nil end
  return v
end

-- Read a job_desc field without raising (a field a Slurm version lacks reads as nil).
local function field(job_desc, name)
  local ok, v = pcall(function() return job_desc[name] end)
  if ok then return v end
  return nil
end

-- The names of the partitions Slurm lets this user use (part_list is already filtered by
-- Slurm for AllowGroups / RootOnly), sorted; nil when not given.
function M.usable_partitions(part_list)
  if type(part_list) ~= "table" then return nil end
  local names = json.array()
  for name in pairs(part_list) do
    if type(name) == "string" then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

-- job_desc fields sent to pald as they are, by kind: str (nil unless a string), n32 / n16
-- (nil when unset: Slurm's NO_VAL / NO_VAL16).
local READ = { str = string_or_nil, n32 = count_or_nil, n16 = count16_or_nil }

-- What decides where the job may run: pald places it only on nodes Slurm would accept
-- (pal_slurm/policy/eligibility.py).
M.SITE_FIELDS = {
  { "features", "str" }, { "exc_nodes", "str" }, { "req_nodes", "str" }, { "reservation", "str" },
  { "account", "str" }, { "qos", "str" }, { "shared", "n16" }, { "time_limit", "n32" },
  { "cpus_per_task", "n16" }, { "ntasks_per_node", "n16" }, { "num_tasks", "n32" },
  { "pn_min_cpus", "n16" }, { "min_cpus", "n32" }, { "cpus_per_tres", "str" },
  { "min_mem_per_node", "n32" }, { "min_mem_per_cpu", "n32" }, { "mem_per_tres", "str" },
}

-- What makes pald pass the job on purpose (arrays, hetjob components, dependencies, --begin,
-- the user's --hold, tasks per GPU; pal_slurm/intake/refusals.py).
M.SHAPE_FIELDS = {
  { "array_inx", "str" }, { "het_job_offset", "n32" }, { "dependency", "str" },
  { "begin_time", "n32" }, { "priority", "n32" }, { "ntasks_per_tres", "n16" },
}

-- Copy the listed fields of job_desc into `into` (a field a Slurm version lacks reads as nil).
function M.read_fields(job_desc, list, into)
  for _, f in ipairs(list) do into[f[1]] = READ[f[2]](field(job_desc, f[1])) end
  return into
end

local request_counter = 0

-- A short id for one request: logged by both sides and written into admin_comment.
function M.new_request_id(now)
  request_counter = request_counter + 1
  return string.format("h%x-%x", math.floor((now or os.time()) * 1000), request_counter)
end

-- The place request for a job, as a Lua table ready for json.encode. `deadline_ms` (epoch
-- milliseconds, optional) is when the hook stops waiting: pald drops a request it reads after
-- that instant and records nothing, since the hook has already passed the job.
-- `part_list` (slurmctld's partitions for this user) gives the partitions the job may use.
function M.build_request(job_desc, spec, submit_uid, request_id, deadline_ms, part_list)
  local tres_node = string_or_nil(job_desc.tres_per_node)
  local tres_job = string_or_nil(job_desc.tres_per_job)
  local uid = count_or_nil(job_desc.user_id) or count_or_nil(submit_uid) or 0
  local job = {
    uid = uid,
    comment = string_or_nil(job_desc.comment) or "", -- a default-on job may have none
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
  job.usable_partitions = M.usable_partitions(part_list)
  M.read_fields(job_desc, M.SITE_FIELDS, job)
  M.read_fields(job_desc, M.SHAPE_FIELDS, job)
  local pal = { class = spec.class, gpus = spec.gpus, mode = spec.mode, net = spec.net }
  return { v = M.PROTOCOL_VERSION, op = "place", id = request_id, job = job, pal = pal,
    deadline_ms = deadline_ms }
end

-- What the job asks for in Slurm's terms, from the request's job table; the same rules as
-- pald's job_shape (pal_slurm/daemon/service.py), so that the hook can tell whether a reply
-- is in the job's shape. per_node: GPUs on each node (--gres=gpu:g), total: GPUs in all
-- (--gpus=N, or gpus= in the comment), min/max: the node count bounds (nil: not given).
function M.job_shape(job, spec)
  local min_n = job.min_nodes
  if min_n == 0 then min_n = nil end
  local max_n = job.max_nodes
  if max_n == 0 then max_n = nil end
  local per_node = job.gpus_per_node
  if per_node == 0 then per_node = nil end
  local total = job.gpus_per_job
  if not total or total == 0 then total = spec.gpus end
  return { per_node = per_node, total = (not per_node) and total or nil,
    min_nodes = min_n, max_nodes = max_n }
end

----------------------------------------------------------------------------------- config

-- Socket path, timeout and the most GPUs a node can have, from slurmctld's environment under
-- the names pal.toml's environment overrides use (PAL_DAEMON_SOCKET or its short form
-- PAL_SOCKET, PAL_DAEMON_HOOK_TIMEOUT_MS or PAL_TIMEOUT_MS, PAL_MAX_GPUS_PER_NODE), with
-- `overrides` (a table set in job_submit.lua) taking precedence. The timeout is clamped to
-- 1..MAX_TIMEOUT_MS whatever is asked. (The hook does not read pal.toml itself: no TOML
-- parser inside slurmctld.)
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
  local max_gpus = tonumber(overrides.max_gpus_per_node) or tonumber(getenv("PAL_MAX_GPUS_PER_NODE"))
  if not max_gpus or max_gpus ~= max_gpus or max_gpus < 1 then max_gpus = M.DEFAULT_MAX_GPUS_PER_NODE end
  local list_bytes = tonumber(overrides.max_job_list_bytes) or tonumber(getenv("PAL_MAX_JOB_LIST_BYTES"))
  if not list_bytes or list_bytes ~= list_bytes or list_bytes < 0 then
    list_bytes = M.DEFAULT_MAX_JOB_LIST_BYTES
  end
  return { socket = path, timeout_ms = timeout, max_gpus_per_node = math.floor(max_gpus),
    max_job_list_bytes = math.min(math.floor(list_bytes), M.MAX_HOSTLIST_BYTES),
    default_on = M.default_on_list(overrides.default_on or getenv("PAL_DEFAULT_ON")) }
end

-- The partitions where every GPU job is PAL's ("gpu,a100"; "*": every partition), as a set, or
-- nil (none: only jobs with a pal: spec are PAL's).
function M.default_on_list(text)
  if type(text) ~= "string" then return nil end
  local set, any = {}, false
  for name in text:gmatch("[^,%s]+") do set[name] = true any = true end
  return any and set or nil
end

-- Whether a job without a pal: spec is PAL's all the same: it asks for GPUs, its user did not
-- opt out (pal:off), and every partition it may run in (its -p list, else Slurm's default
-- partition from part_list) is in the default-on set. pald then gives it a class by the site's
-- rules ([daemon] class_rules) and checks the same partitions against its own list.
function M.default_on(job_desc, part_list, set)
  if not set or M.opted_out(job_desc.comment) then return false end
  local tres_task = string_or_nil(job_desc.tres_per_task) or ""
  if not (M.gpu_count(string_or_nil(job_desc.tres_per_node)) or M.gpu_count(string_or_nil(job_desc.tres_per_job))
      or tres_task:find("gpu", 1, true)) then
    return false
  end
  if set["*"] then return true end
  local names = {}
  local partition = string_or_nil(job_desc.partition)
  if partition then
    for name in partition:gmatch("[^,]+") do names[#names + 1] = name end
  elseif type(part_list) == "table" then
    for name, rec in pairs(part_list) do
      if type(rec) == "table" and (rec.flag_default == 1 or rec.flag_default == true) then names[1] = name break end
    end
  end
  if #names == 0 then return false end
  for _, name in ipairs(names) do
    if not set[name] then return false end
  end
  return true
end

-- The job's own node lists (--exclude, --nodelist) the hook hands to pald and checks a reply
-- against. Reading one costs the hook (inside slurmctld's locks) and pald time linear in its
-- length; a list longer than cfg.max_job_list_bytes (PAL_MAX_JOB_LIST_BYTES, default
-- DEFAULT_MAX_JOB_LIST_BYTES: some 1,000 node names written one by one) passes the job unasked,
-- so no one user's text can hold slurmctld for the milliseconds a 64 KiB list costs. Returns
-- the option's name and the list's length, or nil.
M.DEFAULT_MAX_JOB_LIST_BYTES = 8 * 1024
local JOB_LISTS = { { "exc_nodes", "exclude" }, { "req_nodes", "nodelist" } }

function M.oversized_node_list(job_desc, max_bytes)
  for _, field in ipairs(JOB_LISTS) do
    local value = job_desc[field[1]]
    if type(value) == "string" and #value > max_bytes then return field[2], #value end
  end
  return nil
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

-- Read one line (without its newline) of at most max_bytes, newline included, by `deadline`.
-- Why not receive("*l"): LuaSocket buffers a line without any limit until the newline or the
-- timeout, so a pald streaming bytes without a newline grew slurmctld by hundreds of MB inside
-- its locks. Here each round waits (up to the deadline) for one byte, then takes
-- whatever else has already arrived without waiting, never asking for more than the cap.
-- Returns the line, or nil, "timeout" | "closed" | "too-long" | another socket error.
local function receive_line(sock, deadline, now, max_bytes)
  local parts, got = {}, 0
  while true do
    local left = deadline - now()
    if left <= 0 then return nil, "timeout" end
    sock:settimeout(left, "t")
    local first, err = sock:receive(1)
    if not first then return nil, err end
    local chunk = first
    if got + 1 < max_bytes then
      sock:settimeout(0, "t")
      local more, more_err, partial = sock:receive(max_bytes - got - 1)
      chunk = first .. (more or partial or "")
      if not more and more_err ~= "timeout" and more_err ~= "closed" then return nil, more_err end
    end
    local newline = chunk:find("\n", 1, true)
    if newline then
      parts[#parts + 1] = chunk:sub(1, newline - 1)
      return table.concat(parts)
    end
    got = got + #chunk
    if got >= max_bytes then return nil, "too-long" end
    parts[#parts + 1] = chunk
  end
end

-- Send one line to pald and read one line back, all by one deadline: cfg.deadline (seconds
-- on socket.gettime's clock, the instant sent to pald as deadline_ms) or now + cfg.timeout_ms.
-- Returns the reply line, or nil, reason (a short token), detail.
function M.ask(line, cfg)
  local core, unix = load_socket()
  if not core then return nil, "no-luasocket", "require socket/socket.unix failed" end
  local now = core.gettime
  local deadline = cfg.deadline or (now() + cfg.timeout_ms / 1000)
  local function remaining()
    return math.max(0, deadline - now())
  end
  -- LuaSocket 3 (Debian 12, 13): socket.unix is a table with stream(); LuaSocket 2: a function.
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
  local reply
  reply, err = receive_line(sock, deadline, now, M.MAX_LINE_BYTES)
  if not reply then
    if err == "too-long" then
      sock:close()
      return nil, "bad-reply", "reply longer than " .. M.MAX_LINE_BYTES .. " bytes"
    end
    return fail(sent and err or send_err)
  end
  sock:close()
  return reply
end

------------------------------------------------------------------------------------ replies

local function is_count(v)
  return type(v) == "number" and v >= 0 and v == math.floor(v) and v < 2 ^ 53
end

local function is_node_name(name)
  return type(name) == "string" and #name <= 64 and name:find("^[A-Za-z0-9][A-Za-z0-9_%.%-]*$") ~= nil
end

-- The optional `partition` of a place reply (a job that asked for several partitions is
-- narrowed to the one holding its nodes: Slurm leaves it pending otherwise). Returns the name
-- or nil, and an error text when it is malformed.
function M.check_partition(value)
  if value == nil or value == json.null then return nil end
  if type(value) ~= "string" or not value:find("^[A-Za-z0-9][A-Za-z0-9_%.%-]*$") then
    return nil, "bad partition"
  end
  return value
end

-- Check a decoded reply's form. Returns a table {decision=, reason=, nodes={sorted names},
-- slots={name -> list of slots}, gres= (nil: pin nodes only), rank=, warning=} or nil,
-- reason, detail. Whether a placement fits the job is check_fit's business.
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
      if not is_node_name(name) then return nil, "bad-reply", "bad node name" end
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
      if type(obj.gres) ~= "string" then return nil, "bad-reply", "bad gres" end
      out.gres = obj.gres
    end
    out.nodes, out.slots = names, obj.nodes
    out.site_checked = obj.site_checked == true
    local partition, perr = M.check_partition(obj.partition)
    if perr then return nil, "bad-reply", perr end
    out.partition = partition
  elseif obj.decision ~= "defer" and obj.decision ~= "pass" then
    return nil, "bad-reply", "unknown decision " .. tostring(obj.decision)
  end
  return out
end

-- The GPU slots a reply's gres binds on every node, per the binding scheme of
-- docs/decisions/slurm-shapes.md and pal_slurm/slurm/gres.py: "gres:gpu:s<k>:1,..." (one
-- item per slot, slot types s0..s<max-1>, each once), or one untyped "gres:gpu:<n>".
-- Returns the GPU count and a set {slot -> true} (nil for untyped), or nil, detail.
function M.gres_slots(gres, max_gpus)
  local set, count = {}, 0
  for item in (gres .. ","):gmatch("([^,]*),") do
    local digits = item:match("^gres:gpu:s(%d+):1$")
    if digits then
      local slot = tonumber(digits)
      if digits ~= tostring(slot) or slot >= max_gpus then return nil, "bad slot type s" .. digits end
      if set[slot] then return nil, "slot s" .. digits .. " twice" end
      set[slot], count = true, count + 1
    else
      local n = item:match("^gres:gpu:([1-9]%d*)$")
      if not n or gres ~= item then return nil, "gres item '" .. item .. "' is not a slot binding" end
      return tonumber(n), nil
    end
  end
  return count, set
end

-- Does a placement fit the job it is for? pald answers in the job's own shape
-- (docs/decisions/slurm-shapes.md); a reply that does not would change what the job runs
-- with (a GPU job without GPUs, four nodes for a one-GPU job) or make sbatch fail (a slot
-- type the node lacks), so anything else is a bad reply and the job passes. pald checks its
-- answer against its own Slurm view; this is the hook's independent check against the job.
-- Returns true, or nil, detail.
function M.check_fit(reply, shape, max_gpus)
  local n = #reply.nodes
  local lo = shape.min_nodes or 1
  -- --gres=gpu:g without -N is one node; --gpus=N without -N is at most N nodes.
  local hi = shape.max_nodes or (shape.per_node and lo) or shape.total
  if not shape.per_node and not shape.total then return nil, "the job asks for no GPUs" end
  if n < lo or n > hi then
    return nil, string.format("%d nodes for a job of %d..%d nodes", n, lo, hi)
  end
  local gres_count, gres_set
  if reply.gres then
    gres_count, gres_set = M.gres_slots(reply.gres, max_gpus)
    if not gres_count then return nil, gres_set end
  end
  local total = 0
  for _, name in ipairs(reply.nodes) do
    local slots = reply.slots[name]
    local seen = {}
    for _, slot in ipairs(slots) do
      if slot >= max_gpus or seen[slot] then return nil, "bad GPU slot on " .. name end
      if gres_set and not gres_set[slot] then return nil, "slots on " .. name .. " differ from gres" end
      seen[slot] = true
    end
    if shape.per_node and #slots ~= shape.per_node then
      return nil, string.format("%d GPUs on %s for a job of %d per node", #slots, name, shape.per_node)
    end
    if gres_count and #slots ~= gres_count then return nil, "gres count differs from slots on " .. name end
    total = total + #slots
  end
  if shape.total and total ~= shape.total then
    return nil, string.format("%d GPUs for a job of %d", total, shape.total)
  end
  return true
end

------------------------------------------------------------------------------------ hostlists
-- Slurm's compressed node lists ("gpu[01-04,07],cpu1") as the hook meets them: the job's
-- --exclude / --nodelist (the user's text, up to a whole request line) and its partitions'
-- node lists. The hook tests a few placed nodes against them inside slurmctld's locks, so a
-- list is compiled once per hook run, in one linear pass over its text and never expanded,
-- into a lookup where one name costs the same whatever the list's length or its ranges' size:
--   names   plain names, and the one name of a one-number range ("gpu[07]")
--   ranged  literal prefix -> literal suffix -> zero-padding width -> the ranges of that width
--           (the last bracket group of an item; in "a[1-2]b[3-4]" the groups before it are
--           expanded into prefixes "a1b", "a2b", counted against MAX_HOSTLIST_EXPANSIONS).
-- A name of n characters is looked up by its digit runs: at most n * MAX_RANGE_DIGITS table
-- reads and a binary search per width. The ranges of one (prefix, suffix, width) are sorted
-- on the first lookup that needs them. Slurm's zero-padding rule: "[01-10]" names
-- gpu01..gpu10 (every number written at the width of the lower bound, wider numbers as they
-- are), so "gpu010" and "gpu1" are not in it. The Python side's expander is
-- pal_slurm/intake/hostlist.py; tests/golden/hostlist_match.json holds the cases both check.

M.MAX_HOSTLIST_BYTES = 64 * 1024 -- a whole wire line: the most a request can carry
M.MAX_HOSTLIST_ENTRIES = 32768 -- names + ranges of one list (each range once per prefix)
M.MAX_HOSTLIST_EXPANSIONS = 8192 -- prefixes expanded from leading groups ("a[1-2]b")
local MAX_RANGE_DIGITS = 15 -- range bounds stay exact in a double
local TICK_EVERY = 256 -- items between two calls of the caller's deadline check
local ONE_RANGE_ITEM = "^([^,%[%]]*)%[(%d+)%-(%d+)%]([^,%[%]]*)"
local WHITESPACE = { " ", "\t", "\r", "\n", "\f", "\v" }
local BRACKETS = { "[", "]" }

-- Record the range lo..hi (numbers) of zero-padding width w for prefix/suffix.
local function add_range(ranged, prefix, suffix, w, lo, hi)
  local by_suffix = ranged[prefix]
  if not by_suffix then by_suffix = {}; ranged[prefix] = by_suffix end
  local by_width = by_suffix[suffix]
  if not by_width then by_width = {}; by_suffix[suffix] = by_width end
  local set = by_width[w]
  if not set then set = { los = {}, hi_of = {}, n = 0 }; by_width[w] = set end
  local hi_of = set.hi_of
  local old = hi_of[lo]
  if old == nil then
    set.n = set.n + 1
    set.los[set.n], hi_of[lo] = lo, hi
  elseif hi > old then
    hi_of[lo] = hi
  end
end

-- One range of a bracket body ("01-04" or "07"): its lower bound's text, the bounds, and the
-- digits of the upper bound's text; or nil, why, detail.
local function parse_range(range)
  local lo, hi = range:match("^(%d+)%-(%d+)$")
  if not lo then lo = range:match("^%d+$"); hi = lo end
  if not lo then return nil, "malformed", "bad range '" .. range .. "'" end
  if #lo > MAX_RANGE_DIGITS or #hi > MAX_RANGE_DIGITS then
    return nil, "too-large", "a range bound of more than " .. MAX_RANGE_DIGITS .. " digits"
  end
  local a, b = tonumber(lo), tonumber(hi)
  if b < a then return nil, "malformed", "descending range '" .. range .. "'" end
  return lo, a, b, #hi
end

local TOO_MANY = "more than " .. M.MAX_HOSTLIST_ENTRIES .. " entries"

-- Add prefix..[lo-hi]..suffix to the matcher: one number is one name (exactly the text
-- written), a range goes to ranged. Returns false when the entry cap is passed.
local function add_entry(m, prefix, suffix, lo_text, lo, hi, hi_digits)
  m.entries = m.entries + 1
  if lo == hi then
    m.names[prefix .. lo_text .. suffix] = true
  else
    add_range(m.ranged, prefix, suffix, #lo_text, lo, hi)
    local w = #lo_text > hi_digits and #lo_text or hi_digits -- the widest digit run it names
    if w > m.digits then m.digits = w end
  end
  return m.entries <= M.MAX_HOSTLIST_ENTRIES
end

-- Plain items (no brackets) "a,b,c": names. Returns nil, why, detail on an empty item.
local function add_plain(m, text)
  local names, count = m.names, 0
  for item in (text .. ","):gmatch("([^,]*),") do
    if item == "" then return nil, "malformed", "empty item" end
    names[item] = true
    count = count + 1
  end
  m.entries = m.entries + count
  if m.entries > M.MAX_HOSTLIST_ENTRIES then return nil, "too-large", TOO_MANY end
  return true
end

-- The ranges of one bracket body as a list of {text of lo, lo, hi, digits of hi}, or nil,
-- why, detail.
local function body_ranges(body)
  local ranges = {}
  for range in (body .. ","):gmatch("([^,]*),") do
    local lo, a, b, hd = parse_range(range)
    if not lo then return nil, a, b end
    ranges[#ranges + 1] = { lo, a, b, hd }
  end
  return ranges
end

-- The literal prefixes named by the text before an item's last bracket group ("a[1-2]b" ->
-- "a1b", "a2b"), counted against MAX_HOSTLIST_EXPANSIONS; or nil, why, detail. The same text
-- is expanded once per list (m.expansions: "rack[1-4]-n" repeats in real lists).
local function leading_prefixes(m, text)
  local done = m.expansions[text]
  if done then return done end
  local prefixes, pos = { "" }, 1
  local too_many = "more than " .. M.MAX_HOSTLIST_EXPANSIONS .. " expanded prefixes"
  while pos <= #text do
    local open = text:find("[", pos, true)
    local lit = text:sub(pos, (open or #text + 1) - 1)
    for i, p in ipairs(prefixes) do prefixes[i] = p .. lit end
    if not open then break end
    local close = text:find("]", open + 1, true)
    local ranges, why, detail = body_ranges(text:sub(open + 1, close - 1))
    if not ranges then return nil, why, detail end
    local grown = {}
    for _, p in ipairs(prefixes) do
      for _, r in ipairs(ranges) do
        local fmt = "%0" .. #r[1] .. "d"
        for v = r[2], r[3] do
          m.expanded = m.expanded + 1
          if m.expanded > M.MAX_HOSTLIST_EXPANSIONS then return nil, "too-large", too_many end
          grown[#grown + 1] = p .. string.format(fmt, v)
        end
      end
    end
    prefixes, pos = grown, close + 1
  end
  m.expansions[text] = prefixes
  return prefixes
end

-- An item of several bracket groups from `start` ("a[1-2]b[3-4]c"): the groups before the
-- last are expanded into literal prefixes. Returns the position after it, or nil, why, detail.
local function add_groups(m, expr, start)
  local pos, last_open, last_close = start, nil, nil
  while true do -- find the groups: brackets balanced, none nested
    local j = expr:find("[%[%],]", pos)
    local c = j and expr:byte(j) or 44
    if c == 93 then return nil, "malformed", "unbalanced ']'" end
    if c == 44 then pos = j or #expr + 1 break end
    local close = expr:find("[%[%]]", j + 1)
    if not close or expr:byte(close) ~= 93 then return nil, "malformed", "unclosed or nested '['" end
    last_open, last_close, pos = j, close, close + 1
  end
  local prefixes, why, detail = leading_prefixes(m, expr:sub(start, last_open - 1))
  if not prefixes then return nil, why, detail end
  local suffix = expr:sub(last_close + 1, pos - 1)
  local body = expr:sub(last_open + 1, last_close - 1)
  local lo, hi = body:match("^(%d+)%-(%d+)$")
  local a, b = lo and #lo <= MAX_RANGE_DIGITS and #hi <= MAX_RANGE_DIGITS and tonumber(lo), hi and tonumber(hi)
  if a and a < b then -- the common last group, "[lo-hi]": no tables
    m.entries = m.entries + #prefixes
    if m.entries > M.MAX_HOSTLIST_ENTRIES then return nil, "too-large", TOO_MANY end
    for _, p in ipairs(prefixes) do add_range(m.ranged, p, suffix, #lo, a, b) end
    if #lo > m.digits then m.digits = #lo end
    if #hi > m.digits then m.digits = #hi end
    return pos
  end
  local ranges
  ranges, why, detail = body_ranges(body)
  if not ranges then return nil, why, detail end
  for _, p in ipairs(prefixes) do
    for _, r in ipairs(ranges) do
      if not add_entry(m, p, suffix, r[1], r[2], r[3], r[4]) then
        return nil, "too-large", TOO_MANY
      end
    end
  end
  return pos
end

-- The ranges of one bracket body into the matcher. Returns true, or nil, why, detail.
local function add_body(m, prefix, body, suffix)
  local lo, hi = body:match("^(%d+)%-(%d+)$")
  if lo and #lo <= MAX_RANGE_DIGITS and #hi <= MAX_RANGE_DIGITS then -- the common "[lo-hi]"
    local a, b = tonumber(lo), tonumber(hi)
    if a < b then
      m.entries = m.entries + 1
      add_range(m.ranged, prefix, suffix, #lo, a, b)
      local w = #lo > #hi and #lo or #hi
      if w > m.digits then m.digits = w end
      if m.entries > M.MAX_HOSTLIST_ENTRIES then return nil, "too-large", TOO_MANY end
      return true
    end
  end
  if not body:find(",", 1, true) then -- one range: no loop, no closure
    local lo, a, b, hd = parse_range(body)
    if not lo then return nil, a, b end
    if not add_entry(m, prefix, suffix, lo, a, b, hd) then return nil, "too-large", TOO_MANY end
    return true
  end
  for range in (body .. ","):gmatch("([^,]*),") do
    local lo, a, b, hd = parse_range(range)
    if not lo then return nil, a, b end
    if not add_entry(m, prefix, suffix, lo, a, b, hd) then return nil, "too-large", TOO_MANY end
  end
  return true
end

-- One bracketed item at `pos`: "gpu[01-04,07]ib" read by one anchored find, several groups
-- through add_groups. Returns the position after the item, or nil, why, detail.
local function add_bracketed(m, expr, pos)
  local _, e, prefix, body, suffix = expr:find("^([^,%[%]]*)%[([^%[%]]*)%]([^,%[%]]*)", pos)
  if not e then return nil, "malformed", "unclosed or nested '['" end
  local c = expr:byte(e + 1)
  if c == 91 then return add_groups(m, expr, pos) end
  if c == 93 then return nil, "malformed", "unbalanced ']'" end
  local ok, why, detail = add_body(m, prefix, body, suffix)
  if not ok then return nil, why, detail end
  return e + 1
end

-- Compile a hostlist expression in one pass: runs of plain items in bulk, bracketed items one
-- by one. `tick` (optional) is called every few hundred bracketed items: the caller's deadline
-- check, which may raise. Returns the matcher, or nil, why ("too-large": over
-- MAX_HOSTLIST_BYTES / MAX_HOSTLIST_ENTRIES / MAX_HOSTLIST_EXPANSIONS / MAX_RANGE_DIGITS;
-- "malformed": what pal_slurm.intake.hostlist.expand refuses: brackets unbalanced or nested, a
-- bad or descending range, an empty item, whitespace), detail. "" (or nil) is the empty list.
-- Every search is anchored at the current item or scans forward to the next bracket, so no
-- byte is read more than a few times (Lua patterns backtrack: an unanchored gmatch over
-- "([^,]*)%[" would be quadratic in a long bracket-free item).
function M.hostlist_compile(expr, tick)
  local m = { names = {}, ranged = {}, digits = 0, entries = 0, expanded = 0, expansions = {} }
  if expr == nil or expr == "" then return m end
  if type(expr) ~= "string" then return nil, "malformed", "not a string" end
  local n = #expr
  if n > M.MAX_HOSTLIST_BYTES then
    return nil, "too-large", n .. " bytes, more than " .. M.MAX_HOSTLIST_BYTES
  end
  for _, ch in ipairs(WHITESPACE) do -- plain finds: memchr, not Lua's per-byte class matching
    if expr:find(ch, 1, true) then return nil, "malformed", "whitespace in a hostlist" end
  end
  local pos, items = 1, 0
  local ranged = m.ranged
  local next_at = {} -- "[" / "]" -> where it next occurs at or after pos (false: nowhere)
  local function next_bracket()
    for _, ch in ipairs(BRACKETS) do
      local q = next_at[ch]
      if q == nil or (q and q < pos) then next_at[ch] = expr:find(ch, pos, true) or false end
    end
    local a, b = next_at["["], next_at["]"]
    if a and b then return a < b and a or b end
    return a or b or nil
  end
  while true do -- pos: the start of an item
    -- The common item, "gpu[0100-0131]ib": one anchored find, no intermediate tables.
    local _, e, prefix, lo, hi, suffix = expr:find(ONE_RANGE_ITEM, pos)
    local c = e and expr:byte(e + 1)
    local a, b = e and #lo <= MAX_RANGE_DIGITS and #hi <= MAX_RANGE_DIGITS and tonumber(lo),
      e and tonumber(hi)
    local after
    if a and a < b and (c == nil or c == 44) then
      m.entries = m.entries + 1
      if m.entries > M.MAX_HOSTLIST_ENTRIES then return nil, "too-large", TOO_MANY end
      add_range(ranged, prefix, suffix, #lo, a, b)
      if #lo > m.digits then m.digits = #lo end
      if #hi > m.digits then m.digits = #hi end
      after = e + 1
    elseif c == 91 then -- "r[1-2]-n[01-32]": an item of several groups starts here
      local why, detail
      after, why, detail = add_groups(m, expr, pos)
      if not after then return nil, why, detail end
    else
      local open = next_bracket()
      if not open then
        local ok, why, detail = add_plain(m, expr:sub(pos))
        if not ok then return nil, why, detail end
        return m
      end
      if expr:byte(open) == 93 then return nil, "malformed", "unbalanced ']'" end
      local comma = expr:find(",", pos, true)
      if comma and comma < open then -- plain items first, up to the last comma before `open`
        local start = pos + expr:sub(pos, open - 1):match("^.*,()") - 1
        local ok, why, detail = add_plain(m, expr:sub(pos, start - 2))
        if not ok then return nil, why, detail end
        pos = start
      end
      local why, detail
      after, why, detail = add_bracketed(m, expr, pos)
      if not after then return nil, why, detail end
    end
    if after > n then return m end
    if after == n then return nil, "malformed", "empty item" end -- a trailing comma
    pos = after + 1
    items = items + 1
    if tick and items % TICK_EVERY == 0 then tick() end
  end
end

-- Sort and merge one width's ranges (once, on first use): arrays of disjoint lo..hi.
local function merged(set)
  if set.merged then return set.merged end
  table.sort(set.los) -- numbers: C comparisons, no Lua callback
  local los, his = {}, {}
  for _, lo in ipairs(set.los) do
    local hi = set.hi_of[lo]
    if #his > 0 and lo <= his[#his] + 1 then
      if hi > his[#his] then his[#his] = hi end
    else
      los[#los + 1], his[#his + 1] = lo, hi
    end
  end
  set.merged = { los, his }
  return set.merged
end

local function in_set(set, v)
  local m = merged(set)
  local los, his = m[1], m[2]
  local a, b = 1, #los
  while a <= b do -- the last lo <= v
    local mid = math.floor((a + b) / 2)
    if los[mid] <= v then a = mid + 1 else b = mid - 1 end
  end
  return b >= 1 and v <= his[b]
end

-- Is the digit text `text` one of the numbers of by_width? Written at width w, a number is
-- padded to w digits, or as it is when wider: "007" is only in width-3 ranges, "17" in ranges
-- of width 1 or 2.
local function digits_in(by_width, text)
  local v = tonumber(text)
  if #text > 1 and text:byte(1) == 48 then
    local set = by_width[#text]
    return set ~= nil and in_set(set, v)
  end
  for w = 1, #text do
    local set = by_width[w]
    if set and in_set(set, v) then return true end
  end
  return false
end

-- Is `name` one of the nodes of a compiled hostlist?
function M.hostlist_match(m, name)
  if type(name) ~= "string" then return false end
  if m.names[name] then return true end
  local ranged, n = m.ranged, #name
  for k = 0, n - 1 do
    local b = name:byte(k + 1)
    if b >= 48 and b <= 57 then
      local by_suffix = ranged[name:sub(1, k)]
      if by_suffix then
        local run_end = (name:find("%D", k + 1) or n + 1) - 1
        if run_end > k + m.digits then run_end = k + m.digits end
        for e = k + 1, run_end do
          local by_width = by_suffix[name:sub(e + 1)]
          if by_width and digits_in(by_width, name:sub(k + 1, e)) then return true end
        end
      end
    end
  end
  return false
end

-- Is `name` one of the nodes of hostlist expression `expr`? false for a list that does not
-- compile. (One-off form for tests and callers with one name; the hook compiles each list once.)
function M.hostlist_has(expr, name)
  local m = M.hostlist_compile(expr)
  return m ~= nil and M.hostlist_match(m, name)
end

-- The pass reason for a list that does not compile: the hook cannot check a placement against
-- it, so the job runs as the user asked.
local HOSTLIST_PASS = { ["too-large"] = "input-too-large", malformed = "bad-hostlist" }

-- Would Slurm accept these nodes for this job? A node the job excludes (--exclude) or one
-- outside the job's partition makes sbatch fail ("Invalid node name specified", "Requested
-- node configuration is not available"), e.g. from a pald whose view is stale. `part_list`
-- is what slurmctld hands the hook: the partitions this user may use, by name; with none to
-- check against (an unknown partition, no default) Slurm rejects the job on its own. Each list
-- is compiled once; `tick` is the caller's deadline check. Returns true, or nil, detail,
-- pass reason (nil: a bad reply; "input-too-large" / "bad-hostlist": a list the hook cannot read).
function M.nodes_allowed(names, partition, exc_nodes, part_list, tick)
  if exc_nodes and exc_nodes ~= "" then
    local excluded, why, detail = M.hostlist_compile(exc_nodes, tick)
    if not excluded then return nil, "--exclude: " .. detail, HOSTLIST_PASS[why] end
    for _, name in ipairs(names) do
      if M.hostlist_match(excluded, name) then return nil, name .. " is excluded by the job" end
    end
  end
  if type(part_list) ~= "table" then return true end
  local lists, seen = {}, {}
  if partition then
    for part in partition:gmatch("[^,]+") do -- "-p gpu,gpu,..." compiles gpu's list once
      local rec = part_list[part]
      if rec and not seen[part] then lists[#lists + 1] = rec.nodes end
      seen[part] = true
    end
  else
    for _, rec in pairs(part_list) do
      if rec.flag_default == 1 or rec.flag_default == true then lists[1] = rec.nodes break end
    end
  end
  if #lists == 0 then return true end
  -- Slurm runs the job in one of its partitions: all the nodes must be in the same one.
  for _, nodes in ipairs(lists) do
    local members, why, detail = M.hostlist_compile(nodes, tick)
    if not members then return nil, "partition nodes: " .. detail, HOSTLIST_PASS[why] end
    local all = true
    for _, name in ipairs(names) do
      if not M.hostlist_match(members, name) then all = false break end
    end
    if all then return true end
    if tick then tick() end
  end
  return nil, "nodes outside the job's partition"
end

------------------------------------------------------------------------------ applying it

-- admin_comment reasons are single tokens: safe to grep, safe inside the `;`-separated tag,
-- and never another tag: pald's reason text can contain anything, and "x pal:defer" made a
-- pass look like a PAL hold to a substring match. So only [A-Za-z0-9_.:=-]
-- survive, and a "pal:" inside a reason becomes "pal-".
function M.token(reason)
  reason = tostring(reason or ""):sub(1, 64):gsub("[^A-Za-z0-9_%.:=%-]", "-")
  reason = reason:gsub("[Pp][Aa][Ll]:", "pal-")
  if reason == "" then return "unspecified" end
  return reason
end

-- Text from pald (a warning) or from a socket error on its way to a user's terminal or to
-- slurmctld's log: printable ASCII and well-formed UTF-8 only (no escape sequences, no C1
-- controls, no newlines that would forge log lines), at most max_bytes, cut at a character.
function M.safe_text(text, max_bytes)
  local out, len = {}, 0
  for ch in tostring(text):gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    local b = ch:byte()
    local keep
    if b < 128 then
      ch = ch:sub(1, 1) -- continuation bytes after an ASCII character are strays: dropped
      keep = b >= 32 and b ~= 127
      if not keep and (ch == "\t" or ch == "\n" or ch == "\r") then ch, keep = " ", true end
    else
      local need = b >= 240 and 4 or b >= 224 and 3 or 2
      keep = #ch == need and not (b == 194 and ch:byte(2) < 160) -- U+0080..U+009F: C1 controls
    end
    if keep then
      if len + #ch > max_bytes then break end
      out[#out + 1] = ch
      len = len + #ch
    end
  end
  return table.concat(out)
end

-- What a pald warning looks like to the user: one "pal: " prefix (pald may already have put
-- one there), safe text.
function M.user_warning(warning)
  local text = M.safe_text(warning, M.MAX_WARNING_BYTES):gsub("^%s+", "")
  while text:sub(1, 4) == "pal:" do text = text:sub(5):gsub("^%s+", "") end
  if text == "" then return nil end
  return "pal: " .. text
end

local function tag_text(existing, tag)
  if type(existing) == "string" and existing ~= "" then return existing .. " " .. tag end
  return tag
end

-- Write `changes` ({field, value} in order) into job_desc; on any error put back what was
-- there, so a failed write leaves the job as submitted. Returns true or false, error.
local STRING_FIELDS = { req_nodes = true, tres_per_node = true, tres_per_job = true,
  tres_per_socket = true, tres_per_task = true, features = true, admin_comment = true, partition = true }

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

-- Whether binding the job to pald's slot types would leave it pending for ever: Slurm 24.11
-- (23.11+ spelling "gres/") does not start a job with --cpus-per-gpu bound to two per-slot GPU
-- types on a node (Reason=Resources on an idle node; 22.05 starts it). Such a job is pinned to
-- its nodes only and keeps its GPU request (pal_slurm/slurm/actuator.py does the same).
function M.stalls_on_slots(job_desc, gres, prefix)
  return prefix == "gres/" and M.gpu_count(string_or_nil(job_desc.cpus_per_tres)) ~= nil
    and gres:find(",", 1, true) ~= nil
end

-- The field writes for a checked reply (`slurm`: the Slurm table, for the TRES spelling).
function M.changes_for(job_desc, reply, request_id, slurm)
  -- nodelist=own: the job's --nodelist was the user's (pald keeps it when it places the job
  -- again after a requeue; otherwise the ReqNodeList written here is only PAL's pin)
  local suffix = (reply.rank and (";rank=v" .. string.format("%d", reply.rank)) or "")
    .. (request_id and (";req=" .. request_id) or "")
    .. (string_or_nil(job_desc.req_nodes) and ";nodelist=own" or "")
  local changes = {}
  if reply.decision == "place" then
    local n = #reply.nodes
    if reply.partition then changes[#changes + 1] = { "partition", reply.partition } end
    changes[#changes + 1] = { "req_nodes", table.concat(reply.nodes, ",") }
    changes[#changes + 1] = { "min_nodes", n }
    changes[#changes + 1] = { "max_nodes", n }
    local prefix = M.tres_prefix(job_desc, slurm)
    if reply.gres and not M.stalls_on_slots(job_desc, reply.gres, prefix) then
      changes[#changes + 1] = { "tres_per_node", M.spell_tres(reply.gres, prefix) }
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

------------------------------------------------------------------------- GPU model requests

-- The GPU models whose requests the hook rewrites: PAL_OVERRIDES.gpu_models (a list or a
-- comma-separated string) or PAL_GPU_MODELS in slurmctld's environment ("a100,v100"); nil
-- when none. A site sets them when its GPUs carry pal-slurm's per-slot types and their models
-- are node features (`palctl slurm gres-conf --from` prints both).
function M.gpu_models(getenv, overrides)
  local given = (overrides or {}).gpu_models
  if given == nil then given = (getenv or os.getenv)("PAL_GPU_MODELS") end
  if type(given) == "string" then given = split(given, ",") end
  if type(given) ~= "table" then return nil end
  local models, any = {}, false
  for _, name in ipairs(given) do
    if type(name) == "string" and name:find("^[%w_.%-]+$") then models[name], any = true, true end
  end
  return any and models or nil
end

local MODEL_TRES_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }

-- With per-slot types Slurm knows no GPU of type "a100", so `--gres=gpu:a100:2` (and --gpus=,
-- --gpus-per-socket=, --gpus-per-task= with a model) would be refused: the model request
-- becomes an untyped count on nodes with the model's feature (`gpu:2` and `--constraint=a100`,
-- ANDed with the job's own constraint), which Slurm grants on the same nodes and GPUs.
-- Returns the field changes ({} when the job names no configured model), or nil, why (the job
-- then stays as submitted): two models in one job, or a constraint with counts or brackets
-- (Slurm keeps brackets for those, so the model cannot be ANDed in).
function M.model_changes(job_desc, models)
  local wanted, changes = nil, {}
  for _, field in ipairs(MODEL_TRES_FIELDS) do
    local tres = string_or_nil(job_desc[field])
    if tres and tres ~= "" then
      local items, changed = {}, false
      for _, item in ipairs(split(tres, ",")) do
        local parts = tres_parts(item)
        if parts[1] == "gpu" and #parts >= 2 and models[parts[2]] then
          if #parts > 3 or (parts[3] and not parts[3]:find("^%d+$")) then
            return nil, "unreadable GPU request '" .. item .. "'"
          end
          if wanted and wanted ~= parts[2] then return nil, "GPUs of two models" end
          wanted = parts[2]
          item = (item:match("^gres[:/]") or "") .. "gpu:" .. (parts[3] or "1")
          changed = true
        end
        items[#items + 1] = item
      end
      if changed then changes[#changes + 1] = { field, table.concat(items, ",") } end
    end
  end
  if not wanted then return {} end
  local features = string_or_nil(job_desc.features)
  local combined
  if not features or features == "" then
    combined = wanted
  elseif features:find("[%[%]%*]") then
    return nil, "a constraint with counts or brackets"
  elseif features:find("|", 1, true) then
    combined = "(" .. features .. ")&" .. wanted
  else
    combined = features .. "&" .. wanted
  end
  changes[#changes + 1] = { "features", combined }
  return changes
end

------------------------------------------------------------------------------- the hook

local function log_info(slurm, msg)
  pcall(slurm.log_info, "%s", msg)
end

local function log_user(slurm, msg)
  pcall(slurm.log_user, "%s", msg)
end

-- What the user reads when pald's answer is not used: the job runs as submitted.
local BAD_REPLY_MESSAGE = "pal: the placement service's answer did not fit this job (%s); "
  .. "the job is submitted as you asked, without PAL placement"

-- `run_ms` (optional): the hook's own time for this job so far, from its start (see place).
local function pass(slurm, job_desc, reason, detail, request_id, run_ms)
  local tag = "pal:pass=" .. M.token(reason) .. (request_id and (";req=" .. request_id) or "")
  M.write_fields(job_desc, { { "admin_comment", tag_text(job_desc.admin_comment, tag) } })
  detail = (detail and detail ~= "") and M.safe_text(detail, M.MAX_LOG_DETAIL_BYTES) or nil
  if reason == "bad-reply" then log_user(slurm, string.format(BAD_REPLY_MESSAGE, detail or "?")) end
  log_info(slurm, "pal: pass reason=" .. M.token(reason)
    .. (request_id and (" req=" .. request_id) or "")
    .. (run_ms and string.format(" run_ms=%.2f", run_ms) or "")
    .. (detail and (" detail=" .. detail) or ""))
end

-- A place reply the job can use: in the job's shape and on nodes Slurm will give it.
-- Returns true, or nil, detail.
-- A job whose nodes the hook cannot check a placement against: Slurm refuses the job
-- ("Requested node configuration is not available", tested on the lab) when pinned nodes
-- lack its --constraint features or are outside its --reservation, and the hook cannot see
-- node features or reservation nodes; a --nodelist is the user's own choice of nodes. Such a
-- job is placed only when pald says it judged these restrictions against its Slurm view
-- (`site_checked`: pald's eligibility, docs/decisions/site-compat.md); a pald that does not
-- (an older one, or one that answers nonsense) gets the job passed. Returns the reason token,
-- or nil.
local PINNING_FIELDS = { { "features", "constraint" }, { "reservation", "reservation" },
  { "req_nodes", "nodelist" } }

local function unverifiable_pinning(job_desc)
  for _, field in ipairs(PINNING_FIELDS) do
    local value = job_desc[field[1]]
    if type(value) == "string" and value ~= "" then return field[2] end
  end
  return nil
end

local function placement_usable(job_desc, request, reply, spec, cfg, part_list, tick)
  local pinned = unverifiable_pinning(job_desc)
  if pinned and reply.site_checked ~= true then
    return nil, "pald did not check the job's " .. pinned, pinned
  end
  local ok, detail = M.check_fit(reply, M.job_shape(request.job, spec), cfg.max_gpus_per_node)
  if not ok then return nil, detail end
  tick()
  local wanted = string_or_nil(job_desc.req_nodes)
  if wanted and wanted ~= "" then
    local nodelist, why, ndetail = M.hostlist_compile(wanted, tick)
    if not nodelist then return nil, "--nodelist: " .. ndetail, HOSTLIST_PASS[why] end
    for _, name in ipairs(reply.nodes) do
      if not M.hostlist_match(nodelist, name) then
        return nil, name .. " is outside the job's --nodelist"
      end
    end
  end
  return M.nodes_allowed(reply.nodes, request.job.partition, string_or_nil(job_desc.exc_nodes),
    part_list, tick)
end

-- Raised by a run's deadline check (`tick`) to stop the checks after pald's reply.
local OVER_BUDGET = setmetatable({}, { __tostring = function() return "hook deadline" end })

-- What the hook does with pald's reply line: decode, check, write. Every step is linear in the
-- reply's and the job's field sizes; `tick` (the run's deadline check) is called between
-- steps and inside hostlist compiling, as a backstop.
-- `run_ms()`: the hook's time for this job so far (logged as run_ms: rtt_ms is the socket's
-- share of it).
local function use_reply(job_desc, spec, ctx, cfg, request, request_id, reply_line, took_ms, tick,
                         run_ms)
  local slurm = ctx.slurm
  local obj, jerr = json.decode(reply_line)
  if obj == nil then return pass(slurm, job_desc, "bad-reply", jerr, request_id, run_ms()) end
  tick()
  local reply, rwhy, rdetail = M.check_reply(obj)
  if not reply then return pass(slurm, job_desc, rwhy, rdetail, request_id, run_ms()) end
  tick()
  if reply.decision == "place" then
    local usable, udetail, why = placement_usable(job_desc, request, reply, spec, cfg,
      ctx.part_list, tick)
    if not usable then
      return pass(slurm, job_desc, why or "bad-reply", udetail, request_id, run_ms())
    end
  end
  local changes = M.changes_for(job_desc, reply, request_id, slurm)
  tick() -- the last check: the writes below are a handful of fields
  local warning = reply.warning and M.user_warning(reply.warning)
  if warning then log_user(slurm, warning) end
  local ok, werr = M.write_fields(job_desc, changes)
  if not ok then return pass(slurm, job_desc, "write-failed", werr, request_id, run_ms()) end
  pcall(function()
    log_info(slurm, string.format(
      "pal: %s class=%s req=%s nodes=%s gres=%s rank=%s rtt_ms=%.2f run_ms=%.2f",
      reply.decision, spec.class, request_id, reply.nodes and table.concat(reply.nodes, ",") or "-",
      reply.gres or "-", reply.rank and string.format("v%d", reply.rank) or "-", took_ms, run_ms()))
  end)
end

local function place(job_desc, spec, submit_uid, ctx)
  local slurm = ctx.slurm
  local cfg = M.config(ctx.getenv, ctx.overrides)
  local core = load_socket()
  local clock = ctx.now or (core and core.gettime) or os.time
  local started = clock()
  local request_id = M.new_request_id(started)
  -- The socket's deadline: the hook waits until then, and pald drops the request after it.
  cfg.deadline = started + cfg.timeout_ms / 1000
  -- The run's deadline, from the same start: the checks of a reply that came just before the
  -- socket's deadline get CHECK_BUDGET_MS more; past it the job passes (`hook-deadline`).
  local run_deadline = cfg.deadline + M.CHECK_BUDGET_MS / 1000
  local function tick()
    if clock() > run_deadline then error(OVER_BUDGET, 0) end
  end
  local function run_ms() return (clock() - started) * 1000 end
  local list, list_bytes = M.oversized_node_list(job_desc, cfg.max_job_list_bytes)
  if list then
    return pass(slurm, job_desc, "input-too-large:" .. list, string.format(
      "--%s of %d bytes, more than %d", list, list_bytes, cfg.max_job_list_bytes), request_id, run_ms())
  end
  local request = M.build_request(job_desc, spec, submit_uid, request_id,
    math.floor(cfg.deadline * 1000), ctx.part_list)
  local line = json.encode(request) .. "\n"
  if #line > M.MAX_LINE_BYTES then
    return pass(slurm, job_desc, "request-too-large", #line .. " bytes", request_id, run_ms())
  end
  local asked = clock() -- rtt_ms is the round trip alone, as before deadline_ms existed
  local reply_line, why, detail = (ctx.ask or M.ask)(line, cfg)
  local took_ms = (clock() - asked) * 1000
  if not reply_line then
    return pass(slurm, job_desc, why, detail, request_id, run_ms())
  end
  local ok, err = pcall(use_reply, job_desc, spec, ctx, cfg, request, request_id, reply_line,
    took_ms, tick, run_ms)
  if ok then return end
  if err ~= OVER_BUDGET then error(err, 0) end
  pass(slurm, job_desc, "hook-deadline", string.format("checks past %d ms",
    cfg.timeout_ms + M.CHECK_BUDGET_MS), request_id, run_ms())
end

-- A pal: job whose comment Slurm will refuse (longer than 1024 bytes: slurmctld checks the
-- length after this hook, "Pathname of a file, directory or other parameter too long"). The
-- hook says so, and does not ask pald: a decision for a job that never exists would be a
-- ghost in pald's records.
local function refuse_long_comment(slurm, job_desc, comment)
  log_user(slurm, string.format("pal: --comment is %d bytes; Slurm accepts at most %d, so it "
    .. "will refuse this job. Shorten the comment to submit it.", #comment, M.MAX_COMMENT_BYTES))
  pass(slurm, job_desc, "comment-too-long", #comment .. " bytes")
end

-- The whole submit-time path. ctx: slurm (the Slurm table), getenv (default os.getenv),
-- overrides (socket/timeout_ms/max_gpus_per_node), part_list (slurmctld's partitions for this
-- user, to check a placement against), and for tests ask/now. Always returns slurm.SUCCESS.
-- Every job, PAL's or not: a GPU model request on a site with per-slot types (M.model_changes).
local function rewrite_gpu_models(job_desc, ctx)
  local models = M.gpu_models(ctx.getenv, ctx.overrides)
  if not models then return end
  local changes, why = M.model_changes(job_desc, models)
  if not changes then
    log_info(ctx.slurm, "pal: GPU model request left as submitted: " .. M.safe_text(why, 200))
  elseif #changes > 0 then
    local ok, err = M.write_fields(job_desc, changes)
    local last = changes[#changes]
    log_info(ctx.slurm, ok and ("pal: GPU model request as constraint=" .. M.safe_text(last[2], 200))
      or ("pal: GPU model request left as submitted: " .. M.safe_text(tostring(err), 200)))
  end
end

function M.job_submit(job_desc, submit_uid, ctx)
  local slurm = ctx.slurm
  pcall(rewrite_gpu_models, job_desc, ctx)
  local comment = job_desc.comment
  local status, spec = M.parse_comment(comment)
  if status == "none" then
    local cfg = M.config(ctx.getenv, ctx.overrides)
    if not M.default_on(job_desc, ctx.part_list, cfg.default_on) then return slurm.SUCCESS end
    spec = {} -- no class: pald's rules give one
    comment = string_or_nil(comment) or ""
  end
  if #comment > M.MAX_COMMENT_BYTES then
    refuse_long_comment(slurm, job_desc, comment)
    return slurm.SUCCESS
  end
  if status == "error" then
    log_user(slurm, "pal: ignoring the pal: spec in --comment (" .. spec.message
      .. "); the job is submitted without PAL placement. Expected " .. M.GRAMMAR)
    pass(slurm, job_desc, "bad-comment:" .. spec.code, spec.message)
    return slurm.SUCCESS
  end
  local ok, err = pcall(function() place(job_desc, spec, submit_uid, ctx) end)
  if not ok then pass(slurm, job_desc, "lua-error", err) end
  return slurm.SUCCESS
end

return M
