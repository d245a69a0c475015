-- A fan-out over one or more shards (all of them in one call on a single Redis server, one
-- shard per call on a cluster). KEYS: the subscriptions (prelude.lua, sub_add), for each
-- subscription key (in the order of arg_subscriptions) one per shard (in shard order),
-- "<prefix>:{<shard>}:sub:<key>"; then, when arg_memo_ms is not empty, the emit's memo key,
-- then the n documents' keys (documents_as_expected). The caller names the keys so that the
-- script builds no key but the wake index of a shard where it finds a subscriber. ARGV:
-- scripts::fan_out_args (script_calls.hpp), read as arg_<name>. Returns {reached, 0, id,
-- inbox id, waiting, taken, id, ...}; {reached, 1} when the memo holds an earlier emit with
-- this key (what it reached; nothing delivered now); {0, 2} when a document changed or is
-- locked (nothing written). The documents are written also for a repeated emit: one that
-- still carries a change was not made with the first one. Everything is read, and on a
-- cluster every key it will touch checked (`here`), before the first write. With a worker,
-- an instance the signal makes ready to run (suspended, waiting for it, no lease, not
-- refused) is taken for that worker as acquire.lua's take does, and `taken` is acquire.lua's
-- reply without the journal and with only the meta fields store.hpp's fan_out_request names
-- (less the id and the lease, which the caller has); otherwise taken is 0.

local documents = arg_documents_n
local sets, memo = #KEYS - 2 * documents, nil
local first_document = sets + 1
if documents > 0 and not documents_as_expected(documents, first_document, arg_documents_at) then
  return {0, 2}
end
if arg_memo_ms ~= '' then
  memo = KEYS[sets]
  sets = sets - 1
  local first = redis.call('GET', memo)
  if first then
    if documents > 0 then write_documents(documents, first_document, arg_documents_at) end
    return {tonumber(first), 1}
  end
end
-- shard_of() in store.cpp when the shard count is a power of two (up to 2^24): FNV-1a's low
-- bits depend only on the low bits of what it multiplies, so the last 24 bits of its basis
-- and prime give the shard exactly, within the integers Lua's doubles hold.
local bxor, byte = bit.bxor, string.byte  -- locals: two fewer table lookups per byte
local function shard_index(id, count)
  local h = 10290051
  for i = 1, #id do h = (bxor(h, byte(id, i)) * 435) % 16777216 end
  return h % count
end
local function power_of_two(n)
  local p = 1
  while p < n do p = p * 2 end
  return p == n
end

local worker, now, ttl = arg_worker, tonumber(arg_now), tonumber(arg_ttl)
local refused = {}
for i = arg_refused_at, arg_refused_at + arg_refused_n - 1 do refused[ARGV[i]] = true end
local first_sub, subscriptions = arg_subscriptions_at, arg_subscriptions_n
local shards = subscriptions > 0 and sets / subscriptions or 0

