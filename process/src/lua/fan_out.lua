-- A fan-out over one or more shards (all of them in one call on a single Redis server, one
-- shard per call on a cluster). KEYS: the shards' wake indexes, then, when ARGV[1] is not
-- empty, the emit's memo key. ARGV: the memo's lifetime in ms ('': no memo in this call),
-- idempotency key, path, at (ms), signal (JSON), then the subscription keys. Returns
-- {reached, 0, id, inbox id, waiting, id, ...}, or {reached, 1} when the memo holds an
-- earlier emit with this key (what it reached; nothing delivered now).

local shards, memo = #KEYS, nil
if ARGV[1] ~= '' then
  memo = KEYS[shards]
  shards = shards - 1
  local first = redis.call('GET', memo)
  if first then return {tonumber(first), 1} end
end
local out, reached = {0, 0}, 0
for s = 1, shards do
  local wake = KEYS[s]
  local instances = shard_key(wake, 'i:')
  local targets, order = {}, {}
  for i = 6, #ARGV do
    local set = sub_key(wake, ARGV[i])
    for _, id in ipairs(redis.call('SMEMBERS', set)) do
      if not targets[id] then targets[id] = set; order[#order + 1] = id end
    end
  end
  table.sort(order)
  for _, id in ipairs(order) do
    local base = instances .. id .. ':'
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
        wake_on_delivery(wake, id, m[1], m[4], tonumber(m[5]), ARGV[4], waiting)
        out[#out + 1] = id; out[#out + 1] = inbox_id; out[#out + 1] = waiting
      end
    end
  end
end
out[1] = reached
if memo then redis.call('SET', memo, reached, 'PX', ARGV[1], 'NX') end
return out
