--[[
  mark-dead-lettered: an adapter has dead-lettered a FAILED record; remember it, so later deliveries of
  the same key (a re-fetch, a redelivery) see deadLettered = 1 in the claim's FAILED reply and are not
  dead-lettered again. Call it after the dead-letter copy is durably sent: a crash in between sends it
  again (at least once, never lost).

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token of the FAILED reply

  Replies:
    {'OK', first}                          first: 1 when this call set the mark, 0 when it was already set
    {'LEASE_LOST', currentToken, state}    the record is not FAILED with this token; nothing changed
]]
--- @include "includes/fence"
--- @include "includes/fenced-write"
local rcall = redis.call
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])

return fencedWrite('mark-dead-lettered', not fencingToken, key, fencingToken, {F = true}, function()
  if rcall('HGET', key, 'd') == '1' then
    return {'OK', 0}
  end
  rcall('HSET', key, 'd', '1')
  return {'OK', 1}
end)
