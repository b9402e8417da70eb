-- Flowgate adaptive limits shared by a cluster: AIMD, the transition of
-- `flowgate_core::adaptive::Aimd` (crates/flowgate-core/src/adaptive.rs), applied here once per
-- report for every node. `new_state` is `Aimd::new`, `report` is `Aimd::report`, line for line:
-- the same float operations in the same order, on the same doubles (numbers arrive as the
-- shortest decimal text that reads back as the client's f64).
--
-- KEYS[1]: the rule's hash, flowgate:adaptive:{<domain>:<rule>}. One field per state key; its
--          value `<limit> <hold> <spec>`: the limit as %.17g (it reads back exactly), the reports
--          still held, and the parameters it moved under (ARGV[1..5] joined by commas). A field
--          stored under other parameters starts again, as the library's local state does.
-- ARGV[1..5]: initial, min, max, max_latency (µs), backoff.
-- ARGV[6]: the most fields the hash holds: past it, a key not in the hash is refused.
-- ARGV[7]: the hash's time to live (seconds), set again by every call that writes.
-- ARGV[8..]: per key: its state key, the number n of its reports, then n reports of three values
--            each, in the order they are applied: rtt (µs), failed (1 or 0), inflight.
-- Returns, per key in order, its limit after its reports (whole calls), or -1 when refused.

local spec = table.concat(ARGV, ',', 1, 5)
local initial, lo, hi = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_latency, backoff = tonumber(ARGV[4]), tonumber(ARGV[5])
local cap, ttl = tonumber(ARGV[6]), tonumber(ARGV[7])

-- Aimd::report's bounds: min at least 1, max at least min.
local min = math.max(lo, 1)
local max = math.max(hi, min)

-- Aimd::new: initial within min..=max.
local function new_state()
  return { limit = math.min(math.max(initial, min), max), hold = 0 }
end

-- A stored value, when it was moved under these parameters.
local function decode(v)
  local l, h, s = string.match(v, '^(%S+) (%S+) (.*)$')
  if s ~= spec or not tonumber(l) or not tonumber(h) then
    return nil
  end
  return { limit = tonumber(l), hold = tonumber(h) }
end

-- Aimd::report.
local function report(st, rtt, failed, inflight)
  local held = st.hold > 0
  if held then
    st.hold = st.hold - 1
  end
  if failed or rtt > max_latency then
    if not held then
      st.limit = math.max(st.limit * backoff, min)
      st.hold = inflight
    end
  elseif inflight * 2.0 >= st.limit then
    st.limit = math.min(st.limit + 1.0 / math.max(st.limit, 1.0), max)
  end
end

local out = {}
local len = nil
local wrote = false
local i = 8
while i <= #ARGV do
  local field, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local v = redis.call('HGET', KEYS[1], field)
  if not v then
    len = len or redis.call('HLEN', KEYS[1])
  end
  if not v and len >= cap then
    out[#out + 1] = -1
  else
    if not v then
      len = len + 1
    end
    local st = (v and decode(v)) or new_state()
    for j = 0, n - 1 do
      local r = i + 3 * j
      report(st, tonumber(ARGV[r]), ARGV[r + 1] == '1', tonumber(ARGV[r + 2]))
    end
    redis.call('HSET', KEYS[1], field, string.format('%.17g %d %s', st.limit, st.hold, spec))
    wrote = true
    out[#out + 1] = math.floor(st.limit)
  end
  i = i + 3 * n
end
if wrote then
  redis.call('EXPIRE', KEYS[1], ttl)
end
return out
