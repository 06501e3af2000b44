--[[
  notify: tell waiters (IdempotencyStore.waitForOutcome) that the record reached an outcome, by sharded
  Pub/Sub on a channel named like the record key (so it lives in the key's slot on a Cluster: still one
  key). SPUBLISH needs Redis 7.0; it is called protected, so on an older server the write still succeeds
  and waiters find the outcome by polling.
]]
local function notifyOutcome(key, state)
  pcall(redis.call, 'SPUBLISH', key, state)
end
