-- The rest of the prelude (after final.lua): the helpers of the instance scripts. Instance
-- scripts take the instance's keys in the order of `instance_keys()` in redis_store.cpp,
-- then the shard's wake index.

local function has_lease(worker) return worker and worker ~= '' end

-- When the instance next needs a worker (ms, or nil), and whether its inbox holds a
-- signal its wait set waits for. The engine's wake rule: a final instance needs nobody; a
-- running one needs a worker when its lease expires; a suspended one at its earliest timer
-- or at the arrival of an awaited signal, but not before a lease it still has runs out.
local function wake_of(status, worker, expires, waits, inbox_idx, timers)
  if not status or is_final(status) then return nil, false end
  local w, waiting = nil, false
  if waits and waits ~= '[]' and waits ~= '' then
    local paths = {}
    for _, sw in ipairs(cjson.decode(waits)) do paths[sw.path] = true end
    for _, v in ipairs(redis.call('HVALS', inbox_idx)) do
      local sp = string.find(v, ' ', 1, true)
      if paths[string.sub(v, sp + 1)] then
        waiting = true
        local t = tonumber(string.sub(v, 1, sp - 1))
        if not w or t < w then w = t end
      end
    end
  end
  if status == 'running' then
    if has_lease(worker) then return expires, waiting end
    return 0, waiting
  end
  for _, t in ipairs(redis.call('HVALS', timers)) do
    local d = tonumber(string.sub(t, 1, (string.find(t, ' ', 1, true) or 0) - 1))
    if not w or d < w then w = d end
  end
  if w and has_lease(worker) and expires > w then w = expires end
  return w, waiting
end

-- Appends a signal to an instance's inbox (keys: its meta, inbox, inbox_idx and keys
-- hashes; key may be '') and says whether its wait set (JSON) waits for the path.
local function append_inbox(meta, inbox, inbox_idx, keys, key, path, at, signal, waits)
  local inbox_id = redis.call('HINCRBY', meta, 'next_inbox', 1) - 1
  redis.call('HSET', inbox, inbox_id, signal)
  redis.call('HSET', inbox_idx, inbox_id, at .. ' ' .. path)
  if key ~= '' then redis.call('HSET', keys, key, inbox_id) end
  local waiting = 0
  if waits and waits ~= '[]' then
    for _, sw in ipairs(cjson.decode(waits)) do
      if sw.path == path then waiting = 1 end
    end
  end
  return inbox_id, waiting
end

-- The wake index after append_inbox (keys: the shard's wake index), without reading the
-- inbox and the timers again: of wake_of's answers only a suspended instance's changes, and
-- only when it waits for the signal: then it needs a worker at the signal's arrival (at), or
-- at the end of a lease it still has, whichever is later, if that is earlier than its time
-- in the index (ZADD LT, which also adds it when it has none).
local function wake_on_delivery(wake, id, status, worker, expires, at, waiting)
  if waiting ~= 1 or status ~= 'suspended' then return end
  local w = tonumber(at)
  if has_lease(worker) and expires and expires > w then w = expires end
  redis.call('ZADD', wake, 'LT', w, id)
end

-- A shard's other keys sit beside its wake index, "<prefix>:{<shard>}:wake":
-- subscription sets sub:<key>, and the operators' index: idx:<status>:<definition> (ZSET
-- id -> created ms), idx:counts (HASH "<status> <definition>" -> instances), and for final
-- instances that expire, idx:expiring (ZSET id -> expiry ms) with idx:final (HASH id ->
-- "<status> <definition>"), so the index forgets them when Redis does.
local function shard_key(wake, suffix) return string.sub(wake, 1, -5) .. suffix end
local function sub_key(wake, key) return shard_key(wake, 'sub:' .. key) end

local function index_status(st, parked)
  if st == 'failed' and parked == '1' then return 'parked' end
  return st
end

-- Moves an instance from one index status to another (either may be nil).
local function index_move(wake, id, def, created, from, to)
  if from == to then return end
  local counts = shard_key(wake, 'idx:counts')
  if from then
    redis.call('ZREM', shard_key(wake, 'idx:' .. from .. ':' .. def), id)
    redis.call('HINCRBY', counts, from .. ' ' .. def, -1)
  end
  if to then
    redis.call('ZADD', shard_key(wake, 'idx:' .. to .. ':' .. def), created, id)
    redis.call('HINCRBY', counts, to .. ' ' .. def, 1)
  end
end

-- KEYS: 1 meta, 2 journal, 3 inbox, 4 inbox_idx, 5 keys, 6 timers, 7 commits, 8 wake
local function reindex(id)
  local m = redis.call('HMGET', KEYS[1], 'status', 'lease_worker', 'lease_expires', 'waits')
  local w
  if m[1] == 'running' then  -- wake_of's answer, without reading the inbox and timers
    w = has_lease(m[2]) and tonumber(m[3]) or 0
  else
    w = wake_of(m[1], m[2], tonumber(m[3]), m[4], KEYS[4], KEYS[6])
  end
  if w then redis.call('ZADD', KEYS[8], w, id) else redis.call('ZREM', KEYS[8], id) end
  return w
end
