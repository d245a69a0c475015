-- One shard's part of a listing, newest first: a merge of the shard's index sets that match
-- the filters, each read a small, growing chunk at a time, so a page costs about `limit`
-- entries however many instances there are. KEYS: 1 the shard's wake index. ARGV:
-- scripts::list_args (script_calls.hpp), read as arg_<name>; the budget is how many entries
-- it may examine in all (each set its share; filters other than definition and status skip
-- entries).
-- Returns {boundary score, boundary id, then (id, score, status, definition) per entry,
-- newest first}: the boundary ('' when none) is where a set stopped for the budget;
-- everything above it was examined, and the caller goes on below it.

local limit, budget = tonumber(arg_limit), tonumber(arg_budget)
local sets = {}
for _, set in ipairs(index_sets(KEYS[1], arg_definition, arg_status)) do
  sets[#sets + 1] = {key = set[1], status = set[2], def = set[3], rows = {}, pos = 1,
                     offset = 0, more = true}
end
local prefix, top, cursor = arg_prefix, tonumber(arg_top), arg_cursor
local plain = prefix == ''
local per_set = math.max(limit, math.floor(budget / math.max(1, #sets)))
local first_chunk = math.min(limit + 1, math.max(8, math.ceil(2 * limit / math.max(1, #sets))))
-- The head of each set: its newest entry that passes the filters (id, score, score as Redis
-- wrote it), or, once the set has examined its share of the budget, a stop mark at the last
-- entry it examined.
local hid, hscore, htext, stop = {}, {}, {}, {}
local function advance(k)
  local s = sets[k]
  while true do
    if s.pos > #s.rows then
      hid[k] = nil
      if not s.more then return end
      if s.offset >= per_set then
        hid[k], hscore[k], stop[k] = s.last_id, tonumber(s.last_text), true
        return
      end
      local n = math.min(s.chunk, per_set - s.offset)
      s.rows = redis.call('ZREVRANGEBYSCORE', s.key, arg_top, arg_bottom, 'WITHSCORES', 'LIMIT',
                          s.offset, n)
      s.pos, s.offset, s.more = 1, s.offset + #s.rows / 2, #s.rows / 2 == n
      s.chunk = math.min(2 * s.chunk, 256)
      if #s.rows == 0 then return end
    end
    local id, text = s.rows[s.pos], s.rows[s.pos + 1]
    s.pos, s.last_id, s.last_text = s.pos + 2, id, text
    if plain or string.find(id, prefix, 1, true) == 1 then
      local score = tonumber(text)
      if not (cursor ~= '' and score == top and id >= cursor) then
        hid[k], hscore[k], htext[k] = id, score, text
        return
      end
    end
  end
end
for k, s in ipairs(sets) do
  s.chunk = first_chunk
  advance(k)
end
local out, taken = {'', ''}, 0
while taken < limit do
  local b
  for k = 1, #sets do
    local id = hid[k]
    if id and (not b or hscore[k] > hscore[b] or (hscore[k] == hscore[b] and id > hid[b])) then
      b = k
    end
  end
  if not b then break end
  if stop[b] then
    out[1], out[2] = string.format('%d', hscore[b]), hid[b]
    break
  end
  out[#out + 1] = hid[b]; out[#out + 1] = htext[b]; out[#out + 1] = sets[b].status
  out[#out + 1] = sets[b].def
  taken = taken + 1
  advance(b)
end
return out
