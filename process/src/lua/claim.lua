-- KEYS: 1 wake index. ARGV: now, limit, claimed until, key prefix of the shard's instances,
-- then the refused "<definition>\n<version>" pairs. Hides what it returns until then;
-- refused instances are neither returned nor hidden. Also takes final instances whose
-- retention ended (and that Redis expired) out of the operators' index.

local expiring, final = shard_key(KEYS[1], 'idx:expiring'), shard_key(KEYS[1], 'idx:final')
for _, id in ipairs(redis.call('ZRANGEBYSCORE', expiring, '-inf', ARGV[1], 'LIMIT', '0', '100')) do
  if redis.call('EXISTS', ARGV[4] .. id .. ':meta') == 1 then
    redis.call('ZADD', expiring, decimal(tonumber(ARGV[1]) + 1000), id)  -- not yet expired by Redis
  else
    local entry = redis.call('HGET', final, id)
    if entry then
      local sp = string.find(entry, ' ', 1, true)
      index_move(KEYS[1], id, string.sub(entry, sp + 1), 0, string.sub(entry, 1, sp - 1), nil)
    end
    redis.call('ZREM', expiring, id)
    redis.call('HDEL', final, id)
  end
end
local refused = {}
for i = 5, #ARGV do refused[ARGV[i]] = true end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', '0', ARGV[2])
local claimed = {}
for _, id in ipairs(ids) do
  local take = true
  if #ARGV > 4 then
    local dv = redis.call('HMGET', ARGV[4] .. id .. ':meta', 'definition', 'version')
    take = not (dv[1] and refused[dv[1] .. '\n' .. (dv[2] or '')])
  end
  if take then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    claimed[#claimed + 1] = id
  end
end
return claimed
