#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <keel/framework/concurrency/nursery.hpp>
#include <keel/process/redis_store.hpp>
#include <map>

#include "listing.hpp"

namespace keel::process {
namespace {

// --- Lua -------------------------------------------------------------------------------
// Every script but load and claim starts with this prelude (final_lua, then prelude_rest).
// Instance scripts take the instance's keys in the order of `instance_keys()` below, then
// the shard's wake index.

constexpr std::string_view final_lua = R"lua(
local function is_final(st) return st == 'completed' or st == 'cancelled' or st == 'failed' end
local function final_for_writes(st, parked)
  return st == 'completed' or st == 'cancelled' or (st == 'failed' and parked ~= '1')
end
)lua";

constexpr std::string_view prelude_rest = R"lua(
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
  local w = wake_of(m[1], m[2], tonumber(m[3]), m[4], KEYS[4], KEYS[6])
  if w then redis.call('ZADD', KEYS[8], w, id) else redis.call('ZREM', KEYS[8], id) end
  return w
end
)lua";

// ARGV: id, definition, params, worker, now, lease expiry, then the subscription keys
constexpr std::string_view start_lua = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'status')}
end
local subs = {}
for i = 7, #ARGV do
  subs[#subs + 1] = ARGV[i]
  redis.call('SADD', sub_key(KEYS[8], ARGV[i]), ARGV[1])
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'definition', ARGV[2], 'params', ARGV[3],
           'status', 'running', 'parked', '0', 'epoch', 1, 'lease_worker', ARGV[4],
           'lease_epoch', 1, 'lease_expires', ARGV[6], 'next_inbox', 1, 'waits', '[]',
           'created', ARGV[5], 'changed', ARGV[5], 'subs', cjson.encode(subs))
index_move(KEYS[8], ARGV[1], ARGV[2], ARGV[5], nil, 'running')
reindex(ARGV[1])
return {1, 'running'}
)lua";

// ARGV: with journal (1/0). Without it, the journal part of a running instance is its newest
// entry (for `changed`, which plain step appends leave alone).
constexpr std::string_view load_lua = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local journal = {}
if ARGV[1] == '1' then
  journal = redis.call('LRANGE', KEYS[2], 0, -1)
elseif redis.call('HGET', KEYS[1], 'status') == 'running' then
  journal = {redis.call('LINDEX', KEYS[2], -1)}
end
return {redis.call('HGETALL', KEYS[1]), journal, redis.call('HGETALL', KEYS[3]),
        redis.call('HGETALL', KEYS[6])}
)lua";

// ARGV (positional, no JSON to decode on the hot path):
//  1 id, 2 worker, 3 epoch, 4 expected journal length, 5 status or '', 6 parked (1/0),
//  7 has error (1/0), 8 error, 9 has result (1/0), 10 result, 11 release (1/0),
// 12 audit (1/0), 13 retention ms, 14 has waits (1/0), 15 waits (JSON),
// 16 #consume, 17 #cancel, 18 #add, 19 now (ms), then the consumed inbox ids, the cancelled
// timer seqs, the added timers as (seq, due, name) triples, and last the journal entries.
constexpr std::string_view commit_lua = R"lua(
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch',
                     'lease_expires', 'waits', 'error', 'definition', 'created', 'retries')
if not m[1] then return 'not_found' end
if final_for_writes(m[1], m[2]) then return 'finished' end
if m[3] ~= ARGV[2] or m[4] ~= ARGV[3] then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[4]) then return 'conflict' end
local n_consume, n_cancel, n_add = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18])
local at = 20
for i = at, at + n_consume - 1 do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then return 'inbox_missing' end
end
-- Validated: write.
for i = at, at + n_consume - 1 do
  redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[4], ARGV[i])
end
at = at + n_consume
for i = at, at + n_cancel - 1 do redis.call('HDEL', KEYS[6], ARGV[i]) end
at = at + n_cancel
for i = at, at + 3 * n_add - 1, 3 do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[i + 2])
end
at = at + 3 * n_add
for i = at, #ARGV, 1000 do  -- in chunks: unpack has a stack limit
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end

local status, waits, worker, parked = m[1], m[6], m[3], ARGV[6]
if ARGV[5] ~= '' then status = ARGV[5] end
if ARGV[14] == '1' then waits = ARGV[15] end
local final = ARGV[5] ~= '' and is_final(status) and parked ~= '1'
if final then
  redis.call('DEL', KEYS[6])
  waits = '[]'
  local subs = redis.call('HGET', KEYS[1], 'subs')
  if subs then
    for _, k in ipairs(cjson.decode(subs)) do redis.call('SREM', sub_key(KEYS[8], k), ARGV[1]) end
  end
