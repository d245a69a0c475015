-- KEYS: instance keys. ARGV: scripts::rewind_args (script_calls.hpp), read as arg_<name>;
-- the restored inbox entries are (inbox id, "<at ms> <path>", signal JSON) triples. The
-- retry log's records are [from, at ms, journal length] and, when the operator left consumed
-- signals out, a fourth element: their inbox ids, comma-separated.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_expires',
                     'definition', 'created', 'retries', 'subs')
if not m[1] then return 'not_found' end
if not is_final(m[1]) then return 'wrong_state' end
local now, keep, length = tonumber(arg_now), tonumber(arg_keep), redis.call('LLEN', KEYS[2])
if length ~= tonumber(arg_expected_length) then return 'conflict' end
if keep > length then return 'out_of_range' end
if has_lease(m[3]) and tonumber(m[4]) > now then return 'busy' end
local n = tonumber(m[7] or '0') + 1
local subs = (m[2] ~= '1' and m[8]) and cjson.decode(m[8]) or {}
if on_cluster then  -- the keys written below that were not given
  local others = index_move_keys({shard_key(KEYS[8], 'idx:expiring'),
                                  shard_key(KEYS[8], 'idx:final')},
                                 KEYS[8], m[5], index_status(m[1], m[2]), 'running')
  for r = 1, n do others[#others + 1] = KEYS[2] .. ':' .. r end
  for _, k in ipairs(subs) do others[#others + 1] = sub_key(KEYS[8], k) end
  here(others)
end
if length > 0 then redis.call('COPY', KEYS[2], KEYS[2] .. ':' .. n) end
local history = redis.call('HGET', KEYS[1], 'retry_log')
history = history and cjson.decode(history) or {}
local record = {arg_keep, arg_now, tostring(length)}
if arg_left_out ~= '' then record[4] = arg_left_out end
history[#history + 1] = record
if keep == 0 then redis.call('DEL', KEYS[2]) else redis.call('LTRIM', KEYS[2], 0, keep - 1) end
redis.call('DEL', KEYS[6])
for i = arg_restore_at, arg_restore_at + 3 * arg_restore_n - 1, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
end
for i = 1, 7 do redis.call('PERSIST', KEYS[i]) end
for r = 1, n do redis.call('PERSIST', KEYS[2] .. ':' .. r) end
redis.call('ZREM', shard_key(KEYS[8], 'idx:expiring'), arg_id)
redis.call('HDEL', shard_key(KEYS[8], 'idx:final'), arg_id)
-- (A key it makes is a set, the form every build reads: an operator's retry does not know
-- the live workers' levels.)
for _, k in ipairs(subs) do sub_add(sub_key(KEYS[8], k), arg_id, false) end
redis.call('HSET', KEYS[1], 'status', 'running', 'parked', '0', 'lease_worker', '',
           'lease_epoch', 0, 'waits', '[]', 'changed', arg_now, 'retries', n,
           'retry_log', cjson.encode(history))
redis.call('HDEL', KEYS[1], 'error', 'result')
clear_attempts(KEYS[1])
index_move(KEYS[8], arg_id, m[5], m[6], index_status(m[1], m[2]), 'running')
reindex(arg_id)
return 'ok'
