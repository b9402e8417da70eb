-- token_bucket / leaky_bucket, and the queues' release schedule: GCRA over one theoretical
-- arrival time (TAT). Mirrors flowgate-core src/algorithm/gcra.rs.
-- Key flowgate:{<key>}:g holds the TAT, us since the epoch, as '<d' (8 bytes).

-- GCRA's one step, flowgate-core's `gcra::reserve`, for every script (decide and the queues):
-- a request of `span` us of the schedule (cost * T) at `now` on the TAT `tat`, with tolerance
-- tau = burst * T, is admitted when its wait, max(0, max(tat, now) + span - now - tau), is at
-- most `max_wait`. Answers the new TAT and the wait, or nil and how long until it would be
-- admitted.
local function reserve(tat, now, span, tau, max_wait)
  local new = (tat > now and tat or now) + span
  local wait = new - now - tau
  if wait > max_wait then
    return nil, wait - max_wait
  end
  return new, wait > 0 and wait or 0
end

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
  local new = reserve(tat, now, cost * t, tau, max_wait)
  if not new then
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

-- A charge of `n` units at `now` (`kind` 0), a refund (1) or a release (2, as a refund: the TAT
-- keeps no trace of when units were taken), as Rust's gcra::charge and refund: the TAT pushed
-- n * T further, at most to now + tau + max_debt * T (whole units), or pulled back n * T, never
-- before now. Answers the new state (nil: unchanged), when it is empty again, and the units
-- applied.
local function charge(v, now, n, kind, _, max_debt, t, tau)
  local tat = tat_of(v)
  if kind > 0 then
    if tat <= now then
      return nil, 0, 0
    end
    local given = min(n, idiv(tat - now + t - 1, t))
    local new = max(tat - given * t, now)
    return pack('<d', new), new, given
  end
  local base = max(tat, now)
  local applied = min(n, idiv(max(now + tau + max_debt * t - base, 0), t))
  if applied == 0 then
    return nil, 0, 0
  end
  local new = base + applied * t
  return pack('<d', new), new, applied
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund, charge = charge,
  reserve = reserve }
