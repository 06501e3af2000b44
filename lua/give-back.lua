--[[
  give-back: give back unrun a claim whose caller never got its reply (the command timed out, or the
  connection was lost), named by the nonce it was sent with. Redis may have applied that claim after the
  caller gave up on it, even long after (a command resent after a reconnect, packets delivered late): the
  record then holds a lease nobody runs. Sent on the same connection after the claim, so it applies after
  it. The claim's handler never ran (its caller never learned the token): the record becomes RELEASED as
  release.lua with neverStarted leaves it, and the next claim is ACQUIRED (ACQUIRED_STALE only when the
  claim itself had taken over a stale record).

  KEYS[1]  record key

  ARGV[1]  nonce           the nonce the claim was sent with (claim.lua ARGV[7])
  ARGV[2]  retentionMs     integer > 0, TTL of the released record

  The record holds that claim while it is IN_PROGRESS and its n is '<nonce>:<t>' (or '*<nonce>:<t>': the
  claim was ACQUIRED_STALE), t being the record's current token: a later claim rewrites t, so an n left
  behind by a claim that gave no nonce names a token that is gone.

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}                         the record is RELEASED (s = 'R'); a counted claim gave its
                                          attempt back (a - 1); b = '1' when the claim was ACQUIRED_STALE
    {'LEASE_LOST', currentToken, state}   the record does not hold that claim (it never landed, it was
                                          given back already, or the record moved on): nothing changed
]]
--- @include "includes/clock"
--- @include "includes/notify"
local rcall = redis.call
local key = KEYS[1]
local nonce = ARGV[1]
local retentionMs = tonumber(ARGV[2])
if not nonce or nonce == '' or not retentionMs or retentionMs <= 0 or retentionMs % 1 ~= 0 then
  return redis.error_reply('ERR idempotency give-back: bad arguments')
end

-- s, t, n, a, v
local rec = rcall('HMGET', key, 's', 't', 'n', 'a', 'v')
local held = nonce .. ':' .. (rec[2] or '')
if rec[1] ~= 'P' or (rec[3] ~= held and rec[3] ~= '*' .. held) then
  return {'LEASE_LOST', tonumber(rec[2] or '0'), rec[1] or ''}
end
local now = serverClock()
local fields = {'s', 'R', 'u', now}
if rec[3] ~= held then
  fields[#fields + 1] = 'b'
  fields[#fields + 1] = '1'
end
-- A counted claim (no v) gives its attempt back; a reservation counted none.
if not rec[5] and tonumber(rec[4] or '0') > 0 then
  fields[#fields + 1] = 'a'
  fields[#fields + 1] = tonumber(rec[4]) - 1
end
rcall('HSET', key, unpack(fields))
rcall('HDEL', key, 'e', 'v', 'n')
rcall('PEXPIRE', key, retentionMs)
notifyOutcome(key, 'R')
return {'OK', now}
