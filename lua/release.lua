--[[
  release: give the claim back so the operation can be claimed and run again (retryable failure).
  The attempt count and fencing token stay; the next claim increments both.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the released record (attempts are forgotten after it)

  Replies:
    {'OK', nowMs}
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
if not fencingToken or not retentionMs or retentionMs <= 0 then
  return redis.error_reply('ERR idempotency release: bad arguments')
end

local rec = rcall('HMGET', key, 's', 't')
local state = rec[1]
local token = tonumber(rec[2] or '0')
if state ~= 'P' or token ~= fencingToken then
  return {'LEASE_LOST', token, state or ''}
end

local time = rcall('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
rcall('HSET', key, 's', 'R', 'u', now)
rcall('HDEL', key, 'e')
rcall('PEXPIRE', key, retentionMs)
return {'OK', now}
