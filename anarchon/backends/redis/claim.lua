-- Claim one attempt of a slot (lease strategy). See ClaimRequest in backends/base.py
-- and claim_lib.lua (prepended) for KEYS and ARGV. Returns {outcome, attempt, now,
-- stored control version ('stale'; else 0)}.
local request = claim_parse(ARGV, 0)
local now = now_ms()
local outcome, attempt, stored = claim_run(KEYS, 0, request, now)
return {outcome, attempt, now, stored or 0}