end
if ARGV[11] == '1' then worker = '' end
local fields = {}
local function set(k, v) fields[#fields + 1] = k; fields[#fields + 1] = v end
if status ~= m[1] then set('status', status) end
if waits ~= m[6] then set('waits', waits) end
if parked ~= m[2] then set('parked', parked) end
if ARGV[9] == '1' then set('result', ARGV[10]) end
local clear_error = ARGV[5] ~= '' and status ~= 'failed'
if ARGV[7] == '1' and not clear_error then set('error', ARGV[8]) end
if worker ~= m[3] then set('lease_worker', ''); set('lease_epoch', 0) end
set('changed', ARGV[19])
redis.call('HSET', KEYS[1], unpack(fields))
index_move(KEYS[8], ARGV[1], m[8], m[9], index_status(m[1], m[2]), index_status(status, parked))
if clear_error and m[7] then redis.call('HDEL', KEYS[1], 'error') end
if ARGV[12] == '1' then redis.call('RPUSH', KEYS[7], ARGV[3] .. ' ' .. ARGV[2]) end
local w, waiting = wake_of(status, worker, tonumber(m[5]), waits, KEYS[4], KEYS[6])
if w then redis.call('ZADD', KEYS[8], w, ARGV[1]) else redis.call('ZREM', KEYS[8], ARGV[1]) end
if final and tonumber(ARGV[13]) > 0 then
  for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ARGV[13]) end
  for r = 1, tonumber(m[10] or '0') do redis.call('PEXPIRE', KEYS[2] .. ':' .. r, ARGV[13]) end
  redis.call('ZADD', shard_key(KEYS[8], 'idx:expiring'), tonumber(ARGV[19]) + tonumber(ARGV[13]),
             ARGV[1])
  redis.call('HSET', shard_key(KEYS[8], 'idx:final'), ARGV[1], status .. ' ' .. m[8])
end
return {'ok', (waiting and ARGV[14] == '1') and 1 or 0}
)lua";

// The common step: journal entries appended to a running instance, nothing else changed
// (status, wait set, timers, inbox and lease as they are, so the wake index stands). Kept
// apart from commit_lua because Redis's cost per call grows with the keys and arguments a
// script receives. Anything but a plainly running instance answers 'general': the caller
// sends the general commit instead.
// It leaves `changed` in the meta hash as it is: readers take the newest entry's time.
// KEYS: 1 meta, 2 journal, 3 commits. ARGV: 1 worker, 2 epoch, 3 expected journal length,
// 4 audit (1/0), 5 now (ms), then the journal entries.
constexpr std::string_view append_lua = R"lua(
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch')
if not m[1] then return 'not_found' end
if m[1] ~= 'running' or m[2] == '1' then
  if final_for_writes(m[1], m[2]) then return 'finished' end
  return 'general'
end
if m[3] ~= ARGV[1] or m[4] ~= ARGV[2] then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return 'conflict' end
for i = 6, #ARGV, 1000 do  -- in chunks: unpack has a stack limit
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if ARGV[4] == '1' then redis.call('RPUSH', KEYS[3], ARGV[2] .. ' ' .. ARGV[1]) end
return 'ok'
)lua";

// ARGV: id, idempotency key, path, at (ms), signal (JSON)
constexpr std::string_view deliver_lua = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no_instance', 0, 0} end
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'waits')
if final_for_writes(m[1], m[2]) then return {'finished', 0, 0} end
if ARGV[2] ~= '' then
  local first = redis.call('HGET', KEYS[5], ARGV[2])
  if first then return {'duplicate', 0, tonumber(first)} end
end
local inbox_id, waiting = append_inbox(KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3],
                                       ARGV[4], ARGV[5], m[3])
reindex(ARGV[1])
return {'stored', waiting, inbox_id}
)lua";

// One shard's part of a fan-out. KEYS: 1 the shard's wake index. ARGV: key prefix of the
// shard's instances ("<prefix>:{<shard>}:i:"), idempotency key, path, at (ms), signal (JSON),
// then the subscription keys. Returns {reached, id, inbox id, waiting, id, ...}.
constexpr std::string_view fan_out_lua = R"lua(
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
)lua";

// ARGV: id, worker, now, ttl
constexpr std::string_view acquire_lua = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_expires',
                     'lease_epoch')
if final_for_writes(m[1], m[2]) then return {'finished'} end
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
)lua";

// ARGV: id, worker, epoch, now, ttl (renew) or id, worker, epoch (release)
constexpr std::string_view renew_lua = R"lua(
local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if not has_lease(m[1]) or m[1] ~= ARGV[2] or m[2] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'lease_expires', tonumber(ARGV[4]) + tonumber(ARGV[5]))
reindex(ARGV[1])
return 1
)lua";

constexpr std::string_view release_lua = R"lua(
local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if not has_lease(m[1]) or m[1] ~= ARGV[2] or m[2] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'lease_worker', '', 'lease_epoch', 0)
reindex(ARGV[1])
return 1
)lua";

// KEYS: 1 wake index. ARGV: now, limit, claimed until, key prefix of the shard's instances.
// Hides what it returns until then. Also takes final instances whose retention ended (and
// that Redis expired) out of the operators' index.
constexpr std::string_view claim_lua = R"lua(
local expiring, final = shard_key(KEYS[1], 'idx:expiring'), shard_key(KEYS[1], 'idx:final')
for _, id in ipairs(redis.call('ZRANGEBYSCORE', expiring, '-inf', ARGV[1], 'LIMIT', 0, 100)) do
  if redis.call('EXISTS', ARGV[4] .. id .. ':meta') == 1 then
    redis.call('ZADD', expiring, tonumber(ARGV[1]) + 1000, id)  -- not yet expired by Redis
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
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[3], id) end
return ids
)lua";

// KEYS: instance keys. ARGV: 1 id, 2 expected journal length, 3 keep, 4 now (ms), then the
// restored inbox entries as (inbox id, "<at ms> <path>", signal JSON) triples.
constexpr std::string_view rewind_lua = R"lua(
local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_expires',
                     'definition', 'created', 'retries', 'subs')
