-- Shaped queues: one queue instance's transitions, the same as flowgate_core::queue::engine.
--
-- KEYS (one instance, one hash tag, one slot):
--   1 m   hash: seq (last id), tat (release schedule), submitted, released, acked, dead (totals)
--   2 p   hash: id -> payload
--   3 j   hash: id -> "<submitted>:<attempts>:<nonce>:<key>" (key empty when none)
--   4 r   zset: ready jobs, score = id (submission order)
--   5 d   zset: delayed jobs, score = due instant
--   6 f   zset: in-flight jobs, score = lease deadline
--   7 x   zset: dead letters, score = instant of death
--   8 k   hash: idempotency key -> id (live jobs, and finished jobs within the retention)
--   9 kt  zset: finished jobs' keys, score = finish instant
-- ARGV: 1 op, 2 now (µs; empty: Redis's TIME), 3 max_attempts, 4 key_retention (µs), then:
--   submit       5 max_depth, 6 spacing, 7 tau, 8 n, then n × (payload, key, not_before or 0)
--   lease        5 spacing, 6 tau, 7 horizon, 8 lease, 9 nonce
--   ack          5 id, 6 nonce
--   nack         5 id, 6 nonce, 7 retry_after ('' for the backoff), 8 backoff, 9 backoff cap
--   dead         5 offset, 6 limit
--   requeue, purge_dead   5.. ids (none: all)
--   purge, stats 5 tau
-- Every op first applies what time has done (sweep). Times are µs since the epoch; every value
-- stays below 2^53, so Lua's doubles hold them exactly.

local m, p, j, r, d, f, x, k, kt =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local op = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local max_attempts = tonumber(ARGV[3])
local retention = tonumber(ARGV[4])

local function num(v)
  return string.format('%.0f', v)
end

-- A job's submitted instant, attempts, nonce (a string) and key ('' when none).
local function info(id)
  local v = redis.call('HGET', j, id)
  if not v then return nil end
  local s, a, n, key = string.match(v, '^(%d+):(%d+):(%d+):(.*)$')
  return tonumber(s), tonumber(a), n, key
end

local function set_info(id, s, a, n, key)
  redis.call('HSET', j, id, num(s) .. ':' .. a .. ':' .. n .. ':' .. key)
end

local function meta(field)
  return tonumber(redis.call('HGET', m, field) or '0')
end

-- Calls `cmd key` with the arguments of `args` in chunks (Lua's unpack has a stack limit).
local function bulk(cmd, key, args)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', f, '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    local id, deadline = expired[i], expired[i + 1]
    redis.call('ZREM', f, id)
    local _, a = info(id)
    if a and a >= max_attempts then
      redis.call('ZADD', x, deadline, id)
      redis.call('HINCRBY', m, 'dead', 1)
    else
      redis.call('ZADD', r, id, id)
    end
  end
  local due = redis.call('ZRANGEBYSCORE', d, '-inf', now)
  for _, id in ipairs(due) do
    redis.call('ZREM', d, id)
    redis.call('ZADD', r, id, id)
  end
  local old = redis.call('ZRANGEBYSCORE', kt, '-inf', now - retention)
  for _, key in ipairs(old) do
    redis.call('ZREM', kt, key)
    redis.call('HDEL', k, key)
  end
end

-- Removes a finished job; its key is retained from now.
local function finish(id)
  local _, _, _, key = info(id)
  if not key then return false end
  redis.call('ZREM', r, id)
  redis.call('ZREM', d, id)
  redis.call('ZREM', f, id)
  redis.call('ZREM', x, id)
  redis.call('HDEL', p, id)
  redis.call('HDEL', j, id)
  if key ~= '' then redis.call('ZADD', kt, now, key) end
  return true
end

sweep()

if op == 'submit' then
  local max_depth, spacing, tau, n =
    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  local seen, fresh = {}, 0
  for i = 0, n - 1 do
    local key = ARGV[10 + 3 * i]
    if key == '' then
      fresh = fresh + 1
    elseif not seen[key] and redis.call('HEXISTS', k, key) == 0 then
      seen[key] = true
      fresh = fresh + 1
    end
  end
  local held = redis.call('ZCARD', r) + redis.call('ZCARD', d) + redis.call('ZCARD', f)
  if held + fresh > max_depth then return {'full', held, fresh} end
  local first = math.max(now, meta('tat') - tau)
  local ready = redis.call('ZCARD', r)
  local id = redis.call('HINCRBY', m, 'seq', fresh) - fresh
  redis.call('HINCRBY', m, 'submitted', fresh)
  local out, payloads, infos, readies, keys, ids = {'ok'}, {}, {}, {}, {}, {}
  for i = 0, n - 1 do
    local payload, key, nb = ARGV[9 + 3 * i], ARGV[10 + 3 * i], tonumber(ARGV[11 + 3 * i])
    local dup = key ~= '' and (ids[key] or redis.call('HGET', k, key))
    if dup then
      out[#out + 1] = tonumber(dup); out[#out + 1] = 1; out[#out + 1] = 0; out[#out + 1] = 0
    else
      id = id + 1
      local pos = ready
      payloads[#payloads + 1] = id; payloads[#payloads + 1] = payload
      infos[#infos + 1] = id; infos[#infos + 1] = num(now) .. ':0:0:' .. key
      if nb > now then
        redis.call('ZADD', d, nb, id)
      else
        readies[#readies + 1] = id; readies[#readies + 1] = id
        ready = ready + 1
      end
      if key ~= '' then
        ids[key] = id
        keys[#keys + 1] = key; keys[#keys + 1] = id
      end
      out[#out + 1] = id; out[#out + 1] = 0; out[#out + 1] = pos
      out[#out + 1] = math.max(first + pos * spacing, nb)
    end
  end
  bulk('HSET', p, payloads)
  bulk('HSET', j, infos)
  bulk('ZADD', r, readies)
  bulk('HSET', k, keys)
  return out
end

if op == 'lease' then
  local spacing, tau, horizon, lease, nonce =
    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
  local head = redis.call('ZRANGE', r, 0, 0)
  if #head == 0 then
    local next = -1
    for _, z in ipairs({d, f}) do
      local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
      if #first > 0 then
        local after = math.max(tonumber(first[2]) - now, 0)
        if next < 0 or after < next then next = after end
      end
    end
    return {'empty', next}
  end
  local tat = meta('tat')
  local at = math.max(now, tat - tau)
  if at - now > horizon then return {'later', at - now - horizon} end
  redis.call('HSET', m, 'tat', num(math.max(tat, at) + spacing))
  redis.call('HINCRBY', m, 'released', 1)
  local id = head[1]
  redis.call('ZREM', r, id)
  redis.call('ZADD', f, at + lease, id)
  local s, a, _, key = info(id)
  set_info(id, s, a + 1, nonce, key)
  return {'job', tonumber(id), redis.call('HGET', p, id), a + 1, s, at, at + lease, now}
end

if op == 'ack' then
  local id, nonce = ARGV[5], ARGV[6]
  local _, _, n = info(id)
  if n ~= nonce or nonce == '0' then return {'not_held'} end
  finish(id)
  redis.call('HINCRBY', m, 'acked', 1)
  return {'ok'}
end

if op == 'nack' then
  local id, nonce = ARGV[5], ARGV[6]
  local s, a, n, key = info(id)
  if n ~= nonce or not redis.call('ZSCORE', f, id) then return {'not_held'} end
  redis.call('ZREM', f, id)
  if a >= max_attempts then
    redis.call('ZADD', x, now, id)
    redis.call('HINCRBY', m, 'dead', 1)
    return {'dead'}
  end
  local delay = tonumber(ARGV[7])
  if not delay then
    delay = math.min(tonumber(ARGV[8]) * 2 ^ math.min(a - 1, 40), tonumber(ARGV[9]))
  end
  local at = now + delay
  if at > now then redis.call('ZADD', d, at, id) else redis.call('ZADD', r, id, id) end
  return {'retry', at}
end

if op == 'dead' then
  local offset, limit = tonumber(ARGV[5]), tonumber(ARGV[6])
  local out = {}
  if limit < 1 then return out end
  local list = redis.call('ZRANGE', x, offset, offset + limit - 1, 'WITHSCORES')
  for i = 1, #list, 2 do
    local id = list[i]
    local s, a, _, key = info(id)
    out[#out + 1] = {tonumber(id), redis.call('HGET', p, id), a, s, tonumber(list[i + 1]), key}
  end
  return out
end

if op == 'requeue' or op == 'purge_dead' then
  local ids = {}
  if #ARGV < 5 then
    ids = redis.call('ZRANGE', x, 0, -1)
  else
    for i = 5, #ARGV do
      if not redis.call('ZSCORE', x, ARGV[i]) then return {'not_dead', tonumber(ARGV[i])} end
      ids[#ids + 1] = ARGV[i]
    end
  end
  for _, id in ipairs(ids) do
    if op == 'requeue' then
      local s, _, n, key = info(id)
      set_info(id, s, 0, n, key)
      redis.call('ZREM', x, id)
      redis.call('ZADD', r, id, id)
    else
      finish(id)
    end
  end
  return {'ok', #ids}
end

if op == 'purge' then
  local count = 0
  for _, z in ipairs({r, d, f, x}) do
    for _, id in ipairs(redis.call('ZRANGE', z, 0, -1)) do
      if finish(id) then count = count + 1 end
    end
  end
  return {'ok', count}
end

if op == 'stats' then
  local tau = tonumber(ARGV[5])
  local oldest = -1
  for _, z in ipairs({r, d}) do
    local first = redis.call('ZRANGE', z, 0, 0)
    if #first > 0 then
      local s = info(first[1])
      if s and (oldest < 0 or s < oldest) then oldest = s end
    end
  end
  return {
    redis.call('ZCARD', r), redis.call('ZCARD', d), redis.call('ZCARD', f), redis.call('ZCARD', x),
    oldest, meta('submitted'), meta('released'), meta('acked'), meta('dead'),
    math.max(meta('tat') - tau, now), now,
  }
end

return redis.error_reply('unknown queue op ' .. tostring(op))
