-- A site's own job_submit.lua that keeps its rules and calls pal-slurm's hook (pal.lua).
--
-- Put pal.lua next to this file (or in PAL_LUA_DIR / the Lua path). The site's rules run
-- first and may refuse a job as before; pal.lua runs last, on the job as the site's rules left
-- it, and never refuses one (a failure of ours leaves the job as it was). To stop PAL without
-- touching this file: `palctl pause`; to remove it, delete the marked lines.

PAL_OVERRIDES = PAL_OVERRIDES or {} -- pal-slurm

do -- pal-slurm: find pal.lua next to this file, or in PAL_LUA_DIR
  local function add(dir)
    if dir and dir ~= "" then package.path = dir .. "/?.lua;" .. package.path end
  end
  local source = debug.getinfo(1, "S").source or ""
  if source:sub(1, 1) == "@" then add(source:sub(2):match("^(.*)/[^/]*$")) end
  add(os.getenv("PAL_LUA_DIR"))
end
local pal_loaded, pal = pcall(require, "pal") -- pal-slurm

-- The site's own rules (examples): a job without a time limit gets one hour; a job without an
-- account is refused with a message.
local function site_rules(job_desc, part_list, submit_uid)
  if job_desc.time_limit == nil or job_desc.time_limit == slurm.NO_VAL then
    job_desc.time_limit = 60
  end
  if job_desc.account == nil or job_desc.account == "" then
    slurm.log_user("%s", "site: please give --account")
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local rc = site_rules(job_desc, part_list, submit_uid)
  if rc ~= slurm.SUCCESS then return rc end
  if pal_loaded then -- pal-slurm: last, and it never refuses
    local ok, err = pcall(pal.job_submit, job_desc, submit_uid,
      { slurm = slurm, getenv = os.getenv, overrides = PAL_OVERRIDES, part_list = part_list })
    if not ok then pcall(slurm.log_info, "%s", "pal: hook error, job passes: " .. tostring(err)) end
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
