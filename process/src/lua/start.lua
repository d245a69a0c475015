-- ARGV: id, definition, params, worker, now, lease expiry, version, then the subscription keys

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'status')}
end
local subs = {}
for i = 8, #ARGV do
  subs[#subs + 1] = ARGV[i]
  redis.call('SADD', sub_key(KEYS[8], ARGV[i]), ARGV[1])
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'definition', ARGV[2], 'params', ARGV[3],
           'status', 'running', 'parked', '0', 'epoch', 1, 'lease_worker', ARGV[4],
           'lease_epoch', 1, 'lease_expires', ARGV[6], 'next_inbox', 1, 'waits', '[]',
           'created', ARGV[5], 'changed', ARGV[5], 'subs', cjson.encode(subs))
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'version', ARGV[7]) end
index_move(KEYS[8], ARGV[1], ARGV[2], ARGV[5], nil, 'running')
reindex(ARGV[1])
return {1, 'running'}
