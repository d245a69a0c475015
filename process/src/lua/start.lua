-- KEYS: the instance's keys, then the n documents' keys (documents_as_expected). ARGV: id,
-- definition, params, worker, now, lease expiry, version, #subscription keys, the number n
-- of documents and their 3n arguments, the subscription keys; then, for an instance whose
-- handler waits before any step (it starts suspended, without a lease): its wait set (JSON),
-- #timers, the timers as (seq, due, name) triples, and the journal entries it recorded
-- before the wait. Returns {created (1/0), status}, or {-1} when a document changed or is
-- locked (nothing written). The documents are written also when the instance exists.

local documents = tonumber(ARGV[9])
if documents > 0 and not documents_as_expected(documents, 9, 10) then return {-1} end
local exists = redis.call('EXISTS', KEYS[1]) == 1
local first_sub = 10 + 3 * documents
local at = first_sub + tonumber(ARGV[8])
local suspended = at <= #ARGV
local status, worker, epoch, waits = 'running', ARGV[4], '1', '[]'
if suspended then status, worker, epoch, waits = 'suspended', '', '0', ARGV[at] end
if on_cluster and not exists then
  local others = index_move_keys({shard_key(KEYS[8], 'idx:defs')}, KEYS[8], ARGV[2], nil, status)
  for i = first_sub, at - 1 do others[#others + 1] = sub_key(KEYS[8], ARGV[i]) end
  here(others)
end
if documents > 0 then write_documents(documents, 9, 10) end
if exists then return {0, redis.call('HGET', KEYS[1], 'status')} end
local subs = {}
for i = first_sub, at - 1 do
  subs[#subs + 1] = ARGV[i]
  redis.call('SADD', sub_key(KEYS[8], ARGV[i]), ARGV[1])
end
local fields = {'id', ARGV[1], 'definition', ARGV[2], 'params', ARGV[3], 'status', status,
                'parked', '0', 'epoch', '1', 'lease_worker', worker, 'lease_epoch', epoch,
                'lease_expires', ARGV[6], 'next_inbox', '1', 'waits', waits, 'created', ARGV[5],
                'changed', ARGV[5], 'subs', cjson.encode(subs)}
if ARGV[7] ~= '' then fields[#fields + 1] = 'version'; fields[#fields + 1] = ARGV[7] end
redis.call('HSET', KEYS[1], unpack(fields))
-- When it first needs a worker (wake_of's answer for a new instance, whose inbox is empty):
-- running, when its lease ends; suspended, at its earliest timer.
local wake = has_lease(worker) and tonumber(ARGV[6]) or 0
if suspended then
  wake = nil
  local t, timers = at + 2, {}
  for i = t, t + 3 * tonumber(ARGV[at + 1]) - 1, 3 do
    timers[#timers + 1] = ARGV[i]
    timers[#timers + 1] = ARGV[i + 1] .. ' ' .. ARGV[i + 2]
    local due = tonumber(ARGV[i + 1])
    if not wake or due < wake then wake = due end
    t = i + 3
  end
  for i = 1, #timers, 1000 do  -- (seq, timer) pairs, in chunks: unpack has a stack limit
    redis.call('HSET', KEYS[6], unpack(timers, i, math.min(i + 999, #timers)))
  end
  for i = t, #ARGV, 1000 do  -- in chunks: unpack has a stack limit
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
redis.call('SADD', shard_key(KEYS[8], 'idx:defs'), ARGV[2])
index_move(KEYS[8], ARGV[1], ARGV[2], ARGV[5], nil, status)
set_wake(KEYS[8], ARGV[1], wake)
return {1, status}
