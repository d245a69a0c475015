-- ARGV (positional, no JSON to decode on the hot path):
--  1 id, 2 worker, 3 epoch, 4 expected journal length, 5 status or '', 6 parked (1/0),
--  7 has error (1/0), 8 error, 9 has result (1/0), 10 result, 11 release (1/0),
-- 12 audit (1/0), 13 retention ms, 14 has waits (1/0), 15 waits (JSON),
-- 16 #consume, 17 #cancel, 18 #add, 19 now (ms), 20 the number n of documents, their 3n
-- arguments (documents_as_expected; their keys follow the instance's), then the consumed
-- inbox ids, the cancelled timer seqs, the added timers as (seq, due, name) triples, and
-- last the journal entries.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch',
                     'lease_expires', 'waits', 'error', 'definition', 'created', 'retries',
                     'subs')
if not m[1] then return 'not_found' end
if final_for_writes(m[1], m[2]) then return 'finished' end
if m[3] ~= ARGV[2] or m[4] ~= ARGV[3] then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[4]) then return 'conflict' end
local n_consume, n_cancel, n_add = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18])
local documents = tonumber(ARGV[20])
if documents > 0 and not documents_as_expected(documents, 9, 21) then
  return 'document_changed'
end
local at = 21 + 3 * documents
local status, waits, worker, parked = m[1], m[6], m[3], ARGV[6]
if ARGV[5] ~= '' then status = ARGV[5] end
if ARGV[14] == '1' then waits = ARGV[15] end
local final = ARGV[5] ~= '' and is_final(status) and parked ~= '1'
local expire = final and tonumber(ARGV[13]) > 0
local subs = final and m[11] and cjson.decode(m[11]) or {}
if on_cluster then  -- the keys written below that were not given
  local others = index_move_keys({}, KEYS[8], m[8], index_status(m[1], m[2]),
                                 index_status(status, parked))
  for _, k in ipairs(subs) do others[#others + 1] = sub_key(KEYS[8], k) end
  if expire then
    others[#others + 1] = shard_key(KEYS[8], 'idx:expiring')
    others[#others + 1] = shard_key(KEYS[8], 'idx:final')
    for r = 1, tonumber(m[10] or '0') do others[#others + 1] = KEYS[2] .. ':' .. r end
  end
  here(others)
end
-- Deletes ARGV[from..to] from a hash, in chunks: unpack has a stack limit.
local function hdel_args(key, from, to)
  for i = from, to, 1000 do redis.call('HDEL', key, unpack(ARGV, i, math.min(i + 999, to))) end
end
local last = at + n_consume - 1
if n_consume == 1 then  -- the usual case: the delete is the check, and writes nothing if it fails
  if redis.call('HDEL', KEYS[3], ARGV[at]) == 0 then return 'inbox_missing' end
elseif n_consume > 1 then
  for i = at, last do
    if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then return 'inbox_missing' end
  end
  hdel_args(KEYS[3], at, last)
end
-- Validated: write.
if documents > 0 then write_documents(documents, 9, 21) end
hdel_args(KEYS[4], at, last)
at = at + n_consume
hdel_args(KEYS[6], at, at + n_cancel - 1)
at = at + n_cancel
for i = at, at + 3 * n_add - 1, 3 do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[i + 2])
end
at = at + 3 * n_add
for i = at, #ARGV, 1000 do  -- in chunks: unpack has a stack limit
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end

if final then
  redis.call('DEL', KEYS[6])
  waits = '[]'
  for _, k in ipairs(subs) do redis.call('SREM', sub_key(KEYS[8], k), ARGV[1]) end
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
if worker ~= m[3] then set('lease_worker', ''); set('lease_epoch', '0') end
set('changed', ARGV[19])
redis.call('HSET', KEYS[1], unpack(fields))
index_move(KEYS[8], ARGV[1], m[8], m[9], index_status(m[1], m[2]), index_status(status, parked))
if clear_error and m[7] then redis.call('HDEL', KEYS[1], 'error') end
if ARGV[12] == '1' then redis.call('RPUSH', KEYS[7], ARGV[3] .. ' ' .. ARGV[2]) end
local w, waiting = wake_of(status, worker, tonumber(m[5]), waits, KEYS[4], KEYS[6])
set_wake(KEYS[8], ARGV[1], w)
if expire then
  for i = 1, 7 do  -- (the timers are gone already)
    if i ~= 6 then redis.call('PEXPIRE', KEYS[i], ARGV[13]) end
  end
  for r = 1, tonumber(m[10] or '0') do redis.call('PEXPIRE', KEYS[2] .. ':' .. r, ARGV[13]) end
  redis.call('ZADD', shard_key(KEYS[8], 'idx:expiring'),
             decimal(tonumber(ARGV[19]) + tonumber(ARGV[13])), ARGV[1])
  redis.call('HSET', shard_key(KEYS[8], 'idx:final'), ARGV[1], status .. ' ' .. m[8])
end
return {'ok', (waiting and ARGV[14] == '1') and 1 or 0}
