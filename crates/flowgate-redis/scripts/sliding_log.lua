-- sliding_log: the timestamp and cost of each admitted request in the last window.
-- Mirrors flowgate-core src/algorithm/sliding_log.rs.
-- KEYS[i]: flowgate:{<key>}:L  -- string: one 12-byte entry per admission instant, newest
--          first ('<dI4': the time in microseconds since the epoch as a little-endian double,
--          and the cost), then the total cost of the entries (struct '<I4', a little-endian
--          u32). Requests admitted in the same microsecond are merged into one entry carrying
--          their summed cost (as the Rust log merges them), so same-instant requests all count.
--          The total lets a decision read only the stale entries at the end (usually one or
--          none) instead of the whole log, and newest first lets the new log be made in one
--          struct.pack (the new entry, the live ones as a prefix of the old string, the new
--          total): Redis's Lua hashes every byte of every string it makes, so each string
--          made of the log costs as much as its length. A log costs 12 bytes per entry, and an
--          admitted decision copies it (and the reply carries it to the client): O(limit)
--          bytes per decision, which is why large limits are better served by sliding_window.
--          (The suffix is `L`: the layout of the former `l`, oldest first with the total in
--          front, reads as garbage in this one, so those keys are left to expire.)
-- Item parameters used: p.window, p.limit, p.cost.

-- The entries stored as `v` ({ ts, c } each, oldest first; none for anything else).
local function log_decode(v)
  local entries = {}
  if v and #v >= 4 and (#v - 4) % 12 == 0 then
    local n = (#v - 4) / 12
    for i = 0, n - 1 do
      local t, c = struct.unpack('<dI4', v, 1 + 12 * i)
      entries[n - i] = { ts = t, c = c }
    end
  end
  return entries
end

-- The stored form of `entries` (oldest first).
local function log_encode(entries)
  local parts = {}
  local total = 0
  local n = #entries
  for i = 1, n do
    parts[n + 1 - i] = struct.pack('<dI4', entries[i].ts, entries[i].c)
    total = total + entries[i].c
  end
  parts[n + 1] = struct.pack('<I4', total)
  return table.concat(parts)
end

-- The live entries (after now - window).
local function log_load(key, p, now)
  local horizon = -1
  if now >= p.window then
    horizon = now - p.window -- entries at or before it have left the window
  end
  local entries = {}
  local all = log_decode(redis.call('GET', key))
  for i = 1, #all do
    if all[i].ts > horizon then
      entries[#entries + 1] = all[i]
    end
  end
  return { entries = entries }
end

local function log_check(p, s, now, cost)
  local sum = 0
  for i = 1, #s.entries do
    sum = sum + s.entries[i].c
  end
  local d = decision()
  d.allowed = sum + cost <= p.limit
  local used = sum
  if d.allowed then
    used = sum + cost
  end
  d.remaining = sat(p.limit - used)
  local last = s.entries[#s.entries]
  local newest = nil
  if d.allowed and cost > 0 then
    newest = now
    if last and last.ts > now then
      newest = last.ts
    end
  elseif last then
    newest = last.ts
  end
  if newest then
    d.reset = sat(newest + p.window - now)
  end
  if not d.allowed and cost <= p.limit then
    local freed = 0
    for i = 1, #s.entries do
      freed = freed + s.entries[i].c
      if sum - freed + cost <= p.limit then
        d.retry = s.entries[i].ts + p.window - now
        break
      end
    end
  end
  return d
end

local function log_apply(p, s, now, cost)
  local n = #s.entries
  local last = s.entries[n]
  if last and last.ts >= now then
    -- Same instant (or a clock that stepped back): merge, keeping the log ordered (a new entry
    -- table: copies of a state share the old ones).
    s.entries[n] = { ts = last.ts, c = last.c + cost }
  else
    s.entries[n + 1] = { ts = now, c = cost }
  end
  s.idle_at = s.entries[#s.entries].ts + p.window
end

local function log_store(key, s, now, slack)
  redis.call('SET', key, log_encode(s.entries), expiry(s.idle_at, now, slack))
end

-- Takes `cost` off the entry that recorded a request admitted at `at` (the first entry at or
-- after it: the request was logged at max(at, newest)).
local function log_refund(key, p, at, cost)
  local entries = log_decode(redis.call('GET', key))
  for i = 1, #entries do
    local e = entries[i]
    if e.ts >= at then
      if e.c > cost then
        entries[i] = { ts = e.ts, c = e.c - cost }
      else
        table.remove(entries, i)
      end
      redis.call('SET', key, log_encode(entries), 'KEEPTTL')
      return
    end
  end
end

ALG[4] = { load = log_load, check = log_check, apply = log_apply, store = log_store, refund = log_refund }

-- @@fast
-- Fast fragment (see fast.lua): admission and the new log. Block: limit, P1 = window. Reads the
-- stale entries at the end only (the total is stored), then makes the new log in one pack: the
-- new entry, the live entries (a prefix of `s`: its format, cached in SF, says how long), the
-- new total.
local window = P1
local n, total, live, stale = 0, 0, 0, 0 -- live: the entries after now - window, the first ones
local t, c = 0, 0 -- the last entry read
if s and #s >= 16 and (#s - 4) % 12 == 0 then
  n = (#s - 4) / 12
  live = n
  -- The oldest entry and the total, then older to newer until an entry is live.
  t, c, total = sunpack('<dI4I4', s, #s - 15)
  if now >= window then
    local horizon = now - window
    while t <= horizon do
      stale = stale + c
      live = live - 1
      if live == 0 then
        break
      end
      t, c = sunpack('<dI4', s, 12 * live - 11)
    end
  end
end
local sum = total - stale
if sum + cost <= limit then
  allowed = 1
  if cost > 0 then
    local lt, lc = t, c -- the newest entry (the last read when it is the first)
    if n > 0 then
      if live ~= 1 then
        lt, lc = sunpack('<dI4', s)
      end
      ex0 = lt + window
    end
    if live > 0 and lt >= now then
      -- Same instant (or a clock that stepped back): merge into the newest entry.
      nv = spack('<dI4c0I4', lt, lc + cost, ssub(s, 13, 12 * live), sum + cost)
      ex = lt + window
    else
      if live == 0 then
        nv = spack('<dI4I4', now, cost, sum + cost)
      else
        local f = SF[live]
        if not f then
          f = sformat('<dI4c%dI4', 12 * live)
          SF[live] = f
        end
        nv = spack(f, now, cost, s, sum + cost)
      end
      ex = now + window
    end
  end
end
