-- Circuit breakers shared by a cluster: one breaker's instances, the transitions of
-- flowgate_core::breaker (tests/breakers.rs runs random sequences on both and compares every
-- answer). Nodes send their reports in batches; each transition is decided here, once, and
-- published on the channel so that every node reads the breaker's phases again.
--
-- Whether a call is bad (failed, or slower than `slow_call`) is decided by the node that
-- reports it, from the breaker's strategy; this script counts calls and bad calls.
--
-- KEYS: per breaker (one hash tag, one slot; `<p>` is the breaker's prefix
-- "flowgate:brk:{<domain>:<name>:<fingerprint>}:"):
--   <p>s   hash: instance -> "o <until>" (open until) or "h <succeeded>" (half-open);
--          an instance not in it is closed
--   <p>seq the last probe lease given
--   <p>o   hash: instance -> "<calls> <bad>", why it opened last (the window's calls and bad
--          calls at the transition; after a failed probe, the probes reported while half-open
--          and 1), held while the instance is in <p>s
--   then for each instance of the call, three keys:
--     <p>w:<instance>  hash: "c<bucket index>" and "b<bucket index>" -> calls and bad calls
--                      (the sliding window, closed only)
--     <p>p:<instance>  zset: probe leases out (half-open), score = deadline
--     <p>n:<instance>  zset: node -> its last bad call's instant (with min_nodes over 1)
-- A report may carry several breakers (on a single Redis, one call per flush for them all);
-- probe and cancel carry one.
-- ARGV: 1 op, 2 now (us; empty: Redis's TIME), 3 node, 4 channel, then a breaker's parameters,
--   9 values: '1' for a count threshold ('0': a ratio), threshold, min_calls, window (us),
--   buckets, open_for (us), probes, probe_timeout (us), min_nodes; then:
--   report   5 breakers, then per breaker: its 9 parameters, its instances, then per
--            instance: name, calls, bad, probes reported n, then n pairs (lease, bad 0/1)
--   probe    5..13 the parameters, 14 instance name
--   cancel   5..13 the parameters, 14 instance name, 15 lease
-- Answers:
--   report   per instance, breakers in order: {phase, value, calls, bad, opened calls, opened
--            bad, probes out} (phase 'c'|'o'|'h'; value: until or succeeded; calls and bad: the
--            window's, closed; opened: why it opened, '' while closed or when no figures are
--            held; probes out: leases held, half-open)
--   probe    {answer, value, phase, phase value, opened calls, opened bad, probes out}: answer
--            'call', 'probe' (value: the lease) or 'refused' (value: the time to wait, us)
-- Times are us since the epoch; every value stays below 2^53, so Lua's doubles hold them.

local op = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local node = ARGV[3]
local channel = ARGV[4]
-- The breaker being worked on: its keys and parameters (set by `configure`).
local s, seq, why, is_count, threshold, min_calls, window, buckets, open_for, probes, probe_timeout,
  min_nodes, width

-- Takes the parameters at ARGV[a] and the keys at KEYS[k]; answers the next argument's index.
local function configure(a, k)
  s, seq, why = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  is_count = ARGV[a] == '1'
  threshold = tonumber(ARGV[a + 1])
  min_calls = tonumber(ARGV[a + 2])
  window = tonumber(ARGV[a + 3])
  buckets = tonumber(ARGV[a + 4])
  open_for = tonumber(ARGV[a + 5])
  probes = tonumber(ARGV[a + 6])
  probe_timeout = tonumber(ARGV[a + 7])
  min_nodes = tonumber(ARGV[a + 8])
  width = math.floor(window / buckets)
  return a + 9
end

-- A closed instance's window and an open one's leases outlive their use by this much at most.
local KEEP_MS = 1000

local function num(v)
  return string.format('%.0f', v)
end

-- An instance's phase: 'c', or 'o' with its end, or 'h' with the probes that succeeded. Open
-- past its end is half-open.
local function phase(name)
  local v = redis.call('HGET', s, name)
  if not v then
    return 'c', 0
  end
  local p, x = string.match(v, '^([oh]) (%d+)$')
  if not p then
    error(redis.error_reply('breaker state of ' .. name .. ' is not one this script writes: ' .. v))
  end
  x = tonumber(x)
  if p == 'o' and now >= x then
    redis.call('HSET', s, name, 'h 0')
    return 'h', 0, true
  end
  return p, x
end

local changed = false

-- Opens `name` for open_for, because of `calls` calls of which `bad` were bad.
local function open(name, w, p, n, calls, bad)
  redis.call('HSET', s, name, 'o ' .. num(now + open_for))
  redis.call('HSET', why, name, num(calls) .. ' ' .. num(bad))
  redis.call('DEL', w, p, n)
  changed = true
end

local function close(name, w, p, n)
  redis.call('HDEL', s, name)
  redis.call('HDEL', why, name)
  redis.call('DEL', w, p, n)
  changed = true
end

-- Why `name` opened last: its calls and bad calls, '' and '' while closed or when no figures are
-- held (an instance opened by a script that kept none).
local function opened(name, ph)
  if ph == 'c' then
    return '', ''
  end
  local v = redis.call('HGET', why, name)
  local calls, bad = string.match(v or '', '^(%d+) (%d+)$')
  if not calls then
    return '', ''
  end
  return calls, bad
end

-- The window's calls and bad calls at `now`; buckets that left it are deleted.
local function count(w)
  local current = math.floor(now / width)
  local oldest = current - buckets + 1
  local fields = redis.call('HGETALL', w)
  local calls, bad = 0, 0
  for i = 1, #fields, 2 do
    local kind, index = string.sub(fields[i], 1, 1), tonumber(string.sub(fields[i], 2))
    if index < oldest then
      redis.call('HDEL', w, fields[i])
    elseif index <= current then
      if kind == 'c' then
        calls = calls + tonumber(fields[i + 1])
      else
        bad = bad + tonumber(fields[i + 1])
      end
    end
  end
  return calls, bad
end

local function trips(calls, bad, n)
  if calls < min_calls or calls == 0 then
    return false
  end
  local over
  if is_count then
    over = bad >= threshold
  else
    over = bad >= threshold * calls
  end
  if over and min_nodes > 1 then
    redis.call('ZREMRANGEBYSCORE', n, '-inf', '(' .. num(now - window))
    over = redis.call('ZCARD', n) >= min_nodes
  end
  return over
end

-- Frees the places of expired probe leases (a lease is held while its deadline is later than
-- now).
local function expire(p)
  redis.call('ZREMRANGEBYSCORE', p, '-inf', num(now))
end

-- The probe leases held (half-open), once expired ones are gone.
local function out_of(ph, p)
  if ph ~= 'h' then
    return 0
  end
  expire(p)
  return redis.call('ZCARD', p)
end

if op == 'report' then
  local out = {}
  local a, k = 6, 1
  for _ = 1, tonumber(ARGV[5]) do
    a = configure(a, k)
    changed = false
    local n_instances = tonumber(ARGV[a])
    a = a + 1
    for i = 1, n_instances do
      local name = ARGV[a]
      local calls, bad, reported = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      local leases = a + 4
      a = leases + 2 * reported
      local w, p, n = KEYS[k + 3 * i], KEYS[k + 3 * i + 1], KEYS[k + 3 * i + 2]
      local ph, x, turned = phase(name)
      -- The window's calls and bad calls, answered while closed.
      local c, b = 0, 0
      if turned then
        changed = true
      end
      if ph == 'c' and calls > 0 then
        local index = math.floor(now / width)
        redis.call('HINCRBY', w, 'c' .. num(index), calls)
        if bad > 0 then
          redis.call('HINCRBY', w, 'b' .. num(index), bad)
          if min_nodes > 1 then
            redis.call('ZADD', n, now, node)
            redis.call('PEXPIRE', n, math.ceil(window / 1000) + KEEP_MS)
          end
        end
        redis.call('PEXPIRE', w, math.ceil(window / 1000) + KEEP_MS)
        c, b = count(w)
        if trips(c, b, n) then
          open(name, w, p, n, c, b)
          ph, x, c, b = 'o', now + open_for, 0, 0
        end
      elseif ph == 'c' then
        c, b = count(w)
      elseif ph == 'h' then
        expire(p)
        for j = 0, reported - 1 do
          local lease, bad_probe = ARGV[leases + 2 * j], ARGV[leases + 2 * j + 1] == '1'
          if redis.call('ZREM', p, lease) == 1 then
            if bad_probe then
              open(name, w, p, n, x + 1, 1)
              ph, x = 'o', now + open_for
              break
            end
            x = x + 1
            if x >= probes then
              close(name, w, p, n)
              ph, x = 'c', 0
              break
            end
            redis.call('HSET', s, name, 'h ' .. num(x))
          end
        end
      end
      local oc, ob = opened(name, ph)
      out[#out + 1] = {ph, num(x), c, b, oc, ob, out_of(ph, p)}
    end
    if changed then
      redis.call('PUBLISH', channel, s)
    end
    k = k + 3 + 3 * n_instances
  end
  return out
end

if op == 'probe' then
  configure(5, 1)
  local name = ARGV[14]
  local p = KEYS[5]
  local ph, x, turned = phase(name)
  local answer, value = 'call', 0
  if ph == 'o' then
    answer, value = 'refused', x - now
  elseif ph == 'h' then
    expire(p)
    if redis.call('ZCARD', p) + x < probes then
      answer, value = 'probe', redis.call('INCR', seq)
      redis.call('ZADD', p, now + probe_timeout, value)
      redis.call('PEXPIRE', p, math.ceil(probe_timeout / 1000) + KEEP_MS)
    else
      local first = redis.call('ZRANGE', p, 0, 0, 'WITHSCORES')
      local deadline = now + probe_timeout
      if first[2] then
        deadline = tonumber(first[2])
      end
      answer, value = 'refused', math.max(1, deadline - now)
    end
  end
  if turned then
    redis.call('PUBLISH', channel, s)
  end
  local oc, ob = opened(name, ph)
  return {answer, num(value), ph, num(x), oc, ob, out_of(ph, p)}
end

if op == 'cancel' then
  return redis.call('ZREM', KEYS[5], ARGV[15])
end

return redis.error_reply('unknown breaker op ' .. tostring(op))
