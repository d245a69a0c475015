-- KEYS: 1 wake index. ARGV: scripts::claim_args (script_calls.hpp), read as arg_<name>.
-- Hides what it returns until `until`; refused instances are neither returned nor hidden.
-- Also takes final instances whose retention ended (and that Redis expired) out of the
-- operators' index. Reads everything first, then writes (`here`).

local expiring, final = shard_key(KEYS[1], 'idx:expiring'), shard_key(KEYS[1], 'idx:final')
local others = {expiring, final}
local function meta(id)
  local key = arg_instance_prefix .. id .. ':meta'
  others[#others + 1] = key
  return key
end

-- Final instances whose retention ended: still there (Redis has not expired them yet), or
-- gone, with their index entry ("<status> <definition>", or false).
local ended, gone = {}, {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', expiring, '-inf', arg_now, 'LIMIT', '0', '100')) do
  if redis.call('EXISTS', meta(id)) == 1 then
    ended[#ended + 1] = id
  else
    local entry = redis.call('HGET', final, id)
    gone[#gone + 1] = {id, entry}
    if entry then
      local sp = string.find(entry, ' ', 1, true)
      index_move_keys(others, KEYS[1], string.sub(entry, sp + 1), string.sub(entry, 1, sp - 1), nil)
    end
  end
end

local refused = {}
for i = arg_refused_at, arg_refused_at + arg_refused_n - 1 do refused[ARGV[i]] = true end
local claimed = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', arg_now, 'LIMIT', '0', arg_limit)
for _, id in ipairs(due) do
  local take = true
  if arg_refused_n > 0 then
    local dv = redis.call('HMGET', meta(id), 'definition', 'version')
    take = not (dv[1] and refused[dv[1] .. '\n' .. (dv[2] or '')])
  end
  if take then claimed[#claimed + 1] = id end
end

if on_cluster then here(others) end
for _, id in ipairs(ended) do
  redis.call('ZADD', expiring, decimal(tonumber(arg_now) + 1000), id)  -- not yet expired by Redis
end
for _, g in ipairs(gone) do
  local id, entry = g[1], g[2]
  if entry then
    local sp = string.find(entry, ' ', 1, true)
    index_move(KEYS[1], id, string.sub(entry, sp + 1), 0, string.sub(entry, 1, sp - 1), nil)
  end
  redis.call('ZREM', expiring, id)
  redis.call('HDEL', final, id)
end
for _, id in ipairs(claimed) do redis.call('ZADD', KEYS[1], arg_until, id) end
return claimed
