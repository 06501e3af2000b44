--[[
  fail: record the operation as FAILED (terminal): attempts exhausted or an error marked non-retryable.
  Later claims return FAILED until the record's retention lapses.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the failed record
  ARGV[3]  error           short description of the error (opaque string)
  ARGV[4]  abandoned       '1': the holder gives up on a handler that may still be running (handlerTimeoutMs
                           at the last attempt), so its side effects may be partial or still happening: the
                           record keeps b = '1' (see claim.lua), and an operator's release (admin-release.lua)
                           makes the next claim ACQUIRED_STALE, not ACQUIRED. '0' (or absent, as callers
                           before it send): the handler ended (or never started); b is left as it was

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}                         the record is FAILED (s = 'F', x = error, b = '1' when abandoned)
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/notify"
--- @include "includes/fenced-write"
--- @include "includes/end-claim"
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local err = ARGV[3]
local abandoned = ARGV[4] == '1'

local badArguments = not err or (ARGV[4] and ARGV[4] ~= '0' and not abandoned)
local fields = {'x', err}
if abandoned then
  fields[3] = 'b'
  fields[4] = '1'
end
return endClaim('fail', key, fencingToken, retentionMs, badArguments, 'F', fields)
