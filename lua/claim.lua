--[[
  claim: try to become the one worker that runs the operation of one idempotency key.

  KEYS[1]  record key (a hash; the only key this script touches)

  ARGV[1]  leaseMs         integer > 0, how long the claim holds, on the Redis server clock
  ARGV[2]  retentionMs     integer > 0, how long the record outlives its lease (and the TTL of a finished record)
  ARGV[3]  fingerprint     SHA-256 hex of the payload, or '' for none (no comparison)
  ARGV[4]  maxAttempts     integer >= 0; 0 = unlimited. A claim that would start attempt maxAttempts + 1
                           (of a released record, or a stale one whose worker died, e.g. a message that
                           crashes its consumer) turns the record FAILED instead

  Record fields: s state (P in progress, C completed, R released, F failed), t fencing token, a attempt,
  f fingerprint, e lease expiry (ms, server clock), r result, h has result (1/0), x error, c created (ms),
  u updated (ms).

  Replies (array, first element is the outcome):
    {'ACQUIRED',         token, attempt, leaseExpiresAtMs, nowMs}
    {'ACQUIRED_STALE',   token, attempt, leaseExpiresAtMs, nowMs}   previous holder's lease had expired
    {'DUPLICATE',        token, attempt, hasResult (0/1), result, completedAtMs}
    {'CONFLICT',         token, attempt, remainingLeaseMs}
    {'PAYLOAD_MISMATCH', token, attempt, state}
    {'FAILED',           token, attempt, error}
  Lua errors are raised only for malformed arguments.
]]
local rcall = redis.call
local key = KEYS[1]
local leaseMs = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local fingerprint = ARGV[3]
local maxAttempts = tonumber(ARGV[4])
if not leaseMs or leaseMs <= 0 or not retentionMs or retentionMs <= 0 or not maxAttempts or maxAttempts < 0 then
  return redis.error_reply('ERR idempotency claim: bad arguments')
end

local time = rcall('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local rec = rcall('HMGET', key, 's', 't', 'a', 'f', 'e', 'h', 'r', 'u', 'x')
local state = rec[1]
local token = tonumber(rec[2] or '0')
local attempt = tonumber(rec[3] or '0')
local storedFingerprint = rec[4]

if state and fingerprint ~= '' and storedFingerprint and storedFingerprint ~= '' and storedFingerprint ~= fingerprint then
  return {'PAYLOAD_MISMATCH', token, attempt, state}
end

if state == 'C' then
  return {'DUPLICATE', token, attempt, tonumber(rec[6] or '0'), rec[7] or '', tonumber(rec[8] or '0')}
end
if state == 'F' then
  return {'FAILED', token, attempt, rec[9] or ''}
end

local outcome = 'ACQUIRED'
if state == 'P' then
  local expiresAt = tonumber(rec[5] or '0')
  if expiresAt > now then
    return {'CONFLICT', token, attempt, expiresAt - now}
  end
  outcome = 'ACQUIRED_STALE'
end
if state and maxAttempts > 0 and attempt >= maxAttempts then
  local err = 'ATTEMPTS_EXHAUSTED: ' .. attempt .. ' of ' .. maxAttempts .. ' attempts used'
  if state == 'P' then
    err = err .. ', the last one lost its lease'
  end
  rcall('HSET', key, 's', 'F', 'x', err, 'u', now)
  rcall('HDEL', key, 'e')
  rcall('PEXPIRE', key, retentionMs)
  return {'FAILED', token, attempt, err}
end

token = token + 1
attempt = attempt + 1
local expiresAt = now + leaseMs
rcall('HSET', key, 's', 'P', 't', token, 'a', attempt, 'e', expiresAt, 'u', now)
if not state then
  rcall('HSET', key, 'c', now, 'f', fingerprint)
elseif fingerprint ~= '' and (not storedFingerprint or storedFingerprint == '') then
  rcall('HSET', key, 'f', fingerprint)
end
rcall('PEXPIRE', key, leaseMs + retentionMs)
return {outcome, token, attempt, expiresAt, now}
