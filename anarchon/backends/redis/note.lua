-- Set the detail text of a running attempt's record; the run stays running (fenced).
-- KEYS: runs, att   ARGV: slot, owner, attempt, text   Returns 1, or 0 when the attempt is
-- not (or no longer) this owner's running attempt: then nothing is written.
local runs, att = KEYS[1], KEYS[2]
int_arg(ARGV[1], 'slot')
local owner = text_arg(ARGV[2], 'owner')
local attempt = int_arg(ARGV[3], 'attempt')
local note = ARGV[4]
if note == nil then error('anarchon: note text missing') end
local raw = redis.call('HGET', runs, ARGV[1])
if not raw then return 0 end
local state = cjson.decode(raw)
if state.s ~= 'running' or state.o ~= owner or state.a ~= attempt or state.h == 1 then
  return 0
end
local field = attempt_field(ARGV[1], attempt)
local rec_raw = redis.call('HGET', att, field)
if not rec_raw then return 0 end
local rec = cjson.decode(rec_raw)
if rec.status ~= 'running' then return 0 end
rec.err = note
redis.call('HSET', att, field, cjson.encode(rec))
return 1
