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
    {'OK', nowMs}
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/notify"
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local abandoned = ARGV[3] == '1'
if not fencingToken or not retentionMs or retentionMs <= 0 or (ARGV[3] and ARGV[3] ~= '0' and not abandoned) then
  return redis.error_reply('ERR idempotency release: bad arguments')
end

local lost = fence(key, fencingToken, {P = true})
if lost then
  return lost
end

local now = serverClock()
rcall('HSET', key, 's', 'R', 'u', int(now))
rcall('HDEL', key, 'e', 'v')
if abandoned then
  rcall('HSET', key, 'b', '1')
end
rcall('PEXPIRE', key, retentionMs)
notifyOutcome(key, 'R')
return {'OK', now}
