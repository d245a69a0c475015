-- KEYS: instance keys. ARGV: scripts::remove_signal_args (script_calls.hpp), read as
-- arg_<name>. Writes only keys it is given (the instance's and its shard's wake index), so
-- on Redis Cluster there is nothing for `here` to check. The removed entry is appended to the
-- meta's removed_log, a JSON array of {"id", "removed" (ms), "signal" (the inbox's text)}.

local m = redis.call('HMGET', KEYS[1], 'status', 'lease_worker', 'lease_expires')
if not m[1] then return {'not_found'} end
if m[1] == 'running' then return {'wrong_state'} end
if has_lease(m[2]) and tonumber(m[3] or '0') > tonumber(arg_now) then return {'busy'} end
local signal = redis.call('HGET', KEYS[3], arg_inbox_id)
if not signal then return {'inbox_missing'} end
local entry = '{"id":' .. arg_inbox_id .. ',"removed":' .. arg_now .. ',"signal":' .. signal ..
              '}'
local log = redis.call('HGET', KEYS[1], 'removed_log')
if log then log = string.sub(log, 1, -2) .. ',' .. entry .. ']' else log = '[' .. entry .. ']' end
redis.call('HDEL', KEYS[3], arg_inbox_id)
redis.call('HDEL', KEYS[4], arg_inbox_id)
redis.call('HSET', KEYS[1], 'removed_log', log, 'changed', arg_now)
reindex(arg_id)
return {'ok', signal}
