-- Charges (the body of charge.lua, shared with commit.lua): `charges(call)` reads a call
-- string (see charge.lua) and answers a function that computes it on `keys` (reading them, or
-- given `read`, an MGET's answer holding their states from its index `from` on; writing
-- nothing), which answers a function that writes the new states and answers
-- charge.lua's reply: a caller (commit.lua) can do its own writes only once nothing can fail.

-- Redis's clock, read once per script call: the charges of one call happen at one instant.
local redis_now
local function clock()
  if not redis_now then
    local t = redis.call('TIME')
    redis_now = t[1] * 1000000 + t[2]
  end
  return redis_now
end

local function charges(call)
  local now, slack, nblocks, nitems, at = unpack_at('<ddHI4', call)
  if now == 0 then
    now, slack = clock(), nil
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

  return function(keys, read, from)
    local nkeys = #keys
    local before, states, idle = {}, {}, {}
    if read then
      for k = 1, nkeys do
        before[k] = read[from + k - 1]
      end
    else
      before = redis.call('MGET', unpack(keys))
    end
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

    return function()
      -- Each changed key written once, expiring when its state is empty again (at the next whole
      -- second of Redis's clock after that, as decide.lua writes it), or with a test clock the ms
      -- after it plus the slack.
      for k = 1, nkeys do
        local idle_at = idle[k]
        if idle_at then
          if slack then
            local ms = max(1, idiv(max(idle_at - now, 0) + 999, 1000) + slack)
            redis.call('SET', keys[k], states[k], 'PX', string.format('%d', ms))
          else
            local e = idle_at + 999999
            e = max((e - e % 1000000) / 1000, idiv(now, 1000) + 1)
            redis.call('SET', keys[k], states[k], 'PXAT', string.format('%d', e))
          end
        end
      end

      return { now, applied, unpack(before, 1, nkeys) }
    end
  end
end
