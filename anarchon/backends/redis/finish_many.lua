-- Record several outcomes in one call, each exactly as finish.lua records it, in order.
-- KEYS: 5 per finish (see finish_lib.lua); ARGV: n, then one JSON array of strings
-- holding the 9 arguments of each finish in turn. Every finish is validated before the
-- first write. Returns {recorded_1, ..., recorded_n} (1 or 0).
local n = int_arg(ARGV[1], 'count')
local argv = cjson.decode(ARGV[2])
if n < 0 or #KEYS ~= n * FINISH_KEYS or #argv ~= n * FINISH_ARGS then
  error('anarchon: finish_many needs ' .. FINISH_KEYS .. ' keys and ' .. FINISH_ARGS ..
        ' arguments per finish')
end
local finishes = {}
for i = 1, n do finishes[i] = finish_parse(argv, (i - 1) * FINISH_ARGS) end
local now = now_ms()
local out = {}
for i = 1, n do out[i] = finish_run(KEYS, (i - 1) * FINISH_KEYS, finishes[i], now) end
return out
