-- The store's identity record (store.hpp, identity). KEYS: 1 the record, a hash: id,
-- created (ms), confirmed (the id an operator last confirmed), confirmed_at (ms). ARGV:
-- scripts::identity_args (script_calls.hpp), read as arg_<name>. Returns {id, confirmed or
-- ''}, or false when there is no record and none is to be made.

local m = redis.call('HMGET', KEYS[1], 'id', 'confirmed')
local id, confirmed = m[1], m[2] or ''
if not id then
  if arg_create ~= '1' then return false end
  id = arg_new_id
  redis.call('HSET', KEYS[1], 'id', id, 'created', arg_now)
end
if arg_confirm == '1' then
  confirmed = id
  redis.call('HSET', KEYS[1], 'confirmed', id, 'confirmed_at', arg_now)
end
return {id, confirmed}
