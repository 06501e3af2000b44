--[[
  clock: the Redis server clock, read once per script with TIME, and exact integer formatting.

  Lua 5.1 numbers are doubles and tostring() prints 14 significant digits ('1.7e+15'), so every integer
  written to the record goes through int(), which prints every digit ('%.0f' is exact below 2^53).
]]
local function serverClock()
  local time = redis.call('TIME')
  local seconds = tonumber(time[1])
  local micros = tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end

local function int(n)
  return string.format('%.0f', n)
end
