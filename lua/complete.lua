--[[
  complete: record the operation as done and store its result, if the caller still holds the claim.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the completed record
  ARGV[3]  hasResult       '1' to store ARGV[4] as the result (field r), '0' to store none (no r)
  ARGV[4]  result          encoded result (opaque string), '' when hasResult is '0'

  The completed record keeps s, t, a, w, p when a fingerprint was given (f in records before 0.2) and r: everything a duplicate's
  reply and `store.get` need; the other fields are removed (claim.lua). w is the completion time as
  milliseconds after the token's time (completedAtMs = floor(t / 1000) + w, exact: w is computed from the
  stored t), a small integer (the handler's duration, about) where u took a 64-bit one; a is removed when
  it is 1 (the first attempt, most records: a completed record without a reads as attempt 1). So a record
  with a small result fits the allocator's 80-byte class, 1.14 times a string key. Workers of versions
  before 0.2 read such a record with completedAtMs (u) 0 and attempt 0: reported only, they decide
  nothing on either (a COMPLETED record is a duplicate whatever they say).

  The claim is held while the record is IN_PROGRESS with this token. An expired lease that nobody has
  claimed since still carries this token, so completing it is safe: no other worker can have started.
  The same holds for a record that claim turned FAILED only because this last attempt's lease lapsed
  (l = '1'): nobody ran after it, so its holder's completion is recorded rather than refused.

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}
    {'LEASE_LOST', currentToken, state}   state '' when the record no longer exists; nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/notify"
--- @include "includes/fenced-write"
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local hasResult = ARGV[3]
local result = ARGV[4]

local badArguments = not fencingToken or not retentionMs or retentionMs <= 0 or retentionMs % 1 ~= 0
  or (hasResult ~= '0' and hasResult ~= '1')
return fencedWrite('complete', badArguments, key, fencingToken, {P = true, F = 'lapsed'}, function(rec)
  local now = serverClock()
  local completedAfterToken = now - math.floor(fencingToken / 1000)
  -- rec: s, t, l, a, v, b as the fence read them (includes/fence.lua); only those present are dropped.
  local drop = {'e', 'x', 'd', 'c', 'h', 'u', 'n'}
  if rec[3] then
    drop[#drop + 1] = 'l'
  end
  if rec[4] == '1' then
    drop[#drop + 1] = 'a'
  end
  if rec[5] then
    drop[#drop + 1] = 'v'
  end
  if rec[6] then
    drop[#drop + 1] = 'b'
  end
  if hasResult ~= '1' then
    drop[#drop + 1] = 'r'
  end
  -- Before the HSET: the lease's fields go first, so a large result does not grow the record into an
  -- allocation it keeps (a 1 KiB result's record: 1,664 bytes, 1,696 the other way round; bench, memory).
  rcall('HDEL', key, unpack(drop))
  if hasResult == '1' then
    rcall('HSET', key, 's', 'C', 'w', completedAfterToken, 'r', result)
  else
    rcall('HSET', key, 's', 'C', 'w', completedAfterToken)
  end
  rcall('PEXPIRE', key, retentionMs)
  notifyOutcome(key, 'C')
  return {'OK', now}
end)
