-- Start or finish a manual run's record, or finish a claim-only attempt (fenced by owner).
-- KEYS: att, hist
-- ARGV: 'start', field, owner, slot, attempt, reason
--    or 'finish', field, owner ('' = any), status, has_error, error, size, ttl_ms
-- Returns 1, or 0 when a fenced finish found another owner or no running record.
local att, hist = KEYS[1], KEYS[2]
local op = one_of(ARGV[1], 'operation', {'start', 'finish'})
local field = text_arg(ARGV[2], 'field')
if op == 'start' then
  local owner = text_arg(ARGV[3], 'owner')
  local slot = int_arg(ARGV[4], 'slot')
  local attempt = int_arg(ARGV[5], 'attempt')
  local reason = one_of(ARGV[6], 'reason', {'manual', 'scheduled'})
  local now = now_ms()
  start_record(att, hist, field, {slot = slot, inst = owner, att = attempt, reason = reason,
                                  status = 'running', start = now,
                                  manual = (reason == 'manual')})
  return 1
end
local owner = ARGV[3]
local status = one_of(ARGV[4], 'status', {'success', 'failure', 'interrupted'})
local err = nil
if int_arg(ARGV[5], 'has_error') == 1 then err = ARGV[6] end
local size = int_arg(ARGV[7], 'history_size')
local ttl = int_arg(ARGV[8], 'history_ttl_ms')
local now = now_ms()
local raw = redis.call('HGET', att, field)
if not raw then return 0 end
if owner ~= '' and cjson.decode(raw).inst ~= owner then return 0 end
local done = end_record(att, field, status, now, err)
trim_history(att, hist, size, ttl, now)
if done then return 1 end
return 0
