-- ARGV: scripts::queue_args (script_calls.hpp), read as arg_<name>; arg_op says which of
-- enqueue, admit, leave (the instances in arg_leaving) and describe. The queue's keys share
-- its hash tag; arg_base is their common start, and a partition's line is
-- arg_base .. 'w:' .. partition.
-- KEYS: 1 entries (hash: instance -> cjson {p, pr, d, t}), 2 dedup (hash: dedup id ->
-- instance), 3 ring (list: partitions with waiting entries, in turn), 4 admitted (sorted
-- set: instance scored by its next check, ms), 5 held (hash: partition -> admitted),
-- 6 window (sorted set: admissions in the rate window, scored by time), 7 seq (counter),
-- 8 waits (hash: partition -> waiting), 9 the calling worker's admissions (set of the
-- instances it admitted; arg_base .. 'k:' alone for a caller that is no worker), then the
-- lines this call may touch.
-- A line is a sorted set scored priority * 2^40 + seq: lowest priority, then oldest.
-- The script touches no key it was not given: on a cluster, a slot being migrated refuses
-- a call whose declared keys are not all on one node before it runs, whereas a key reached
-- undeclared is refused half-way, after the writes before it.
-- process/include/keel/process/detail/queue_book.hpp keeps the same rules in memory.

local lines = {}
for i = 10, #KEYS do lines[string.sub(KEYS[i], #arg_base + 3)] = KEYS[i] end
local function line(p) return lines[p] end

local function count_waiting(p, by)
  if redis.call('HINCRBY', KEYS[8], p, by) <= 0 then redis.call('HDEL', KEYS[8], p) end
end

local concurrency, pc = tonumber(arg_concurrency), tonumber(arg_partition_concurrency)
local rate, per = tonumber(arg_rate), tonumber(arg_per)
local wc = arg_worker ~= '' and tonumber(arg_worker_concurrency) or 0

-- Whether the limits let one more of partition p in at now.
local function has_room(p, now)
  if concurrency > 0 and redis.call('ZCARD', KEYS[4]) >= concurrency then return false end
  if pc > 0 and tonumber(redis.call('HGET', KEYS[5], p) or '0') >= pc then return false end
  if rate > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - per)
    if redis.call('ZCARD', KEYS[6]) >= rate then return false end
  end
  return true
end

-- The calling worker's admissions that still hold a slot under its name, counted against
-- worker_concurrency. Its set is pruned here rather than at each leave, so that a leave needs
-- no key of the admitting worker (and a worker of a build before worker_concurrency, which
-- leaves without touching the set, leaves no count behind). The set's size bounds the count
-- from above, so it is pruned (read whole) only when that bound reaches the limit. It
-- outlives its worker by worker_set_ttl at most.
local worker_set_ttl = 3600000
local function worker_admitted(exact)
  if wc == 0 then return 0 end
  local bound = redis.call('SCARD', KEYS[9])
  if bound < wc and not exact then return bound end
  local n = 0
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[9])) do
    local raw = redis.call('HGET', KEYS[1], id)
    if raw and cjson.decode(raw).w == arg_worker and redis.call('ZSCORE', KEYS[4], id) then
      n = n + 1
    else
      redis.call('SREM', KEYS[9], id)
    end
  end
  if n > 0 then redis.call('PEXPIRE', KEYS[9], worker_set_ttl) end
  return n
end

-- Whether the calling worker may take in one more (mine: its count so far, from above).
local function worker_has_room(mine)
  if wc == 0 or mine < wc then return true, mine end
  mine = worker_admitted(true)
  return mine < wc, mine
end

local function admit_entry(p, id, e, now)
  redis.call('ZADD', KEYS[4], now + tonumber(arg_recheck), id)
  redis.call('HINCRBY', KEYS[5], p, 1)
  if rate > 0 then
    redis.call('ZADD', KEYS[6], now, id .. '@' .. now)
    redis.call('PEXPIRE', KEYS[6], per + 60000)
  end
  if wc > 0 then
    e.w = arg_worker
    redis.call('SADD', KEYS[9], id)
    redis.call('PEXPIRE', KEYS[9], worker_set_ttl)
  end
  return cjson.encode(e)
end

-- {instance, fresh 0/1, admitted at once 0/1}
local function enqueue()
  if not line(arg_partition) then return redis.error_reply('queue: enqueue without its line') end
  if redis.call('HEXISTS', KEYS[1], arg_instance) == 1 then return {arg_instance, 0, 0} end
  if arg_dedup ~= '' then
    local holder = redis.call('HGET', KEYS[2], arg_dedup)
    if holder then return {holder, 0, 0} end
    redis.call('HSET', KEYS[2], arg_dedup, arg_instance)
  end
  local now = tonumber(arg_now)
  local e = {p = arg_partition, pr = tonumber(arg_priority), d = arg_dedup, t = now}
  if redis.call('LLEN', KEYS[3]) == 0 and has_room(arg_partition, now) and
     worker_has_room(worker_admitted(false)) then
    redis.call('HSET', KEYS[1], arg_instance, admit_entry(arg_partition, arg_instance, e, now))
    return {arg_instance, 1, 1}
  end
  local record = cjson.encode(e)
  local seq = redis.call('INCR', KEYS[7])
  local score = tonumber(arg_priority) * 1099511627776 + seq
  redis.call('ZADD', line(arg_partition), string.format('%.0f', score), arg_instance)
  if redis.call('ZCARD', line(arg_partition)) == 1 then
    redis.call('RPUSH', KEYS[3], arg_partition)
  end
  count_waiting(arg_partition, 1)
  redis.call('HSET', KEYS[1], arg_instance, record)
  return {arg_instance, 1, 0}
