-- Finish logic shared by finish.lua (one attempt) and finish_many.lua (a batch).
-- A finish is 9 ARGV values from position base + 1: slot, owner, attempt, status,
-- has_error (0/1), error, history_size, history_ttl_ms (-1: none), retain_runs_ms
-- (0: keep); its 5 KEYS from position kbase + 1: runs, active, done, att, hist.
local FINISH_ARGS = 9
local FINISH_KEYS = 5

-- Validate one finish (raises before any write); returns it as a table.
local function finish_parse(argv, base)
  int_arg(argv[base + 1], 'slot')
  local f = {
    slot_s = argv[base + 1],
    owner = text_arg(argv[base + 2], 'owner'),
    attempt = int_arg(argv[base + 3], 'attempt'),
    status = one_of(argv[base + 4], 'status', {'success', 'failure', 'interrupted'}),
    size = int_arg(argv[base + 7], 'history_size'),
    ttl = int_arg(argv[base + 8], 'history_ttl_ms'),
    retain = int_arg(argv[base + 9], 'retain_runs_ms'),
  }
  if int_arg(argv[base + 5], 'has_error') == 1 then f.err = argv[base + 6] end
  return f
end

-- Record one validated finish at store time now, fenced by (owner, attempt).
-- Returns 1 when recorded, 0 when stale.
local function finish_run(keys, kbase, f, now)
  local runs, active, done = keys[kbase + 1], keys[kbase + 2], keys[kbase + 3]
  local att, hist = keys[kbase + 4], keys[kbase + 5]
  local raw = redis.call('HGET', runs, f.slot_s)
  if not raw then return 0 end
  local state = cjson.decode(raw)
  if state.s ~= 'running' or state.o ~= f.owner or state.a ~= f.attempt then return 0 end
  state.s = f.status
  redis.call('HSET', runs, f.slot_s, cjson.encode(state))
  redis.call('ZREM', active, f.slot_s)
  redis.call('ZADD', done, now, f.slot_s)
  end_record(att, attempt_field(f.slot_s, f.attempt), f.status, now, f.err)
  trim_history(att, hist, f.size, f.ttl, now)
  if f.retain > 0 then
    local old = redis.call('ZRANGEBYSCORE', done, '-inf', '(' .. (now - f.retain))
    for _, member in ipairs(old) do redis.call('HDEL', runs, member) end
    redis.call('ZREMRANGEBYSCORE', done, '-inf', '(' .. (now - f.retain))
  end
  return 1
end
