-- ARGV: id, worker, now, ttl, then the refused "<definition>\n<version>" pairs

if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_expires',
                     'lease_epoch')
if final_for_writes(m[1], m[2]) then return {'finished'} end
if #ARGV > 4 then
  local dv = redis.call('HMGET', KEYS[1], 'definition', 'version')
  local started_by = dv[1] .. '\n' .. (dv[2] or '')
  for i = 5, #ARGV do
    if ARGV[i] == started_by then return {'declined'} end
  end
end
local now, worker = tonumber(ARGV[3]), ARGV[2]
if has_lease(m[3]) and m[3] ~= worker and tonumber(m[4]) > now then return {'busy'} end
local epoch = tonumber(m[5])
local taken_over = (has_lease(m[3]) and m[3] ~= worker) and 1 or 0
if m[3] ~= worker then
  epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
  redis.call('HSET', KEYS[1], 'lease_worker', worker, 'lease_epoch', epoch)
end
local expires = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'lease_expires', expires)
reindex(ARGV[1])
return {'ok', epoch, redis.call('LLEN', KEYS[2]), m[1], expires, taken_over}
