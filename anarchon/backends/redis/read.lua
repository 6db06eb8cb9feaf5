-- Read-only: history records, or the unfinished runs of several jobs.
-- 'history': KEYS att, hist, skips; ARGV 'history', count -> {JSON, ...}: the newest
--   count attempts and the newest count skip records (the caller merges them)
-- 'unfinished': KEYS runs_1, active_1, ...; ARGV 'unfinished'
--   -> {now, {{job index, slot, state JSON}, ...}}
local op = one_of(ARGV[1], 'operation', {'history', 'unfinished'})
if op == 'history' then
  local count = int_arg(ARGV[2], 'count')
  if count <= 0 then return {} end
  local fields = redis.call('ZREVRANGE', KEYS[2], 0, count - 1)
  if KEYS[3] then
    for _, f in ipairs(redis.call('ZREVRANGE', KEYS[3], 0, count - 1)) do
      table.insert(fields, f)
    end
  end
  if #fields == 0 then return {} end
  local out = {}
  local raws = redis.call('HMGET', KEYS[1], unpack(fields))
  for i = 1, #fields do if raws[i] then table.insert(out, raws[i]) end end
  return out
end
local now = now_ms()
local out = {}
for i = 1, #KEYS / 2 do
  local members = redis.call('ZRANGE', KEYS[2 * i], 0, -1)
  for _, member in ipairs(members) do
    local raw = redis.call('HGET', KEYS[2 * i - 1], member)
    if raw then table.insert(out, {i, member, raw}) end
  end
end
return {now, out}
