-- The first part of the prelude: which statuses are final. Every script but load, changed
-- and announce starts with the helpers it uses of it, then of prelude.lua.

local function is_final(st) return st == 'completed' or st == 'cancelled' or st == 'failed' end
local function final_for_writes(st, parked)
  return st == 'completed' or st == 'cancelled' or (st == 'failed' and parked ~= '1')
end
