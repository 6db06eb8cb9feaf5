-- Record an attempt's outcome, fenced by (owner, attempt); trims history and old runs.
-- KEYS and ARGV: see finish_lib.lua (prepended). Returns 1 when recorded, 0 when stale.
local f = finish_parse(ARGV, 0)
return finish_run(KEYS, 0, f, now_ms())
