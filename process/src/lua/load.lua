-- ARGV: scripts::load_args (script_calls.hpp): with the journal (1/0). Without it, the
-- journal part of a running instance is its newest entry (for `changed`, which plain step
-- appends leave alone). The last part is the journal's length (steps at or past it are in
-- flight).

if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local journal = {}
if arg_journal == '1' then
  journal = redis.call('LRANGE', KEYS[2], 0, -1)
elseif redis.call('HGET', KEYS[1], 'status') == 'running' then
  journal = {redis.call('LINDEX', KEYS[2], -1)}
end
return {redis.call('HGETALL', KEYS[1]), journal, redis.call('HGETALL', KEYS[3]),
        redis.call('HGETALL', KEYS[6]), redis.call('LLEN', KEYS[2])}
