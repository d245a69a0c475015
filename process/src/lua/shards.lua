-- The store's shard count, recorded by the first worker that opens the store (redis_store.cpp,
-- open()). KEYS: 1 the record; on one Redis server also 2 the workers hash, then the keys that
-- a store of Keel before the record has in some shard once it has started an instance (each
-- shard's idx:defs and idx:counts under the count it used). ARGV: scripts::shards_args
-- (script_calls.hpp): the count the caller is configured with ('': none), the count of a new
-- store, the count of a store from before the record. Returns the recorded count, recording
-- it first when there is none: the configured one; else, when the store has announced workers
-- or started instances (an earlier build's, which does not read the record), the earlier
-- builds' count; else the new store's.

local recorded = redis.call('GET', KEYS[1])
if recorded then return recorded end
local count = arg_configured
if count == '' then
  count = arg_new_store
  if #KEYS > 1 and redis.call('EXISTS', unpack(KEYS, 2)) > 0 then count = arg_before_record end
end
redis.call('SET', KEYS[1], count)
return count
