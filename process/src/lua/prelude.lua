-- The rest of the prelude (after final.lua): the helpers of the instance scripts. Instance
-- scripts take the instance's keys in the order of `instance_keys()` in redis_store.cpp,
-- then the shard's wake index.

local function has_lease(worker) return worker and worker ~= '' end

-- On Redis Cluster a script writes nothing before it knows that every key it may touch is on
-- this node. While its slot migrates, Redis refuses a command on a key that is not here
-- (moved already, or not existing) but keeps what the script wrote before that command: an
-- idempotency key recorded without its signal was a signal lost for good. Redis checks the
-- KEYS a script declares before it runs; `here` checks the others, the keys a script builds
-- from an index or a prefix, with EXISTS of them and KEYS[1]: Redis refuses it unless every
-- one is here, on the slot's owner and on a node importing it alike (an EXISTS of one key
-- would be answered 0 by the importing node). The store retries a refused script until the
-- migration ends (redis_store.cpp, run). On one server (on_cluster false) it is never called.
local on_cluster = false
local function here(keys)
  for i = 1, #keys, 999 do  -- in chunks: unpack has a stack limit
    redis.call('EXISTS', KEYS[1], unpack(keys, i, math.min(i + 998, #keys)))
  end
end

-- A whole number as the text a script writes: Redis formats a Lua number argument with
-- "%.17g", several times the work of "%d" (the scripts' numbers are whole milliseconds,
-- epochs and ids).
local function decimal(n) return string.format('%d', n) end

-- Deletes the meta's records of failed attempts (note_attempt.lua), whose seqs a journal
-- started over would reuse.
local function clear_attempts(meta)
  for _, field in ipairs(redis.call('HKEYS', meta)) do
    if string.sub(field, 1, 8) == 'attempt:' then redis.call('HDEL', meta, field) end
  end
end

-- Appends ARGV[from], ... (n of them) to a list, in chunks: unpack has a stack limit.
local function rpush_args(key, from, n)
  for i = from, from + n - 1, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, from + n - 1)))
  end
end

-- The documents a commit writes (store.hpp, document_write): n of them, their keys from
-- KEYS[k] (a document's, then its lock's) and their arguments from ARGV[a] (1 when a
-- document is expected or 0, the expected text, the new one). Checked before the commit
-- writes anything: true when each is as expected and nobody holds its lock. A document whose
-- new text is the expected one is a check only and is not written.
local function documents_as_expected(n, k, a)
  for i = 0, n - 1 do
    local key, arg = k + 2 * i, a + 3 * i
    if redis.call('EXISTS', KEYS[key + 1]) == 1 then return false end
    local current = redis.call('GET', KEYS[key])
    if ARGV[arg] == '1' then
      if current ~= ARGV[arg + 1] then return false end
    elseif current then
      return false
    end
  end
  return true
end
local function write_documents(n, k, a)
  for i = 0, n - 1 do
    local arg = a + 3 * i
    if ARGV[arg] ~= '1' or ARGV[arg + 1] ~= ARGV[arg + 2] then
      redis.call('SET', KEYS[k + 2 * i], ARGV[arg + 2])
    end
  end
end

-- 1 when a wait set waits for the path, else 0. The wait set is JSON as waits_text() in
-- json_text.cpp writes it: a path without quotes, backslashes and control characters is in
-- it verbatim, as a "path":"<path>" field, and a field is the only place where that text can
-- be (a quote inside a JSON string is escaped); other paths are compared decoded.
local function waits_for(waits, path)
  if not waits or waits == '' or waits == '[]' then return 0 end
  if not string.find(path, '["\\%c]') then
    return string.find(waits, '"path":"' .. path .. '"', 1, true) and 1 or 0
  end
  for _, sw in ipairs(cjson.decode(waits)) do
    if sw.path == path then return 1 end
  end
  return 0
end

