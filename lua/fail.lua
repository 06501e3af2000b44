--[[
  fail: record the operation as FAILED (terminal): attempts exhausted or an error marked non-retryable.
  Later claims return FAILED until the record's retention lapses.

  KEYS[1]  record key

  ARGV[1]  fencingToken    integer, the token the claim returned
  ARGV[2]  retentionMs     integer > 0, TTL of the failed record
  ARGV[3]  error           short description of the error (opaque string)

  Waiters for the outcome are told on the sharded Pub/Sub channel KEYS[1] (includes/notify.lua).

  Replies:
    {'OK', nowMs}                         the record is FAILED (s = 'F', x = error)
    {'LEASE_LOST', currentToken, state}   nothing changed
]]
--- @include "includes/clock"
--- @include "includes/fence"
--- @include "includes/notify"
--- @include "includes/fenced-write"
--- @include "includes/settle"
local key = KEYS[1]
local fencingToken = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local err = ARGV[3]

return settle('fail', key, fencingToken, retentionMs, not err, 'F', {'x', err})
