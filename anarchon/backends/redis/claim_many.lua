-- Claim several runs in one call, each judged exactly as claim.lua judges it, in order,
-- at one store time. KEYS: 6 per request (see claim_lib.lua); ARGV: n, then one JSON
-- array of strings holding the 11 arguments of each request in turn (one argument
-- instead of 11 n: cheaper to send). Every request is validated before the first write.
-- Returns {now, outcome_1, attempt_1, stored_1, ..., outcome_n, attempt_n, stored_n}
-- (stored: the job's control version when 'stale', else 0).
local n = int_arg(ARGV[1], 'count')
local argv = cjson.decode(ARGV[2])
if n < 0 or #KEYS ~= n * CLAIM_KEYS or #argv ~= n * CLAIM_ARGS then
  error('anarchon: claim_many needs ' .. CLAIM_KEYS .. ' keys and ' .. CLAIM_ARGS ..
        ' arguments per request')
end
local requests = {}
for i = 1, n do requests[i] = claim_parse(argv, (i - 1) * CLAIM_ARGS) end
local now = now_ms()
local out = {now}
for i = 1, n do
  local outcome, attempt, stored = claim_run(KEYS, (i - 1) * CLAIM_KEYS, requests[i], now)
  out[3 * i - 1] = outcome
  out[3 * i] = attempt
  out[3 * i + 1] = stored or 0
end
return out
