--[[
  claim: try to become the one worker that runs the operation of one idempotency key.

  KEYS[1]  record key (a hash; the only key this script touches)

  ARGV[1]  leaseMs         integer > 0, how long the claim holds, on the Redis server clock
  ARGV[2]  retentionMs     integer > 0, how long the record outlives its lease (and the TTL of a finished record)
  ARGV[3]  fingerprint     SHA-256 hex of the payload, or '' for none (no comparison)
  ARGV[4]  maxAttempts     integer >= 0; 0 = unlimited. A claim that would start attempt maxAttempts + 1
                           (of a released record, or a stale one whose worker died while its handler ran,
                           e.g. a message that crashes its consumer) turns the record FAILED instead
  ARGV[5]  reserve         '1': reserve the key without counting an attempt (batch consumers); the attempt
                           counts when start.lua reports that the handler starts. '0' (or absent): count now
  ARGV[6]  fingerprint64   the same fingerprint in base64 without padding (43 characters), as the record
                           stores it (p); absent or '': converted here from ARGV[3] (includes/fingerprint.lua,
                           about 10 µs of server time, so the store passes it)
  ARGV[7]  nonce           names this claim call: 1 to 64 bytes without ':', or '' (or absent) for none. A
                           claim that takes the key keeps it in n, so that a caller whose reply never came can
                           give the claim back unrun (give-back.lua); about 6% of a new key's claim in server
                           instructions (bench/dist/script-instructions.js)

  Record fields: s state (P in progress, C completed, R released, F failed), t fencing token, a attempt
  (handlers started), p fingerprint (base64 of the SHA-256, absent when none was given; records before 0.2
  carry it as f, in hex: includes/fingerprint.lua), e lease expiry (ms, server clock),
  r result (absent when completed without one), x error, c created (ms; dropped on completion: a finished
  record keeps only what duplicates and operators need), u updated (ms; dropped on completion, see w),
  w completed (ms after the token's time: completedAtMs = floor(t / 1000) + w; complete.lua),
  v reserved ('1': claimed, handler not started yet),
  l lapsed ('1': FAILED only because the last attempt's lease lapsed; its holder may still complete),
  d dead-lettered ('1': an adapter reported the FAILED record dead-lettered),
  n nonce of the claim that wrote the lease, '<nonce>:<token>', prefixed with '*' when that claim was
    ACQUIRED_STALE; only while IN_PROGRESS (complete, release, fail and a claim that turns the record
    FAILED remove it). A claim without a nonce leaves an older n, which names another token: it matches
    nothing (give-back.lua),
  b abandoned ('1': released by a holder that gave up on a handler that may still run (handlerTimeoutMs),
    a reservation that took over from a handler whose lease lapsed, or a claim given back unrun after it
    was ACQUIRED_STALE (release.lua abandoned); the next claim is ACQUIRED_STALE; cleared when a handler
    starts: a counted claim, or start.lua; a record FAILED by maxAttempts keeps it, and fail.lua sets it
    when the holder gave up on its last attempt's handler (fail.lua abandoned), for admin-release.lua.
    The record does not say which cause set it).
  Only fields with a value are stored, and a completed record drops a when it is 1 (a completed record
  without a completed on its first attempt; a small result then fits the allocator's 80-byte class,
  1.14 times a string key holding the result). Records written before this layout may carry h ('0': completed
  without a result, its r is ''); complete.lua removes it.

  Fencing token: max(previous token + 1, server TIME in microseconds). It grows with every claim of the
  key, and also across the loss of the record (DEL, expiry, eviction, a restart without persistence) as
  long as the server clock does not go back. About 1.8e15 today: exact in a double (< 2^53) until 2255.

  Replies (array, first element is the outcome):
    {'ACQUIRED',         token, attempt, leaseExpiresAtMs, nowMs, started}
    {'ACQUIRED_STALE',   token, attempt, leaseExpiresAtMs, nowMs, started}   previous holder's handler ran
                         and its lease expired, or it was released abandoned (b): it may be partial or
                         still running. started is 1 when the attempt was counted, 0 for a reservation
                         (attempt is then the one the handler will run as)
    {'DUPLICATE',        token, attempt, hasResult (0/1), result, completedAtMs}
    {'CONFLICT',         token, attempt, remainingLeaseMs}
    {'PAYLOAD_MISMATCH', token, attempt, state}
    {'FAILED',           token, attempt, error, deadLettered (0/1)}
  Lua errors are raised only for malformed arguments.
]]
--- @include "includes/clock"
--- @include "includes/fingerprint"
local rcall = redis.call
local key = KEYS[1]
local leaseMs = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local fingerprint = ARGV[3]
local maxAttempts = tonumber(ARGV[4])
local reserve = ARGV[5] == '1'
local nonce = ARGV[7] or ''
if not leaseMs or leaseMs <= 0 or leaseMs % 1 ~= 0 or not retentionMs or retentionMs <= 0 or retentionMs % 1 ~= 0
  or not maxAttempts or maxAttempts < 0 or maxAttempts % 1 ~= 0
  or not fingerprint or string.find(fingerprint, '[^%x]') or #nonce > 64 or string.find(nonce, ':', 1, true) then
  return redis.error_reply('ERR idempotency claim: bad arguments')
end

local now, nowUs, time = serverClock()

-- The whole record, field name -> value. HGETALL, not an HMGET of the 14 fields read below: a new key
-- (the common claim) then costs one lookup instead of 14, and a record is a handful of fields.
local all = rcall('HGETALL', key)
local rec = {}
for i = 1, #all, 2 do
  rec[all[i]] = all[i + 1]
end
local state = rec.s
local token = 0
if rec.t then
  token = tonumber(rec.t)
end
-- A completed record without a completed on its first attempt (complete.lua).
local attempt = 0
if rec.a then
  attempt = tonumber(rec.a)
elseif state == 'C' then
  attempt = 1
end
-- The fingerprint as stored: p (base64, includes/fingerprint.lua), or f (hex) in records before 0.2.
local compact = ARGV[6] or ''
if fingerprint == '' then
  compact = ''
elseif compact == '' then
  compact = hexToBase64(fingerprint)
elseif #compact ~= 43 or string.find(compact, '[^%w+/]') then
  return redis.error_reply('ERR idempotency claim: bad arguments')
end
local storedFingerprint, given = rec.p, compact
if not storedFingerprint or storedFingerprint == '' then
  storedFingerprint, given = rec.f, fingerprint
end

if state and fingerprint ~= '' and storedFingerprint and storedFingerprint ~= '' and storedFingerprint ~= given then
  return {'PAYLOAD_MISMATCH', token, attempt, state}
end

if state == 'C' then
  local hasResult = rec.r and rec.h ~= '0'
  -- Completed since 0.2: w, ms after the token's time (complete.lua); before: u.
  local completedAt = rec.w and math.floor(token / 1000) + tonumber(rec.w) or tonumber(rec.u or '0')
  return {'DUPLICATE', token, attempt, hasResult and 1 or 0, hasResult and rec.r or '', completedAt}
end
if state == 'F' then
  return {'FAILED', token, attempt, rec.x or '', rec.d == '1' and 1 or 0}
end

local outcome = 'ACQUIRED'
local ranBefore = state == 'P' and rec.v ~= '1'
local abandoned = rec.b == '1'
if abandoned then
  outcome = 'ACQUIRED_STALE'
end
if state == 'P' then
  local expiresAt = tonumber(rec.e or '0')
  if expiresAt > now then
    return {'CONFLICT', token, attempt, expiresAt - now}
  end
  -- A stale reservation never started its handler: nothing of it can be partial.
  if ranBefore then
    outcome = 'ACQUIRED_STALE'
  end
end
if state and maxAttempts > 0 and attempt >= maxAttempts then
  local err = 'ATTEMPTS_EXHAUSTED: ' .. int(attempt) .. ' of ' .. int(maxAttempts) .. ' attempts used'
  if ranBefore then
    err = err .. ', the last one lost its lease'
    rcall('HSET', key, 'l', '1')
  elseif abandoned then
    -- b: no handler started since the last one that ran was abandoned (handlerTimeoutMs) or lost its
    -- lease (a claim took over and was given back, or lapsed before start); b does not say which.
    err = err .. ', the last one recorded no outcome (abandoned by its handler timeout, or its lease lapsed)'
  end
  rcall('HSET', key, 's', 'F', 'x', err, 'u', now)
  -- b stays: the FAILED record still says that its last handler may be partial or still running, so an
  -- operator's release (admin-release.lua) makes the next claim ACQUIRED_STALE.
  rcall('HDEL', key, 'e', 'v', 'n')
  rcall('PEXPIRE', key, retentionMs)
  return {'FAILED', token, attempt, err, 0}
end

-- The new token: max(token + 1, nowUs); written as the clock's digits when it is nowUs (a new key).
local nowText, nowUsText = clockText(time)
local tokenArg = nowUsText
if token + 1 > nowUs then
  token = token + 1
  tokenArg = token
else
  token = nowUs
end
local expiresAt = now + leaseMs
local started = 1
local counted = attempt + 1
if reserve then
  started = 0
  counted = attempt
elseif rec.v or abandoned then
  rcall('HDEL', key, 'v', 'b')
end
-- One HSET. Integers go in as text where it is at hand (the clock's digits, the first attempt), else as Lua
-- numbers, which Redis writes with every digit below 2^53 (includes/clock.lua).
local fields = {'s', 'P', 't', tokenArg, 'a', counted == 1 and '1' or counted, 'e', expiresAt, 'u', nowText}
if reserve then
  fields[#fields + 1] = 'v'
  fields[#fields + 1] = '1'
  if ranBefore and not abandoned then
    -- Taken over from a handler whose lease lapsed: until a handler starts, the record keeps saying so (b),
    -- so a give-back or a crash before start leaves the next claim ACQUIRED_STALE, not ACQUIRED.
    fields[#fields + 1] = 'b'
    fields[#fields + 1] = '1'
  end
end
if not state then
  fields[#fields + 1] = 'c'
  fields[#fields + 1] = nowText
end
if fingerprint ~= '' and (not storedFingerprint or storedFingerprint == '') then
  fields[#fields + 1] = 'p'
  fields[#fields + 1] = compact
end
if nonce ~= '' then
  -- The token as the record holds it: its own digits, so give-back.lua can compare them with t.
  local held = nonce .. ':' .. (tokenArg == nowUsText and nowUsText or int(token))
  fields[#fields + 1] = 'n'
  fields[#fields + 1] = outcome == 'ACQUIRED_STALE' and '*' .. held or held
end
rcall('HSET', key, unpack(fields))
rcall('PEXPIRE', key, leaseMs + retentionMs)
return {outcome, token, attempt + 1, expiresAt, now, started}