end

local function admit()
  local now, max = tonumber(arg_now), tonumber(arg_max)
  local recheck = tonumber(arg_recheck)
  local out = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, max)) do
    redis.call('ZADD', KEYS[4], now + recheck, id)
    local e = cjson.decode(redis.call('HGET', KEYS[1], id) or '{"t":0}')
    out[#out + 1] = {id, e.t, 0}
  end
  local rate_bound, undeclared = false, false
  local mine, room = worker_admitted(false), true
  while #out < max do
    if concurrency > 0 and redis.call('ZCARD', KEYS[4]) >= concurrency then break end
    room, mine = worker_has_room(mine)
    if not room then break end
    if rate > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - per)
      if redis.call('ZCARD', KEYS[6]) >= rate then
        rate_bound = true
        break
      end
    end
    -- The next partition in turn with room. One whose line this call was not given (the
    -- ring changed since the caller read it) stays first in turn for the next round.
    local picked = nil
    for _ = 1, redis.call('LLEN', KEYS[3]) do
      local p = redis.call('LINDEX', KEYS[3], 0)
      local room = pc == 0 or tonumber(redis.call('HGET', KEYS[5], p) or '0') < pc
      if room and not line(p) then
        undeclared = true
        break
      end
      redis.call('LMOVE', KEYS[3], KEYS[3], 'LEFT', 'RIGHT')
      if room then
        picked = p
        break
      end
    end
    if not picked then break end
    local head = redis.call('ZPOPMIN', line(picked))
    local id = head[1]
    if redis.call('ZCARD', line(picked)) == 0 then redis.call('LREM', KEYS[3], -1, picked) end
    count_waiting(picked, -1)
    local e = cjson.decode(redis.call('HGET', KEYS[1], id))
    redis.call('HSET', KEYS[1], id, admit_entry(picked, id, e, now))
    mine = mine + 1
    out[#out + 1] = {id, e.t, 1}
  end
  -- {next ms or -1, waiting 0/1, entries...}: when time alone can change the answer.
  local waiting = redis.call('LLEN', KEYS[3]) > 0
  local nxt = -1
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #first > 0 then nxt = tonumber(first[2]) end
  if undeclared then nxt = now end
  if rate_bound and waiting then
    local oldest = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
    local free_at = tonumber(oldest[2]) + per
    if nxt < 0 or free_at < nxt then nxt = free_at end
  end
  local reply = {nxt, waiting and 1 or 0}
  for _, item in ipairs(out) do reply[#reply + 1] = item end
  return reply
end

-- Nil (left, or not queued), or the partition of a waiting entry whose line this call was
-- not given (nothing written).
local function leave_one(id)
  local raw = redis.call('HGET', KEYS[1], id)
  if not raw then return nil end
  local e = cjson.decode(raw)
  if redis.call('ZREM', KEYS[4], id) == 1 then
    if redis.call('HINCRBY', KEYS[5], e.p, -1) <= 0 then redis.call('HDEL', KEYS[5], e.p) end
  else
    if not line(e.p) then return e.p end
    redis.call('ZREM', line(e.p), id)
    if redis.call('ZCARD', line(e.p)) == 0 then redis.call('LREM', KEYS[3], 0, e.p) end
    count_waiting(e.p, -1)
  end
  redis.call('HDEL', KEYS[1], id)
  if e.d ~= '' and redis.call('HGET', KEYS[2], e.d) == id then redis.call('HDEL', KEYS[2], e.d) end
  return nil
end

-- {{instance, partition}...}: the waiting entries whose lines this call was not given, to
-- be left by a call that names them.
local function leave()
  local unnamed = {}
  for i = arg_leaving_at, arg_leaving_at + arg_leaving_n - 1 do
    local p = leave_one(ARGV[i])
    if p then unnamed[#unnamed + 1] = {ARGV[i], p} end
  end
  return unnamed
end

-- {waiting, admitted, more, {name, waiting, admitted}...}
local function describe()
  local names, seen = {}, {}
  for _, p in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    if not seen[p] then seen[p] = true; names[#names + 1] = p end
  end
  for _, p in ipairs(redis.call('HKEYS', KEYS[5])) do
    if not seen[p] then seen[p] = true; names[#names + 1] = p end
  end
  table.sort(names)
  local waiting = 0
  for _, n in ipairs(redis.call('HVALS', KEYS[8])) do waiting = waiting + tonumber(n) end
  local top = tonumber(arg_max)
  local out = {waiting, redis.call('ZCARD', KEYS[4]), #names > top and 1 or 0}
  for i = 1, math.min(#names, top) do
    local p = names[i]
    out[#out + 1] = {p, tonumber(redis.call('HGET', KEYS[8], p) or '0'),
                     tonumber(redis.call('HGET', KEYS[5], p) or '0')}
  end
  return out
end

if arg_op == 'enqueue' then return enqueue() end
if arg_op == 'admit' then return admit() end
if arg_op == 'leave' then return leave() end
return describe()
