-- ARGV: scripts::release_args (script_calls.hpp), read as arg_<name>: the departure, when
-- not '', says why the worker left.

local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if not has_lease(m[1]) or m[1] ~= arg_worker or m[2] ~= arg_epoch then return 0 end
redis.call('HSET', KEYS[1], 'lease_worker', '', 'lease_epoch', 0)
if arg_departure ~= '' then redis.call('HSET', KEYS[1], 'left', arg_departure) end
reindex(arg_id)
return 1