-- When the instance next needs a worker (ms, or nil), and whether its inbox holds a
-- signal its wait set waits for. The engine's wake rule: a final instance needs nobody; a
-- running one needs a worker when its lease expires; a suspended one at its earliest timer
-- or at the arrival of an awaited signal, but not before a lease it still has runs out (and
-- at the lease's end when nothing else).
local function wake_of(status, worker, expires, waits, inbox_idx, timers)
  if not status or is_final(status) then return nil, false end
  local w, waiting = nil, false
  if waits and waits ~= '[]' and waits ~= '' then
    for _, v in ipairs(redis.call('HVALS', inbox_idx)) do
      local sp = string.find(v, ' ', 1, true)
      if waits_for(waits, string.sub(v, sp + 1)) == 1 then
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
  -- Leased (taken to resume): not before the lease ends, and then even with nothing to
  -- resume it (its holder failed before the commit that would have said so).
  if has_lease(worker) and (not w or expires > w) then w = expires end
  return w, waiting
end

-- A signal's idempotency key (may be '': none) recorded in an instance's keys hash for the
-- inbox id it is about to be put in as: false, and nothing written, when the key already
-- names an earlier signal. The check and the record are one HSETNX.
local function claim_key(keys, key, inbox_id)
  return key == '' or redis.call('HSETNX', keys, key, decimal(inbox_id)) == 1
end

-- Puts a signal into an instance's inbox as inbox_id (keys: its inbox and inbox_idx
-- hashes), its key claimed already. The caller moves the meta's next_inbox past it.
local function put_in_inbox(inbox, inbox_idx, inbox_id, path, at, signal)
  redis.call('HSET', inbox, inbox_id, signal)
  redis.call('HSET', inbox_idx, inbox_id, at .. ' ' .. path)
end

-- Appends a signal to an instance's inbox as inbox_id, the meta's next_inbox as read (0 when
-- missing), its key claimed already (keys: its meta, inbox and inbox_idx hashes).
local function append_inbox(meta, inbox, inbox_idx, inbox_id, path, at, signal)
  redis.call('HSET', meta, 'next_inbox', decimal(inbox_id + 1))
  put_in_inbox(inbox, inbox_idx, inbox_id, path, at, signal)
end

-- The wake index after append_inbox (keys: the shard's wake index), without reading the
-- inbox and the timers again: of wake_of's answers only a suspended instance's changes, and
-- only when it waits for the signal: then it needs a worker at the signal's arrival (at), or
-- at the end of a lease it still has, whichever is later, if that is earlier than its time
-- in the index (ZADD LT, which also adds it when it has none). `expires` and `at`: ms, as
-- text.
local function wake_on_delivery(wake, id, status, worker, expires, at, waiting)
  if waiting ~= 1 or status ~= 'suspended' then return end
  local w, lease_end = at, tonumber(expires)
  if has_lease(worker) and lease_end and lease_end > tonumber(at) then w = expires end
  redis.call('ZADD', wake, 'LT', w, id)
end

-- A shard's other keys sit beside its wake index, "<prefix>:{<shard>}:wake":
-- subscriptions sub:<key> (below), and the operators' index: idx:<status>:<definition> (ZSET
-- id -> created ms), idx:defs (SET of the definitions started in the shard), and for final
-- instances that expire, idx:expiring (ZSET id -> expiry ms) with idx:final (HASH id ->
-- "<status> <definition>"), so the index forgets them when Redis does. Stores written
-- before idx:defs kept counters instead, idx:counts (HASH "<status> <definition>" ->
-- instances): its fields still name definitions; its values are no longer kept.
local function shard_key(wake, suffix) return string.sub(wake, 1, -5) .. suffix end
local function sub_key(wake, key) return shard_key(wake, 'sub:' .. key) end

-- A subscription key's instances are the fields of a hash (values empty), which Redis keeps
-- as a listpack while small, about half a one-member set's memory; builds before store
-- level 4 (store.hpp, store_level_compact_subscriptions) kept them as a set's members and
-- read nothing else. Every script here reads either form; a key keeps the form it has, and a
-- new key is a hash only when `compact` (no live worker below level 4). Only a WRONGTYPE
-- answer means the other form; any other error is raised.
local function other_form(reply)
  if type(reply) ~= 'table' or not reply.err then return false end
  if not string.find(reply.err, 'WRONGTYPE', 1, true) then error(reply) end
  return true
end
local function sub_add(key, id, compact)
  if compact then
    if other_form(redis.pcall('HSET', key, id, '')) then redis.call('SADD', key, id) end
  elseif other_form(redis.pcall('SADD', key, id)) then
    redis.call('HSET', key, id, '')
  end
end
local function sub_remove(key, id)
  if other_form(redis.pcall('HDEL', key, id)) then redis.call('SREM', key, id) end
end
local function sub_members(key)
  local ids = redis.pcall('HKEYS', key)
  if other_form(ids) then return redis.call('SMEMBERS', key) end
  return ids
end

-- `queued`: the meta's field of that name, '1' while the instance waits for its queue to admit
-- it (set by start.lua, dropped by the next commit or resumed_and_running).
local function index_status(st, parked, queued)
  if st == 'failed' and parked == '1' then return 'parked' end
  if st == 'suspended' and queued == '1' then return 'queued' end
  return st
end

