--[[
  fence: the one check every fenced write makes (complete, release, fail, extend, start, mark-dead-lettered),
  through includes/fenced-write.lua.

  fence(key, fencingToken, allowed) reads the record's state and token. The caller holds the record when
  the token is the record's current one and the state is a key of `allowed` whose value is true, or
  'lapsed' when the record must also carry l = '1' (complete may finish a record that claim turned FAILED
  only because the last attempt's lease lapsed). Tokens never repeat for a key (see claim.lua), so an equal token means the same claim.

  Returns nil and the fields it read {s, t, l, a, v, b} when the caller holds the record (complete.lua and
  start.lua use them, so neither reads the record a second time),
  else the reply {'LEASE_LOST', currentToken, state} (state '' when the record no longer exists); the
  caller returns it and changes nothing.
]]
local function fence(key, fencingToken, allowed)
  local rec = redis.call('HMGET', key, 's', 't', 'l', 'a', 'v', 'b')
  local state = rec[1]
  local token = tonumber(rec[2] or '0')
  local rule = state and allowed[state]
  if token == fencingToken and rule and (rule == true or (rule == 'lapsed' and rec[3] == '1')) then
    return nil, rec
  end
  return {'LEASE_LOST', token, state or ''}
end
