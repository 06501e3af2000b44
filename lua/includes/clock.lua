--[[
  clock: the Redis server clock, read once per script with TIME, and exact integer formatting.

  Integers (tokens, times, attempts) are written to the record by passing them to redis.call as Lua numbers:
  Redis converts a number argument with every digit ('%.17g', or an integer conversion in later versions:
  exact below 2^53), and that costs less than formatting it here. Lua 5.1 numbers are doubles and
  tostring() or '..' print only 14 significant digits ('1.7e+15'), so an integer put into a string (an error
  message) goes through int(), which prints every digit ('%.0f').

  A number argument is not free, though. Redis 7.0 formats it with snprintf('%.17g'), about 3,000
  instructions each, and a new key's claim wrote six. So claim.lua passes the clock's own digits as text
  (clockText), which cut its server instructions by 9%.
]]
-- now (ms), nowUs (µs) and TIME's reply, for clockText.
local function serverClock()
  local time = redis.call('TIME')
  local seconds = tonumber(time[1])
  local micros = tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros, time
end

-- The same now and nowUs as text, every digit, from TIME's reply (serverClock's third value), without
-- formatting a number.
local function clockText(time)
  -- TIME's microseconds come without leading zeros (0 to 999999).
  local micros = string.rep('0', 6 - #time[2]) .. time[2]
  return time[1] .. string.sub(micros, 1, 3), time[1] .. micros
end

local function int(n)
  return string.format('%.0f', n)
end
