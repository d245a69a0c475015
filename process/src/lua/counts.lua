-- One shard's part of counts(): KEYS: 1 the shard's wake index. Returns (status, definition,
-- instances) triples for every status of every definition the shard has had.

local out = {}
for _, set in ipairs(index_sets(KEYS[1], '', '', true)) do
  out[#out + 1] = set[2]; out[#out + 1] = set[3]; out[#out + 1] = set[4]
end
return out
