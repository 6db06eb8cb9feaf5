-- Record slots given up (late, overlap) in history, at most one record per slot (attempt
-- field "<slot>:0"): an overlap skip always, a late one only if the slot has no run (see
-- anarchon.backends.skips). KEYS: 3 per skip (its job's runs, att, skips: the skip
-- records' own zset, bounded apart from the attempts' hist); ARGV: n, then
-- one JSON array of strings holding the 5 arguments of each skip in turn: slot, owner,
-- reason, history_size, history_ttl_ms (-1: none). Every skip is validated before the
-- first write. Returns how many records were written.
local n = int_arg(ARGV[1], 'count')
local argv = cjson.decode(ARGV[2])
if n < 0 or #KEYS ~= n * 3 or #argv ~= n * 5 then
  error('anarchon: skip needs 3 keys and 5 arguments per skip')
end
local skips = {}
for i = 1, n do
  local b = (i - 1) * 5
  int_arg(argv[b + 1], 'slot')
  skips[i] = {slot = tonumber(argv[b + 1]), slot_s = argv[b + 1],
              owner = text_arg(argv[b + 2], 'owner'),
              reason = one_of(argv[b + 3], 'reason', {'late', 'overlap'}),
              size = int_arg(argv[b + 4], 'history_size'),
              ttl = int_arg(argv[b + 5], 'history_ttl_ms')}
end
local now = now_ms()
local written = 0
for i = 1, n do
  local s = skips[i]
  local runs, att, skipped = KEYS[(i - 1) * 3 + 1], KEYS[(i - 1) * 3 + 2], KEYS[(i - 1) * 3 + 3]
  local field = attempt_field(s.slot_s, 0)
  local ran = s.reason == 'late' and redis.call('HEXISTS', runs, s.slot_s) == 1
  if not ran and redis.call('HEXISTS', att, field) == 0 then
    start_record(att, skipped, field, {slot = s.slot, inst = s.owner, att = 0,
                                    reason = s.reason, status = 'skipped', start = now,
                                    fin = now})
    written = written + 1
  end
  trim_history(att, skipped, s.size, s.ttl, now)
end
return written
