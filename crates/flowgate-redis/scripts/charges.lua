-- Charges (the body of charge.lua, shared with commit.lua), in two steps so that a caller
-- (commit.lua) can do its own writes only once nothing can fail: `charges(call, read, from,
-- nkeys)` computes a call string's items (see charge.lua) on the states of `read` (an MGET's
-- answer) from its index `from` on, `nkeys` of them, writing nothing; `write_charged` writes
-- what it computed. Neither makes a closure or a table per key: a commit is small, and what
-- it allocates is most of its cost.

-- Redis's clock, read once per script call: the charges of one call happen at one instant.
local redis_now
local function clock()
  if not redis_now then
    local t = redis.call('TIME')
    redis_now = t[1] * 1000000 + t[2]
  end
  return redis_now
end

-- The blocks of the call strings of one script call, parsed once each (a call's commits
-- mostly share their limit): by their bytes, the algorithm's charge, max_debt, the parameters.
local parsed_blocks = {}

-- Answers the instant, the test clock's slack (nil on Redis's clock), the keys' new states and
-- when each is empty again (nil: unchanged), by its place among the `nkeys`, and the units
-- each item applied.
local function charges(call, read, from, nkeys)
  local now, slack, nblocks, nitems, at = unpack_at('<ddHI4', call)
  if now == 0 then
    now, slack = clock(), nil
  end

  local blocks = {}
  for b = 1, nblocks do
    local raw = sub(call, at, at + 48)
    local blk = parsed_blocks[raw]
    if not blk then
      local code, limit, x, y, z, u, w = unpack_at('<Bdddddd', raw)
      ALG[code] = ALG[code] or make(code)
      if not ALG[code].charge then
        error('flowgate: this algorithm takes no charges')
      end
      blk = { ALG[code].charge, u, ALG[code].params(limit, x, y, z, 0, w) }
      parsed_blocks[raw] = blk
    end
    blocks[b] = blk
    at = at + 49
  end

  local states, idle, applied = {}, {}, {}
  for k = 1, nkeys do
    states[k] = read[from + k - 1]
  end
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
    local new, idle_at, got, patch = blk[1](v, now, n, flags, taken, blk[2], blk[3], blk[4],
      blk[5], blk[6], blk[7])
    if new then
      if patch then
        new = sub(v, 1, patch) .. new .. sub(v, patch + #new + 1)
      end
      states[k], idle[k] = new, idle_at
    end
    applied[i] = got
  end
  return now, slack, states, idle, applied
end

-- Writes the keys `charges` changed (KEYS from index `from` on, `nkeys` of them), each
-- expiring when its state is empty again (at the next whole second of Redis's clock after that,
-- as decide.lua writes it), or with a test clock the ms after it plus the slack.
local function write_charged(from, nkeys, now, slack, states, idle)
  for k = 1, nkeys do
    local idle_at = idle[k]
    if idle_at then
      if slack then
        local ms = max(1, idiv(max(idle_at - now, 0) + 999, 1000) + slack)
        redis.call('SET', KEYS[from + k - 1], states[k], 'PX', string.format('%d', ms))
      else
        local e = idle_at + 999999
        e = max((e - e % 1000000) / 1000, idiv(now, 1000) + 1)
        redis.call('SET', KEYS[from + k - 1], states[k], 'PXAT', string.format('%d', e))
      end
    end
  end
end
