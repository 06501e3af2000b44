--[[
  release: give the claim back so the operation can be claimed and run again (retryable failure).
  The attempt count and fencing token stay; the next claim increments both. Releasing a reservation whose
  handler never started (claim with reserve) gives it back without an attempt counted.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the released record (attempts are forgotten after it)
  ARGV[3]  abandoned       '1': the holder gives up on a handler that may still be running (handlerTimeoutMs),
                           so its side effects may be partial or still happening: the record keeps b = '1'
                           and the next claim reports ACQUIRED_STALE, not ACQUIRED. '0' (or absent): the
                           handler ended (or never started)
  ARGV[4]  neverStarted    '1': this claim's handler never started (an adapter gives back a claim it did not
                           run): a counted claim gives its attempt back (a - 1), so maxAttempts counts only
                           handlers that ran; a reservation (v) counted none. '0' (or absent): the attempt stays

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}                         the record is RELEASED (s = 'R'), claimable again
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
local abandoned = ARGV[3] == '1'
local neverStarted = ARGV[4] == '1'

local badArguments = (ARGV[3] and ARGV[3] ~= '0' and not abandoned)
  or (ARGV[4] and ARGV[4] ~= '0' and not neverStarted)
return endClaim('release', key, fencingToken, retentionMs, badArguments, 'R', function(rec)
  local fields = abandoned and {'b', '1'} or {}
  -- rec: s, t, l, a, v, b as the fence read them (includes/fence.lua). A counted claim (no v) whose handler
  -- never ran gives its attempt back.
  if neverStarted and not rec[5] and tonumber(rec[4] or '0') > 0 then
    fields[#fields + 1] = 'a'
    fields[#fields + 1] = tonumber(rec[4]) - 1
  end
  return fields
end)
