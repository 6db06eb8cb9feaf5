-- Compare-and-set of one shared value (read_value / swap_value).
-- KEYS: the job's values hash. ARGV: field, has_expected ('0' or '1'), expected, value.
-- Returns 1 when the value was stored, 0 when the current value differs.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '0' then
  if current then return 0 end
elseif current ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return 1
