-- Register jobs, keeping each job's first-seen time.
-- KEYS: jobs (hash name -> JSON {kind, schedule, first_seen, seen: last registered};
-- field '' -> key format)
-- ARGV: key format, name_1, kind_1, schedule_1, name_2, ...
-- Returns {'ok', first_seen_1, first_seen_2, ...}, or {'format', found} (nothing written)
-- when the prefix holds keys of another format (jobs without a format field: format 1).
if (#ARGV - 1) % 3 ~= 0 then error('anarchon: register needs name, kind, schedule triples') end
for i = 2, #ARGV, 3 do text_arg(ARGV[i], 'job name') end
local found = redis.call('HGET', KEYS[1], '')
if not found and redis.call('HLEN', KEYS[1]) > 0 then found = '1' end
if found and found ~= ARGV[1] then return {'format', found} end
redis.call('HSET', KEYS[1], '', ARGV[1])
local now = now_ms()
local out = {'ok'}
for i = 2, #ARGV, 3 do
  local first = now
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local ok, old = pcall(cjson.decode, raw)
    if ok and type(old) == 'table' and tonumber(old.first_seen) then first = tonumber(old.first_seen) end
  end
  redis.call('HSET', KEYS[1], ARGV[i],
             cjson.encode({kind = ARGV[i + 1], schedule = ARGV[i + 2], first_seen = first,
                           seen = now}))
  table.insert(out, first)
end
return out
