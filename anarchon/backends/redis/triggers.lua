-- Take the pending trigger requests for some jobs; each request is taken once. Requests
-- older than ttl_ms are dropped unrun (a request without "at", stored by an older
-- anarchon, counts as live). Also reads the namespace's control generation: an
-- instance's whole poll is this one call.
-- KEYS: triggers (list of JSON {id, job, data, at}), generation (integer; same slot)
-- ARGV: ttl_ms, then the job names this instance runs
-- Returns {generation, {taken requests (JSON), oldest first}}; a GET and an LLEN when idle.
local generation = tonumber(redis.call('GET', KEYS[2]) or '0')
if redis.call('LLEN', KEYS[1]) == 0 then return {generation, {}} end
local oldest = now_ms() - int_arg(ARGV[1], 'ttl_ms')
local wanted = {}
for i = 2, #ARGV do wanted[ARGV[i]] = true end
local taken, kept, dropped = {}, {}, 0
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local ok, request = pcall(cjson.decode, raw)
  if ok and type(request) == 'table' and type(request.at) == 'number'
      and request.at < oldest then
    dropped = dropped + 1
  elseif ok and type(request) == 'table' and wanted[request.job] then
    table.insert(taken, raw)
  else
    table.insert(kept, raw)
  end
end
if #taken > 0 or dropped > 0 then
  redis.call('DEL', KEYS[1])
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(kept, i, math.min(i + 999, #kept)))
  end
end
return {generation, taken}
