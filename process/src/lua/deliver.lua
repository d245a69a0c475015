-- ARGV: id, idempotency key, path, at (ms), signal (JSON)

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
