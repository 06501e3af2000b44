--[[
  start: the handler of a reserved claim (claim with reserve) starts now: count its attempt and renew the
  lease, if the caller still holds the claim. On a claim whose attempt already counted it only renews the
  lease, so calling it twice counts once. Either way it clears b (abandoned, see claim.lua): a handler
  runs now.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  leaseMs         integer > 0, the lease from now on the Redis server clock
  ARGV[3]  retentionMs     integer > 0, how long the record outlives the lease

  Replies:
    {'OK', attempt, leaseExpiresAtMs, nowMs}   attempt: the counted attempt this handler runs as
    {'LEASE_LOST', currentToken, state}        nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/fenced-write"
--- @include "includes/lease"
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local retentionMs = tonumber(ARGV[3])

-- rec: s, t, l, a, v, b as the fence read them (includes/fence.lua).
return renewLease('start', key, fencingToken, leaseMs, retentionMs, function(rec)
  local attempt = tonumber(rec[4] or '0')
  if rec[5] == '1' then
    attempt = attempt + 1
  end
  if rec[5] or rec[6] then
    rcall('HDEL', key, 'v', 'b')
  end
  return {'OK', attempt}, {'a', attempt == 1 and '1' or attempt}
end)