-- Moves an instance from one index status to another (either may be nil). A count is its
-- set's ZCARD, so a move is two commands.
local function index_move(wake, id, def, created, from, to)
  if from == to then return end
  if from then redis.call('ZREM', shard_key(wake, 'idx:' .. from .. ':' .. def), id) end
  if to then redis.call('ZADD', shard_key(wake, 'idx:' .. to .. ':' .. def), created, id) end
end

-- The keys index_move(wake, _, def, _, from, to) touches, added to `keys`.
local function index_move_keys(keys, wake, def, from, to)
  if from ~= to then
    if from then keys[#keys + 1] = shard_key(wake, 'idx:' .. from .. ':' .. def) end
    if to then keys[#keys + 1] = shard_key(wake, 'idx:' .. to .. ':' .. def) end
  end
  return keys
end

-- What started an instance, as worker refusals name it: "<definition>\n<version>".
local function started_by(def, version) return def .. '\n' .. (version or '') end

-- The lease for a worker that did not hold the instance: the epoch after the last one, and
-- the meta fields that grant it (`expires`: ms, as text).
local function new_lease_fields(last_epoch, worker, expires)
  local epoch = (tonumber(last_epoch) or 0) + 1
  local text = decimal(epoch)
  return epoch, {'epoch', text, 'lease_worker', worker, 'lease_epoch', text,
                 'lease_expires', expires}
end
local function grant_new_lease(meta, last_epoch, worker, expires)
  local epoch, fields = new_lease_fields(last_epoch, worker, expires)
  redis.call('HSET', meta, unpack(fields))
  return epoch
end

-- A take's reply (parse_taken in redis_store.cpp): the grant and the instance, meta (as
-- HGETALL gives it), the journal given, inbox and timers; its last element, 0, becomes 1
-- when the instance was suspended. A take leaves a suspended instance suspended, the lease
-- its only change: the signal or timer that woke it, its wait set, its status and its place
-- in the operators' index stay until the worker commits what it resumed to (usually with the
-- step that follows; docs/architecture.md, "A resumption leaves the operators' index alone").
local function taken_reply(epoch, length, status, expires, taken_over, meta_fields, journal,
                           inbox, timers)
  return {'ok', epoch, length, status, expires, taken_over, meta_fields, journal,
          redis.call('HGETALL', inbox), redis.call('HGETALL', timers), 0}
end

-- A suspended instance a worker took to resume says so until the worker commits (taken_reply)
-- unless its step outlasts half a lease (a renewal) or fails an attempt: then the store says
-- it runs (status, `changed`, the operators' index). m_status, def, created: its meta's.
-- A script calls here_to_resume (its `here`) before its first write. m_queued: the meta's
-- `queued`.
local function resumed_and_running(meta, wake, id, m_status, m_queued, def, created, now)
  if m_status ~= 'suspended' then return end
  redis.call('HSET', meta, 'status', 'running', 'changed', now)
  if m_queued then redis.call('HDEL', meta, 'queued') end
  index_move(wake, id, def, created, index_status(m_status, nil, m_queued), 'running')
end
local function here_to_resume(wake, m_status, m_queued, def)
  if on_cluster and m_status == 'suspended' then
    here(index_move_keys({}, wake, def, index_status(m_status, nil, m_queued), 'running'))
  end
end

-- The shard's index sets that match the filters ('' matches all), as {key, status,
-- definition, count}: the non-empty ones, or with keep_empty every status of every
-- definition the shard has had.
local index_statuses = {'running', 'suspended', 'queued', 'parked', 'failed', 'completed',
                        'cancelled'}
local function index_sets(wake, def_filter, status_filter, keep_empty)
  local defs, seen = {}, {}
  local function add(d)
    if not seen[d] and (def_filter == '' or def_filter == d) then
      seen[d] = true
      defs[#defs + 1] = d
    end
  end
  for _, d in ipairs(redis.call('SMEMBERS', shard_key(wake, 'idx:defs'))) do add(d) end
  for _, f in ipairs(redis.call('HKEYS', shard_key(wake, 'idx:counts'))) do
    local sp = string.find(f, ' ', 1, true)
    if sp then add(string.sub(f, sp + 1)) end
  end
  local out = {}
  for _, d in ipairs(defs) do
    for _, st in ipairs(index_statuses) do
      if status_filter == '' or status_filter == st then
        local key = shard_key(wake, 'idx:' .. st .. ':' .. d)
        local n = redis.call('ZCARD', key)
        if n > 0 or keep_empty then out[#out + 1] = {key, st, d, n} end
      end
    end
  end
  return out
end

-- An instance's entry in its shard's wake index: due at w (ms), or none when w is nil.
local function set_wake(wake, id, w)
  if w then redis.call('ZADD', wake, decimal(w), id) else redis.call('ZREM', wake, id) end
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
  set_wake(KEYS[8], id, w)
  return w
end
