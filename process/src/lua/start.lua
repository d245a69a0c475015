-- ARGV: scripts::start_args (script_calls.hpp), read as arg_<name>. KEYS: the instance's,
-- then the documents' (documents_as_expected). An instance whose handler waits before any
-- step starts suspended, without a lease, with its wait set, timers and the journal entries
-- it recorded before the wait (and, waiting for its queue, `queued` in its meta, which lists
-- it as queued); one that runs starts with the entries recorded before its first step.
-- Returns {created (1/0), status}, or {-1} when a document changed or is locked (nothing
-- written). The documents are written also when the instance exists.

local documents = arg_documents_n
if documents > 0 and not documents_as_expected(documents, 9, arg_documents_at) then
  return {-1}
end
local exists = redis.call('EXISTS', KEYS[1]) == 1
local suspended = arg_suspended == '1'
local status, worker, epoch, waits = 'running', arg_worker, '1', '[]'
if suspended then status, worker, epoch, waits = 'suspended', '', '0', arg_waits end
local queued = (suspended and arg_queued == '1') and '1' or nil
local listed = index_status(status, nil, queued)
local subs = {}
for i = arg_subscriptions_at, arg_subscriptions_at + arg_subscriptions_n - 1 do
  subs[#subs + 1] = ARGV[i]
end
if on_cluster and not exists then
  local others = index_move_keys({shard_key(KEYS[8], 'idx:defs')}, KEYS[8], arg_definition, nil,
                                 listed)
  for _, k in ipairs(subs) do others[#others + 1] = sub_key(KEYS[8], k) end
  here(others)
end
if documents > 0 then write_documents(documents, 9, arg_documents_at) end
if exists then return {0, redis.call('HGET', KEYS[1], 'status')} end
local compact = arg_compact_subscriptions == '1'
for _, k in ipairs(subs) do sub_add(sub_key(KEYS[8], k), arg_id, compact) end
local fields = {'id', arg_id, 'definition', arg_definition, 'params', arg_params, 'status', status,
                'parked', '0', 'epoch', '1', 'lease_worker', worker, 'lease_epoch', epoch,
                'lease_expires', arg_lease_expires, 'next_inbox', '1', 'waits', waits,
                'created', arg_now, 'changed', arg_now, 'subs', cjson.encode(subs)}
if arg_version ~= '' then fields[#fields + 1] = 'version'; fields[#fields + 1] = arg_version end
if arg_parent ~= '' then fields[#fields + 1] = 'parent'; fields[#fields + 1] = arg_parent end
if arg_trace ~= '' then fields[#fields + 1] = 'trace'; fields[#fields + 1] = arg_trace end
if queued then fields[#fields + 1] = 'queued'; fields[#fields + 1] = queued end
redis.call('HSET', KEYS[1], unpack(fields))
-- When it first needs a worker (wake_of's answer for a new instance, whose inbox is empty):
-- running, when its lease ends; suspended, at its earliest timer.
local wake = has_lease(worker) and tonumber(arg_lease_expires) or 0
if suspended then
  wake = nil
  local timers = {}
  for i = arg_timers_at, arg_timers_at + 3 * arg_timers_n - 1, 3 do
    timers[#timers + 1] = ARGV[i]
    timers[#timers + 1] = ARGV[i + 1] .. ' ' .. ARGV[i + 2]
    local due = tonumber(ARGV[i + 1])
    if not wake or due < wake then wake = due end
  end
  for i = 1, #timers, 1000 do  -- (seq, timer) pairs, in chunks: unpack has a stack limit
    redis.call('HSET', KEYS[6], unpack(timers, i, math.min(i + 999, #timers)))
  end
end
rpush_args(KEYS[2], arg_entries_at, arg_entries_n)
redis.call('SADD', shard_key(KEYS[8], 'idx:defs'), arg_definition)
index_move(KEYS[8], arg_id, arg_definition, arg_now, nil, listed)
set_wake(KEYS[8], arg_id, wake)
return {1, status}
