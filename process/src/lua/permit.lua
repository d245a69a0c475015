-- ARGV: scripts::permit_args (script_calls.hpp), read as arg_<name>. KEYS[1]: the limit's
-- grants in its window (a sorted set of grant ids scored by grant time, ms); KEYS[2]: its
-- holders (holder ids scored by when their hold ends, ms). Both share the limit's hash tag.
-- Reply: {1, 0} granted, or {0, ms}: not now, ask again in ms.

local now, per, hold = tonumber(arg_now), tonumber(arg_per), tonumber(arg_hold)
local rate, concurrency = tonumber(arg_rate), tonumber(arg_concurrency)
-- The scores are the callers' clock; the keys' lifetimes are Redis's. They only clear a limit
-- left idle, so they run a minute past the window and the hold: a caller whose clock runs
-- apart from Redis's (virtual time in tests, a skewed worker) never sees its counts expire
-- early.
local idle = 60000
local holds = false  -- the holder has a permit already (its worker died mid-attempt)
if concurrency > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  holds = redis.call('ZSCORE', KEYS[2], arg_holder) ~= false
  if not holds and redis.call('ZCARD', KEYS[2]) >= concurrency then
    -- Freed by a release, which nobody announces: look again soon, or when a hold ends.
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, math.max(1, math.min(tonumber(first[2]) - now, 20))}
  end
end
if rate > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - per)
  if redis.call('ZCARD', KEYS[1]) >= rate then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {0, math.max(1, tonumber(first[2]) + per - now)}
  end
  redis.call('ZADD', KEYS[1], now, arg_grant)
  redis.call('PEXPIRE', KEYS[1], per + idle)
end
if concurrency > 0 then
  redis.call('ZADD', KEYS[2], now + hold, arg_holder)
  redis.call('PEXPIRE', KEYS[2], hold + idle)
end
return {1, 0}
