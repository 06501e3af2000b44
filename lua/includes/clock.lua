--[[
  clock: the Redis server clock, read once per script with TIME, and exact integer formatting.

  Integers (tokens, times, attempts) are written to the record by passing them to redis.call as Lua numbers:
  Redis converts a number argument with every digit ('%.17g', or an integer conversion in later versions:
  exact below 2^53), and that costs less than formatting it here. Lua 5.1 numbers are doubles and
  tostring() or '..' print only 14 significant digits ('1.7e+15'), so an integer put into a string (an error
  message) goes through int(), which prints every digit ('%.0f').
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
