--[[
  admin-purge: an operator deletes one record (the `idempotent-consumer purge` command, called once per
  key a SCAN of the scope found). Not part of the consumer's state machine, and never a blind DEL: only a
  hash with a state field is deleted, and never one whose lease is still held (IN_PROGRESS with a lease
  expiry after now), so a running handler keeps its claim. A purged key is claimed afresh by its next
  message: its operation runs again.

  KEYS[1]  record key

  ARGV[1]  states          the one-letter states that may be deleted (P in progress, C completed,
                           R released, F failed), for example 'CF'; '' for any

  Replies:
    {'DELETED', state}
    {'NOT_FOUND'}
    {'NOT_A_RECORD', type}                   the key is not an idempotency record; nothing changed
    {'LEASE_HELD', token, remainingLeaseMs}  a worker holds the claim; nothing changed
    {'OTHER_STATE', state}                   the state is not one of ARGV[1]; nothing changed
]]
--- @include "includes/clock"
local rcall = redis.call
local key = KEYS[1]
local states = ARGV[1]
if not states or not string.match(states, '^[PCRF]*$') then
  return redis.error_reply('ERR idempotency admin-purge: bad arguments')
end

local keyType = rcall('TYPE', key)['ok']
if keyType == 'none' then
  return {'NOT_FOUND'}
end
if keyType ~= 'hash' then
  return {'NOT_A_RECORD', keyType}
end
local rec = rcall('HMGET', key, 's', 't', 'e')
local state = rec[1]
if not state then
  return {'NOT_A_RECORD', keyType}
end
if states ~= '' and not string.find(states, state, 1, true) then
  return {'OTHER_STATE', state}
end

local now = serverClock()
local expiresAt = tonumber(rec[3] or '0')
if state == 'P' and expiresAt > now then
  return {'LEASE_HELD', tonumber(rec[2] or '0'), expiresAt - now}
end
rcall('DEL', key)
return {'DELETED', state}
