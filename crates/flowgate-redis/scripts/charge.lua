-- Flowgate charge: charges and refunds (costs learned after the work), each applied to its key in
-- order, never refused for being over the limit: a charge counts up to the limit's max_debt
-- beyond it, a refund gives back down to empty (docs/algorithms.md, "Charges, debt and refunds").
-- Each algorithm that takes charges has a `charge` in its file, the twin of its Rust `charge`
-- and `refund`; the client replays the items on the states before the call with the Rust
-- transition to report each answer, checking that it applied alike.
--
-- KEYS: the call's distinct state keys.
-- ARGV[1]: as decide.lua's call string, but each block's fourth parameter is the limit's
--          max_debt, and an item's flags byte is 0 for a charge, 1 for a refund, 2 for the
--          release of a reservation; a release's item ends with one more '<d': the instant the
--          reservation took its units, or for a fixed window the end of the window holding that
--          instant (the client computes it: calendar periods need a time zone database).
-- Returns { now, the units each item applied (a list), the keys' states before the call }.

local call = ARGV[1]
local now, slack, nblocks, nitems, at = unpack_at('<ddHI4', call)
if now == 0 then
  local t = redis.call('TIME')
  now, slack = t[1] * 1000000 + t[2], nil
end

local blocks = {}
for b = 1, nblocks do
  local code, limit, x, y, z, u, w
  code, limit, x, y, z, u, w, at = unpack_at('<Bdddddd', call, at)
  ALG[code] = ALG[code] or make(code)
  if not ALG[code].charge then
    error('flowgate: this algorithm takes no charges')
  end
  blocks[b] = { ALG[code].charge, u, ALG[code].params(limit, x, y, z, 0, w) }
end

local nkeys = #KEYS
local before = redis.call('MGET', unpack(KEYS))
local states, idle = {}, {}
for k = 1, nkeys do
  states[k] = before[k]
end

local applied = {}
for i = 1, nitems do
  local n, b, k1, k2, flags = string.byte(call, at, at + 4)
  at = at + 5
  if n == 255 then
    n, at = unpack_at('<d', call, at)
  end
  local taken = 0
  if flags == 2 then
    taken, at = unpack_at('<d', call, at)
  end
  local k = k1 + 256 * k2
  local blk, v = blocks[b], states[k] or nil
  local new, idle_at, got, patch = blk[1](v, now, n, flags, taken, blk[2], unpack(blk, 3))
  if new then
    if patch then
      new = sub(v, 1, patch) .. new .. sub(v, patch + #new + 1)
    end
    states[k], idle[k] = new, idle_at
  end
  applied[i] = got
end

-- Each changed key written once, expiring when its state is empty again (at the next whole
-- second of Redis's clock after that, as decide.lua writes it), or with a test clock the ms
-- after it plus the slack.
for k = 1, nkeys do
  local idle_at = idle[k]
  if idle_at then
    if slack then
      local ms = max(1, idiv(max(idle_at - now, 0) + 999, 1000) + slack)
      redis.call('SET', KEYS[k], states[k], 'PX', string.format('%d', ms))
    else
      local e = idle_at + 999999
      e = max((e - e % 1000000) / 1000, idiv(now, 1000) + 1)
      redis.call('SET', KEYS[k], states[k], 'PXAT', string.format('%d', e))
    end
  end
end

return { now, applied, unpack(before, 1, nkeys) }
