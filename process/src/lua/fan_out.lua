-- One shard's part of a fan-out. KEYS: 1 the shard's wake index. ARGV: key prefix of the
-- shard's instances ("<prefix>:{<shard>}:i:"), idempotency key, path, at (ms), signal (JSON),
-- then the subscription keys. Returns {reached, id, inbox id, waiting, id, ...}.

local targets, order = {}, {}
for i = 6, #ARGV do
  local set = sub_key(KEYS[1], ARGV[i])
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    if not targets[id] then targets[id] = set; order[#order + 1] = id end
  end
end
table.sort(order)
local out, reached = {0}, 0
for _, id in ipairs(order) do
  local base = ARGV[1] .. id .. ':'
  local meta, keys = base .. 'meta', base .. 'keys'
  local m = redis.call('HMGET', meta, 'status', 'parked', 'waits', 'lease_worker',
                       'lease_expires')
  if not m[1] then
    redis.call('SREM', targets[id], id)  -- expired after its retention
  elseif not final_for_writes(m[1], m[2]) then
    reached = reached + 1
    if ARGV[2] == '' or not redis.call('HGET', keys, ARGV[2]) then
      local inbox_id, waiting = append_inbox(meta, base .. 'inbox', base .. 'inbox_idx', keys,
                                             ARGV[2], ARGV[3], ARGV[4], ARGV[5], m[3])
      local w = wake_of(m[1], m[4], tonumber(m[5]), m[3], base .. 'inbox_idx', base .. 'timers')
      if w then redis.call('ZADD', KEYS[1], w, id) else redis.call('ZREM', KEYS[1], id) end
      out[#out + 1] = id; out[#out + 1] = inbox_id; out[#out + 1] = waiting
    end
  end
end
out[1] = reached
return out
