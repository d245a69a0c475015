-- ARGV: scripts::renew_args (script_calls.hpp), read as arg_<name>. A suspended instance
-- (taken to resume, its step still running) is marked running: resumed_and_running.

local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch', 'status', 'definition',
                     'created', 'queued')
if not has_lease(m[1]) or m[1] ~= arg_worker or m[2] ~= arg_epoch then return 0 end
here_to_resume(KEYS[8], m[3], m[6], m[4])
redis.call('HSET', KEYS[1], 'lease_expires', decimal(tonumber(arg_now) + tonumber(arg_ttl)))
resumed_and_running(KEYS[1], KEYS[8], arg_id, m[3], m[6], m[4], m[5], arg_now)
reindex(arg_id)
return 1
