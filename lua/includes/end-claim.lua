--[[
  endClaim: end a held IN_PROGRESS claim in a state that is not COMPLETED, the write release and fail share;
  after includes/clock.lua, includes/fence.lua, includes/notify.lua and includes/fenced-write.lua.

  endClaim(script, key, fencingToken, retentionMs, badArguments, state, fields) refuses bad arguments
  (badArguments, the script's own check, or retentionMs not an integer > 0) and a claim the caller no longer
  holds like fencedWrite. Else it sets s = state, the field-value pairs in fields (a list, or a function of
  the fields the fence read that returns one) and u = now in one HSET,
  removes the lease (e, v, n), makes the record expire retentionMs from now, tells the waiters
  (includes/notify.lua) and returns {'OK', nowMs}.
]]
local function endClaim(script, key, fencingToken, retentionMs, badArguments, state, fields)
  local bad = not fencingToken or not retentionMs or retentionMs <= 0 or retentionMs % 1 ~= 0 or badArguments
  return fencedWrite(script, bad, key, fencingToken, {P = true}, function(rec)
    local now = serverClock()
    if type(fields) == 'function' then
      fields = fields(rec)
    end
    local set = {'s', state}
    for i = 1, #fields do
      set[#set + 1] = fields[i]
    end
    set[#set + 1] = 'u'
    set[#set + 1] = now
    redis.call('HSET', key, unpack(set))
    redis.call('HDEL', key, 'e', 'v', 'n')
    redis.call('PEXPIRE', key, retentionMs)
    notifyOutcome(key, state)
    return {'OK', now}
  end)
end
