-- A failed attempt of a step in flight, kept in the meta hash as field 'attempt:<seq>' so that
-- load shows it to any process until the step's entry is journaled. Only the lease holder
-- of a running instance may write it, or of a suspended one it took to resume, which is
-- marked running (resumed_and_running) and moved in the wake index, as renew.lua does: a
-- running instance is due when its lease ends, no longer at its timers or signals.
-- KEYS: the instance's. ARGV: scripts::note_attempt_args (script_calls.hpp), as arg_<name>.

local m = redis.call('HMGET', KEYS[1], 'status', 'lease_worker', 'lease_epoch', 'definition',
                     'created', 'queued')
local in_flight = m[1] == 'running' or m[1] == 'suspended'
if not in_flight or not has_lease(m[2]) or m[2] ~= arg_worker or m[3] ~= arg_epoch then
  return 0
end
here_to_resume(KEYS[8], m[1], m[6], m[4])
redis.call('HSET', KEYS[1], 'attempt:' .. arg_seq, arg_attempt)
resumed_and_running(KEYS[1], KEYS[8], arg_id, m[1], m[6], m[4], m[5], arg_now)
if m[1] == 'suspended' then reindex(arg_id) end  -- rare: a running one's index stands
return 1