if not m[1] then return 'not_found' end
if not is_final(m[1]) then return 'wrong_state' end
local now, keep, length = tonumber(ARGV[4]), tonumber(ARGV[3]), redis.call('LLEN', KEYS[2])
if length ~= tonumber(ARGV[2]) then return 'conflict' end
if keep > length then return 'out_of_range' end
if has_lease(m[3]) and tonumber(m[4]) > now then return 'busy' end
local n = tonumber(m[7] or '0') + 1
if length > 0 then redis.call('COPY', KEYS[2], KEYS[2] .. ':' .. n) end
local history = redis.call('HGET', KEYS[1], 'retry_log')
history = history and cjson.decode(history) or {}
history[#history + 1] = {ARGV[3], ARGV[4], tostring(length)}
if keep == 0 then redis.call('DEL', KEYS[2]) else redis.call('LTRIM', KEYS[2], 0, keep - 1) end
redis.call('DEL', KEYS[6])
for i = 5, #ARGV, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
end
for i = 1, 7 do redis.call('PERSIST', KEYS[i]) end
for r = 1, n do redis.call('PERSIST', KEYS[2] .. ':' .. r) end
redis.call('ZREM', shard_key(KEYS[8], 'idx:expiring'), ARGV[1])
redis.call('HDEL', shard_key(KEYS[8], 'idx:final'), ARGV[1])
if m[2] ~= '1' and m[8] then
  for _, k in ipairs(cjson.decode(m[8])) do redis.call('SADD', sub_key(KEYS[8], k), ARGV[1]) end
end
redis.call('HSET', KEYS[1], 'status', 'running', 'parked', '0', 'lease_worker', '',
           'lease_epoch', 0, 'waits', '[]', 'changed', ARGV[4], 'retries', n,
           'retry_log', cjson.encode(history))
redis.call('HDEL', KEYS[1], 'error', 'result')
index_move(KEYS[8], ARGV[1], m[5], m[6], index_status(m[1], m[2]), 'running')
reindex(ARGV[1])
return 'ok'
)lua";

// One shard's part of a listing, newest first: a merge of the shard's index sets that match
// the filters, each read a small, growing chunk at a time, so a page costs about `limit`
// entries however many instances there are. KEYS: 1 the shard's wake index. ARGV:
// 1 definition or '', 2 status or '', 3 id prefix, 4 highest score (created ms, or '+inf'),
// 5 cursor id: with it, entries scored exactly ARGV[4] are taken only below that id,
// 6 lowest score (or '-inf'), 7 limit, 8 budget: how many entries it may examine in all
// (each set its share; filters other than definition and status skip entries).
// Returns {boundary score, boundary id, then (id, score, status, definition) per entry,
// newest first}: the boundary ('' when none) is where a set stopped for the budget;
// everything above it was examined, and the caller goes on below it.
constexpr std::string_view list_lua = R"lua(
local counts = redis.call('HGETALL', shard_key(KEYS[1], 'idx:counts'))
local limit, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local sets = {}
for i = 1, #counts, 2 do
  local sp = string.find(counts[i], ' ', 1, true)
  local st, def = string.sub(counts[i], 1, sp - 1), string.sub(counts[i], sp + 1)
  if tonumber(counts[i + 1]) > 0 and (ARGV[2] == '' or ARGV[2] == st)
     and (ARGV[1] == '' or ARGV[1] == def) then
    sets[#sets + 1] = {key = shard_key(KEYS[1], 'idx:' .. st .. ':' .. def), status = st,
                       def = def, rows = {}, pos = 1, offset = 0, more = true}
  end
