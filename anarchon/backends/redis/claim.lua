-- Claim one attempt of a slot (lease strategy). See ClaimRequest in backends/base.py.
-- KEYS: runs (hash slot -> state), active (zset slot -> lease_until), done (zset
--       slot -> finished ms), att, hist
-- ARGV: slot, owner, reason, lease_ms, max_late_ms, max_attempts, overlap, catch_up_ms,
--       expected_attempt, first_seen_ms (-1 unknown)
-- Returns {outcome, attempt, now}.
local runs, active, done, att, hist = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local slot = int_arg(ARGV[1], 'slot')
local owner = text_arg(ARGV[2], 'owner')
local reason = one_of(ARGV[3], 'reason', {'scheduled', 'catch-up', 'takeover'})
local lease = int_arg(ARGV[4], 'lease_ms')
local max_late = int_arg(ARGV[5], 'max_late_ms')
local max_attempts = int_arg(ARGV[6], 'max_attempts')
local overlap = one_of(ARGV[7], 'overlap', {'skip', 'allow'})
local catch_up = int_arg(ARGV[8], 'catch_up_ms')
local expected = int_arg(ARGV[9], 'expected_attempt')
local first_seen = int_arg(ARGV[10], 'first_seen_ms')
if lease <= 0 then error('anarchon: lease_ms must be positive') end

local now = now_ms()
local slot_s = tostring(ARGV[1])
local raw = redis.call('HGET', runs, slot_s)

local function interrupt(member, state, why_now)
  state.s = 'interrupted'
  redis.call('HSET', runs, member, cjson.encode(state))
  redis.call('ZREM', active, member)
  redis.call('ZADD', done, why_now, member)
  end_record(att, attempt_field(member, state.a), 'interrupted', why_now, nil)
end

local function begin(attempt, counted)
  local state = {o = owner, a = attempt, c = counted, h = 0, l = now + lease,
                 s = 'running', r = reason}
  redis.call('HSET', runs, slot_s, cjson.encode(state))
  redis.call('ZADD', active, state.l, slot_s)
  start_record(att, hist, attempt_field(slot_s, attempt),
               {slot = slot, inst = owner, att = attempt, reason = reason,
                status = 'running', start = now})
  return {'won', attempt, now}
end

if reason == 'takeover' then
  if not raw then return {'taken', 0, now} end
  local state = cjson.decode(raw)
  if state.s ~= 'running' or state.a ~= expected or state.l > now then
    return {'taken', 0, now}
  end
  end_record(att, attempt_field(slot_s, state.a), 'interrupted', now, nil)
  local counted = state.c
  if state.h ~= 1 then
    if counted >= max_attempts then
      interrupt(slot_s, state, now)
      return {'exhausted', 0, now}
    end
    counted = counted + 1
  end
  return begin(state.a + 1, counted)
end

if reason == 'scheduled' then
  if now > slot + max_late then return {'late', 0, now} end
else
  if slot <= now - catch_up or first_seen < 0 or first_seen > slot then
    return {'late', 0, now}
  end
end

-- earlier runs whose lease expired are over: the new slot replaces them
local expired = redis.call('ZRANGEBYSCORE', active, '-inf', now)
for _, member in ipairs(expired) do
  if tonumber(member) < slot then
    local other = redis.call('HGET', runs, member)
    if other then
      interrupt(member, cjson.decode(other), now)
    else
      redis.call('ZREM', active, member)
    end
  end
end

if raw then
  if cjson.decode(raw).s == 'skipped' then return {'overlap', 0, now} end
  return {'taken', 0, now}
end

if overlap == 'skip' then
  local live = redis.call('ZRANGEBYSCORE', active, '(' .. now, '+inf')
  for _, member in ipairs(live) do
    if tonumber(member) < slot then
      redis.call('HSET', runs, slot_s, cjson.encode({s = 'skipped', a = 0}))
      redis.call('ZADD', done, now, slot_s)
      return {'overlap', 0, now}
    end
  end
end

return begin(1, 1)
