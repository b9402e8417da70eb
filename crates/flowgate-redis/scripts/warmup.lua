-- token_bucket with warmup: GCRA whose units cost more while the bucket is cold. Mirrors
-- flowgate-core src/algorithm/warmup.rs, where the model and what it admits when are stated.
-- Key flowgate:{<key>}:g<period>/<cold factor in thousandths> holds, as '<dI4' (12 bytes), the
-- TAT (us since the epoch) and how long after it the bucket is cold again (us).

-- The call packs the warning level and the ramp into one number, warn * LEVELS + ramp (each
-- below 2^26, flowgate-core's MAX_WARMUP_LEVELS).
local LEVELS = 67108864

-- The parameters admit takes, from the call's block: the emission interval T, tau = burst * T,
-- max_wait (0 in reject mode), extra = round((c - 1) * T), and the packed levels.
local function params(limit, t, tau, max_wait, extra, levels)
  return t, tau, max_wait, extra, levels
end

-- The TAT and the time to cool stored as `v` (0, 0 for none: a cold bucket).
local function state_of(v)
  if v and #v == 12 then
    local tat, cool = unpack_at('<dI4', v)
    if tat >= 0 and tat < BOUND and tat % 1 == 0 then
      return tat, cool
    end
  end
  return 0, 0
end

-- F(j) = floor(extra * j * (j + 1) / (2 * ramp)), the surcharge of the j levels above the
-- warning level. Exact: with j * (j + 1) / 2 = q * ramp + r, F = extra * q + floor(extra * r /
-- ramp), and every term stays below 2^53 (j <= 2^26, extra * ramp <= 2 * warmup).
local function surcharge_below(j, extra, ramp)
  local p = j * (j + 1) / 2
  local r = p % ramp
  return extra * ((p - r) / ramp) + idiv(extra * r, ramp)
end

-- Admits as GCRA on the TAT (the cold surcharge is paid after admission); an admission takes
-- `cost` levels and moves the TAT by cost * T plus their surcharge. Answers as gcra.lua's.
local function admit(v, now, cost, _, t, tau, max_wait, extra, levels)
  local tat, cool = state_of(v)
  if cost == 0 then
    return true
  end
  local base = tat > now and tat or now
  if base + cost * t - now - tau > max_wait then
    return false
  end
  local ramp = levels % LEVELS
  local warn = (levels - ramp) / LEVELS
  local top = warn + ramp
  -- The level at now: the stored one, cooled by every whole T since the TAT.
  local s = top - min(top, idiv(cool, t))
  if tat < now then
    s = min(top, s + idiv(now - tat, t))
  end
  local after = max(s - cost, 0)
  local j0, j1 = min(max(s - warn, 0), ramp), min(max(after - warn, 0), ramp)
  local new = base + cost * t + surcharge_below(j0, extra, ramp) - surcharge_below(j1, extra, ramp)
  local cool_in = (top - after) * t
  return true, pack('<dI4', new, cool_in), new + cool_in, tat + cool
end

local function idle_at(v)
  local tat, cool = state_of(v)
  return tat + cool
end

-- Gives back `cost` units taken at `at`, where the bucket's cooling position was `position - 1`
-- (flowgate-core's `warmup::position`: level * T plus the time since the last whole T of
-- cooling): the TAT moves back by cost * T and the surcharge of the levels taken, which return.
-- A TAT that then falls on `at` (the request found the bucket full) goes back to where cooling
-- stood, so that the bucket cools on as it would have.
local function refund(v, at, cost, position, t, _, _, extra, levels)
  local tat, cool = state_of(v)
  local ramp = levels % LEVELS
  local warn = (levels - ramp) / LEVELS
  local partial = (position - 1) % t
  local s = (position - 1 - partial) / t
  local after = max(s - cost, 0)
  local j0, j1 = min(max(s - warn, 0), ramp), min(max(after - warn, 0), ramp)
  tat = tat - cost * t - (surcharge_below(j0, extra, ramp) - surcharge_below(j1, extra, ramp))
  if tat == at then
    tat = at - partial
  end
  return pack('<dI4', max(tat, 0), max(cool - (s - after) * t, 0))
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund }
