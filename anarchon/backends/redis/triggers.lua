-- Take the pending trigger requests for some jobs; each request is taken once.
-- KEYS: triggers (list of JSON {id, job, data})
-- ARGV: the job names this instance runs
-- Returns the taken requests (JSON), oldest first; {} at the cost of one LLEN when idle.
if redis.call('LLEN', KEYS[1]) == 0 then return {} end
local wanted = {}
for i = 1, #ARGV do wanted[ARGV[i]] = true end
local taken, kept = {}, {}
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local ok, request = pcall(cjson.decode, raw)
  if ok and type(request) == 'table' and wanted[request.job] then
    table.insert(taken, raw)
  else
    table.insert(kept, raw)
  end
end
if #taken > 0 then
  redis.call('DEL', KEYS[1])
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(kept, i, math.min(i + 999, #kept)))
  end
end
return taken
