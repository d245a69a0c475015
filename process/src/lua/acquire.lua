-- ARGV: scripts::acquire_args (script_calls.hpp), read as arg_<name>. With `load` (take: the
-- worker takes the instance to run it), the reply also carries the instance as load.lua gives
-- it, as it was before this call: meta, journal (only when its length differs from the one
-- given), inbox, timers; then 1 when the instance is suspended (it stays so: taken_reply),
-- else 0.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_expires',
                     'lease_epoch', 'definition', 'created', 'epoch', 'version')
if not m[1] then return {'not_found'} end
if final_for_writes(m[1], m[2]) then return {'finished'} end
if arg_refused_n > 0 then
  local by = started_by(m[6], m[9])
  for i = arg_refused_at, arg_refused_at + arg_refused_n - 1 do
    if ARGV[i] == by then return {'declined'} end
  end
end
local now, worker = tonumber(arg_now), arg_worker
if has_lease(m[3]) and m[3] ~= worker and tonumber(m[4]) > now then return {'busy'} end
local epoch = tonumber(m[5])
local taken_over = (has_lease(m[3]) and m[3] ~= worker) and 1 or 0
local expires = now + tonumber(arg_ttl)
local expires_text = decimal(expires)
if m[3] ~= worker then
  epoch = grant_new_lease(KEYS[1], m[8], worker, expires_text)
else
  redis.call('HSET', KEYS[1], 'lease_expires', expires_text)
end
local length = redis.call('LLEN', KEYS[2])
if arg_load == '' then
  reindex(arg_id)
  return {'ok', epoch, length, m[1], expires, taken_over}
end
local journal = {}
if arg_load == '-' or tonumber(arg_load) ~= length then
  journal = redis.call('LRANGE', KEYS[2], 0, -1)
elseif m[1] == 'running' then
  journal = {redis.call('LINDEX', KEYS[2], -1)}
end
local reply = taken_reply(epoch, length, m[1], expires, taken_over,
                          redis.call('HGETALL', KEYS[1]), journal, KEYS[3], KEYS[6])
if m[1] == 'suspended' then reply[11] = 1 end
if m[1] == 'suspended' or m[1] == 'running' then  -- leased: due when the lease ends
  redis.call('ZADD', KEYS[8], expires_text, arg_id)
else
  reindex(arg_id)
end
return reply
