--[[
  fingerprint: the payload fingerprint as the record stores it since 0.2, field p: the SHA-256 in base64
  (43 characters, no padding) where field f held it in hex (64). A record with a fingerprint then stays in
  a smaller allocation (1.35 times a string key instead of 1.44) and is still text for HGETALL. The callers still pass hex
  (ARGV); records written before keep f and are compared in hex.
]]
local BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

-- Lowercase (or uppercase) hex to base64 without padding: 6 hex digits (24 bits) make 4 characters.
local function hexToBase64(hex)
  local out = {}
  for i = 1, #hex, 6 do
    local chunk = string.sub(hex, i, i + 5)
    local bits = #chunk * 4
    local n = tonumber(chunk, 16) * 2 ^ (24 - bits)
    for j = 1, math.ceil(bits / 6) do
      local index = math.floor(n / 2 ^ (24 - 6 * j)) % 64
      out[#out + 1] = string.sub(BASE64, index + 1, index + 1)
    end
  end
  return table.concat(out)
end
