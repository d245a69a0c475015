-- ARGV: id, worker, epoch, now, ttl (renew) or id, worker, epoch (release)

local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if not has_lease(m[1]) or m[1] ~= ARGV[2] or m[2] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'lease_expires', tonumber(ARGV[4]) + tonumber(ARGV[5]))
reindex(ARGV[1])
return 1
