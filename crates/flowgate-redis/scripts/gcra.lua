-- token_bucket / leaky_bucket: GCRA over one theoretical arrival time (TAT).
-- Mirrors flowgate-core src/algorithm/gcra.rs.
-- Key flowgate:{<key>}:g holds the TAT, us since the epoch, as '<d' (8 bytes).

-- The parameters the other functions take, from the call's block: the emission interval T,
-- tau = burst * T, max_wait (0 in reject mode).
local function params(limit, t, tau, max_wait)
  return t, tau, max_wait
end

-- The TAT stored as `v` (0 for none).
local function tat_of(v)
  if v and #v == 8 then
    local tat = unpack_at('<d', v)
    if tat >= 0 and tat < BOUND and tat % 1 == 0 then
      return tat
    end
  end
  return 0
end

-- Admits when the request's slot (the TAT after it) is within tau + max_wait of now; that also
-- refuses a cost above burst + max_wait / T (Rust's max_cost). Answers whether it admits and,
-- with a cost, the new state, when it is empty again and when `v` was (see decide.lua).
local function admit(v, now, cost, _, t, tau, max_wait)
  local tat = tat_of(v)
  local new = (tat > now and tat or now) + cost * t
  if new - now - tau > max_wait then
    return false
  end
  if cost == 0 then
    return true
  end
  return true, pack('<d', new), new, tat
end

local function idle_at(v)
  return tat_of(v)
end

-- Gives back `cost` units taken at `at`: the TAT moves back by cost * T.
local function refund(v, at, cost, _, t)
  return pack('<d', max(tat_of(v) - cost * t, 0))
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund }
