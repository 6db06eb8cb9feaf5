-- Renew held leases and read watched runs, in one call.
-- KEYS: runs_1, active_1, runs_2, active_2, ... (one pair per job)
-- ARGV: owner, lease_ms, n_held, then n_held x (job index, slot, attempt),
--       then the rest x (job index, slot) for watched runs.
-- Returns {now, {lost held positions (1-based)}, {watched state JSON or false},
--          {positions of lost held runs with no record at all}}.
local owner = text_arg(ARGV[1], 'owner')
local lease = int_arg(ARGV[2], 'lease_ms')
local n_held = int_arg(ARGV[3], 'n_held')
local rest = #ARGV - 3 - 3 * n_held
if lease <= 0 or n_held < 0 or rest < 0 or rest % 2 ~= 0 then
  error('anarchon: bad heartbeat arguments')
end
local function job_keys(index)
  local i = int_arg(index, 'job index')
  if i < 1 or 2 * i > #KEYS then error('anarchon: job index out of range') end
  return KEYS[2 * i - 1], KEYS[2 * i]
end
for h = 1, n_held do
  job_keys(ARGV[3 + 3 * h - 2]); int_arg(ARGV[3 + 3 * h - 1], 'slot')
  int_arg(ARGV[3 + 3 * h], 'attempt')
end

local now = now_ms()
local lost = {}
local gone = {}
for h = 1, n_held do
  local runs, active = job_keys(ARGV[3 + 3 * h - 2])
  local slot_s = ARGV[3 + 3 * h - 1]
  local attempt = tonumber(ARGV[3 + 3 * h])
  local raw = redis.call('HGET', runs, slot_s)
  local ok = false
  if raw then
    local state = cjson.decode(raw)
    if state.s == 'running' and state.o == owner and state.a == attempt and state.h ~= 1 then
      state.l = now + lease
      redis.call('HSET', runs, slot_s, cjson.encode(state))
      redis.call('ZADD', active, state.l, slot_s)
      ok = true
    end
  end
  if not ok then table.insert(lost, h) end
  if not raw then table.insert(gone, h) end
end

local watched = {}
local base = 3 + 3 * n_held
for w = 1, rest / 2 do
  local runs = job_keys(ARGV[base + 2 * w - 1])
  local raw = redis.call('HGET', runs, ARGV[base + 2 * w])
  table.insert(watched, raw or false)
end
return {now, lost, watched, gone}
