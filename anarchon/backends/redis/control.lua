-- Runtime control (see backends/control.py and redis/control.py), by operation ARGV[1].
-- A job's record lives in its own hash tag (KEYS control: hash v -> version, t -> text;
-- changes: list of entries, newest first), read by the claims' version fence; the
-- namespace index (hash name -> "<version>:<text>"), the generation and the handler
-- offers live in the trigger list's slot.
--
-- 'job'    KEYS control, changes; ARGV 'job', expected, text, entry, log_size
--          compare-and-set of the job's record -> {new version or 0, version, text}
--          (the stored version and text after the call)
-- 'index'  KEYS index, generation; ARGV 'index', name, version, text, channel, message
--          copy a job's record into the index unless it holds that version or a newer
--          one; then raise the generation and publish -> 1, or 0 (nothing written)
-- 'change' KEYS control, changes, index, generation; ARGV 'change', name, expected, text,
--          entry, log_size, channel, message: 'job' then 'index' in one call (a single
--          server) -> like 'job'
-- 'read'   KEYS index, generation, offers; ARGV 'read', offer_ttl_ms
--          -> {generation, {name, "<version>:<text>", ...}, {instance, handlers, ...}}
--          (offers written within offer_ttl_ms of the server's time)
-- 'offer'  KEYS offers; ARGV 'offer', instance, handlers (JSON list; '' withdraws),
--          offer_ttl_ms: stamp the offer with the server's time, drop expired ones -> 1
local op = one_of(ARGV[1], 'operation', {'job', 'index', 'change', 'read', 'offer'})

local function stamp_of(raw)
  return tonumber(string.match(raw, '^(%d+):')) or 0
end

local function job_cas(control, changes, expected, text, entry, size)
  local stored = tonumber(redis.call('HGET', control, 'v') or '0')
  if stored ~= expected then
    return {0, stored, redis.call('HGET', control, 't') or ''}
  end
  local version = expected + 1
  redis.call('HSET', control, 'v', version, 't', text)
  redis.call('LPUSH', changes, entry)
  redis.call('LTRIM', changes, 0, size - 1)
  return {version, version, text}
end

local function index_put(index, generation, name, version, text, channel, message)
  if version <= 0 then return 0 end
  local raw = redis.call('HGET', index, name)
  if raw and stamp_of(raw) >= version then return 0 end
  redis.call('HSET', index, name, tostring(version) .. ':' .. text)
  redis.call('INCR', generation)
  -- PUBLISH takes no key: fine in a script on a Cluster too
  if channel ~= '' then redis.call('PUBLISH', channel, message) end
  return 1
end

if op == 'job' or op == 'change' then
  local base = op == 'job' and 1 or 2
  local expected = int_arg(ARGV[base + 1], 'expected_version')
  local text, entry = ARGV[base + 2], ARGV[base + 3]
  local size = int_arg(ARGV[base + 4], 'log_size')
  if text == nil or entry == nil or expected < 0 or size <= 0 then
    error('anarchon: bad control change arguments')
  end
  local result = job_cas(KEYS[1], KEYS[2], expected, text, entry, size)
  if op == 'change' then
    -- on a refusal too: the index then holds the job's record (it always does here)
    index_put(KEYS[3], KEYS[4], text_arg(ARGV[2], 'job name'), result[2], result[3],
              ARGV[7] or '', ARGV[8] or '')
  end
  return result
end

if op == 'index' then
  local name = text_arg(ARGV[2], 'job name')
  local version = int_arg(ARGV[3], 'version')
  if ARGV[4] == nil then error('anarchon: control text missing') end
  return index_put(KEYS[1], KEYS[2], name, version, ARGV[4], ARGV[5] or '', ARGV[6] or '')
end

local ttl = int_arg(ARGV[#ARGV], 'offer_ttl_ms')
local now = now_ms()

if op == 'read' then
  local generation = tonumber(redis.call('GET', KEYS[2]) or '0')
  local live = {}
  local offers = redis.call('HGETALL', KEYS[3])
  for i = 1, #offers, 2 do
    if stamp_of(offers[i + 1]) > now - ttl then
      table.insert(live, offers[i])
      table.insert(live, offers[i + 1])
    end
  end
  return {generation, redis.call('HGETALL', KEYS[1]), live}
end

-- 'offer'
local instance = text_arg(ARGV[2], 'instance id')
local handlers = ARGV[3]
local offers = redis.call('HGETALL', KEYS[1])
for i = 1, #offers, 2 do
  if stamp_of(offers[i + 1]) <= now - ttl then redis.call('HDEL', KEYS[1], offers[i]) end
end
if handlers == nil or handlers == '' then
  redis.call('HDEL', KEYS[1], instance)
else
  redis.call('HSET', KEYS[1], instance, tostring(now) .. ':' .. handlers)
end
return 1
