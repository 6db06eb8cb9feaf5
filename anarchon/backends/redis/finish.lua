-- Record an attempt's outcome, fenced by (owner, attempt); trims history and old runs.
-- KEYS: runs, active, done, att, hist
-- ARGV: slot, owner, attempt, status, has_error (0/1), error, history_size,
--       history_ttl_ms (-1: none), retain_runs_ms (0: keep)
-- Returns 1 when recorded, 0 when stale.
local runs, active, done, att, hist = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
int_arg(ARGV[1], 'slot')
local owner = text_arg(ARGV[2], 'owner')
local attempt = int_arg(ARGV[3], 'attempt')
local status = one_of(ARGV[4], 'status', {'success', 'failure', 'interrupted'})
local err = nil
if int_arg(ARGV[5], 'has_error') == 1 then err = ARGV[6] end
local size = int_arg(ARGV[7], 'history_size')
local ttl = int_arg(ARGV[8], 'history_ttl_ms')
local retain = int_arg(ARGV[9], 'retain_runs_ms')
local now = now_ms()
local raw = redis.call('HGET', runs, ARGV[1])
if not raw then return 0 end
local state = cjson.decode(raw)
if state.s ~= 'running' or state.o ~= owner or state.a ~= attempt then return 0 end
state.s = status
redis.call('HSET', runs, ARGV[1], cjson.encode(state))
redis.call('ZREM', active, ARGV[1])
redis.call('ZADD', done, now, ARGV[1])
end_record(att, attempt_field(ARGV[1], attempt), status, now, err)
trim_history(att, hist, size, ttl, now)
if retain > 0 then
  local old = redis.call('ZRANGEBYSCORE', done, '-inf', '(' .. (now - retain))
  for _, member in ipairs(old) do redis.call('HDEL', runs, member) end
  redis.call('ZREMRANGEBYSCORE', done, '-inf', '(' .. (now - retain))
end
return 1
