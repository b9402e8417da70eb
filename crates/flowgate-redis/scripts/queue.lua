-- Shaped queues: one queue instance's transitions, the same as flowgate_core::queue::engine
-- (tests/queue_props.rs runs random operation sequences on both and compares every answer).
-- Assembled after common.lua and the algorithm files (scripts.rs): the release schedule is
-- gcra.lua's `reserve`, a release being a request of one unit (span = spacing, tau = burst *
-- spacing, max_wait = the lease's horizon).
--
-- KEYS (one instance, one hash tag, one slot):
--   1 m   hash: seq (last id), tat (release schedule), submitted, released, acked, dead (totals)
--   2 j   hash: id -> job record "<submitted>:<attempts>:<nonce>:<key length>:<key><payload>";
--         a job submitted ready is stored as the client built it, submitted 0: its instant is
--         its batch's (bt), and is written into the record when the job leaves r
--   3 r   list: ready jobs never delivered, in submission order (ids only grow)
--   4 rz  zset: ready jobs back out of order (redelivered, retried, due, requeued), score = id;
--         the next ready job is the lower id of the heads of r and rz (submission order)
--   5 d   zset: delayed jobs, score = due instant
--   6 f   zset: in-flight jobs, score = lease deadline
--   7 x   zset: dead letters, score = instant of death
--   8 k   hash: idempotency key -> id (live jobs, and finished jobs within the retention)
--   9 kt  zset: finished jobs' keys, score = finish instant
--  10 bt  zset: batches with jobs in r, member "<first id>:<instant>", score = first id
-- ARGV: 1 op, 2 now (µs; empty: Redis's TIME), 3 max_attempts, 4 key_retention (µs), then:
--   submit       5 max_depth, 6 spacing, 7 tau, 8 n, 9 how many jobs have a key, then
--                n × (record, options): the record "0:0:0:<key length>:<key><payload>",
--                options '' or "<not_before or 0>:<key>"
--                (records are stored as sent: building them here cost more than the rest of a
--                submit, whose cost is per job)
--   lease        5 spacing, 6 tau, 7 horizon, 8 lease, 9 nonce
--   ack          5 id, 6 nonce
--   nack         5 id, 6 nonce, 7 retry_after ('' for the backoff), 8 backoff, 9 backoff cap
--   dead         5 offset, 6 limit
--   requeue, purge_dead   5.. ids (none: all)
--   purge        (none)
--   stats        5 spacing, 6 tau
-- Every op first applies what time has done (sweep). Times are µs since the epoch; every value
-- stays below 2^53, so Lua's doubles hold them exactly.

local reserve = make(GCRA).reserve
local m, j, r, rz, d, f, x, k, kt, bt =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
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

-- A job record's fields: submitted instant, attempts, nonce (a string), key ('' when none) and
-- payload; nil for an unknown job.
local function job(id)
  local v = redis.call('HGET', j, id)
  if not v then return nil end
  local s, a, n, kl, at = string.match(v, '^(%d+):(%d+):(%d+):(%d+):()')
  local key_end = at + tonumber(kl)
  s = tonumber(s)
  if s == 0 then
    local batch = redis.call('ZREVRANGEBYSCORE', bt, id, '-inf', 'LIMIT', 0, 1)[1]
    s = batch and tonumber(string.match(batch, ':(%d+)$')) or now
  end
  return s, tonumber(a), n, string.sub(v, at, key_end - 1), string.sub(v, key_end)
end

local function record(s, a, n, key, payload)
  return num(s) .. ':' .. a .. ':' .. n .. ':' .. #key .. ':' .. key .. payload
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

-- Members `from` to `from + count - 1` (0-based ranks) of zset `z`, as {id, score} pairs, in the
-- engine's order: by score, then by id as a number. (Redis breaks a tie of scores by the
-- members' text, "10" before "9": the members tied with the last one read are all read, and
-- sorted here.)
local function by_score(z, from, count)
  local list = redis.call('ZRANGE', z, 0, from + count - 1, 'WITHSCORES')
  if #list == 0 then return {} end
  local last = tonumber(list[#list])
  local rows = {}
  for i = 1, #list, 2 do
    local score = tonumber(list[i + 1])
    if score < last then rows[#rows + 1] = {list[i], score} end
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', z, num(last), num(last))) do
    rows[#rows + 1] = {id, last}
  end
  table.sort(rows, function(a, b)
    return a[2] < b[2] or (a[2] == b[2] and tonumber(a[1]) < tonumber(b[1]))
  end)
  local out = {}
  for i = from + 1, math.min(from + count, #rows) do out[#out + 1] = rows[i] end
  return out
end

local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', f, '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    local id, deadline = expired[i], expired[i + 1]
    redis.call('ZREM', f, id)
    local _, a = job(id)
    if a and a >= max_attempts then
      redis.call('ZADD', x, deadline, id)
      redis.call('HINCRBY', m, 'dead', 1)
    else
      redis.call('ZADD', rz, id, id)
    end
  end
  local due = redis.call('ZRANGEBYSCORE', d, '-inf', now)
  for _, id in ipairs(due) do
    redis.call('ZREM', d, id)
    redis.call('ZADD', rz, id, id)
  end
  local old = redis.call('ZRANGEBYSCORE', kt, '-inf', now - retention)
  for _, key in ipairs(old) do
    redis.call('ZREM', kt, key)
    redis.call('HDEL', k, key)
  end
end

-- The number of ready jobs, and the id of the next one (nil when none).
local function ready_head()
  local a = redis.call('LINDEX', r, 0)
  local b = redis.call('ZRANGE', rz, 0, 0)[1]
  local count = redis.call('LLEN', r) + redis.call('ZCARD', rz)
  if a and (not b or tonumber(a) < tonumber(b)) then return count, a end
  return count, b
end

-- Removes a finished job (not one in r: a job there was never delivered, so it is only ever
-- finished by a purge, which deletes r); its key is retained from now.
local function finish(id)
  local _, _, _, key = job(id)
  if not key then return false end
  redis.call('ZREM', rz, id)
  redis.call('ZREM', d, id)
  redis.call('ZREM', f, id)
  redis.call('ZREM', x, id)
  redis.call('HDEL', j, id)
  if key ~= '' then redis.call('ZADD', kt, now, key) end
  return true
end

sweep()

if op == 'submit' then
  local max_depth, spacing, tau, n, keyed_jobs =
    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  -- Options of job i: its not_before (0 when none) and key ('' when none).
  local function options(i)
    local opt = ARGV[9 + 2 * i]
    if opt == '' then return 0, '' end
    local nb, key = string.match(opt, '^(%d+):(.*)$')
    return tonumber(nb), key
  end
  -- New jobs: all but those whose key names a job (known, or earlier in the batch).
  local fresh = n
  if keyed_jobs > 0 then
    local seen = {}
    for i = 1, n do
      local _, key = options(i)
      if key ~= '' then
        if seen[key] or redis.call('HEXISTS', k, key) == 1 then fresh = fresh - 1 end
        seen[key] = true
      end
    end
  end
  local ready = ready_head()
  local held = ready + redis.call('ZCARD', d) + redis.call('ZCARD', f)
  if held + fresh > max_depth then return {'full', held, fresh} end
  local _, wait = reserve(meta('tat'), now, spacing, tau, math.huge)
  local first = now + wait
  local id = redis.call('HINCRBY', m, 'seq', fresh) - fresh
  redis.call('HINCRBY', m, 'submitted', fresh)
  -- The reply: the instant, the first release slot, the jobs ready before, the first new id,
  -- then (index, id) of each duplicate; the client numbers the new jobs and their positions.
  local out = {'ok', now, first, ready, id + 1}
  if fresh > 0 then redis.call('ZADD', bt, id + 1, (id + 1) .. ':' .. num(now)) end
  -- Records and ready ids are written in bulk after the loop: the batch's cost is this loop.
  local records, readies, keyed, ids = {}, {}, {}, {}
  local nr, nready = 0, 0
  for i = 1, n do
    local nb, key = options(i)
    local dup = key ~= '' and (ids[key] or redis.call('HGET', k, key))
    if dup then
      out[#out + 1] = i - 1; out[#out + 1] = tonumber(dup)
    else
      id = id + 1
      records[nr + 1] = id
      records[nr + 2] = ARGV[8 + 2 * i]
      if key ~= '' then
        ids[key] = id
        keyed[#keyed + 1] = key; keyed[#keyed + 1] = id
      end
      nr = nr + 2
      if nb > now then
        -- Not in r: its record carries its instant.
        records[nr] = num(now) .. string.sub(ARGV[8 + 2 * i], 2)
        redis.call('ZADD', d, nb, id)
      else
        nready = nready + 1
        readies[nready] = id
      end
      if nr == 1000 then
        redis.call('HSET', j, unpack(records))
        redis.call('RPUSH', r, unpack(readies, 1, nready))
        records, readies, nr, nready = {}, {}, 0, 0
      end
    end
  end
  if nr > 0 then redis.call('HSET', j, unpack(records)) end
  if nready > 0 then redis.call('RPUSH', r, unpack(readies, 1, nready)) end
  bulk('HSET', k, keyed)
  return out
end

if op == 'lease' then
  local spacing, tau, horizon, lease, nonce =
    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
  local _, id = ready_head()
  if not id then
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
  local tat, wait = reserve(meta('tat'), now, spacing, tau, horizon)
  if not tat then return {'later', wait} end
  local at = now + wait
  redis.call('HSET', m, 'tat', num(tat))
  redis.call('HINCRBY', m, 'released', 1)
  local s, a, _, key, payload = job(id)
  if redis.call('ZREM', rz, id) == 0 then
    redis.call('LPOP', r)
    -- Batches with no job left in r go.
    local next = redis.call('LINDEX', r, 0)
    if next then
      local batch = redis.call('ZREVRANGEBYSCORE', bt, next, '-inf', 'LIMIT', 0, 1, 'WITHSCORES')
      if batch[2] then redis.call('ZREMRANGEBYSCORE', bt, '-inf', '(' .. batch[2]) end
    else
      redis.call('DEL', bt)
    end
  end
  redis.call('ZADD', f, at + lease, id)
  redis.call('HSET', j, id, record(s, a + 1, nonce, key, payload))
  return {'job', tonumber(id), payload, a + 1, s, at, at + lease, now}
end

if op == 'ack' then
  local id, nonce = ARGV[5], ARGV[6]
  local _, _, n = job(id)
  if n ~= nonce or nonce == '0' then return {'not_held'} end
  finish(id)
  redis.call('HINCRBY', m, 'acked', 1)
  return {'ok'}
end

if op == 'nack' then
  local id, nonce = ARGV[5], ARGV[6]
  local _, a, n = job(id)
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
  if at > now then redis.call('ZADD', d, at, id) else redis.call('ZADD', rz, id, id) end
  return {'retry', at}
end

if op == 'dead' then
  local offset, limit = tonumber(ARGV[5]), tonumber(ARGV[6])
  local out = {}
  if limit < 1 then return out end
  for _, row in ipairs(by_score(x, offset, limit)) do
    local id, died = row[1], row[2]
    local s, a, _, key, payload = job(id)
    out[#out + 1] = {tonumber(id), payload, a, s, died, key}
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
      local s, _, n, key, payload = job(id)
      redis.call('HSET', j, id, record(s, 0, n, key, payload))
      redis.call('ZREM', x, id)
      redis.call('ZADD', rz, id, id)
    else
      finish(id)
    end
  end
  return {'ok', #ids}
end

if op == 'purge' then
  local count = 0
  for _, id in ipairs(redis.call('LRANGE', r, 0, -1)) do
    if finish(id) then count = count + 1 end
  end
  redis.call('DEL', r, bt)
  for _, z in ipairs({rz, d, f, x}) do
    for _, id in ipairs(redis.call('ZRANGE', z, 0, -1)) do
      if finish(id) then count = count + 1 end
    end
  end
  return {'ok', count}
end

if op == 'stats' then
  local spacing, tau = tonumber(ARGV[5]), tonumber(ARGV[6])
  local oldest = -1
  local ready, head = ready_head()
  local next_due = (by_score(d, 0, 1)[1] or {})[1]
  for _, id in ipairs({head or next_due, next_due}) do
    local s = job(id)
    if s and (oldest < 0 or s < oldest) then oldest = s end
  end
  return {
    ready, redis.call('ZCARD', d), redis.call('ZCARD', f), redis.call('ZCARD', x),
    oldest, meta('submitted'), meta('released'), meta('acked'), meta('dead'),
    now + select(2, reserve(meta('tat'), now, spacing, tau, math.huge)), now,
  }
end

return redis.error_reply('unknown queue op ' .. tostring(op))
