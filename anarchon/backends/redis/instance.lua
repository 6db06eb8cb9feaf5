-- Store one instance's liveness record, stamped with the server's clock, and delete the
-- records expired for longer than keep_ms.
-- KEYS: records (hash id -> "<last seen ms>:<expires ms>:<JSON>"), expiry (zset id -> expires ms)
-- ARGV: id, record JSON, ttl_ms, keep_ms. Returns now.
local id = text_arg(ARGV[1], 'instance id')
local ttl = int_arg(ARGV[3], 'ttl_ms')
local keep = int_arg(ARGV[4], 'keep_ms')
local now = now_ms()
redis.call('HSET', KEYS[1], id, string.format('%d:%d:%s', now, now + ttl, ARGV[2]))
redis.call('ZADD', KEYS[2], now + ttl, id)
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - keep)
for _, d in ipairs(dead) do
  redis.call('HDEL', KEYS[1], d)
  redis.call('ZREM', KEYS[2], d)
end
return now
