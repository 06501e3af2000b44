--[[
  fenced-write: the frame of every fenced write (complete, release, fail, extend, start, mark-dead-lettered),
  after includes/fence.lua.

  fencedWrite(script, badArguments, key, fencingToken, allowed, write) returns
  redis.error_reply('ERR idempotency <script>: bad arguments') when badArguments is true; else the reply
  {'LEASE_LOST', currentToken, state} when the caller does not hold the record (fence(key, fencingToken,
  allowed)), nothing changed; else write(rec) with the fields the fence read, the script's reply.
]]
local function fencedWrite(script, badArguments, key, fencingToken, allowed, write)
  if badArguments then
    return redis.error_reply('ERR idempotency ' .. script .. ': bad arguments')
  end
  local lost, rec = fence(key, fencingToken, allowed)
  if lost then
    return lost
  end
  return write(rec)
end
