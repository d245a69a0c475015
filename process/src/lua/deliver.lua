-- ARGV: id, idempotency key, path, at (ms), signal (JSON)

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'waits', 'lease_worker',
                     'lease_expires')
if not m[1] then return {'no_instance', 0, 0} end
if final_for_writes(m[1], m[2]) then return {'finished', 0, 0} end
if ARGV[2] ~= '' then
  local first = redis.call('HGET', KEYS[5], ARGV[2])
  if first then return {'duplicate', 0, tonumber(first)} end
end
local inbox_id = append_inbox(KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], ARGV[4],
                              ARGV[5])
local waiting = waits_for(m[3], ARGV[3])
wake_on_delivery(KEYS[8], ARGV[1], m[1], m[4], m[5], ARGV[4], waiting)
return {'stored', waiting, inbox_id}
