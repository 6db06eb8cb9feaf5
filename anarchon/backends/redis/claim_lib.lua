-- Claim logic shared by claim.lua (one run) and claim_many.lua (a batch).
-- See ClaimRequest in backends/base.py for the rules.
-- A request is 11 ARGV values from position base + 1: slot, owner, reason, lease_ms,
-- max_late_ms, max_attempts, overlap, catch_up_ms, expected_attempt, since_ms (catch-up:
-- when the job was first seen; takeover: since when the server is up; -1 unknown),
-- version (the control version the claim was planned from); its 6 KEYS from position
-- kbase + 1: runs (hash slot -> state), active (zset slot -> lease_until), done (zset
-- slot -> finished ms), att, hist, control (hash: v -> the job's control version).
local CLAIM_ARGS = 11
local CLAIM_KEYS = 6

-- Validate one request (raises before any write); returns it as a table.
local function claim_parse(argv, base)
  local c = {
    slot = int_arg(argv[base + 1], 'slot'),
    slot_s = tostring(argv[base + 1]),
    owner = text_arg(argv[base + 2], 'owner'),
    reason = one_of(argv[base + 3], 'reason', {'scheduled', 'catch-up', 'takeover'}),
    lease = int_arg(argv[base + 4], 'lease_ms'),
    max_late = int_arg(argv[base + 5], 'max_late_ms'),
    max_attempts = int_arg(argv[base + 6], 'max_attempts'),
    overlap = one_of(argv[base + 7], 'overlap', {'skip', 'allow'}),
    catch_up = int_arg(argv[base + 8], 'catch_up_ms'),
    expected = int_arg(argv[base + 9], 'expected_attempt'),
    since = int_arg(argv[base + 10], 'since_ms'),
    version = int_arg(argv[base + 11], 'version'),
  }
  if c.lease <= 0 then error('anarchon: lease_ms must be positive') end
  return c
end

-- Judge and record one validated request at store time now; returns outcome, attempt and
-- (for 'stale') the job's stored control version, else 0.
local function claim_run(keys, kbase, c, now)
  local runs, active, done = keys[kbase + 1], keys[kbase + 2], keys[kbase + 3]
  local att, hist, control = keys[kbase + 4], keys[kbase + 5], keys[kbase + 6]
  local slot, slot_s = c.slot, c.slot_s
  local raw = redis.call('HGET', runs, slot_s)

  local function interrupt(member, state, why_now)
    state.s = 'interrupted'
    redis.call('HSET', runs, member, cjson.encode(state))
    redis.call('ZREM', active, member)
    redis.call('ZADD', done, why_now, member)
    end_record(att, attempt_field(member, state.a), 'interrupted', why_now, nil)
  end

  local function begin(attempt, counted)
    local state = {o = c.owner, a = attempt, c = counted, h = 0, l = now + c.lease,
                   s = 'running', r = c.reason}
    redis.call('HSET', runs, slot_s, cjson.encode(state))
    redis.call('ZADD', active, state.l, slot_s)
    start_record(att, hist, attempt_field(slot_s, attempt),
                 {slot = slot, inst = c.owner, att = attempt, reason = c.reason,
                  status = 'running', start = now})
    return 'won', attempt
  end

  if c.reason == 'takeover' then
    if not raw then return 'taken', 0 end
    local state = cjson.decode(raw)
    if state.s ~= 'running' or state.a ~= c.expected or state.l > now then
      return 'taken', 0
    end
    -- a lease that lapsed while the server was down: its runner may renew or finish first
    -- (a run its runner handed over is free at once: nobody will renew it)
    if state.h ~= 1 and now < c.since + c.lease then return 'taken', 0 end
    end_record(att, attempt_field(slot_s, state.a), 'interrupted', now, nil)
    local counted = state.c
    if state.h ~= 1 then
      if counted >= c.max_attempts then
        interrupt(slot_s, state, now)
        return 'exhausted', 0
      end
      counted = counted + 1
    end
    return begin(state.a + 1, counted)
  end

  -- a claim from an instance whose clock runs ahead: nothing is written, it may come again
  if slot - now > EARLY_MS then return 'early', 0 end

  -- the version fence: planned from an older control record than the stored one
  local stored = tonumber(redis.call('HGET', control, 'v') or '0')
  if stored > c.version then return 'stale', 0, stored end

  if c.reason == 'scheduled' then
    if now > slot + c.max_late then return 'late', 0 end
  else
    if slot <= now - c.catch_up or c.since < 0 or c.since > slot then
      return 'late', 0
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
    if cjson.decode(raw).s == 'skipped' then return 'overlap', 0 end
    return 'taken', 0
  end

  if c.overlap == 'skip' then
    local live = redis.call('ZRANGEBYSCORE', active, '(' .. now, '+inf')
    for _, member in ipairs(live) do
      if tonumber(member) < slot then
        redis.call('HSET', runs, slot_s, cjson.encode({s = 'skipped', a = 0}))
        redis.call('ZADD', done, now, slot_s)
        return 'overlap', 0
      end
    end
  end

  return begin(1, 1)
end
