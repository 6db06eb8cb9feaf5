-- Store a manual-run request, unless (exclusive) a live request of the job is pending:
-- the check and the RPUSH are one script, so two requesters never both store one.
-- KEYS: triggers (list of JSON {id, job, data, at})
-- ARGV: id, job, has_data (0/1), data, exclusive (0/1), ttl_ms
-- Returns 'pending' (refused) or 'ok'.
local id = text_arg(ARGV[1], 'id')
local job = text_arg(ARGV[2], 'job')
local now = now_ms()
if int_arg(ARGV[5], 'exclusive') == 1 then
  local oldest = now - int_arg(ARGV[6], 'ttl_ms')
  for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    local ok, request = pcall(cjson.decode, raw)
    if ok and type(request) == 'table' and request.job == job
        and (type(request.at) ~= 'number' or request.at >= oldest) then
      return 'pending'
    end
  end
end
local request = {id = id, job = job, at = now}
if int_arg(ARGV[3], 'has_data') == 1 then request.data = ARGV[4] end
redis.call('RPUSH', KEYS[1], cjson.encode(request))
return 'ok'
