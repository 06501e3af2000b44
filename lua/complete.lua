--[[
  complete: record the operation as done and store its result, if the caller still holds the claim.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the completed record
  ARGV[3]  hasResult       '1' to store ARGV[4] as the result, '0' to store none
  ARGV[4]  result          encoded result (opaque string), '' when hasResult is '0'

  The claim is held while the record is IN_PROGRESS with this token. An expired lease that nobody has
  claimed since still carries this token, so completing it is safe: no other worker can have started.

  Replies:
    {'OK', nowMs}
    {'LEASE_LOST', currentToken, state}   state '' when the record no longer exists; nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local hasResult = ARGV[3]
local result = ARGV[4]
if not fencingToken or not retentionMs or retentionMs <= 0 or (hasResult ~= '0' and hasResult ~= '1') then
  return redis.error_reply('ERR idempotency complete: bad arguments')
end

local rec = rcall('HMGET', key, 's', 't')
local state = rec[1]
local token = tonumber(rec[2] or '0')
if state ~= 'P' or token ~= fencingToken then
  return {'LEASE_LOST', token, state or ''}
end

local time = rcall('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
rcall('HSET', key, 's', 'C', 'h', hasResult, 'r', result, 'u', now)
rcall('HDEL', key, 'e')
rcall('PEXPIRE', key, retentionMs)
return {'OK', now}
