--[[
  lease: renew the lease of a held IN_PROGRESS claim from now on the server clock, the write extend and start
  share; after includes/clock.lua, includes/fence.lua and includes/fenced-write.lua.

  renewLease(script, key, fencingToken, leaseMs, retentionMs, write) refuses bad arguments (leaseMs and
  retentionMs integers > 0) and a claim the caller no longer holds like fencedWrite. Else it calls
  write(rec) with the fields the fence read (includes/fence.lua), which returns the reply's head and the fields to set with the lease (or nil), sets them with
  e = now + leaseMs and u = now in one HSET, makes the record expire leaseMs + retentionMs from now, and
  returns the head followed by leaseExpiresAtMs and nowMs.
]]
local function renewLease(script, key, fencingToken, leaseMs, retentionMs, write)
  local bad = not fencingToken or not leaseMs or leaseMs <= 0 or leaseMs % 1 ~= 0 or not retentionMs
    or retentionMs <= 0 or retentionMs % 1 ~= 0
  return fencedWrite(script, bad, key, fencingToken, {P = true}, function(rec)
    local now, _, time = serverClock()
    local reply, fields = write(rec)
    local expiresAt = now + leaseMs
    fields = fields or {}
    fields[#fields + 1] = 'e'
    fields[#fields + 1] = expiresAt
    fields[#fields + 1] = 'u'
    fields[#fields + 1] = (clockText(time))
    redis.call('HSET', key, unpack(fields))
    redis.call('PEXPIRE', key, leaseMs + retentionMs)
    reply[#reply + 1] = expiresAt
    reply[#reply + 1] = now
    return reply
  end)
end
