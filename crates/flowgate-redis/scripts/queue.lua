-- Shaped queues: one queue instance's transitions, the same as flowgate_core::queue::engine
-- (tests/queue_props.rs runs random operation sequences on both and compares every answer).
-- Assembled after common.lua and the algorithm files (scripts.rs): the release schedule is
-- gcra.lua's `reserve`, a release being a request of one unit (span = spacing, tau = burst *
-- spacing, max_wait = the lease's horizon).
--
-- Every call is bounded, so that no call holds Redis for long: a sweep applies at most SWEEP of
-- each kind; purges and requeues of all dead letters work CHUNK jobs per call and answer 'more'
-- (the client calls again); a big batch's records are uploaded beforehand, in chunks, into a
-- staging hash that `submit` renames (O(1)) into the batch's hash.
--
-- KEYS (one instance, one hash tag, one slot; `<p>` is the instance's prefix
-- "flowgate:q:{<instance>}:"):
--   1 m   hash: seq (last id given), tat (release schedule), submitted, released, acked, dead
--   2 j   hash: id -> job record "<submitted>:<attempts>:<nonce>:<key length>:<key><payload>"
--         (flowgate_core::queue::record, the encoding both stores use; queue_props.rs reads
--         every record with it), for jobs delivered at least once, or delayed by an older version
--   3 r   list: ready jobs never delivered, in submission order (ids only grow)
--   4 rz  zset: ready jobs back out of order (redelivered, retried, due, requeued), score = id;
--         the next ready job is the lower id of the heads of r and rz (submission order)
--   5 d   zset: delayed jobs, score = due instant
--   6 f   zset: in-flight jobs, score = lease deadline (their slot plus the lease)
--   7 x   zset: dead letters, score = instant of death
--   8 k   hash: idempotency key -> id (live jobs, and finished jobs within the retention)
--   9 kt  zset: finished jobs' keys, score = finish instant
--  10 bt  zset: batches with records in their hash, member "<first id>:<instant>", score = first
--  11 rl  list: the slots of the last RELEASE_LOG releases, newest first
--  12 kf  hash: idempotency key -> its job's payload fingerprint (none for a key kept by an
--         older version: no conflict is detected for it)
--  13 fs  zset: slots given back before they came, member "<slot>:<id>", score = slot; the
--         next leases take them before new ones
--  14     submit only: the staging hash of the batch's records
--   <p>b:<first id>  hash: a batch's records of jobs never delivered, field = 1 + id - first,
--         records "0:0:0:<key length>:<key><payload>" as the client built them (submitted 0:
--         the batch's instant, in bt). A job's record leaves it for j at its first delivery.
-- ARGV: 1 op, 2 now (us; empty: Redis's TIME), 3 max_attempts, 4 key_retention (us), then:
--   submit       5 max_depth, 6 spacing, 7 tau, 8 n, 9 how many jobs have a not_before,
--                10 '1' when the records are staged (KEYS[14]), 11 '1' when keys are sent;
--                then (index, not_before) of each job with one; then, with keys, n keys and
--                n fingerprints ('' for a job without); then, unless staged, n records
--   describe     5 spacing, 6 tau, then ids: each one's state, position, release estimate
--   lease        5 spacing, 6 tau, 7 horizon, 8 lease, 9 nonce
--   give_back    5 id, 6 nonce, 7 slot, 8 spacing
--   ack          5 id, 6 nonce
--   nack         5 id, 6 nonce, 7 retry_after ('' for the backoff), 8 backoff, 9 backoff cap
--   dead         5 offset, 6 limit
--   requeue, purge_dead   5.. ids (none: all, CHUNK per call)
--   purge        (none; CHUNK per call)
--   stats        5 spacing, 6 tau, 7 lease
-- Every op first applies what time has done (sweep). Times are us since the epoch; every value
-- stays below 2^53, so Lua's doubles hold them exactly.

local SWEEP = 100
local CHUNK = 100
local RELEASE_LOG = 4096
local RELEASE_WINDOW = 60000000
local reserve = make(GCRA).reserve
local m, j, r, rz, d, f, x, k, kt, bt, rl, kf, fs =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10],
  KEYS[11], KEYS[12], KEYS[13]
local prefix = string.sub(m, 1, -2)
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

-- Whether `id` is a job id (digits: `tonumber` would also take `nan`, `1e5`, `0x10`).
local function is_id(id)
  return string.match(tostring(id), '^%d+$') ~= nil
end

-- Stops the call on a value no script writes (another writer's, or a damaged one), saying
-- which.
local function damaged(what)
  -- (printable ASCII only: an error reply is text, and the value may be any bytes)
  local shown = string.gsub(string.sub(what, 1, 300), '[^%w%p ]', '?')
  error({err = 'ERR queue: ' .. shown})
end

-- The batch a job id belongs to: its hash, the job's field there, the batch's instant and bt
-- member; nil when no batch starts at or before the id.
local function batch_of(id)
  local b = redis.call('ZREVRANGEBYSCORE', bt, id, '-inf', 'LIMIT', 0, 1)[1]
  if not b then return nil end
  local first, at = string.match(b, '^(%d+):(%d+)$')
  if not first then damaged('member ' .. b .. ' of ' .. bt .. ' is not a batch Flowgate writes') end
  return prefix .. 'b:' .. first, num(tonumber(id) - tonumber(first) + 1), tonumber(at), b
end

-- A job's record, from j or from its batch's hash: submitted instant, attempts, nonce (a
-- string), key ('' when none), payload, and (for a record in a batch) where it is: hash,
-- field, bt member. nil for an unknown job.
local function job(id)
  if not is_id(id) then return nil end
  local v = redis.call('HGET', j, id)
  local hash, field, instant, member
  if not v then
    hash, field, instant, member = batch_of(id)
    if not hash then return nil end
    v = redis.call('HGET', hash, field)
    if not v then return nil end
  end
  local s, a, n, kl, at = string.match(v, '^(%d+):(%d+):(%d+):(%d+):()')
  if not at then
    damaged('the record of job ' .. id .. ' in ' .. (hash or j) .. ' is not one Flowgate writes')
  end
  local key_end = at + tonumber(kl)
  s = tonumber(s)
  if s == 0 then
    if not instant then
      local _, _, batch_at = batch_of(id)
      instant = batch_at
    end
    s = instant or now
  end
  return s, tonumber(a), n, string.sub(v, at, key_end - 1), string.sub(v, key_end),
    hash, field, member
end

-- Whether a job is held (its record exists), without reading it.
local function held(id)
  if redis.call('HEXISTS', j, id) == 1 then return true end
  local hash, field = batch_of(id)
  return hash ~= nil and redis.call('HEXISTS', hash, field) == 1
end

-- Removes a record from its batch's hash (the batch leaves bt with its last record).
local function unbatch(hash, field, member)
  if not hash then return end
  redis.call('HDEL', hash, field)
  if redis.call('EXISTS', hash) == 0 then redis.call('ZREM', bt, member) end
end

local function record(s, a, n, key, payload)
  return num(s) .. ':' .. a .. ':' .. n .. ':' .. #key .. ':' .. key .. payload
end

local function meta(field)
  local v = tonumber(redis.call('HGET', m, field) or '0')
  if not v then damaged('field ' .. field .. ' of ' .. m .. ' is not a number') end
  return v
end

-- Calls `cmd key` with the arguments of `args` in chunks (Lua's unpack has a stack limit; an
-- even size keeps pairs together).
local function bulk(cmd, key, args)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

-- Members `from` to `from + count - 1` (0-based ranks) of zset `z`, as {id, score} pairs, in the
-- engine's order: by score, then by id as a number. (Redis breaks a tie of scores by the
-- members' text, "10" before "9": the members tied with the last one read are all read, and
-- sorted here.)
-- An id's place in an order of ids; a member that is no id (another writer's) sorts first, to be
-- met and refused.
local function id_order(id)
  return is_id(id) and tonumber(id) or -1
