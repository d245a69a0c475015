-- ARGV: id, idempotency key, path, at (ms), signal (JSON)

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'waits', 'lease_worker',
                     'lease_expires', 'next_inbox')
if not m[1] then return {'no_instance', 0, 0} end
if final_for_writes(m[1], m[2]) then return {'finished', 0, 0} end
local inbox_id = tonumber(m[6] or '0')
if not claim_key(KEYS[5], ARGV[2], inbox_id) then
  return {'duplicate', 0, tonumber(redis.call('HGET', KEYS[5], ARGV[2]))}
end
append_inbox(KEYS[1], KEYS[3], KEYS[4], inbox_id, ARGV[3], ARGV[4], ARGV[5])
local waiting = waits_for(m[3], ARGV[3])
wake_on_delivery(KEYS[8], ARGV[1], m[1], m[4], m[5], ARGV[4], waiting)
return {'stored', waiting, inbox_id}
