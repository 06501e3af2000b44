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

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}                         the record is RELEASED (s = 'R'), claimable again
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/notify"
--- @include "includes/fenced-write"
--- @include "includes/settle"
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local abandoned = ARGV[3] == '1'

local badArguments = ARGV[3] and ARGV[3] ~= '0' and not abandoned
return settle('release', key, fencingToken, retentionMs, badArguments, 'R', abandoned and {'b', '1'} or {})
