-- The common step: journal entries appended to a running instance, nothing else changed
-- (status, wait set, timers, inbox and lease as they are, so the wake index stands). Kept
-- apart from commit_lua because Redis's cost per call grows with the keys and arguments a
-- script receives. Anything but a plainly running instance answers 'general': the caller
-- sends the general commit instead.
-- It leaves `changed` in the meta hash as it is: readers take the newest entry's time.
-- KEYS: 1 meta, 2 journal, 3 commits, then the documents' (documents_as_expected). ARGV:
-- 1 worker, 2 epoch, 3 expected journal length, 4 audit (1/0), 5 now (ms), 6 the number n
-- of documents, their 3n arguments, then the journal entries.

local m = redis.call('HMGET', KEYS[1], 'status', 'parked', 'lease_worker', 'lease_epoch')
if not m[1] then return 'not_found' end
if m[1] ~= 'running' or m[2] == '1' then
  if final_for_writes(m[1], m[2]) then return 'finished' end
  return 'general'
end
if m[3] ~= ARGV[1] or m[4] ~= ARGV[2] then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return 'conflict' end
local documents = tonumber(ARGV[6])
if documents > 0 then
  if not documents_as_expected(documents, 4, 7) then return 'document_changed' end
  write_documents(documents, 4, 7)
end
for i = 7 + 3 * documents, #ARGV, 1000 do  -- in chunks: unpack has a stack limit
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if ARGV[4] == '1' then redis.call('RPUSH', KEYS[3], ARGV[2] .. ' ' .. ARGV[1]) end
return 'ok'
