-- ARGV: id, worker, epoch, then optionally why the worker left (departure JSON)

local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if not has_lease(m[1]) or m[1] ~= ARGV[2] or m[2] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'lease_worker', '', 'lease_epoch', 0)
if ARGV[4] then redis.call('HSET', KEYS[1], 'left', ARGV[4]) end
reindex(ARGV[1])
return 1
