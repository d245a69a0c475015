-- A failed attempt of a step in flight, kept in the meta hash as field 'attempt:<seq>' so that
-- load shows it to any process until the step's entry is journaled. Only the lease holder
-- of a running instance may write it.
-- KEYS: 1 meta. ARGV: 1 worker, 2 epoch, 3 seq, 4 the attempt as JSON.

local m = redis.call('HMGET', KEYS[1], 'status', 'lease_worker', 'lease_epoch')
if m[1] ~= 'running' or m[2] ~= ARGV[1] or m[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'attempt:' .. ARGV[3], ARGV[4])
return 1
