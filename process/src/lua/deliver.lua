-- ARGV: scripts::deliver_args (script_calls.hpp), read as arg_<name>.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'waits', 'lease_worker',
                     'lease_expires', 'next_inbox')
if not m[1] then return {'no_instance', 0, 0} end
if final_for_writes(m[1], m[2]) then return {'finished', 0, 0} end
local inbox_id = tonumber(m[6] or '0')
if not claim_key(KEYS[5], arg_key, inbox_id) then
  return {'duplicate', 0, tonumber(redis.call('HGET', KEYS[5], arg_key))}
end
append_inbox(KEYS[1], KEYS[3], KEYS[4], inbox_id, arg_path, arg_at, arg_signal)
local waiting = waits_for(m[3], arg_path)
wake_on_delivery(KEYS[8], arg_id, m[1], m[4], m[5], arg_at, waiting)
return {'stored', waiting, inbox_id}
