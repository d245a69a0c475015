-- The common step: journal entries appended to a running instance, nothing else changed
-- (status, wait set, timers, inbox and lease as they are, so the wake index stands). Kept
-- apart from commit_lua because Redis's cost per call grows with the keys and arguments a
-- script receives. Anything but a plainly running instance answers 'general': the caller
-- sends the general commit instead.
-- It leaves `changed` in the meta hash as it is: readers take the newest entry's time.
-- KEYS: 1 meta, 2 journal, 3 commits, then the documents' (documents_as_expected). ARGV:
-- scripts::append_args (script_calls.hpp), read as arg_<name>.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch')
if not m[1] then return 'not_found' end
if m[1] ~= 'running' or m[2] == '1' then
  if final_for_writes(m[1], m[2]) then return 'finished' end
  return 'general'
end
if m[3] ~= arg_worker or m[4] ~= arg_epoch then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(arg_expected_length) then return 'conflict' end
local documents = arg_documents_n
if documents > 0 then
  if not documents_as_expected(documents, 4, arg_documents_at) then return 'document_changed' end
  write_documents(documents, 4, arg_documents_at)
end
rpush_args(KEYS[2], arg_entries_at, arg_entries_n)
if arg_audit == '1' then redis.call('RPUSH', KEYS[3], arg_epoch .. ' ' .. arg_worker) end
return 'ok'
