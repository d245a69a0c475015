-- KEYS: 1 the workers hash. ARGV: scripts::announce_args (script_calls.hpp), read as
-- arg_<name>. Records the announcement, forgets expired ones, returns the live announcements.

redis.call('HSET', KEYS[1], arg_worker, arg_expires .. ' ' .. arg_announcement)
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local value = all[i + 1]
  local sp = string.find(value, ' ', 1, true)
  if not sp or tonumber(string.sub(value, 1, sp - 1)) < tonumber(arg_now) then
    redis.call('HDEL', KEYS[1], all[i])
  else
    live[#live + 1] = string.sub(value, sp + 1)
  end
end
return live
