--[[
  extend: heartbeat; move the lease's expiry to now + leaseMs, if the caller still holds the claim.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  leaseMs         integer > 0, the new lease, from now on the Redis server clock
  ARGV[3]  retentionMs     integer > 0, how long the record outlives the lease

  Replies:
    {'OK', leaseExpiresAtMs, nowMs}
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local retentionMs = tonumber(ARGV[3])
if not fencingToken or not leaseMs or leaseMs <= 0 or not retentionMs or retentionMs <= 0 then
  return redis.error_reply('ERR idempotency extend: bad arguments')
end

local rec = rcall('HMGET', key, 's', 't')
local state = rec[1]
local token = tonumber(rec[2] or '0')
if state ~= 'P' or token ~= fencingToken then
  return {'LEASE_LOST', token, state or ''}
end

local time = rcall('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expiresAt = now + leaseMs
rcall('HSET', key, 'e', expiresAt, 'u', now)
rcall('PEXPIRE', key, leaseMs + retentionMs)
return {'OK', expiresAt, now}
