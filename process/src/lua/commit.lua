-- ARGV: scripts::commit_args (script_calls.hpp), read as arg_<name>. KEYS: the instance's,
-- then the documents' (documents_as_expected).

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch',
                     'lease_expires', 'waits', 'error', 'definition', 'created', 'retries',
                     'subs', 'queued')
if not m[1] then return 'not_found' end
if final_for_writes(m[1], m[2]) then return 'finished' end
if m[3] ~= arg_worker or m[4] ~= arg_epoch then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(arg_expected_length) then return 'conflict' end
local documents = arg_documents_n
if documents > 0 and not documents_as_expected(documents, 9, arg_documents_at) then
  return 'document_changed'
end
local status, waits, worker, parked = m[1], m[6], m[3], arg_parked
if arg_status ~= '' then status = arg_status end
if arg_has_waits == '1' then waits = arg_waits end
local final = arg_status ~= '' and is_final(status) and parked ~= '1'
local expire = final and tonumber(arg_retention) > 0
local subs = final and m[11] and cjson.decode(m[11]) or {}
if on_cluster then  -- the keys written below that were not given
  local others = index_move_keys({}, KEYS[8], m[8], index_status(m[1], m[2], m[12]),
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
local first, last = arg_consume_at, arg_consume_at + arg_consume_n - 1
-- One id, the usual case: the delete is the check, and writes nothing if it fails.
if arg_consume_n == 1 then
  if redis.call('HDEL', KEYS[3], ARGV[first]) == 0 then return 'inbox_missing' end
elseif arg_consume_n > 1 then
  for i = first, last do
    if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then return 'inbox_missing' end
  end
  hdel_args(KEYS[3], first, last)
end
-- Validated: write.
if documents > 0 then write_documents(documents, 9, arg_documents_at) end
hdel_args(KEYS[4], first, last)
if arg_restart == '1' then  -- continue as new: the run's journal, timers and attempts go
  redis.call('DEL', KEYS[2], KEYS[6])
  clear_attempts(KEYS[1])
  waits = '[]'
else
  hdel_args(KEYS[6], arg_cancel_timers_at, arg_cancel_timers_at + arg_cancel_timers_n - 1)
  for i = arg_timers_at, arg_timers_at + 3 * arg_timers_n - 1, 3 do
    redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[i + 2])
  end
  rpush_args(KEYS[2], arg_entries_at, arg_entries_n)
end

if final then
  redis.call('DEL', KEYS[6])
  waits = '[]'
  for _, k in ipairs(subs) do sub_remove(sub_key(KEYS[8], k), arg_id) end
end
if arg_release == '1' then worker = '' end
local fields = {}
local function set(k, v) fields[#fields + 1] = k; fields[#fields + 1] = v end
if status ~= m[1] then set('status', status) end
if waits ~= m[6] then set('waits', waits) end
if parked ~= m[2] then set('parked', parked) end
if arg_has_result == '1' then set('result', arg_result) end
if arg_restart == '1' then set('params', arg_params) end
local clear_error = arg_status ~= '' and status ~= 'failed'
if arg_has_error == '1' and not clear_error then set('error', arg_error) end
if worker ~= m[3] then set('lease_worker', ''); set('lease_epoch', '0') end
set('changed', arg_now)
for i = arg_published_at, arg_published_at + 2 * arg_published_n - 1, 2 do
  set('published:' .. ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], unpack(fields))
index_move(KEYS[8], arg_id, m[8], m[9], index_status(m[1], m[2], m[12]),
           index_status(status, parked))
if clear_error and m[7] then redis.call('HDEL', KEYS[1], 'error') end
if m[12] then redis.call('HDEL', KEYS[1], 'queued') end  -- admitted (or cancelled) by now
if arg_audit == '1' then redis.call('RPUSH', KEYS[7], arg_epoch .. ' ' .. arg_worker) end
local w, waiting = wake_of(status, worker, tonumber(m[5]), waits, KEYS[4], KEYS[6])
set_wake(KEYS[8], arg_id, w)
if expire then
  for i = 1, 7 do  -- (the timers are gone already)
    if i ~= 6 then redis.call('PEXPIRE', KEYS[i], arg_retention) end
  end
  for r = 1, tonumber(m[10] or '0') do redis.call('PEXPIRE', KEYS[2] .. ':' .. r, arg_retention) end
  redis.call('ZADD', shard_key(KEYS[8], 'idx:expiring'),
             decimal(tonumber(arg_now) + tonumber(arg_retention)), arg_id)
  redis.call('HSET', shard_key(KEYS[8], 'idx:final'), arg_id, status .. ' ' .. m[8])
end
return {'ok', (waiting and arg_has_waits == '1') and 1 or 0}
