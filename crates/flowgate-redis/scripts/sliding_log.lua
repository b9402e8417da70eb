-- sliding_log: the timestamp and cost of each admitted request in the last window.
-- Mirrors flowgate-core src/algorithm/sliding_log.rs.
-- KEYS[i]: flowgate:{<key>}:S  -- string: one 12-byte entry per admission instant, oldest
--          first ('<dI4': the time in microseconds since the epoch as a little-endian double,
--          and the cost), then a trailer '<I4I4' (little-endian u32s): `dead`, how many entries
--          at the front had left the window when the log was last written (they count as
--          absent: the fast script leaves them in place rather than copy the log), and the
--          total cost of the entries after them. Requests admitted in the same microsecond are
--          merged into one entry carrying their summed cost (as the Rust log merges them), so
--          same-instant requests all count.
--          The total lets a decision read only the entries that have gone stale since (usually
--          one or none), from the front, instead of the whole log; oldest first lets the fast
--          script record an admission by writing only the new (or merged) entry and the trailer
--          in place (SETRANGE of 20 bytes at the log's end) instead of making the whole new log
--          as a Lua string, which Redis's Lua hashes byte by byte, and writing it. It rewrites
--          the log without its dead entries when they outweigh what copying the log costs, or
--          when the log reaches its limit (see its fragment below; every other writer writes
--          the log whole, with no dead entries). A log costs 12 bytes per entry (below its
--          limit, plus the room Redis leaves a string that grows and the dead entries not yet
--          dropped), and each decision reads it whole (the reply carries
--          it to the client): O(limit) bytes per decision, which is why large limits are
--          better served by sliding_window.
--          (The suffix is `S`: the former layouts, `l` and `L`, read as garbage in this one,
--          so those keys are left to expire.)
-- Item parameters used: p.window, p.limit, p.cost.

-- The entries stored as `v` but the dead ones ({ ts, c } each, oldest first; none for anything
-- else).
local function log_decode(v)
  local entries = {}
  if v and #v >= 8 and (#v - 8) % 12 == 0 then
    local n = (#v - 8) / 12
    local dead = struct.unpack('<I4', v, #v - 7)
    for i = dead, n - 1 do -- (none when dead > n: not a log any script writes)
      local t, c = struct.unpack('<dI4', v, 1 + 12 * i)
      entries[#entries + 1] = { ts = t, c = c }
    end
  end
  return entries
end

-- The stored form of `entries` (oldest first), with no dead entries.
local function log_encode(entries)
  local parts = {}
  local total = 0
  for i = 1, #entries do
    parts[i] = struct.pack('<dI4', entries[i].ts, entries[i].c)
    total = total + entries[i].c
  end
  parts[#entries + 1] = struct.pack('<I4I4', 0, total)
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
-- Fast fragment (see fast.lua): admission and the write. Block: limit, P1 = window. Reads the
-- newest entry and the trailer (one unpack), then the entries gone stale since the log was
-- written, from the first live one on (the total is stored). An admission on a key of one
-- request (`shared` 0) whose dead entries are few writes only the new (or merged) entry and the
-- trailer, at the log's end (`off`, the byte offset as a string, cached in SF at that offset:
-- `put` writes them with SETRANGE). Otherwise the new log is made whole: the entries as they
-- are, dead ones included (a prefix of `s`, copied by the pack; its format, cached in SF at the
-- prefix's length plus 1, says how long), then the new entry and the trailer; or the live entries
-- alone, when the dead entries outweigh what copying the log costs or the log reaches its limit
-- (so that a full log holds neither dead entries nor the spare room Redis gives a string that
-- SETRANGE grows). (The dead entries are worth dropping once their bytes, read on every
-- decision, cost more than a rewrite: about when dead^2 > 4 live + 150, counted in Redis
-- instructions.)
local window = P1
local n, first, total, stale = 0, 0, 0, 0 -- first: the index (from 0) of the first live entry
local lt, lc = 0, 0 -- the newest entry
if s and (#s - 8) % 12 == 0 then -- (% is floored: never 0 below 8 bytes)
  n = (#s - 8) / 12
  if n > 0 then
    lt, lc, first, total = sunpack('<dI4I4I4', s, #s - 19)
  else
    first, total = sunpack('<I4I4', s)
  end
  if first > n then -- not a log any script writes: no state
    n, first, total = 0, 0, 0
  elseif first < n and now >= window then
    local horizon = now - window
    if lt <= horizon then
      first = n -- (all of them)
      stale = total
    else
      local t, c = sunpack('<dI4', s, 12 * first + 1)
      while t <= horizon do -- (the newest is live: the loop stops before it)
        stale = stale + c
        first = first + 1
        t, c = sunpack('<dI4', s, 12 * first + 1)
      end
    end
  end
end
local live = n - first
local used = total - stale + cost -- (the live costs and this one)
if used <= limit then
  allowed = 1
  if cost > 0 then
    -- (in bulk, see fast.lua, when every item of the call on it fits)
    if shared == 1 and used - cost + tot <= limit then
      used = used - cost + tot
      cost = tot
      Z[k] = tot
    end
    local at = 12 * n -- where the new entry goes (bytes from 0)
    local t, c = now, cost
    if n > 0 then
      ex0 = lt + window
      if live > 0 and lt >= now then
        -- Same instant (or a clock that stepped back): merge into the newest entry.
        at = at - 12
        t = lt
        c = lc + cost
      end
    end
    ex = t + window
    if live == 0 or at == 0 then
      nv = spack('<dI4I4I4', t, c, 0, used)
    elseif used >= limit or first * first > 4 * live + 150 then
      -- (a log that reaches its limit stops growing until entries leave it: it is written at
      -- its size, as Redis keeps the spare room it gave a string that grows)
      nv = ssub(s, 12 * first + 1, at) .. spack('<dI4I4I4', t, c, 0, used)
    elseif shared == 0 then
      nv = spack('<dI4I4I4', t, c, first, used)
      off = SF[at]
      if not off then
        off = sformat('%d', at)
        SF[at] = off
      end
    else
      local f = SF[at + 1]
      if not f then
        f = sformat('<c%ddI4I4I4', at)
        SF[at + 1] = f
      end
      nv = spack(f, s, t, c, first, used)
    end
  end
end