end
local prefix, top, cursor = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local plain = prefix == ''
local per_set = math.max(limit, math.floor(budget / math.max(1, #sets)))
local first_chunk = math.min(limit + 1, math.max(8, math.ceil(2 * limit / math.max(1, #sets))))
-- The head of each set: its newest entry that passes the filters (id, score, score as Redis
-- wrote it), or, once the set has examined its share of the budget, a stop mark at the last
-- entry it examined.
local hid, hscore, htext, stop = {}, {}, {}, {}
local function advance(k)
  local s = sets[k]
  while true do
    if s.pos > #s.rows then
      hid[k] = nil
      if not s.more then return end
      if s.offset >= per_set then
        hid[k], hscore[k], stop[k] = s.last_id, tonumber(s.last_text), true
        return
      end
      local n = math.min(s.chunk, per_set - s.offset)
      s.rows = redis.call('ZREVRANGEBYSCORE', s.key, ARGV[4], ARGV[6], 'WITHSCORES', 'LIMIT',
                          s.offset, n)
      s.pos, s.offset, s.more = 1, s.offset + #s.rows / 2, #s.rows / 2 == n
      s.chunk = math.min(2 * s.chunk, 256)
      if #s.rows == 0 then return end
    end
    local id, text = s.rows[s.pos], s.rows[s.pos + 1]
    s.pos, s.last_id, s.last_text = s.pos + 2, id, text
    if plain or string.find(id, prefix, 1, true) == 1 then
      local score = tonumber(text)
      if not (cursor ~= '' and score == top and id >= cursor) then
        hid[k], hscore[k], htext[k] = id, score, text
        return
      end
    end
  end
end
for k, s in ipairs(sets) do
  s.chunk = first_chunk
  advance(k)
end
local out, taken = {'', ''}, 0
while taken < limit do
  local b
  for k = 1, #sets do
    local id = hid[k]
    if id and (not b or hscore[k] > hscore[b] or (hscore[k] == hscore[b] and id > hid[b])) then
      b = k
    end
  end
  if not b then break end
  if stop[b] then
    out[1], out[2] = string.format('%d', hscore[b]), hid[b]
    break
  end
  out[#out + 1] = hid[b]; out[#out + 1] = htext[b]; out[#out + 1] = sets[b].status
  out[#out + 1] = sets[b].def
  taken = taken + 1
  advance(b)
end
return out
)lua";

// When each of a page's instances (all of one shard) last changed: its last transition, or
// for one that runs, its newest journal entry if later (plain step appends leave the meta
// hash alone: they are the hot path). KEYS: (meta, journal) per instance.
constexpr std::string_view changed_lua = R"lua(
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
)lua";

redis::script with_prelude(std::string_view body) {
    return redis::script(std::string(final_lua) + std::string(prelude_rest) + std::string(body));
}

// Every script of the store, built once.
struct store_scripts {
    redis::script start = with_prelude(start_lua);
    redis::script load{std::string(load_lua)};
    redis::script commit = with_prelude(commit_lua);
    redis::script append{std::string(final_lua) + std::string(append_lua)};
    redis::script deliver = with_prelude(deliver_lua);
    redis::script fan_out = with_prelude(fan_out_lua);
    redis::script acquire = with_prelude(acquire_lua);
    redis::script renew = with_prelude(renew_lua);
    redis::script release = with_prelude(release_lua);
    redis::script claim = with_prelude(claim_lua);
    redis::script rewind = with_prelude(rewind_lua);
    redis::script list = with_prelude(list_lua);
    redis::script changed{std::string(changed_lua)};
};

const store_scripts& scripts() {
    static const store_scripts all;
    return all;
}

// --- encoding ---------------------------------------------------------------------------

// Due times and lease expiries round up, "now" rounds down: nothing fires early.
std::int64_t ms_ceil(time_point t) {
    return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::int64_t ms_floor(time_point t) {
    return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::int64_t ms_ceil(duration d) {
    return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}
time_point from_ms(std::int64_t ms) {
    return time_point(std::chrono::milliseconds(ms));
}

std::string waits_json(const std::vector<signal_wait>& waits) {
    auto j = nlohmann::json::array();
    for (const auto& w : waits) j.push_back({{"seq", w.seq}, {"path", w.path}});
    return j.dump();
}

// An inbox entry as the inbox hash keeps it.
std::string signal_json(const inbox_entry& signal) {
    nlohmann::json j{
        {"path", signal.path}, {"payload", signal.payload}, {"at", ms_floor(signal.at)}};
    if (!signal.key.empty()) j["key"] = signal.key;
    return j.dump();
}

std::vector<signal_wait> parse_waits(std::string_view text) {
    std::vector<signal_wait> out;
    for (const auto& j : nlohmann::json::parse(text))
        out.push_back(
            signal_wait{j.at("seq").get<std::uint64_t>(), j.at("path").get<std::string>()});
    return out;
}

// The retry log: a JSON array of [from, at ms, journal length] (as strings or numbers).
std::vector<retry_record> parse_retry_log(std::string_view text) {
    auto number = [](const nlohmann::json& j) -> std::int64_t {
        return j.is_string() ? std::stoll(j.get<std::string>()) : j.get<std::int64_t>();
    };
    std::vector<retry_record> out;
    for (const auto& r : nlohmann::json::parse(text))
        out.push_back(retry_record{static_cast<std::uint64_t>(number(r.at(0))),
                                   from_ms(number(r.at(1))),
                                   static_cast<std::uint64_t>(number(r.at(2)))});
    return out;
}

std::string text_of(const redis::reply& r) {
    return r.text() ? std::string(*r.text()) : std::string();
}

std::map<std::string, std::string> pairs(const redis::reply& r) {
    std::map<std::string, std::string> out;
    auto e = r.elements();
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) out.emplace(text_of(e[i]), text_of(e[i + 1]));
    return out;
}

std::int64_t to_int(const std::string& s) {
    return s.empty() ? 0 : std::stoll(s);
}

std::optional<store_error> parse_store_error(std::string_view code) {
    if (code == "not_found") return store_error::not_found;
    if (code == "fenced") return store_error::fenced;
    if (code == "conflict") return store_error::conflict;
    if (code == "inbox_missing") return store_error::inbox_missing;
    if (code == "finished") return store_error::finished;
    if (code == "busy") return store_error::busy;
    if (code == "wrong_state") return store_error::wrong_state;
    if (code == "out_of_range") return store_error::out_of_range;
    return std::nullopt;
}

std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace

redis_store::redis_store(redis::connection& connection, redis_store_options options)
    : redis_(connection), options_(std::move(options)) {
    if (options_.shards == 0) throw std::invalid_argument("redis_store: shards must be at least 1");
    const auto& all = scripts();
    for (const auto* s :
         {&all.start, &all.load, &all.commit, &all.append, &all.deliver, &all.fan_out, &all.acquire,
          &all.renew, &all.release, &all.claim, &all.rewind, &all.list})
        redis_.add_script(*s);
}

std::size_t redis_store::shard_of(std::string_view id) const {
    return fnv1a(id) % options_.shards;
}

std::string redis_store::wake_key(std::size_t shard) const {
    return fmt::format("{}:{{{}}}:wake", options_.prefix, shard);
}

std::string redis_store::instance_prefix(std::size_t shard) const {
    return fmt::format("{}:{{{}}}:i:", options_.prefix, shard);
}

std::string redis_store::key(std::string_view id, std::string_view suffix) const {
    return fmt::format("{}:{{{}}}:i:{}:{}", options_.prefix, shard_of(id), id, suffix);
}

asio::awaitable<redis::reply> redis_store::run(const redis::script& s,
                                               std::vector<std::string> keys,
                                               std::vector<std::string> args) {
    auto r = co_await redis_.eval(s, keys, args);
    if (!r) throw store_unavailable("process store: " + r.error().what());
    co_return std::move(*r);
}

namespace {
// The keys every instance script receives, in the prelude's order.
std::vector<std::string> instance_keys(const redis_store& st, std::string_view id) {
    return {st.key(id, "meta"),      st.key(id, "journal"),       st.key(id, "inbox"),
            st.key(id, "inbox_idx"), st.key(id, "keys"),          st.key(id, "timers"),
            st.key(id, "commits"),   st.wake_key(st.shard_of(id))};
}
}  // namespace

asio::awaitable<start_result> redis_store::start(start_request req) {
    std::vector<std::string> args{req.id,
                                  req.definition,
                                  req.params.dump(),
                                  req.worker,
                                  std::to_string(ms_floor(req.now)),
                                  std::to_string(ms_ceil(req.now + req.lease_ttl))};
    for (auto& sub : req.subscriptions) args.push_back(std::move(sub));
    auto r = co_await run(scripts().start, instance_keys(*this, req.id), std::move(args));
    auto e = r.elements();
    start_result out;
    out.created = e[0].integer().value_or(0) == 1;
    out.status = parse_instance_status(text_of(e[1])).value_or(instance_status::running);
    if (out.created) out.lease = lease_token{req.worker, 1};
    co_return out;
}

asio::awaitable<std::optional<instance_snapshot>> redis_store::load(std::string id, bool journal) {
    std::vector<std::string> args{journal ? "1" : "0"};
    auto r = co_await run(scripts().load, instance_keys(*this, id), std::move(args));
    if (r.is_nil()) co_return std::nullopt;
    auto parts = r.elements();
    auto meta = pairs(parts[0]);
    instance_snapshot s;
    s.id = meta["id"];
    s.definition = meta["definition"];
    s.params = nlohmann::json::parse(meta["params"]);
    s.status = parse_instance_status(meta["status"]).value_or(instance_status::running);
    s.parked = meta["parked"] == "1";
    if (meta.contains("result")) s.result = nlohmann::json::parse(meta["result"]);
    if (meta.contains("error")) s.error = meta["error"];
    for (const auto& entry : parts[1].elements()) {
        if (entry.is_nil()) continue;
        s.journal.push_back(nlohmann::json::parse(text_of(entry)).get<journal_entry>());
    }
    std::map<std::uint64_t, inbox_entry> inbox;  // ordered by id
    for (const auto& [inbox_id, text] : pairs(parts[2])) {
        auto j = nlohmann::json::parse(text);
        inbox_entry e;
        e.id = std::stoull(inbox_id);
        e.key = j.value("key", "");
        e.path = j.at("path").get<std::string>();
        e.payload = j.value("payload", nlohmann::json());
        e.at = from_ms(j.at("at").get<std::int64_t>());
        inbox.emplace(e.id, std::move(e));
    }
    for (auto& [_, e] : inbox) s.inbox.push_back(std::move(e));
    for (const auto& [seq, value] : pairs(parts[3])) {
        auto space = value.find(' ');
        s.timers.push_back(timer_record{std::stoull(seq), from_ms(to_int(value.substr(0, space))),
                                        space == std::string::npos ? "" : value.substr(space + 1)});
    }
    std::sort(s.timers.begin(), s.timers.end(),
              [](const timer_record& a, const timer_record& b) { return a.seq < b.seq; });
    s.waits = parse_waits(meta["waits"].empty() ? "[]" : meta["waits"]);
    if (!meta["lease_worker"].empty())
        s.lease = lease_token{meta["lease_worker"],
                              static_cast<std::uint64_t>(to_int(meta["lease_epoch"]))};
    s.lease_expires = from_ms(to_int(meta["lease_expires"]));
    s.created = from_ms(to_int(meta["created"]));
    s.changed = from_ms(to_int(meta["changed"]));
    if (!s.journal.empty()) s.changed = std::max(s.changed, s.journal.back().at);
    if (!journal) s.journal.clear();
    if (!meta["retry_log"].empty()) s.retries = parse_retry_log(meta["retry_log"]);
    co_return s;
}

namespace {
// A commit that only appends journal entries: the append script serves it.
bool appends_only(const commit_request& req) {
    return !req.status && !req.waits && !req.parked && !req.result && !req.error && !req.release &&
           req.consume.empty() && req.add_timers.empty() && req.cancel_timers.empty();
}
}  // namespace

asio::awaitable<std::optional<expected<commit_result, store_error>>> redis_store::append(
    const commit_request& req) {
    std::vector<std::string> args;
    args.reserve(5 + req.entries.size());
    args.push_back(req.lease.worker);
    args.push_back(std::to_string(req.lease.epoch));
    args.push_back(std::to_string(req.expected_length));
    args.push_back(options_.audit_commits ? "1" : "0");
    args.push_back(std::to_string(ms_floor(req.now)));
    for (const auto& e : req.entries) args.push_back(nlohmann::json(e).dump());
    std::vector<std::string> keys{key(req.instance, "meta"), key(req.instance, "journal"),
                                  key(req.instance, "commits")};
    auto r = co_await run(scripts().append, std::move(keys), std::move(args));
    auto code = text_of(r);
    if (code == "ok") co_return commit_result{};
    if (code == "general") co_return std::nullopt;
    if (auto e = parse_store_error(code)) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected append reply " + r.to_debug_string());
}

asio::awaitable<expected<commit_result, store_error>> redis_store::commit(commit_request req) {
    if (appends_only(req)) {
        auto done = co_await append(req);
        if (done) co_return std::move(*done);
    }
    std::vector<std::string> args;
    args.reserve(19 + req.consume.size() + req.cancel_timers.size() + 3 * req.add_timers.size() +
                 req.entries.size());
    auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
    args.push_back(req.instance);
    args.push_back(req.lease.worker);
    args.push_back(std::to_string(req.lease.epoch));
    args.push_back(std::to_string(req.expected_length));
    args.push_back(req.status ? std::string(to_string(*req.status)) : std::string());
    args.push_back(flag(req.parked));
    args.push_back(flag(req.error.has_value()));
    args.push_back(req.error.value_or(std::string()));
    args.push_back(flag(req.result.has_value()));
    args.push_back(req.result ? req.result->dump() : std::string());
    args.push_back(flag(req.release));
    args.push_back(flag(options_.audit_commits));
    args.push_back(std::to_string(ms_ceil(options_.retention)));
    args.push_back(flag(req.waits.has_value()));
    args.push_back(req.waits ? waits_json(*req.waits) : std::string());
    args.push_back(std::to_string(req.consume.size()));
    args.push_back(std::to_string(req.cancel_timers.size()));
    args.push_back(std::to_string(req.add_timers.size()));
    args.push_back(std::to_string(ms_floor(req.now)));
    for (auto id : req.consume) args.push_back(std::to_string(id));
    for (auto seq : req.cancel_timers) args.push_back(std::to_string(seq));
    for (const auto& t : req.add_timers) {
        args.push_back(std::to_string(t.seq));
        args.push_back(std::to_string(ms_ceil(t.due)));
        args.push_back(t.name);
    }
    for (const auto& e : req.entries) args.push_back(nlohmann::json(e).dump());
    auto r = co_await run(scripts().commit, instance_keys(*this, req.instance), std::move(args));
    if (r.is_array() && r.elements().size() == 2 && r.elements()[0].text() == "ok")
        co_return commit_result{r.elements()[1].integer().value_or(0) == 1};
    if (auto e = parse_store_error(text_of(r))) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected commit reply " + r.to_debug_string());
}

asio::awaitable<delivery> redis_store::deliver(std::string id, inbox_entry signal) {
    std::vector<std::string> args{id, signal.key, signal.path, std::to_string(ms_floor(signal.at)),
                                  signal_json(signal)};
    auto r = co_await run(scripts().deliver, instance_keys(*this, id), std::move(args));
    auto e = r.elements();
    auto outcome = text_of(e[0]);
    delivery d;
    d.waiting = e[1].integer().value_or(0) == 1;
    d.id = static_cast<std::uint64_t>(e[2].integer().value_or(0));
    if (outcome == "stored")
        d.result = delivery::outcome::stored;
    else if (outcome == "duplicate")
        d.result = delivery::outcome::duplicate;
    else if (outcome == "finished")
        d.result = delivery::outcome::finished;
    else
        d.result = delivery::outcome::no_instance;
    co_return d;
}

asio::awaitable<void> redis_store::fan_out_shard(std::size_t shard, const fan_out_request& req,
                                                 const std::string& signal_json,
                                                 fan_out_result& out) {
    std::vector<std::string> args{instance_prefix(shard), req.signal.key, req.signal.path,
                                  std::to_string(ms_floor(req.signal.at)), signal_json};
    args.insert(args.end(), req.subscriptions.begin(), req.subscriptions.end());
    std::vector<std::string> keys{wake_key(shard)};
    auto r = co_await run(scripts().fan_out, std::move(keys), std::move(args));
    auto e = r.elements();
    out.reached = static_cast<std::size_t>(e[0].integer().value_or(0));
    for (std::size_t i = 1; i + 2 < e.size(); i += 3) {
        delivery d;
        d.result = delivery::outcome::stored;
        d.id = static_cast<std::uint64_t>(e[i + 1].integer().value_or(0));
        d.waiting = e[i + 2].integer().value_or(0) == 1;
        out.delivered.emplace_back(text_of(e[i]), d);
    }
}

asio::awaitable<fan_out_result> redis_store::fan_out(fan_out_request req) {
    const auto& key = req.signal.key;
    auto memo_key = fmt::format("{}:fan_out:{}", options_.prefix, key);
    if (!key.empty()) {
        auto first = co_await redis_.exec("GET", memo_key);
        if (!first) throw store_unavailable("process store: " + first.error().what());
        if (auto text = first->text())
            co_return fan_out_result{
                static_cast<std::size_t>(std::stoull(std::string(*text))), true, {}};
    }
    auto signal = signal_json(req.signal);
    // Every shard's part at once (one pipelined round trip), gathered in shard order.
    std::vector<fan_out_result> parts(options_.shards);
    auto send_all = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (std::size_t shard = 0; shard < options_.shards; ++shard)
            n.spawn(fan_out_shard(shard, req, signal, parts[shard]));
        co_return;
    };
    concurrency::nursery_options limits;  // named: no braced default beside the co_await
    co_await concurrency::open_nursery(send_all, limits);
    fan_out_result out;
    for (auto& part : parts) {
        out.reached += part.reached;
        for (auto& d : part.delivered) out.delivered.push_back(std::move(d));
    }
    if (!key.empty()) {
        auto window = std::to_string(std::max<std::int64_t>(1, ms_ceil(req.window)));
        auto done =
            co_await redis_.exec("SET", memo_key, std::to_string(out.reached), "PX", window, "NX");
        if (!done) throw store_unavailable("process store: " + done.error().what());
    }
    co_return out;
}

asio::awaitable<expected<lease_grant, store_error>> redis_store::acquire(std::string id,
                                                                         std::string worker,
                                                                         time_point now,
                                                                         duration ttl) {
    std::vector<std::string> args{id, worker, std::to_string(ms_floor(now)),
                                  std::to_string(ms_ceil(ttl))};
    auto r = co_await run(scripts().acquire, instance_keys(*this, id), std::move(args));
    auto e = r.elements();
    auto code = text_of(e[0]);
    if (code != "ok")
        co_return unexpected(parse_store_error(code).value_or(store_error::not_found));
    lease_grant g;
    g.lease =
        lease_token{std::move(worker), static_cast<std::uint64_t>(e[1].integer().value_or(0))};
    g.journal_length = static_cast<std::uint64_t>(e[2].integer().value_or(0));
    g.status = parse_instance_status(text_of(e[3])).value_or(instance_status::running);
    g.expires = from_ms(e[4].integer().value_or(0));
    g.taken_over = e.size() > 5 && e[5].integer().value_or(0) == 1;
    co_return g;
}

asio::awaitable<bool> redis_store::renew(std::string id, lease_token lease, time_point now,
                                         duration ttl) {
    std::vector<std::string> args{id, lease.worker, std::to_string(lease.epoch),
                                  std::to_string(ms_floor(now)), std::to_string(ms_ceil(ttl))};
    auto r = co_await run(scripts().renew, instance_keys(*this, id), std::move(args));
    co_return r.integer().value_or(0) == 1;
}

asio::awaitable<void> redis_store::release(std::string id, lease_token lease) {
    std::vector<std::string> args{id, lease.worker, std::to_string(lease.epoch)};
    co_await run(scripts().release, instance_keys(*this, id), std::move(args));
}

asio::awaitable<std::vector<std::string>> redis_store::due(time_point now, std::size_t limit) {
    std::vector<std::string> ids;
    auto now_ms = ms_floor(now);
    auto until = std::to_string(now_ms + ms_ceil(options_.claim_ttl));
    // Start at a different shard each call so no shard is always served first.
    auto first = static_cast<std::size_t>(now_ms) % options_.shards;
    for (std::size_t i = 0; i < options_.shards && ids.size() < limit; ++i) {
        auto shard = (first + i) % options_.shards;
        std::vector<std::string> args{std::to_string(now_ms), std::to_string(limit - ids.size()),
                                      until, instance_prefix(shard)};
        std::vector<std::string> keys{wake_key(shard)};
        auto r = co_await run(scripts().claim, std::move(keys), std::move(args));
        for (const auto& e : r.elements()) ids.push_back(text_of(e));
    }
    co_return ids;
}

asio::awaitable<std::optional<time_point>> redis_store::next_due() {
    std::optional<time_point> earliest;
    for (std::size_t shard = 0; shard < options_.shards; ++shard) {
        auto r = co_await redis_.exec("ZRANGE", wake_key(shard), 0, 0, "WITHSCORES");
        if (!r) throw store_unavailable("process store: " + r.error().what());
        auto e = r->elements();
        if (e.size() < 2) continue;
        auto t = from_ms(static_cast<std::int64_t>(std::stod(text_of(e[1]))));
        if (!earliest || t < *earliest) earliest = t;
    }
    co_return earliest;
}

asio::awaitable<std::vector<std::string>> redis_store::commit_log(std::string id) {
    auto r = co_await redis_.exec("LRANGE", key(id, "commits"), 0, -1);
    if (!r) throw store_unavailable("process store: " + r.error().what());
    std::vector<std::string> out;
    for (const auto& e : r->elements()) out.push_back(text_of(e));
    co_return out;
}

asio::awaitable<expected<void, store_error>> redis_store::rewind(rewind_request req) {
    std::vector<std::string> args{req.instance, std::to_string(req.expected_length),
                                  std::to_string(req.keep), std::to_string(ms_floor(req.now))};
    for (const auto& e : req.restore) {
        args.push_back(std::to_string(e.id));
        args.push_back(std::to_string(ms_floor(e.at)) + " " + e.path);
        args.push_back(signal_json(e));
    }
    auto r = co_await run(scripts().rewind, instance_keys(*this, req.instance), std::move(args));
    auto code = text_of(r);
    if (code == "ok") co_return expected<void, store_error>();
    if (auto e = parse_store_error(code)) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected rewind reply " + r.to_debug_string());
}

asio::awaitable<void> redis_store::list_shard(std::size_t shard, const list_query& query,
                                              const std::vector<std::string>& bounds,
                                              redis::reply& out) {
    std::vector<std::string> args{query.definition.value_or(""),
                                  query.status ? std::string(to_string(*query.status)) : "",
                                  query.prefix};
    args.insert(args.end(), bounds.begin(), bounds.end());
    args.push_back(std::to_string(query.limit));
    args.push_back(std::to_string(options_.list_budget));
    std::vector<std::string> keys{wake_key(shard)};
    out = co_await run(scripts().list, std::move(keys), std::move(args));
}

asio::awaitable<void> redis_store::changed_times(std::span<instance_summary* const> of) {
    std::vector<std::string> keys;
    for (const auto* s : of) {
        keys.push_back(key(s->id, "meta"));
        keys.push_back(key(s->id, "journal"));
    }
    std::vector<std::string> no_args;
    auto r = co_await run(scripts().changed, std::move(keys), std::move(no_args));
    auto e = r.elements();
    for (std::size_t i = 0; i < of.size() && i < e.size(); ++i)
        of[i]->changed = from_ms(to_int(text_of(e[i])));
}

asio::awaitable<list_page> redis_store::list(list_query query) {
    using detail::lists_before;
    query.limit = std::clamp<std::size_t>(query.limit, 1, 1000);
    // The score window: [since, min(until - 1, cursor)], entries at the cursor's score only
    // below its id.
    std::string top = "+inf", cursor_id;
    std::optional<std::int64_t> top_score;
    if (query.until) top_score = ms_ceil(*query.until) - 1;
    if (!query.cursor.empty()) {
        auto c = detail::parse_cursor(query.cursor);
        if (!c) throw std::invalid_argument("not a listing cursor: " + query.cursor);
        if (!top_score || c->created_ms <= *top_score) {
            top_score = c->created_ms;
            cursor_id = c->id;
        }
    }
    if (top_score) top = std::to_string(*top_score);
    std::string bottom = query.since ? std::to_string(ms_ceil(*query.since)) : "-inf";
    std::vector<std::string> bounds{top, cursor_id, bottom};

    std::vector<redis::reply> parts(options_.shards);
    auto send_all = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (std::size_t shard = 0; shard < options_.shards; ++shard)
            n.spawn(list_shard(shard, query, bounds, parts[shard]));
        co_return;
    };
    concurrency::nursery_options limits;  // named: no braced default beside the co_await
    co_await concurrency::open_nursery(send_all, limits);

    // Everything above the highest boundary was examined on every shard.
    std::optional<detail::list_position> boundary;
    std::vector<std::pair<std::int64_t, instance_summary>> found;
    for (const auto& part : parts) {
        auto e = part.elements();
        if (e.size() < 2) continue;
        if (auto b = text_of(e[0]); !b.empty()) {
            detail::list_position c{to_int(b), text_of(e[1])};
            if (!boundary || lists_before(c.created_ms, c.id, boundary->created_ms, boundary->id))
                boundary = c;
        }
        for (std::size_t i = 2; i + 3 < e.size(); i += 4) {
            auto score = to_int(text_of(e[i + 1]));
            instance_summary s{
                text_of(e[i]),
                text_of(e[i + 3]),
                parse_index_status(text_of(e[i + 2])).value_or(index_status::running),
                from_ms(score),
                {}};
            found.emplace_back(score, std::move(s));
        }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return lists_before(a.first, a.second.id, b.first, b.second.id);
    });
    list_page page;
    for (auto& [score, summary] : found) {
        if (page.instances.size() == query.limit) break;
        if (boundary && lists_before(boundary->created_ms, boundary->id, score, summary.id)) break;
        page.instances.push_back(std::move(summary));
    }
    if (page.instances.size() == query.limit) {
        const auto& last = page.instances.back();
        page.next = detail::format_cursor(ms_floor(last.created), last.id);
    } else if (boundary) {
        page.next = detail::format_cursor(boundary->created_ms, boundary->id);
    }
    co_await fill_changed(page.instances);
    co_return page;
}

asio::awaitable<void> redis_store::fill_changed(std::vector<instance_summary>& page) {
    std::vector<std::vector<instance_summary*>> by_shard(options_.shards);
    for (auto& s : page) by_shard[shard_of(s.id)].push_back(&s);
    auto send_all = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (const auto& group : by_shard)
            if (!group.empty()) n.spawn(changed_times(group));
        co_return;
    };
    concurrency::nursery_options limits;
    co_await concurrency::open_nursery(send_all, limits);
}

asio::awaitable<instance_counts> redis_store::counts() {
    instance_counts out;
    for (std::size_t shard = 0; shard < options_.shards; ++shard) {
        auto r = co_await redis_.exec("HGETALL",
                                      fmt::format("{}:{{{}}}:idx:counts", options_.prefix, shard));
        if (!r) throw store_unavailable("process store: " + r.error().what());
        for (const auto& [field, value] : pairs(*r)) {
            auto space = field.find(' ');
            if (space == std::string::npos) continue;
            auto status = parse_index_status(std::string_view(field).substr(0, space));
            if (!status) continue;
            auto& row = out[field.substr(space + 1)];
            row[static_cast<std::size_t>(*status)] +=
                static_cast<std::uint64_t>(std::max<std::int64_t>(0, to_int(value)));
        }
    }
    co_return out;
}

asio::awaitable<std::optional<journal_page>> redis_store::read_journal(std::string id,
                                                                       std::size_t retry,
                                                                       std::uint64_t offset,
                                                                       std::size_t limit) {
    auto list = key(id, "journal");
    if (retry > 0) list += ":" + std::to_string(retry);
    auto exists = co_await redis_.exec("EXISTS", key(id, "meta"));
    if (!exists) throw store_unavailable("process store: " + exists.error().what());
    if (exists->integer().value_or(0) == 0) co_return std::nullopt;
    auto total = co_await redis_.exec("LLEN", list);
    if (!total) throw store_unavailable("process store: " + total.error().what());
    journal_page page;
    page.total = static_cast<std::uint64_t>(total->integer().value_or(0));
    if (retry > 0 && page.total == 0) co_return std::nullopt;
    if (limit > 0 && offset < page.total) {
        auto last = static_cast<std::int64_t>(offset + limit) - 1;
        auto r = co_await redis_.exec("LRANGE", list, static_cast<std::int64_t>(offset), last);
        if (!r) throw store_unavailable("process store: " + r.error().what());
        for (const auto& entry : r->elements())
            page.entries.push_back(nlohmann::json::parse(text_of(entry)).get<journal_entry>());
    }
    co_return page;
}

}  // namespace keel::process