-- The subscribers: each id with the set it was found in and that set's subscription key
-- (its ARGV index): the set's name less 'sub:<key>', then 'wake', is its shard's wake index.
local found, order = {}, {}
local function add(id, set, sub)
  if not found[id] then found[id] = {set, sub}; order[#order + 1] = id end
end
-- While every subscription is a set (stores written before level 4), one SUNION per
-- subscription key over every shard; WRONGTYPE from any of them (a hash among the keys): key
-- by key, in either form.
local unions = nil
if shards > 1 and shards <= 4096 and power_of_two(shards) then
  unions = {}
  for g = 1, subscriptions do
    local at = (g - 1) * shards
    local ids = redis.pcall('SUNION', unpack(KEYS, at + 1, at + shards))
    if other_form(ids) then
      unions = nil
      break
    end
    unions[g] = ids
  end
end
if unions then
  for g = 1, subscriptions do
    local at = (g - 1) * shards
    for _, id in ipairs(unions[g]) do
      add(id, KEYS[at + shard_index(id, shards) + 1], first_sub + g - 1)
    end
  end
else
  for s = 1, shards do
    for g = 1, subscriptions do
      local set = KEYS[(g - 1) * shards + s]
      for _, id in ipairs(sub_members(set)) do add(id, set, first_sub + g - 1) end
    end
  end
end
table.sort(order)

-- Where each subscriber's keys are: its shard's wake index and the prefix of its own keys.
local wakes, bases = {}, {}
for _, id in ipairs(order) do
  local set = found[id][1]
  wakes[id] = string.sub(set, 1, #set - 4 - #ARGV[found[id][2]]) .. 'wake'
  bases[id] = shard_key(wakes[id], 'i:') .. id .. ':'
end
if on_cluster then
  local others = {}
  for _, id in ipairs(order) do
    local base = bases[id]
    others[#others + 1] = wakes[id]
    for _, suffix in ipairs({'meta', 'keys', 'inbox', 'inbox_idx', 'journal', 'timers'}) do
      others[#others + 1] = base .. suffix
    end
  end
  here(others)
end
if documents > 0 then write_documents(documents, first_document, arg_documents_at) end

-- The signal put into the inbox of an instance it makes ready as inbox_id, the lease for
-- `worker`, and the instance as it was with the signal and the grant, as acquire.lua's take
-- gives it but with only the meta fields a worker that holds the instance in memory checks
-- (store.hpp, fan_out_request); the meta written once: next inbox id and lease. It stays
-- suspended (taken_reply).
local function take(wake, id, base, m, inbox_id)
  local meta, expires = base .. 'meta', now + ttl
  local expires_text = decimal(expires)
  put_in_inbox(base .. 'inbox', base .. 'inbox_idx', inbox_id, arg_path, arg_at, arg_signal)
  local epoch, fields = new_lease_fields(m[6], worker, expires_text)
  local as_was = {'definition', m[7], 'version', m[9] or '', 'status', m[1], 'parked',
                  m[2] or '', 'waits', m[3] or ''}  -- (the id and the lease: the caller's)
  fields[#fields + 1] = 'next_inbox'
  fields[#fields + 1] = decimal(inbox_id + 1)
  redis.call('HSET', meta, unpack(fields))
  local reply = taken_reply(epoch, redis.call('LLEN', base .. 'journal'), m[1], expires, 0, as_was,
                            {}, base .. 'inbox', base .. 'timers')
  reply[11] = 1
  redis.call('ZADD', wake, expires_text, id)
  return reply
end

local out, reached = {0, 0}, 0
for _, id in ipairs(order) do
  local set, wake, base = found[id][1], wakes[id], bases[id]
  local meta, keys = base .. 'meta', base .. 'keys'
  local m = redis.call('HMGET', meta, 'status', 'parked', 'waits', 'lease_worker', 'lease_expires',
                       'epoch', 'definition', 'created', 'version', 'next_inbox')
  if not m[1] then
    sub_remove(set, id)  -- expired after its retention
  elseif not final_for_writes(m[1], m[2]) then
    reached = reached + 1
    local inbox_id = tonumber(m[10] or '0')
    if claim_key(keys, arg_key, inbox_id) then
      local waiting, taken = waits_for(m[3], arg_path), 0
      if worker ~= '' and waiting == 1 and m[1] == 'suspended' and not has_lease(m[4])
          and not refused[started_by(m[7], m[9])] then
        taken = take(wake, id, base, m, inbox_id)
      else
        append_inbox(meta, base .. 'inbox', base .. 'inbox_idx', inbox_id, arg_path, arg_at,
                     arg_signal)
        wake_on_delivery(wake, id, m[1], m[4], m[5], arg_at, waiting)
      end
      out[#out + 1] = id; out[#out + 1] = inbox_id; out[#out + 1] = waiting
      out[#out + 1] = taken
    end
  end
end
out[1] = reached
if memo then redis.call('SET', memo, decimal(reached), 'PX', arg_memo_ms, 'NX') end
return out
