-- Shared helpers, prepended to every anarchon script (see connection.py).
-- Numbers are epoch milliseconds; run states and attempt records are cjson objects.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function int_arg(value, what)
  local n = tonumber(value)
  if n == nil or n ~= math.floor(n) then
    error('anarchon: ' .. what .. ' must be an integer, got ' .. tostring(value))
  end
  return n
end

local function text_arg(value, what)
  if value == nil or value == '' then error('anarchon: ' .. what .. ' must not be empty') end
  return value
end

local function one_of(value, what, allowed)
  for _, a in ipairs(allowed) do if a == value then return value end end
  error('anarchon: bad ' .. what .. ' ' .. tostring(value))
end

-- attempt records: hash <att> field -> JSON, zset <hist> field -> started ms
local function start_record(att, hist, field, rec)
  redis.call('HSET', att, field, cjson.encode(rec))
  redis.call('ZADD', hist, rec.start, field)
end

local function end_record(att, field, status, now, err)
  local raw = redis.call('HGET', att, field)
  if not raw then return false end
  local rec = cjson.decode(raw)
  if rec.status ~= 'running' then return false end
  rec.status = status
  rec.fin = now
  rec.err = err  -- the outcome's error replaces a note (nil: none, e.g. success)
  redis.call('HSET', att, field, cjson.encode(rec))
  return true
end

-- drop finished records older than ttl, then the oldest finished ones beyond size
local function trim_history(att, hist, size, ttl, now)
  local function drop(fields)
    for _, f in ipairs(fields) do
      local raw = redis.call('HGET', att, f)
      local keep = false
      if raw then keep = cjson.decode(raw).status == 'running' end
      if not keep then
        redis.call('HDEL', att, f)
        redis.call('ZREM', hist, f)
      end
    end
  end
  if ttl >= 0 then drop(redis.call('ZRANGEBYSCORE', hist, '-inf', '(' .. (now - ttl))) end
  local n = redis.call('ZCARD', hist)
  if n > size then drop(redis.call('ZRANGE', hist, 0, n - size - 1)) end
end

local function attempt_field(slot, attempt)
  return tostring(slot) .. ':' .. tostring(attempt)
end
