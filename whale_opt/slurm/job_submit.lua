--[[
whale_opt job_submit plugin: every job that asks for GPUs arrives held.

Slurm then never places a GPU job by itself: `whale-opt slurm` reads the
held jobs (priority 0), decides where each one runs, pins it there with
`scontrol update JobId=N NodeList=... StartTime=now` and releases it.
Jobs without GPUs pass through untouched: Slurm schedules them as usual.

Install: copy this file next to slurm.conf (as job_submit.lua) and set
`JobSubmitPlugins=lua` in slurm.conf (see docs/SLURM.md in whale_opt).
--]]

local GPU_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }

local function asks_for_gpus(job_desc)
   for _, name in ipairs(GPU_FIELDS) do
      local value = job_desc[name]
      if value ~= nil and string.find(value, "gpu", 1, true) then
         return true
      end
   end
   return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if asks_for_gpus(job_desc) then
      job_desc.priority = 0
      slurm.log_info("whale_opt: job %s from uid %u held for placement",
                     tostring(job_desc.name), submit_uid)
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
