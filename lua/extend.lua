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
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/fenced-write"
--- @include "includes/lease"
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local retentionMs = tonumber(ARGV[3])

return renewLease('extend', key, fencingToken, leaseMs, retentionMs, function()
  return {'OK'}
end)
