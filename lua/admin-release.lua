--[[
  admin-release: an operator makes a stuck IN_PROGRESS record, or a FAILED one, claimable again (the
  `idempotent-consumer release` command). Not part of the consumer's state machine.

  The record becomes RELEASED with its fencing token unchanged: the worker that held the claim can no
  longer complete, release, fail or extend it (they require IN_PROGRESS), and the next claim gets a higher
  token. The attempt count restarts at 0, so the next claim runs attempt 1 under maxAttempts afresh; the
  recorded error, the lease and the flags (v reserved, l lapsed, d dead-lettered) are dropped. A record
  whose last handler recorded no outcome is released abandoned (b = '1', see claim.lua): that handler may
  be partial or still running, so the next claim is ACQUIRED_STALE. That is an IN_PROGRESS record whose
  handler started, a FAILED one whose last lease lapsed (l = '1'), and one already marked b (a FAILED
  record that exhausted maxAttempts after an abandoned handler keeps b, and fail.lua sets it when the
  holder gave up on its last attempt's handler by handlerTimeoutMs).

  KEYS[1]  record key

  ARGV[1]  expectedToken   integer >= 0: the fencing token the operator saw (inspect); 0 = any. When the
                           record's token differs, it changed since it was inspected: nothing is changed
  ARGV[2]  retentionMs     integer > 0, TTL of the released record
  ARGV[3]  expectedState   the one-letter state the operator saw (P or F), or '' (or absent) for any. A
                           holder's fail, and a claim that exhausts maxAttempts, turn P into F with the
                           token unchanged: the token alone does not show that the record was written

  Replies:
    {'OK', previousState, token, nowMs}
    {'NOT_FOUND'}
    {'NOT_RELEASABLE', state, token}   COMPLETED or RELEASED: nothing to release; nothing changed
    {'TOKEN_CHANGED', token, state}    the record was claimed or written since (another token, or another
                                       state than ARGV[3]); nothing changed
]]
--- @include "includes/clock"
local rcall = redis.call
local key = KEYS[1]
local expectedToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local expectedState = ARGV[3] or ''
if not expectedToken or expectedToken < 0 or not retentionMs or retentionMs <= 0 or retentionMs % 1 ~= 0
  or not string.match(expectedState, '^[PF]?$') then
  return redis.error_reply('ERR idempotency admin-release: bad arguments')
end

local rec = rcall('HMGET', key, 's', 't', 'v', 'l', 'b')
local state = rec[1]
local token = tonumber(rec[2] or '0')
if not state then
  return {'NOT_FOUND'}
end
if (expectedToken > 0 and token ~= expectedToken) or (expectedState ~= '' and state ~= expectedState) then
  return {'TOKEN_CHANGED', token, state}
end
if state ~= 'P' and state ~= 'F' then
  return {'NOT_RELEASABLE', state, token}
end

local now = serverClock()
rcall('HSET', key, 's', 'R', 'a', 0, 'u', now)
if (state == 'P' and rec[3] ~= '1') or (state == 'F' and (rec[4] == '1' or rec[5] == '1')) then
  rcall('HSET', key, 'b', '1')
end
rcall('HDEL', key, 'e', 'x', 'v', 'l', 'd', 'n')
rcall('PEXPIRE', key, retentionMs)
return {'OK', state, token, now}