end

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
    return a[2] < b[2] or (a[2] == b[2] and id_order(a[1]) < id_order(b[1]))
  end)
  local out = {}
  for i = from + 1, math.min(from + count, #rows) do out[#out + 1] = rows[i] end
  return out
end

-- Up to SWEEP members of zset `z` due by `now`, in the engine's order (ties by id).
local function due(z)
  local list = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'WITHSCORES', 'LIMIT', 0, SWEEP)
  local rows = {}
  for i = 1, #list, 2 do rows[#rows + 1] = {list[i], tonumber(list[i + 1])} end
  table.sort(rows, function(a, b)
    return a[2] < b[2] or (a[2] == b[2] and id_order(a[1]) < id_order(b[1]))
  end)
  return rows
end

local function sweep()
  for _, row in ipairs(due(f)) do
    local id, deadline = row[1], row[2]
    redis.call('ZREM', f, id)
    local _, a = job(id)
    -- (a member that is no id, another writer's, is dropped)
    if not is_id(id) then
    elseif a and a >= max_attempts then
      redis.call('ZADD', x, deadline, id)
      redis.call('HINCRBY', m, 'dead', 1)
    else
      redis.call('ZADD', rz, id, id)
    end
  end
  for _, row in ipairs(due(d)) do
    redis.call('ZREM', d, row[1])
    if is_id(row[1]) then redis.call('ZADD', rz, row[1], row[1]) end
  end
  local old = redis.call('ZRANGEBYSCORE', kt, '-inf', now - retention, 'LIMIT', 0, SWEEP)
  for _, key in ipairs(old) do
    redis.call('ZREM', kt, key)
    redis.call('HDEL', k, key)
    redis.call('HDEL', kf, key)
  end
end

-- The number of ready jobs, and the id of the next one (nil when none).
local function ready_head()
  local a = redis.call('LINDEX', r, 0)
  local b = redis.call('ZRANGE', rz, 0, 0)[1]
  local count = redis.call('LLEN', r) + redis.call('ZCARD', rz)
  if a and (not b or id_order(a) < id_order(b)) then return count, a end
  return count, b
end

-- Removes a finished job (not one in r: a job there is only finished by a purge, which takes
-- it out of r itself). An acked job's key is retained from now; a purged job's is forgotten.
local function finish(id, keep_key)
  local s, _, _, key, _, hash, field, member = job(id)
  if not s then return false end
  redis.call('ZREM', rz, id)
  redis.call('ZREM', d, id)
  redis.call('ZREM', f, id)
  redis.call('ZREM', x, id)
  redis.call('HDEL', j, id)
  unbatch(hash, field, member)
  if key ~= '' then
    if keep_key then
      redis.call('ZADD', kt, now, key)
    else
      redis.call('HDEL', k, key)
      redis.call('HDEL', kf, key)
      redis.call('ZREM', kt, key)
    end
  end
  return true
end

-- The number of jobs in r below each of `ids` (ascending): one binary search for the first,
-- then one walk of r up to the last.
local function ranks_in_r(ids)
  local out = {}
  if #ids == 0 then return out end
  local lo, hi = 0, redis.call('LLEN', r)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if id_order(redis.call('LINDEX', r, mid)) < ids[1] then lo = mid + 1 else hi = mid end
  end
  local base = lo
  local chunk, p = redis.call('LRANGE', r, base, base + 999), 1
  for _, id in ipairs(ids) do
    while true do
      if p > #chunk then
        if #chunk < 1000 then break end
        base = base + #chunk
        chunk, p = redis.call('LRANGE', r, base, base + 999), 1
        if #chunk == 0 then break end
      elseif id_order(chunk[p]) < id then
        p = p + 1
      else
        break
      end
    end
    out[id] = base + p - 1
  end
  return out
end

sweep()

if op == 'submit' then
  -- (per job, the script creates no string: Redis's Lua interns every string it makes, and at
  -- about a microsecond each they were most of a big batch's cost)
  local max_depth, spacing, tau, n, n_delayed =
    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local staged, with_keys = ARGV[10] == '1', ARGV[11] == '1'
  local stage = KEYS[14]
  -- (a staging hash that expired before its submit: nothing is stored, the client says so)
  if staged and redis.call('EXISTS', stage) == 0 then return {'lost'} end
  local nbs = {}
  for t = 0, n_delayed - 1 do nbs[tonumber(ARGV[12 + 2 * t])] = tonumber(ARGV[13 + 2 * t]) end
  local at_keys = 12 + 2 * n_delayed
  local at_prints = at_keys + n
  local at_records = with_keys and at_prints + n or at_keys
  local seq = meta('seq')
  local dup = {}
  local fresh = n
  if with_keys then
    -- Known keys, a thousand at a time: another payload is a conflict (checked first, in
    -- order); the same one, a duplicate.
    local ids, prints = {}, {}
    for c = 0, n - 1, 1000 do
      local last = math.min(c + 999, n - 1)
      local got = redis.call('HMGET', k, unpack(ARGV, at_keys + c, at_keys + last))
      local fps = redis.call('HMGET', kf, unpack(ARGV, at_keys + c, at_keys + last))
      for t = 1, #got do
        ids[c + t] = got[t]
        prints[c + t] = fps[t]
      end
    end
    local in_batch = {}
    for i = 1, n do
      local key = ARGV[at_keys + i - 1]
      if key ~= '' then
        local fp = ARGV[at_prints + i - 1]
        local id, id_fp = tonumber(ids[i] or nil), prints[i] or nil
        if not id and in_batch[key] then id, id_fp = in_batch[key], ARGV[at_prints + in_batch[key] - seq - 1] end
        if id then
          if id_fp and id_fp ~= fp then
            if staged then redis.call('DEL', stage) end
            return {'conflict', i - 1, key, id}
          end
          dup[i] = id
          fresh = fresh - 1
        else
          in_batch[key] = seq + i
        end
      end
    end
  end
  local ready = ready_head()
  local held = ready + redis.call('ZCARD', d) + redis.call('ZCARD', f)
  if held + fresh > max_depth then
    if staged then redis.call('DEL', stage) end
    return {'full', held, fresh}
  end
  local _, wait = reserve(meta('tat'), now, spacing, tau, math.huge)
  if fresh > 0 then redis.call('HSET', m, 'seq', num(seq + n)) end
  redis.call('HINCRBY', m, 'submitted', fresh)
  local first = seq + 1
  -- The reply: the instant, the first release slot, the jobs ready before, the first id, then
  -- (index, id) of each duplicate; the client numbers and places the new jobs.
  local out = {'ok', now, now + wait, ready, first}
  local hash = prefix .. 'b:' .. num(first)
  if fresh > 0 then
    if staged then
      redis.call('RENAME', stage, hash)
      redis.call('PERSIST', hash)
    end
    redis.call('ZADD', bt, first, num(first) .. ':' .. num(now))
  elseif staged then
    redis.call('DEL', stage)
  end
  local records, readies, delays, ids_kv, prints_kv, gone = {}, {}, {}, {}, {}, {}
  for i = 1, n do
    if dup[i] then
      out[#out + 1] = i - 1
      out[#out + 1] = dup[i]
      if staged then gone[#gone + 1] = i end
    else
      local id = seq + i
      if not staged then
        records[#records + 1] = i
        records[#records + 1] = ARGV[at_records + i - 1]
      end
      if with_keys then
        local key = ARGV[at_keys + i - 1]
        if key ~= '' then
          ids_kv[#ids_kv + 1] = key
          ids_kv[#ids_kv + 1] = id
          prints_kv[#prints_kv + 1] = key
          prints_kv[#prints_kv + 1] = ARGV[at_prints + i - 1]
        end
      end
      local nb = nbs[i]
      if nb and nb > now then
        delays[#delays + 1] = nb
        delays[#delays + 1] = id
      else
        readies[#readies + 1] = id
      end
    end
  end
  bulk('HSET', hash, records)
  bulk('HDEL', hash, gone)
  bulk('RPUSH', r, readies)
  bulk('ZADD', d, delays)
  bulk('HSET', k, ids_kv)
  bulk('HSET', kf, prints_kv)
  return out
end

if op == 'describe' then
  local spacing, tau = tonumber(ARGV[5]), tonumber(ARGV[6])
  local first = now + select(2, reserve(meta('tat'), now, spacing, tau, math.huge))
  local states, in_r, in_z = {}, {}, {}
  for i = 6, #ARGV - 1 do
    local id = tonumber(ARGV[i + 1])
    local due_at = redis.call('ZSCORE', d, id)
    if due_at then
      states[i] = {'delayed', -1, tonumber(due_at)}
    elseif redis.call('ZSCORE', f, id) then
      states[i] = {'in_flight', -1, -1}
    elseif redis.call('ZSCORE', x, id) then
      states[i] = {'dead', -1, -1}
    elseif redis.call('ZSCORE', rz, id) then
      states[i] = {'ready'}
      in_z[#in_z + 1] = id
    elseif held(id) then
      states[i] = {'ready'}
      in_r[#in_r + 1] = id
    else
      states[i] = {'done', -1, -1}
    end
  end
  local all = {}
  for _, id in ipairs(in_r) do all[#all + 1] = id end
  for _, id in ipairs(in_z) do all[#all + 1] = id end
  table.sort(all)
  local ranks = ranks_in_r(all)
  local out = {}
  for i = 6, #ARGV - 1 do
    local s = states[i]
    if s[1] == 'ready' then
      local id = tonumber(ARGV[i + 1])
      local pos = ranks[id] + redis.call('ZCOUNT', rz, '-inf', '(' .. num(id))
      s = {'ready', pos, first + pos * spacing}
    end
    out[#out + 1] = s
  end
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
  local s, a, _, key, payload, hash, field, member = job(id)
  if not s then
    -- Dropped, so that the next lease goes on with the jobs behind it.
    if redis.call('ZREM', rz, id) == 0 then redis.call('LPOP', r) end
    damaged('job ' .. id .. ' was listed as ready without a record: dropped from the list')
  end
  -- The slot (engine.rs's `take_slot`): the earliest slot given back that has not passed, else
  -- the schedule's next one.
  redis.call('ZREMRANGEBYSCORE', fs, '-inf', '(' .. num(now))
  local free = redis.call('ZRANGE', fs, 0, 0, 'WITHSCORES')
  local free_at = free[2] and tonumber(free[2])
  local at
  if free_at and free_at - now <= horizon then
    at = free_at
    redis.call('ZREM', fs, free[1])
  else
    local tat, wait = reserve(meta('tat'), now, spacing, tau, horizon)
    if not tat then
      if free_at then wait = math.min(wait, free_at - now - horizon) end
      return {'later', wait}
    end
    at = now + wait
    redis.call('HSET', m, 'tat', num(tat))
  end
  redis.call('HINCRBY', m, 'released', 1)
  redis.call('LPUSH', rl, num(at))
  redis.call('LTRIM', rl, 0, RELEASE_LOG - 1)
  if redis.call('ZREM', rz, id) == 0 then redis.call('LPOP', r) end
  unbatch(hash, field, member)
  redis.call('ZADD', f, at + lease, id)
  redis.call('HSET', j, id, record(s, a + 1, nonce, key, payload))
  return {'job', tonumber(id), payload, a + 1, s, at, at + lease, now}
end

if op == 'give_back' then
  local id, nonce, slot, spacing = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
  local s, a, n, key, payload = job(id)
  if n ~= nonce or nonce == '0' or not redis.call('ZSCORE', f, id) then return {'not_held'} end
  redis.call('ZREM', f, id)
  redis.call('ZADD', rz, id, id)
  redis.call('HSET', j, id, record(s, math.max(a - 1, 0), '0', key, payload))
  if meta('released') > 0 then redis.call('HINCRBY', m, 'released', -1) end
  if meta('tat') == slot + spacing then
    redis.call('HSET', m, 'tat', num(slot))
  elseif slot >= now then
    redis.call('ZADD', fs, slot, num(slot) .. ':' .. id)
  end
  redis.call('LREM', rl, 1, num(slot))
  return {'ok'}
end

if op == 'ack' then
  local id, nonce = ARGV[5], ARGV[6]
  local _, _, n = job(id)
  if n ~= nonce or nonce == '0' then return {'not_held'} end
  finish(id, true)
  redis.call('HINCRBY', m, 'acked', 1)
  return {'ok'}
end

if op == 'nack' then
  local id, nonce = ARGV[5], ARGV[6]
  local s, a, n, key, payload = job(id)
  if n ~= nonce or not redis.call('ZSCORE', f, id) then return {'not_held'} end
  redis.call('ZREM', f, id)
  -- The delivery ends here: a later ack or nack of it is not held.
  redis.call('HSET', j, id, record(s, a, '0', key, payload))
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
  local more = false
  if #ARGV < 5 then
    ids = redis.call('ZRANGE', x, 0, CHUNK - 1)
    more = #ids == CHUNK
  else
    for i = 5, #ARGV do
      if not redis.call('ZSCORE', x, ARGV[i]) then return {'not_dead', tonumber(ARGV[i])} end
      ids[#ids + 1] = ARGV[i]
    end
  end
  for _, id in ipairs(ids) do
    local s, _, n, key, payload = job(id)
    if not s then
      -- A member without its job (written by someone else): nothing to requeue or purge, and
      -- left in place it would be listed again by every call.
      redis.call('ZREM', x, id)
    elseif op == 'requeue' then
      redis.call('HSET', j, id, record(s, 0, n, key, payload))
      redis.call('ZREM', x, id)
      redis.call('ZADD', rz, id, id)
    else
      finish(id, false)
    end
  end
  return {more and 'more' or 'ok', #ids}
end

if op == 'purge' then
  local count = 0
  local from_r = redis.call('LRANGE', r, 0, CHUNK - 1)
  for _, id in ipairs(from_r) do
    if finish(id, false) then count = count + 1 end
  end
  redis.call('LTRIM', r, #from_r, -1)
  for _, z in ipairs({rz, d, f, x}) do
    if count >= CHUNK then break end
    for _, id in ipairs(redis.call('ZRANGE', z, 0, CHUNK - count - 1)) do
      if finish(id, false) then
        count = count + 1
      else
        -- A member without its job: removed, or the purge would never end.
        redis.call('ZREM', z, id)
      end
    end
  end
  local left = redis.call('LLEN', r) + redis.call('ZCARD', rz) + redis.call('ZCARD', d)
    + redis.call('ZCARD', f) + redis.call('ZCARD', x)
  return {left > 0 and 'more' or 'ok', count}
end

if op == 'stats' then
  local spacing, tau, lease = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local ready, head = ready_head()
  local delayed, flying = redis.call('ZCARD', d), redis.call('ZCARD', f)
  local dead = redis.call('ZCARD', x)
  local tat = meta('tat')
  -- Forgotten: no job, no key retained, no release within the retention.
  if ready + delayed + flying + dead == 0 and redis.call('HLEN', k) == 0
      and tat <= now and now - tat >= retention then
    redis.call('DEL', m, j, r, rz, d, f, x, k, kt, bt, rl, kf, fs)
    return {'gone'}
  end
  local oldest = -1
  local next_due = (by_score(d, 0, 1)[1] or {})[1]
  for _, id in ipairs({head or next_due, next_due}) do
    local s = job(id)
    if s and (oldest < 0 or s < oldest) then oldest = s end
  end
  local reserved = redis.call('ZCOUNT', f, '(' .. num(now + lease), '+inf')
  local last_due = redis.call('ZRANGE', d, -1, -1, 'WITHSCORES')[2] or -1
  -- The current run of releases (engine.rs's `release_gap`): back from the newest delivered
  -- one until a pause of five spacings (at least 2 s) or the window's start.
  local gap = math.max(5 * spacing, 2000000)
  local recent, first_recent, prev = 0, -1, now
  for _, v in ipairs(redis.call('LRANGE', rl, 0, -1)) do
    local t = tonumber(v)
    -- (an entry that is no instant, another writer's, is skipped)
    if t and t <= now then
      -- (a slot given back and used again is logged after later ones)
      if prev - t > gap or now - t > RELEASE_WINDOW then break end
      recent = recent + 1
      if first_recent < 0 or t < first_recent then first_recent = t end
      prev = math.min(prev, t)
    end
  end
  return {
    'stats', ready, delayed, flying - reserved, reserved, dead,
    oldest, meta('submitted'), meta('released'), meta('acked'), meta('dead'),
    now + select(2, reserve(tat, now, spacing, tau, math.huge)), tonumber(last_due),
    recent, first_recent, now,
  }
end

return redis.error_reply('unknown queue op ' .. tostring(op))
