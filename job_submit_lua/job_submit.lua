-- job_submit.lua for pal-slurm: the Slurm entry points, nothing else (logic: pal.lua).
--
-- Install: this file next to slurm.conf (Slurm looks for it there), pal.lua next to it or in
-- PAL_LUA_DIR / the Lua path, and JobSubmitPlugins=lua in slurm.conf. slurmctld reloads this
-- file when its mtime changes; after updating pal.lua alone, `touch job_submit.lua`.
-- slurmctld's environment: PAL_SOCKET or PAL_DAEMON_SOCKET (default /run/pal/pald.sock),
-- PAL_TIMEOUT_MS or PAL_DAEMON_HOOK_TIMEOUT_MS (default 150, never above 150),
-- PAL_MAX_GPUS_PER_NODE (default 16: the most GPUs any node has; a reply beyond it passes).
--
-- Fail open: if pal.lua cannot be loaded or raises, the job is accepted as submitted.

-- Site overrides of the environment, e.g. { socket = "/run/pal/pald.sock", timeout_ms = 80,
-- max_gpus_per_node = 8 }.
PAL_OVERRIDES = PAL_OVERRIDES or {}

local function add_lua_dir(dir)
  if dir and dir ~= "" then package.path = dir .. "/?.lua;" .. package.path end
end

do
  local source = debug.getinfo(1, "S").source or ""
  if source:sub(1, 1) == "@" then add_lua_dir(source:sub(2):match("^(.*)/[^/]*$")) end
  add_lua_dir(os.getenv("PAL_LUA_DIR"))
end

local loaded, pal = pcall(require, "pal")
if not loaded then
  pcall(slurm.log_error, "%s", "pal: cannot load pal.lua, PAL jobs pass untouched: " .. tostring(pal))
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not loaded then
    pcall(function()
      local comment = job_desc.comment
      if type(comment) == "string" and comment:find("pal:", 1, true) then
        local tag = "pal:pass=hook-not-loaded"
        local old = job_desc.admin_comment
        job_desc.admin_comment = (type(old) == "string" and old ~= "") and (old .. " " .. tag) or tag
        slurm.log_info("%s", "pal: pass reason=hook-not-loaded")
      end
    end)
    return slurm.SUCCESS
  end
  local ok, err = pcall(pal.job_submit, job_desc, submit_uid,
    { slurm = slurm, getenv = os.getenv, overrides = PAL_OVERRIDES, part_list = part_list })
  if not ok then pcall(slurm.log_info, "%s", "pal: hook error, job passes: " .. tostring(err)) end
  return slurm.SUCCESS
end

-- Updates (scontrol update by pald on held jobs, users' own) are Slurm's business, not ours.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
