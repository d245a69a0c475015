-- ARGV: id, worker, epoch, now, ttl. A suspended instance (taken to resume, its step still
-- running) is marked running: resumed_and_running.

local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch', 'status', 'definition',
                     'created')
if not has_lease(m[1]) or m[1] ~= ARGV[2] or m[2] ~= ARGV[3] then return 0 end
here_to_resume(KEYS[8], m[3], m[4])
redis.call('HSET', KEYS[1], 'lease_expires', decimal(tonumber(ARGV[4]) + tonumber(ARGV[5])))
resumed_and_running(KEYS[1], KEYS[8], ARGV[1], m[3], m[4], m[5], ARGV[4])
reindex(ARGV[1])
return 1
