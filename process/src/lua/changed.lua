-- When each of a page's instances (all of one shard) last changed: its last transition, or
-- for one that runs, its newest journal entry if later (plain step appends leave the meta
-- hash alone: they are the hot path). KEYS: (meta, journal) per instance.

local out = {}
for i = 1, #KEYS, 2 do
  local m = redis.call('HMGET', KEYS[i], 'changed', 'status')
  local changed = tonumber(m[1] or '0')
  if m[2] == 'running' then
    local last = redis.call('LINDEX', KEYS[i + 1], -1)
    local at = last and cjson.decode(last).at
    if type(at) == 'number' and at > changed then changed = at end
  end
  out[#out + 1] = string.format('%d', changed)
end
return out
