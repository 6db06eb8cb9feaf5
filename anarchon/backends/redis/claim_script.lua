-- The 'script' comparison strategy: add the slot to the job's stream only if it was not
-- claimed within `window`; server clock for lateness.
-- KEYS: seen (zset slot -> claimed ms), stream, att, hist
-- ARGV: slot, owner, max_late_ms, window_ms
-- Returns {outcome, attempt, now}.
local seen, stream, att, hist = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local slot = int_arg(ARGV[1], 'slot')
local owner = text_arg(ARGV[2], 'owner')
local max_late = int_arg(ARGV[3], 'max_late_ms')
local window = int_arg(ARGV[4], 'window_ms')
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', seen, '-inf', '(' .. (now - window))
if now > slot + max_late then return {'late', 0, now} end
if redis.call('ZSCORE', seen, ARGV[1]) then return {'taken', 0, now} end
redis.call('ZADD', seen, now, ARGV[1])
redis.call('XADD', stream, 'MAXLEN', '~', 1000, '*', 'slot', ARGV[1], 'owner', owner)
start_record(att, hist, attempt_field(ARGV[1], 1),
             {slot = slot, inst = owner, att = 1, reason = 'scheduled', status = 'running',
              start = now})
return {'won', 1, now}
