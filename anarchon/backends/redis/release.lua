-- Hand a run over: expire its lease now and mark it handed over (fenced).
-- KEYS: runs, active, att   ARGV: slot, owner, attempt[, channel, message]   Returns 1 or 0.
-- With a channel, the message is published once the run is released, so backups wake up
-- at once (PUBLISH takes no key: fine in a script on a Cluster too).
local runs, active, att = KEYS[1], KEYS[2], KEYS[3]
int_arg(ARGV[1], 'slot')
local owner = text_arg(ARGV[2], 'owner')
local attempt = int_arg(ARGV[3], 'attempt')
local now = now_ms()
local raw = redis.call('HGET', runs, ARGV[1])
if not raw then return 0 end
local state = cjson.decode(raw)
if state.s ~= 'running' or state.o ~= owner or state.a ~= attempt then return 0 end
state.l = now
state.h = 1
redis.call('HSET', runs, ARGV[1], cjson.encode(state))
redis.call('ZADD', active, now, ARGV[1])
end_record(att, attempt_field(ARGV[1], attempt), 'interrupted', now, nil)
if ARGV[4] and ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5] or '') end
return 1
